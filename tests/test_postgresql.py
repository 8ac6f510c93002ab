"""The results database on a real PostgreSQL server (tests/postgres.py starts one per worker)."""

from __future__ import annotations

import re

import pytest

from fslab.report.formats.markdown import to_markdown
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB
from synthetic import stored_study

STUDY = """[study]\nname = "s"\nworkloads = ["rand_read", "seq_write"]\nrepetitions = 3\n
[[target]]\nname = "raw"\nfilesystem = "raw"\n
[[target]]\nname = "ext4"\nfilesystem = "ext4"\n"""


@pytest.mark.root
def test_a_study_run_stored_in_postgresql_summarises_as_in_sqlite(pg_cluster, tmp_path):
    url = pg_cluster.new_database("same_summary")
    on_postgresql, on_sqlite = ResultsDB(url), ResultsDB(str(tmp_path / "results.db"))
    ids = [stored_study(tmp_path, STUDY, db, seed=7) for db in (on_postgresql, on_sqlite)]
    assert pg_cluster.sql("SELECT count(*) FROM runs", "same_summary") == "12"
    summaries = [to_markdown(summarize_study_run(db, i)) for db, i in zip((on_postgresql, on_sqlite), ids)]
    started = re.compile(r"started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")  # each stored when it was
    assert [started.subn("started …", s)[1] for s in summaries] == [1, 1]
    assert started.sub("started …", summaries[0]) == started.sub("started …", summaries[1])
    on_postgresql.engine.dispose()


@pytest.mark.root
def test_a_current_database_opens_without_waiting_for_another_fslabs_set_up(pg_cluster):
    """A database at this fslab's schema version is opened by reading its version alone: a
    summary on a team's PostgreSQL does not queue behind another host's fslab setting up (the
    set-up lock), nor inspect every table each time it starts."""
    import threading

    import sqlalchemy as sa

    from fslab.results import db as results_db

    url = pg_cluster.new_database("current_opens")
    ResultsDB(url).engine.dispose()  # made, at this version
    holder = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    opened = threading.Event()
    with holder.begin() as conn:
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(results_db._SETUP_LOCK)))
        opener = threading.Thread(target=lambda: (ResultsDB(url).engine.dispose(), opened.set()), daemon=True)
        opener.start()
        assert opened.wait(60), "opening a current database waited for the set-up lock"
    holder.dispose()
