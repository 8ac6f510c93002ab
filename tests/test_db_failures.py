"""A results database that fails in the middle of a command — its SQLite file gone or locked, its
PostgreSQL server stopped —: one error naming the database and what to do, never a traceback
(results/location.py's DatabaseLost, raised by every engine fslab makes); a study run keeps every
run it stored, and says which it did not."""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path

import pytest

from conftest import fslab_in_process, held_by, write_study
from fslab.results import ResultsDB, RunRecord, location
from fslab.results.location import DatabaseLost, shown
from fslab.results.owner import Owner
from fslab.results.schema import runs
from test_exit_codes import TIGHT, store

WHEN = datetime(2026, 11, 1, 12)


@contextmanager
def failing_once_open(monkeypatch: pytest.MonkeyPatch, fail: Callable[[ResultsDB], None]) -> Iterator[None]:
    """The database a command opens fails right after (`fail`), as the command reads it."""
    opened = ResultsDB.mark_abandoned

    def then_fail(db: ResultsDB) -> list[dict]:
        marked = opened(db)
        fail(db)
        return marked

    monkeypatch.setattr(ResultsDB, "mark_abandoned", then_fail)
    yield


def removed(directory: Path) -> Callable[[ResultsDB], None]:
    def remove(db: ResultsDB) -> None:
        db.engine.dispose()  # its pooled connection closed: the next one opens the file anew
        shutil.rmtree(directory)

    return remove


@contextmanager
def locked(db: Path) -> Iterator[None]:
    """Another program holding the SQLite file locked for writing (as long as the block lasts)."""
    other = sqlite3.connect(db, isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


@pytest.mark.parametrize("command", ["summary", "report", "export", "history"])
def test_an_sqlite_database_gone_midway_is_one_error_naming_it(tmp_path, monkeypatch, command):
    directory = tmp_path / "results"
    directory.mkdir()
    db = directory / "r.db"
    store(ResultsDB(str(db)), [1000 * f for f in TIGHT], Owner.current(tmp_path), WHEN)
    with failing_once_open(monkeypatch, removed(directory)):
        ended = fslab_in_process(command, "--db", str(db), cwd=tmp_path)
    assert ended.returncode == 2, ended.stdout + ended.stderr
    said = " ".join(ended.stderr.split())
    assert "Traceback" not in said
    assert f"error: the results database {db} failed: unable to open database file; check that {db}" in said, said


def test_a_store_into_a_locked_sqlite_database_fails_and_keeps_what_was_stored(tmp_path, monkeypatch):
    monkeypatch.setattr(location, "BUSY_SECONDS", 0.1)  # the wait is SQLite's; its 5 s would idle a worker
    db = tmp_path / "r.db"
    results = ResultsDB(str(db))
    study_run = store(results, [1000 * f for f in TIGHT], Owner.current(tmp_path), WHEN)
    run = RunRecord(
        target="xfs", workload="rand_read", repetition=6, warmup=False, block=6, position=1,
        started_at=WHEN, finished_at=WHEN, status="ok", buffered=False,
    )  # fmt: skip
    with (
        locked(db),
        pytest.raises(DatabaseLost, match=f"^the results database {re.escape(str(db))} failed: database is locked;"),
    ):
        results.record_run(study_run, run)  # after its busy timeout
    assert len(results.runs(study_run)) == len(TIGHT), "what was stored is kept"
    results.record_run(study_run, run)  # and the same database is used again once it answers
    assert len(results.runs(study_run)) == len(TIGHT) + 1


TOY_STUDY = """\
[study]
name = "toys"
repetitions = 3
image_size = "64MiB"
image_fill = "sparse"

[[target]]
filesystem = "ext2"
reserved = 1

[[workload]]
name = "truth"
kind = "true"
times = 1
"""


@pytest.mark.root
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_study_run_whose_database_fails_says_what_it_did_not_store(
    toys, workdir, tmp_path, monkeypatch, request, kind
):
    """The database failing as the second run is stored — an SQLite file locked by another program,
    a PostgreSQL server stopped —: the run stops with one error naming the database, the run not
    stored and how to go on; the first run is kept, and nothing is left mounted or attached."""
    toys("filesystem", "workload_kind")
    if kind == "sqlite":
        db = str(tmp_path / "r.db")
        failing, reason, check = (lambda: locked(Path(db))), "database is locked", f"check that {db} and its"
    else:
        cluster = request.getfixturevalue("pg_cluster")
        db = cluster.new_database("failing_run")
        failing, reason, check = cluster.away, "", "check that its server is up"
    store_run = ResultsDB.record_run
    stores = []

    def second_failing(results: ResultsDB, study_run_id: int, record: RunRecord) -> int:
        stores.append(record)
        if len(stores) < 2:
            return store_run(results, study_run_id, record)
        with failing():
            return store_run(results, study_run_id, record)

    monkeypatch.setattr(ResultsDB, "record_run", second_failing)
    ran = fslab_in_process(
        "run", str(write_study(tmp_path, TOY_STUDY)), "--no-ceiling", "--db", db, "--workdir", str(workdir.root)
    )
    said = " ".join(ran.stderr.split())
    assert ran.returncode == 2 and "Traceback" not in said, ran.stdout + said
    results = ResultsDB(db)
    study_run = results.study_run()
    assert f"error: the results database {shown(db)} failed: {reason}" in said, said
    assert (
        f" Study run {study_run['id']} keeps every run it stored; not stored: the run of truth on ext2 "
        f"(repetition {stores[1].repetition}) that had just ended; {check}" in said
    ), said
    assert f"then `fslab run --resume {study_run['id']}` (with the same --db and --workdir) goes on" in said, said
    assert len(results.runs(study_run["id"])) == 1, "the run stored before is kept"
    assert held_by(workdir.root) == [] and workdir.journal.read() == ([], [])


@pytest.mark.root
def test_a_study_run_whose_database_fails_as_it_ends_says_it_lost_no_run(toys, workdir, tmp_path, monkeypatch):
    """Every run stored, and the database locked as the study run is marked finished: said so, and
    how to go on (a resume finds every run stored, and ends it)."""
    toys("filesystem", "workload_kind")
    db = tmp_path / "r.db"
    finish = ResultsDB.finish_study_run

    def locked_then(results: ResultsDB, study_run_id: int, status: str, outcome: dict) -> None:
        with locked(db):
            finish(results, study_run_id, status, outcome)

    monkeypatch.setattr(ResultsDB, "finish_study_run", locked_then)
    ran = fslab_in_process(
        "run", str(write_study(tmp_path, TOY_STUDY)), "--no-ceiling", "--db", str(db), "--workdir", str(workdir.root)
    )
    said = " ".join(ran.stderr.split())
    assert ran.returncode == 2 and "Traceback" not in said, ran.stdout + said
    results = ResultsDB(str(db))
    study_run = results.study_run()
    assert (
        f"error: the results database {db} failed: database is locked. Study run {study_run['id']} keeps "
        f"every run it stored, and lost none; check that {db}" in said
    ), said
    assert len(results.runs(study_run["id"])) == 3 and study_run["status"] == "running"
    assert held_by(workdir.root) == [] and workdir.journal.read() == ([], [])


@pytest.fixture
def in_postgresql(pg_cluster, tmp_path) -> tuple[str, int]:
    url = pg_cluster.new_database("failures")
    return url, store(ResultsDB(url), [1000 * f for f in TIGHT], Owner.current(tmp_path), WHEN)


@pytest.mark.parametrize("command", ["summary", "report", "status"])
def test_a_postgresql_server_stopped_midway_is_one_error_naming_it(
    pg_cluster, in_postgresql, tmp_path, monkeypatch, command
):
    url, _ = in_postgresql
    with ExitStack() as stopped:
        with failing_once_open(monkeypatch, lambda db: stopped.enter_context(pg_cluster.away())):
            ended = fslab_in_process(command, "--db", url, cwd=tmp_path)
        said = " ".join(ended.stderr.split())
    assert ended.returncode == 2, ended.stdout + said
    assert "Traceback" not in said and "pg-secret" not in said
    assert f"error: the results database {shown(url)} failed: " in said, said
    assert "check that its server is up and reachable from here, then run the command again" in said, said


def test_a_store_while_the_postgresql_server_is_stopped_fails_and_keeps_what_was_stored(pg_cluster, in_postgresql):
    url, study_run = in_postgresql
    results = ResultsDB(url)
    run = RunRecord(
        target="xfs", workload="rand_read", repetition=6, warmup=False, block=6, position=1,
        started_at=WHEN, finished_at=WHEN, status="ok", buffered=False,
    )  # fmt: skip
    with (
        pg_cluster.away(),
        pytest.raises(DatabaseLost, match=f"^the results database {re.escape(shown(url))} failed: "),
    ):
        results.record_run(study_run, run)
    assert len(results.runs(study_run)) == len(TIGHT), "what was stored is kept"


def test_the_drivers_own_reads_fail_as_the_engines_do(pg_cluster, in_postgresql):
    """The samples are read by psycopg's own cursor (ResultsDB._plain_rows), past SQLAlchemy's
    handle_error: a connection lost under it is a DatabaseLost too."""
    url, study_run = in_postgresql
    results = ResultsDB(url)
    with results.engine.connect() as conn:
        with (
            pg_cluster.away(),
            pytest.raises(DatabaseLost, match=f"^the results database {re.escape(shown(url))} failed: "),
        ):
            results._plain_rows(conn, runs.select().where(runs.c.study_run_id == study_run))
