"""The results database: schema version, migration of databases written by an older fslab, and
the databases fslab refuses to open (each through the command line, as a user meets it)."""

import json
import multiprocessing
import os
import shutil
import sqlite3
import stat
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from conftest import FIXTURES, fslab_in_process, same_document
from fslab.model import RawOutput
from fslab.model.records import Histogram, RunRecord, StoredHistogram, now
from fslab.report.formats.markdown import to_markdown
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB
from fslab.results.schema import SAMPLE_COLUMNS, SCHEMA_VERSION, SchemaMismatch, schema_info


def test_a_version_1_database_is_migrated_with_nothing_lost(tmp_path):
    # written by fslab with schema version 1 (the first release), from a real study run
    db_path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema-v1.db", db_path)
    db = ResultsDB(str(db_path))
    with db.engine.connect() as conn:
        assert conn.execute(sa.select(schema_info.c.version)).scalar() == SCHEMA_VERSION
    study_run = db.study_run()
    assert study_run["study"] == "v1" and study_run["settings"] is None
    runs = db.runs(study_run["id"])
    assert len(runs) == 4 and all(r["warmup"] is False for r in runs)
    assert {m.target for m in db.run_metrics(study_run["id"]) if m.metric == "read_iops"} == {"xfs", "raw"}
    result = fslab_in_process("summary", "--db", str(db_path))
    assert (
        result.returncode == 0
        and "rand_read (direct I/O; data: random; files preallocated (fio fallocate=native))" in result.stdout
    )


@pytest.mark.parametrize("fixture", ["schema-v1.db", "schema-v2.db"])
def test_latency_stored_before_version_4_becomes_clat_not_total_latency(tmp_path, fixture):
    # before version 4 "read_lat_p99_us" and the like were fio's completion latency (clat)
    db_path = tmp_path / "old.db"
    shutil.copy(FIXTURES / fixture, db_path)
    with sqlite3.connect(db_path) as conn:
        before = {(run, name): value for run, name, value in conn.execute("SELECT run_id, name, value FROM metrics")}
    db = ResultsDB(str(db_path))
    with sqlite3.connect(db_path) as conn:
        after = {(run, name): value for run, name, value in conn.execute("SELECT run_id, name, value FROM metrics")}
    assert any("_lat_" in name for _, name in before)
    renamed = {(run, name.replace("_lat_", "_clat_")): value for (run, name), value in before.items()}
    assert after == renamed, "every latency value kept, under its clat name; nothing else changed"
    names = {m.metric for m in db.run_metrics(db.study_run()["id"])}
    assert {"read_clat_p99_us", "read_clat_mean_us"} <= names
    assert not any("_lat_" in name for name in names if name), (
        "no total latency where fio's total latency was never stored"
    )


# schema-v4.db: written by fslab with schema version 4 (commit 0981218) from schema-v4.toml, run
# for real. Kept here: every metric and raw output; that its summary reads what the migration kept
# (every cell, the stored values' medians, in every format) is test_summary_properties.py's, for
# each fixture database.
@pytest.mark.parametrize("version", [1, 2, 4])
def test_a_migrated_database_keeps_every_metric_and_fios_raw_output(tmp_path, version):
    db_path = tmp_path / "old.db"
    shutil.copy(FIXTURES / f"schema-v{version}.db", db_path)
    with sqlite3.connect(db_path) as conn:
        raw = dict(conn.execute("SELECT id, raw_output FROM runs WHERE raw_output IS NOT NULL"))
        values = sorted(conn.execute("SELECT run_id, value, unit, higher_is_better FROM metrics"))
    db = ResultsDB(str(db_path))
    with sqlite3.connect(db_path) as conn:
        assert sorted(conn.execute("SELECT run_id, value, unit, higher_is_better FROM metrics")) == values, (
            "every metric kept"
        )
        assert {phase for (phase,) in conn.execute("SELECT phase FROM metrics")} == {""}
        assert "raw_output" not in {row[1] for row in conn.execute("PRAGMA table_info(runs)")}, (
            "one raw output, one place"
        )
    assert raw and {run_id: [(o.phase, o.tool, o.text) for o in db.outputs(run_id)] for run_id in raw} == {
        run_id: [("", "fio", text)] for run_id, text in raw.items()
    }


def test_golden_documents_are_compared_to_the_last_bits_that_vary_and_no_further():
    golden = json.loads((FIXTURES / "baseline" / "schema-v4" / "summary.json").read_text())
    assert "0.6962726887040422" in json.dumps(golden), "a ratio of geometric means: an exp of numpy's"
    same_document(
        json.loads(json.dumps(golden).replace("0.6962726887040422", "0.6962726887040425")), golden
    )  # 3 ulps: numpy's exp on another CPU
    for changed in ("0.6962726887040422", '"undecided"'):
        assert changed in json.dumps(golden), changed
        other = json.dumps(golden).replace(
            changed, {"0.6962726887040422": "0.6962726887", '"undecided"': '"faster"'}[changed], 1
        )
        with pytest.raises(AssertionError):
            same_document(json.loads(other), golden)


def test_a_database_opened_read_only_is_read_and_never_written(tmp_path):
    """A current database is opened without a write (another user's, a copy on read-only media):
    its summary is read through a read-only SQLite URL."""
    db_path = tmp_path / "results.db"
    shutil.copy(FIXTURES / "schema-v7.db", db_path)
    expected = to_markdown(summarize_study_run(ResultsDB(str(db_path)), 1))  # migrated to the current version
    before = db_path.read_bytes()
    read_only = ResultsDB(f"sqlite:///file:{db_path}?mode=ro&uri=true")
    assert to_markdown(summarize_study_run(read_only, 1)) == expected
    read_only.engine.dispose()
    assert db_path.read_bytes() == before


def _migrated(tmp_path: Path, fixture: str | Path, tables: tuple[str, ...]) -> tuple[Path, ResultsDB, dict, dict]:
    """A copy of a stored database (a fixture's name, or a database's path) opened (migrated) by
    this fslab: its path, the open database, and each table's rows before and after."""
    db_path = tmp_path / "old.db"
    shutil.copy(FIXTURES / fixture, db_path)
    with sqlite3.connect(db_path) as conn:
        before = {table: sorted(conn.execute(f"SELECT * FROM {table}")) for table in tables}
    db = ResultsDB(str(db_path))
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT version FROM schema_info").fetchone() == (SCHEMA_VERSION,) == (20,)
        after = {table: sorted(conn.execute(f"SELECT * FROM {table}")) for table in tables}
    return db_path, db, before, after


# schema-v7.db: written by fslab with schema version 7 (commit a9f71b7) from schema-v7.toml, run
# for real (ext4 and raw, two runs each); a summary judges its runs from the read-back they stored
# (no options_applied before 9): test_summary_properties.py reads it.
def test_a_version_7_database_is_migrated_with_every_run_kept(tmp_path):
    tables = ("study_runs", "targets", "workloads", "runs", "metrics", "run_outputs")
    db_path, db, before, after = _migrated(tmp_path, "schema-v7.db", tables)
    with sqlite3.connect(db_path) as conn:
        uids = [uid for (uid,) in conn.execute("SELECT uid FROM study_runs")]
        after["study_runs"] = [row[:-1] for row in after["study_runs"]]
        assert all(row[-1] is None for row in after["run_outputs"]), "outputs stored before 14 stay text"
        after["run_outputs"] = [row[:-1] for row in after["run_outputs"]]
        assert [column[1] for column in conn.execute("PRAGMA table_info(runs)")][-5:] == [
            "source",
            "options_applied",
            "host",
            "redone",
            "boot_id",
        ]
        assert [
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            for table in ("hosts", "fleet_workers", "fleet_units")
        ] == [(0,)] * 3
    assert len(before["runs"]) == 4 and [run[:-5] for run in after["runs"]] == before["runs"], "every run as it was"
    assert all(run[-5:] == (None, None, None, 0, None) for run in after["runs"]), (
        "its source NULL: fslab ran it; what its options became: judged when read; its host: the study run's "
        "machine; not redone; its boot unknown"
    )
    assert {table: rows for table, rows in after.items() if table != "runs"} == {
        table: rows for table, rows in before.items() if table != "runs"
    }, "nothing else changed"
    assert len(uids) == 1 and len(uids[0]) == 32, "each study run gains its identity across databases (fslab db copy)"


# schema-v13.db: written by fslab with schema version 13 (commit 559156d) from schema-v13.toml, run
# for real (ext4 and raw, two runs each: fio's JSON, its logs and its histogram logs); its summary:
# test_summary_properties.py.
def test_a_version_13_database_keeps_its_outputs_as_text_and_stores_new_ones_packed(tmp_path):
    db_path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema-v13.db", db_path)
    with sqlite3.connect(db_path) as conn:
        before = sorted(conn.execute("SELECT run_id, phase, tool, output FROM run_outputs"))
    db = ResultsDB(str(db_path))
    assert {tool for _, _, tool, _ in before} == {"fio", "fio_log", "fio_hist"}
    assert (
        sorted((run_id, o.phase, o.tool, o.text) for run_id in {r[0] for r in before} for o in db.outputs(run_id))
        == before
    ), "every output read as it was"
    # a run stored now is packed, and reads back as the text it was
    first = before[0][0]
    again = RunRecord(
        "ext4",
        "rand_read",
        3,
        False,
        3,
        1,
        now(),
        now(),
        "ok",
        False,
        outputs=[RawOutput(phase, tool, text) for run_id, phase, tool, text in before if run_id == first],
    )
    new_id = db.record_run(1, again)
    with sqlite3.connect(db_path) as conn:
        stored = conn.execute(
            "SELECT output, length(packed) FROM run_outputs WHERE run_id = ? AND tool = 'fio'", (new_id,)
        ).fetchone()
        assert conn.execute("SELECT version FROM schema_info").fetchone() == (SCHEMA_VERSION,)
    fio_text = next(o.text for o in again.outputs if o.tool == "fio")
    assert stored[0] == "" and stored[1] < len(fio_text) / 3, "fio's JSON in a third of its room, or less"
    assert db.outputs(new_id) == sorted(again.outputs, key=lambda o: (o.phase, o.tool))
    assert db.outputs_of_study_run(1, "fio")[new_id] == [o for o in again.outputs if o.tool == "fio"]
    db.engine.dispose()


# schema-v14.db: written by fslab with schema version 14 (commit b299554) from schema-v14.toml, run
# for real, with a fleet's units, blocks and worker beside it (written by fslab.fleet's own
# functions); its summary: test_summary_properties.py.
def test_a_version_14_database_gains_its_fleet_leases_generation_and_nothing_else_changes(tmp_path):
    tables = (
        "study_runs",
        "targets",
        "workloads",
        "runs",
        "metrics",
        "run_outputs",
        "hosts",
        "fleet_workers",
        "fleet_units",
        "fleet_blocks",
    )
    _, db, before, after = _migrated(tmp_path, "schema-v14.db", tables)
    assert len(before["fleet_units"]) == len(before["fleet_blocks"]) == 2 and len(before["runs"]) == 2
    for leased in ("fleet_units", "fleet_blocks"):
        assert [row[:-1] for row in after[leased]] == before[leased] and {row[-1] for row in after[leased]} == {0}, (
            f"{leased}: each row as it was, its generation 0"
        )
    workers = after["fleet_workers"]
    assert [row[:-2] for row in workers] == before["fleet_workers"], "its worker as it was"
    assert {row[-2:] for row in workers} == {(None, None)}, "its versions unsaid (schema 16)"
    assert [row[:-2] for row in after["runs"]] == before["runs"], "each run as it was"
    assert {row[-2:] for row in after["runs"]} == {(0, None)}, "none redone (schema 18), no boot (19)"
    others = [t for t in tables if not t.startswith("fleet_") and t != "runs"]
    assert {t: after[t] for t in others} == {t: before[t] for t in others}, "nothing else changed"
    db.engine.dispose()


# schema-v16.db: written by fslab with schema version 16 (commit 4434306) from schema-v16.toml, run
# for real (ext4, a 4 KiB random direct write, two runs).
def test_a_version_16_database_gains_run_histograms_and_nothing_else_changes(tmp_path):
    """Catches a migration that loses or changes a stored run, or leaves no room for the histograms
    `--trace block` stores (schema 17): a run stored after it keeps them, bucket for bucket."""
    tables = ("study_runs", "targets", "workloads", "runs", "metrics", "run_outputs", "hosts")
    _, db, before, after = _migrated(tmp_path, "schema-v16.db", tables)
    assert len(before["runs"]) == 2 and [row[:-2] for row in after["runs"]] == before["runs"]
    assert {t: after[t] for t in tables if t != "runs"} == {t: before[t] for t in tables if t != "runs"}
    assert db.histograms(1) == [], "runs stored before have none"
    stored_histograms_read_back(db)
    db.engine.dispose()


def stored_histograms_read_back(db: ResultsDB) -> None:
    """A run stored with histograms in study run 1 of `db` gives them back, bucket for bucket."""
    buckets = ((2048.0, 4096.0, 0), (4096.0, 8192.0, 3416), (8192.0, 16384.0, 0))
    run = RunRecord(
        "ext4", "rand-write", 3, False, 3, 1, now(), now(), "ok", False,
        histograms=[Histogram("loop0", "write", "request_bytes", buckets)],
    )  # fmt: skip
    run_id = db.record_run(1, run)
    assert db.histograms(1) == [
        StoredHistogram(run_id, "ext4", "rand-write", 3, "", "loop0", "write", "request_bytes", buckets)
    ]


def test_fio_metrics_of_an_older_database_get_the_roles_fio_gave_them(tmp_path):
    db_path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema-v4.db", db_path)
    groups = ResultsDB(str(db_path)).sample_groups(1)
    assert {metric for _, metric in groups.roles.primary} == {"read_iops", "write_iops"}
    assert {metric for _, metric in groups.roles.compared} == {
        "read_iops",
        "write_iops",
        "read_lat_p99_us",
        "write_lat_p99_us",
    }


def test_a_version_11_database_gains_the_fleet_units_times_and_the_blocks_table(tmp_path):
    path = tmp_path / "v11.db"
    ResultsDB(str(path)).engine.dispose()
    with sqlite3.connect(path) as conn:  # as version 11 left it: fleet_units without its times, no fleet_blocks
        for column in ("queued_at", "claimed_at", "started_at"):
            conn.execute(f"ALTER TABLE fleet_units DROP COLUMN {column}")
        conn.execute("DROP TABLE fleet_blocks")
        conn.execute("UPDATE schema_info SET version = 11")
    ResultsDB(str(path)).engine.dispose()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version FROM schema_info").fetchone() == (SCHEMA_VERSION,)
        assert [column[1] for column in conn.execute("PRAGMA table_info(fleet_units)")][-3:] == [
            "queued_at",
            "claimed_at",
            "started_at",
        ]
        assert "claimed_at" in [column[1] for column in conn.execute("PRAGMA table_info(fleet_blocks)")]


def test_a_newer_database_is_refused(tmp_path):
    db = ResultsDB(str(tmp_path / "new.db"))
    with db.engine.begin() as conn:
        conn.execute(schema_info.update().values(version=SCHEMA_VERSION + 1))
    with pytest.raises(SchemaMismatch, match="newer than this fslab's"):
        ResultsDB(str(tmp_path / "new.db"))


def test_a_version_2_database_is_migrated_and_its_interrupted_study_run_not_resumed_with_other_jobs(tmp_path, workdir):
    # written by fslab with schema version 2 (b6d6274) from a real study run (xfs, raw and a target
    # whose mount option, journal_async_commit, ext4 refuses with data=ordered; 2 runs each),
    # interrupted with Ctrl-C after four runs
    db_path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "schema-v2.db", db_path)
    db = ResultsDB(str(db_path))
    study_run = db.study_run()
    assert study_run["status"] == "interrupted" and study_run["owner"] is None
    before = {r["id"]: r for r in db.runs(study_run["id"])}
    assert len(before) == 4 and {r["device"] for r in before.values() if r["status"] == "ok"} == {"/dev/loop1"}
    assert all(r["failure"] is None for r in before.values()), "an old failed run keeps its error, with no details"
    assert fslab_in_process("summary", "--db", str(db_path)).returncode == 0

    # its fio jobs preallocated their files (fio's default then); fslab's no longer do: the runs
    # left would not be repetitions of the runs made, so it is not resumed — and says why
    refused = fslab_in_process("run", "--resume", "--db", str(db_path), "--workdir", str(workdir.root))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stdout + refused.stderr
    said = " ".join(refused.stderr.split())
    assert "cannot be resumed: 'rand_read' ran before fslab stopped preallocating fio's files" in said, said
    assert 'options = { fallocate = "native" } in its [fio] table measures as before' in said
    assert {r["id"]: r for r in db.runs(study_run["id"])} == before and db.study_run()["status"] == "interrupted", (
        "nothing run, nothing changed"
    )


def _refused(tmp_path, location: str) -> str:
    result = fslab_in_process("history", "--db", location)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    return " ".join(result.stderr.split())


def test_a_database_in_a_missing_directory_is_refused(tmp_path):
    message = _refused(tmp_path, str(tmp_path / "nowhere" / "r.db"))
    assert f"the directory {tmp_path / 'nowhere'} does not exist" in message
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.root
@pytest.mark.parametrize("kind", ["block device", "directory", "FIFO", "symbolic link"])
def test_a_database_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    path = tmp_path / "r.db"
    if kind == "block device":  # major 42 is for demos: no driver, nothing to write over if the check failed
        os.mknod(path, stat.S_IFBLK | 0o600, os.makedev(42, 0))
    elif kind == "directory":
        path.mkdir()
    elif kind == "FIFO":
        os.mkfifo(path)
    else:
        (tmp_path / "real.db").touch()
        path.symlink_to(tmp_path / "real.db")
    assert f"{path} is a {kind}, not a database file" in _refused(tmp_path, str(path))
    assert kind != "symbolic link" or (tmp_path / "real.db").stat().st_size == 0


def test_a_wal_file_that_is_not_a_regular_file_is_refused(tmp_path):
    (tmp_path / "r.db-wal").symlink_to("/dev/null")
    assert "r.db-wal is a symbolic link" in _refused(tmp_path, str(tmp_path / "r.db"))


def test_a_postgresql_url_without_its_driver_says_what_to_install(tmp_path, monkeypatch):
    for module in ("psycopg", "psycopg2"):
        monkeypatch.setitem(sys.modules, module, None)  # as where neither is installed
    message = _refused(tmp_path, "postgresql://fslab:secret@localhost/results")
    assert "needs the database driver psycopg, which is not installed: pip install 'psycopg[binary]'" in message
    assert "secret" not in message


def test_a_file_that_is_not_an_fslab_database_is_refused(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    assert "file is not a database" in _refused(tmp_path, str(text))
    assert text.read_text() == "not a database\n" * 100
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER)")
    assert "is not an fslab results database (it holds tables photos)" in _refused(tmp_path, str(other))
    with sqlite3.connect(other) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["photos"], "nothing added to it"


def test_a_damaged_database_is_refused(tmp_path):
    db_path = tmp_path / "damaged.db"
    shutil.copy(FIXTURES / "schema-v1.db", db_path)
    with open(db_path, "r+b") as f:  # page 1 holds the schema: overwrite its b-tree after the header
        f.seek(100)
        f.write(b"\xff" * 3000)
    message = _refused(tmp_path, str(db_path))
    assert f"cannot use {db_path} as the results database: database disk image is malformed" in message


def _open_database(path: str, said: "multiprocessing.Queue") -> None:
    try:
        ResultsDB(path)
        said.put("ok")
    except Exception as exc:  # reported to the test, which names it
        said.put(repr(exc))


def test_fslab_processes_opening_one_new_database_at_once_all_get_it(tmp_path):
    """Two studies started together with one new --db: the one that makes the tables a moment
    later finds them made, not an error."""
    context = multiprocessing.get_context("fork")
    for attempt in range(10):
        said = context.Queue()
        openers = [
            context.Process(target=_open_database, args=(str(tmp_path / f"{attempt}.db"), said)) for _ in range(4)
        ]
        for opener in openers:
            opener.start()
        for opener in openers:
            opener.join()
        assert [said.get() for _ in openers] == ["ok"] * 4


_SUPERSEDING = (
    '[study]\nname = "s"\nworkloads = ["rand_read", "seq_write"]\nrepetitions = 2\n'
    '[[target]]\nfilesystem = "ext4"\n[[target]]\nfilesystem = "xfs"\n'
)


def test_runs_a_systematic_failure_superseded_are_counted_by_no_reader(tmp_path):
    from fslab.model.records import RunFailure
    from synthetic import stored_study

    db = ResultsDB(str(tmp_path / "r.db"))
    failure = RunFailure("workload", "Traceback …", ["fio"], 127, "fio: command not found")
    gone = ("`fio` exited with status 127: fio: command not found", failure)
    study_run = stored_study(tmp_path, _SUPERSEDING, db, failing={"xfs": gone})
    failed = [r["id"] for r in db.runs(study_run) if r["status"] == "failed"]
    assert len(failed) == 4 and len(summarize_study_run(db, study_run).failures) == 4
    assert db.supersede(study_run, failed) == 4
    assert [r["target"] for r in db.runs(study_run)] == ["ext4"] * 4 and all(s.ok for s in db.stored_runs(study_run))
    failures = summarize_study_run(db, study_run).failures
    assert failures == [], "the summary, and so `fslab run`'s exit status, counts none"
    assert {m.status for m in db.run_metrics(study_run)} == {"ok"}, "nor does `fslab export`"
    exported = fslab_in_process("export", f"#{study_run}", "--db", db.location, "-o", str(tmp_path / "out"))
    assert exported.returncode == 0 and "xfs" not in (tmp_path / "out" / "runs.csv").read_text()
    with db.engine.connect() as conn:
        superseded = conn.execute(sa.text("select count(*) from runs where status = 'superseded'")).scalar()
        assert superseded == 4, "kept, marked"


# schema-v17.db: written by fslab with schema version 17 (commit b293aa4) from schema-v17.toml, run
# for real (ext4 and xfs, two runs each, and the ceiling fslab adds).
def test_a_version_17_database_gains_the_redone_mark_none_redone_and_reads_as_before(tmp_path):
    """Migration 17 → 18 (runs.redone, --redo-disturbed): a defect would lose or alter a run, mark
    one redone (left out of the statistics), or fail on a database that has the column already."""
    tables = ("study_runs", "targets", "workloads", "runs", "metrics", "run_outputs", "hosts")
    db_path, db, before, after = _migrated(tmp_path, "schema-v17.db", tables)
    assert len(before["runs"]) == 8
    assert [row[:-2] for row in after["runs"]] == before["runs"] and {row[-2] for row in after["runs"]} == {0}
    assert {t: after[t] for t in tables if t != "runs"} == {t: before[t] for t in tables if t != "runs"}
    groups = db.sample_groups(1)
    assert sum(len(v["write_iops"]) for v in groups.values.values()) == 8, "every run still in the statistics"
    assert len(db.stored_runs(1)) == 8
    db.engine.dispose()
    with sqlite3.connect(db_path) as conn:  # marked older again, the column kept: migrated again, harmlessly
        conn.execute("UPDATE schema_info SET version = 17")
    assert len(ResultsDB(str(db_path)).stored_runs(1)) == 8


# schema-v18.db: written by fslab with schema version 18 (commit 48fca28) from schema-v18.toml, run
# for real (ext4 and xfs, a direct sequential write, two runs each, and the ceiling fslab adds).
def test_a_version_18_database_gains_the_boot_column_null_and_reads_as_before(tmp_path):
    """Migration 18 → 19 (runs.boot_id): a defect would lose or alter a run, invent a boot for one
    stored before (its statistics then taken as boot means), or fail where the column is already."""
    tables = ("study_runs", "targets", "workloads", "runs", "metrics", "run_outputs", "hosts")
    db_path, db, before, after = _migrated(tmp_path, "schema-v18.db", tables)
    assert len(before["runs"]) == 8
    assert [row[:-1] for row in after["runs"]] == before["runs"] and {row[-1] for row in after["runs"]} == {None}
    assert {t: after[t] for t in tables if t != "runs"} == {t: before[t] for t in tables if t != "runs"}
    assert [r["boot_id"] for r in db.runs(1, ["boot_id"])] == [None] * 8
    _counted_then_migrated_again(db, db_path, 18)


def _counted_then_migrated_again(db: ResultsDB, db_path: Path, version: int) -> None:
    """The migrated fixture's 8 runs all still in the statistics; then, marked `version` again with
    what the migration added kept (a database made by this fslab and marked older), migrated again
    harmlessly."""
    groups = db.sample_groups(1)
    assert sum(len(v["write_iops"]) for v in groups.values.values()) == 8, "every run still in the statistics"
    db.engine.dispose()
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE schema_info SET version = ?", (version,))
    assert len(ResultsDB(str(db_path)).stored_runs(1)) == 8


def at_version_19(path: Path) -> Path:
    """schema-v18.db as schema version 19 had it, at `path`: migrated by this fslab, then without
    what 20 added (ix_metrics_samples, its only change) and marked 19."""
    shutil.copy(FIXTURES / "schema-v18.db", path)
    ResultsDB(str(path)).engine.dispose()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX ix_metrics_samples")
        conn.execute("UPDATE schema_info SET version = 19")
    return path


def test_a_version_19_database_gains_the_samples_index_and_reads_from_it(tmp_path):
    """Migration 19 → 20 (ix_metrics_samples, every column of metrics): a defect would lose or alter
    a metric, leave the index out (a summary then looks up each value's row), or fail where the
    index is already (a database made by this fslab and marked older)."""
    tables = ("study_runs", "targets", "workloads", "runs", "metrics", "run_outputs", "hosts")
    made = at_version_19(tmp_path / "v19.db")
    with sqlite3.connect(made) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'ix_metrics_samples'").fetchone() == (0,)
    db_path, db, before, after = _migrated(tmp_path, made, tables)
    assert len(before["metrics"]) > 0 and after == before, "every row as it was"
    expected = list(enumerate(SAMPLE_COLUMNS))
    with sqlite3.connect(db_path) as conn:
        assert [(row[0], row[2]) for row in conn.execute("PRAGMA index_info(ix_metrics_samples)")] == expected
        # the values a summary reads, and their kinds, from the index alone (no row of the table looked up)
        plan = " ".join(
            row[3]
            for row in conn.execute(
                'EXPLAIN QUERY PLAN SELECT DISTINCT phase, name, unit, higher_is_better, "primary", compared, '
                "value FROM metrics WHERE run_id IN (1, 2)"
            )
        )
        assert "COVERING INDEX ix_metrics_samples" in plan, plan
    _counted_then_migrated_again(db, db_path, 19)


def test_a_new_database_has_the_samples_index(tmp_path):
    """A database made at this version has the index a migrated one gains (metadata.create_all)."""
    db = ResultsDB(str(tmp_path / "new.db"))
    db.engine.dispose()
    with sqlite3.connect(tmp_path / "new.db") as conn:
        columns = [row[2] for row in conn.execute("PRAGMA index_info(ix_metrics_samples)")]
    assert columns == list(SAMPLE_COLUMNS)
