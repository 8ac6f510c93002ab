"""Every migration, v1 → now, on a real PostgreSQL server: each stored fixture database (SQLite,
written by an older fslab) is loaded into a fresh PostgreSQL database at its own old schema, then
opened by ResultsDB, which migrates it there; its summary reads as the same fixture's migrated on
SQLite (whose summary test_summary_properties.py checks against the database itself)."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest
import sqlalchemy as sa

from conftest import FIXTURES, same_document
from fslab.report.formats.markdown import to_markdown
from fslab.report.formats.summary_json import to_json
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB
from fslab.results.schema import SAMPLE_COLUMNS, SCHEMA_VERSION


def at_its_old_schema(sqlite_file, url: str) -> None:
    """The SQLite database's tables made on PostgreSQL as that fslab declared them (reflected,
    each column's type in its generic form), and its rows copied; each id sequence set past the
    ids copied, as a database made there would have it."""
    source = sa.create_engine(f"sqlite:///{sqlite_file}")
    old = sa.MetaData()
    old.reflect(source)
    for table in old.tables.values():
        for column in table.columns:
            column.type = column.type.as_generic()
            if isinstance(column.type, sa.Boolean) and isinstance(column.server_default, sa.DefaultClause):  # 0 and 1
                column.server_default = sa.DefaultClause(
                    sa.true() if str(column.server_default.arg) == "1" else sa.false()
                )
    target = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    old.create_all(target)
    with source.connect() as read, target.begin() as write:
        for table in old.sorted_tables:
            rows = [dict(r) for r in read.execute(sa.select(table)).mappings()]
            if rows:
                write.execute(table.insert(), rows)
            if "id" in table.c and rows:
                write.execute(
                    sa.text(
                        f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), {max(r['id'] for r in rows)})"
                    )
                )
    source.dispose()
    target.dispose()


@pytest.mark.parametrize("version", [1, 2, 4, 7, 13, 14, 16, 17, 18])
def test_a_fixture_database_migrated_on_postgresql_reads_as_on_sqlite(pg_cluster, version, tmp_path):
    url = pg_cluster.new_database(f"migrated_v{version}")
    at_its_old_schema(FIXTURES / f"schema-v{version}.db", url)
    assert pg_cluster.sql("SELECT version FROM schema_info", f"migrated_v{version}") == str(version)
    with sqlite3.connect(FIXTURES / f"schema-v{version}.db") as conn:
        values = sorted(conn.execute("SELECT run_id, value, unit FROM metrics"))
        run_count = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        raw_outputs = conn.execute(
            "SELECT count(*) FROM runs WHERE raw_output IS NOT NULL"
            if version < 5
            else "SELECT count(*) FROM run_outputs"
        ).fetchone()[0]
    db = ResultsDB(url)
    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT version FROM schema_info")).scalar() == SCHEMA_VERSION
        assert sorted(conn.execute(sa.text("SELECT run_id, value, unit FROM metrics")).all()) == values, (
            "every metric kept"
        )
        assert conn.execute(sa.text("SELECT count(*) FROM runs")).scalar() == run_count
        assert conn.execute(sa.text("SELECT count(*) FROM run_outputs")).scalar() == raw_outputs > 0, (
            "fio's raw outputs moved, none lost"
        )
        assert conn.execute(sa.text("SELECT count(DISTINCT uid) FROM study_runs WHERE uid IS NOT NULL")).scalar() == 1
    summary = summarize_study_run(db, db.study_run()["id"])
    shutil.copy(FIXTURES / f"schema-v{version}.db", tmp_path / "on-sqlite.db")
    on_sqlite = ResultsDB(str(tmp_path / "on-sqlite.db"))
    expected = summarize_study_run(on_sqlite, on_sqlite.study_run()["id"])
    assert to_markdown(summary) == to_markdown(expected)
    same_document(json.loads(to_json(summary)), json.loads(to_json(expected)))
    on_sqlite.engine.dispose()
    db.engine.dispose()


def test_a_version_14_database_migrated_on_postgresql_leases_its_fleet_units_and_blocks(pg_cluster):
    """Its units and blocks start at generation 0; a take leases them from 1 on (fleet/lease.py)."""
    from fslab.fleet import lease

    url = pg_cluster.new_database("migrated_v14_leases")
    at_its_old_schema(FIXTURES / "schema-v14.db", url)
    db = ResultsDB(url)
    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT host, generation FROM fleet_units ORDER BY host")).all() == [
            ("nvme-box", 0),
            ("sata-box", 0),
        ]
        assert conn.execute(sa.text("SELECT block, generation FROM fleet_blocks ORDER BY block")).all() == [
            (1, 0),
            (2, 0),
        ]
    first, second = lease.take_block(db.engine, 1, 2, "nvme-box"), lease.take_block(db.engine, 1, 2, "sata-box")
    assert (first.generation, second.generation) == (1, 2)
    assert lease.take_unit(db.engine, 1, "sata-box").generation == 1
    assert not lease.holds(db.engine, first) and lease.holds(db.engine, second)
    db.engine.dispose()


def test_a_version_14_fleet_database_on_postgresql_gains_the_workers_versions(pg_cluster):
    from test_fleet_versions import migrated_v14_fleet_shows_its_workers_versions

    url = pg_cluster.new_database("migrated_v14_fleet")
    at_its_old_schema(FIXTURES / "schema-v14.db", url)
    assert pg_cluster.sql("SELECT version FROM schema_info", "migrated_v14_fleet") == "14"
    db = ResultsDB(url)
    migrated_v14_fleet_shows_its_workers_versions(db)
    db.engine.dispose()


def test_a_version_16_database_migrated_on_postgresql_stores_histograms(pg_cluster):
    """Catches run_histograms missing on PostgreSQL after the migration, or its JSON buckets read
    back otherwise than stored."""
    from test_results import stored_histograms_read_back

    url = pg_cluster.new_database("migrated_v16_histograms")
    at_its_old_schema(FIXTURES / "schema-v16.db", url)
    assert pg_cluster.sql("SELECT version FROM schema_info", "migrated_v16_histograms") == "16"
    db = ResultsDB(url)
    assert db.histograms(1) == []
    stored_histograms_read_back(db)
    db.engine.dispose()


def test_a_version_17_database_migrated_on_postgresql_marks_none_redone_and_leaves_a_redone_run_out(pg_cluster):
    """Migration 17 → 18 on PostgreSQL: runs.redone added FALSE (a defect: NULL, or a type
    PostgreSQL refuses to compare with a boolean), and a run marked redone is left out of the
    statistics and of a resume's plan there as on SQLite."""
    url = pg_cluster.new_database("migrated_v17")
    at_its_old_schema(FIXTURES / "schema-v17.db", url)
    db = ResultsDB(url)
    with db.engine.begin() as conn:
        assert conn.execute(sa.text("SELECT DISTINCT redone FROM runs")).all() == [(False,)]
        first = conn.execute(sa.text("SELECT min(id) FROM runs WHERE target = 'ext4'")).scalar()
        conn.execute(sa.text("UPDATE runs SET redone = TRUE WHERE id = :id"), {"id": first})
    groups = db.sample_groups(1)
    assert len(groups.values[("rand_write", "ext4")]["write_iops"]) == 1, "the redone run left out"
    assert len(db.stored_runs(1)) == 7
    assert sum(r["redone"] for r in db.runs(1, ["redone"])) == 1, "still stored, and marked"
    db.engine.dispose()


def test_a_version_18_database_migrated_on_postgresql_names_no_boot_and_stores_one(pg_cluster):
    """Migration 18 → 19 on PostgreSQL: runs.boot_id added NULL for every run stored before (a
    defect: a default boot, or a column too short for a boot id), and a run stored after names its boot."""
    from fslab.model.records import RunRecord, now

    url = pg_cluster.new_database("migrated_v18")
    at_its_old_schema(FIXTURES / "schema-v18.db", url)
    assert pg_cluster.sql("SELECT version FROM schema_info", "migrated_v18") == "18"
    db = ResultsDB(url)
    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT DISTINCT boot_id FROM runs")).all() == [(None,)]
    boot = "0b1f5a62-7c1e-4d0a-9a38-2d3c4e5f6a7b"
    run = RunRecord("ext4", "seq_write", 3, False, 3, 1, now(), now(), "ok", False, boot_id=boot)
    run_id = db.record_run(1, run)
    assert [r["boot_id"] for r in db.runs(1, ["id", "boot_id"]) if r["id"] == run_id] == [boot]
    db.engine.dispose()


def test_a_version_19_database_migrated_on_postgresql_gains_the_samples_index(pg_cluster, tmp_path):
    """Migration 19 → 20 on PostgreSQL: ix_metrics_samples made over every column of metrics, in
    its order (a defect: no index, or another's columns), every metric kept, the samples read as before."""
    from test_results import at_version_19

    url = pg_cluster.new_database("migrated_v19")
    at_its_old_schema(at_version_19(tmp_path / "v19.db"), url)
    assert pg_cluster.sql("SELECT version FROM schema_info", "migrated_v19") == "19"
    assert (
        pg_cluster.sql("SELECT count(*) FROM pg_indexes WHERE indexname = 'ix_metrics_samples'", "migrated_v19") == "0"
    )
    db = ResultsDB(url)
    with db.engine.connect() as conn:
        columns = conn.execute(
            sa.text(
                "SELECT a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) ON true "
                "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
                "WHERE c.relname = 'ix_metrics_samples' ORDER BY k.n"
            )
        ).scalars()
        assert list(columns) == list(SAMPLE_COLUMNS)
        assert conn.execute(sa.text("SELECT count(*) FROM metrics")).scalar() > 0
    groups = db.sample_groups(1)
    assert sum(len(v["write_iops"]) for v in groups.values.values()) == 8, "every run still in the statistics"
    db.engine.dispose()


# A newer fslab, as far as its migrations go: this one, its schema one higher (its new step empty).
NEWER_FSLAB = """
import sys
from fslab.results import schema
schema.MIGRATIONS[schema.SCHEMA_VERSION], schema.SCHEMA_VERSION = [], schema.SCHEMA_VERSION + 1
from fslab.results import ResultsDB
ResultsDB(sys.argv[1])
"""


def test_a_run_stored_as_a_newer_fslab_migrates_is_stored_before_it_and_the_next_refused(pg_cluster):
    """check_current's key-share lock and bring_up_to_date's update lock: a newer fslab's
    migration waits for the run being stored; the run stored after it is refused, naming both."""
    import re
    import subprocess
    import sys

    from conftest import wait_for
    from fslab import version
    from fslab.model import RawOutput
    from fslab.model.records import RunRecord, now
    from fslab.results.db import insert_run
    from fslab.results.schema import SchemaChanged, check_current

    url = pg_cluster.new_database("migrated_beneath")
    at_its_old_schema(FIXTURES / "schema-v13.db", url)
    db = ResultsDB(url)
    run = RunRecord(
        "ext4", "rand_read", 3, False, 3, 1, now(), now(), "ok", False, outputs=[RawOutput("", "fio", "{}")]
    )
    waiting = "SELECT count(*) FROM pg_stat_activity WHERE datname = 'migrated_beneath' AND wait_event_type = 'Lock'"
    with db.engine.begin() as conn:  # a run being stored, as record_run stores it: checked, then inserted
        check_current(conn, "the database")
        newer = subprocess.Popen([sys.executable, "-c", NEWER_FSLAB, url], stderr=subprocess.PIPE, text=True)
        wait_for("the newer fslab waiting to migrate", lambda: pg_cluster.sql(waiting, "migrated_beneath") == "1", 60)
        insert_run(conn, 1, run)
    assert newer.wait(timeout=60) == 0, newer.stderr.read()
    assert pg_cluster.sql("SELECT version FROM schema_info", "migrated_beneath") == str(SCHEMA_VERSION + 1)
    stored = "SELECT count(*) FROM runs WHERE repetition = 3"
    assert pg_cluster.sql(stored, "migrated_beneath") == "1", "stored before the migration"
    refused = (
        f"at schema version {SCHEMA_VERSION + 1} now, and this fslab "
        f"{re.escape(version())} writes schema {SCHEMA_VERSION}"
    )
    with pytest.raises(SchemaChanged, match=refused):
        db.record_run(1, run)
    assert pg_cluster.sql(stored, "migrated_beneath") == "1", "the next not stored"
    db.engine.dispose()
