"""Every command on a real PostgreSQL server (tests/postgres.py): a real `fslab run` (loop images,
mkfs, mount, 1 s of fio) stored there, read back by the other commands (in this process: what they
read, print and write is tested, not their start); two runs writing into one new database at once;
and the server's password never said, written or stored anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import postgres
from conftest import fresh_workdir, fslab_in_process, write_study
from fslab.results import ResultsDB
from fslab.results.schema import SCHEMA_VERSION
from short_studies import short_study

STUDY = short_study("pgrun", '[[target]]\nfilesystem = ["ext4", "raw"]\n')  # 2 cells × 2 runs of 1 s
RAW = short_study("pgraw", '[[target]]\nfilesystem = "raw"\n', repetitions=1)  # 1 run of 1 s, no filesystem to make


def fslab(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fslab", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def database_dump(cluster: postgres.Cluster, database: str) -> str:
    """Everything the database holds, as text (pg_dump: every table's rows)."""
    dump = [
        str(postgres.programs() / "pg_dump"),
        "-h",
        str(cluster.directory),
        "-p",
        str(cluster.port),
        "-U",
        postgres.USER,
        "--data-only",
        database,
    ]
    return subprocess.run(dump, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def study_in_postgresql(pg_cluster, tmp_path_factory, needs_root):
    """One study run by `fslab run` into PostgreSQL, named by FSLAB_DB, with the password in it."""
    root = tmp_path_factory.mktemp("pgrun")
    url = pg_cluster.new_database("commands")
    with fresh_workdir() as workdir:
        ran = fslab(
            "run",
            str(write_study(root, STUDY)),
            "--no-ceiling",
            "--workdir",
            str(workdir.root),
            "--seed",
            "3",
            cwd=root,
            env={"FSLAB_DB": url},
        )
        yield ran, url, root, workdir


def test_a_study_runs_into_postgresql_and_every_run_is_stored(study_in_postgresql, pg_cluster):
    ran, url, _, _ = study_in_postgresql
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (
        pg_cluster.sql(
            "SELECT count(*), count(DISTINCT id) FROM runs WHERE status = 'ok' AND warmup = false", "commands"
        )
        == "4|4"
    )
    assert pg_cluster.sql("SELECT count(DISTINCT run_id) FROM metrics WHERE name = 'write_iops'", "commands") == "4"
    assert pg_cluster.sql("SELECT count(*) FROM run_outputs WHERE tool = 'fio'", "commands") == "4"
    assert pg_cluster.sql("SELECT status, settings->>'runs' FROM study_runs", "commands") == "finished|2"
    assert pg_cluster.sql("SELECT version FROM schema_info", "commands") == str(SCHEMA_VERSION)
    db = ResultsDB(url)
    assert {(r.target, r.ok) for r in db.stored_runs(1)} == {("ext4", True), ("raw", True)}
    assert all(r["warmup"] is False and r["buffered"] is False for r in db.runs(1)), "booleans read back as booleans"
    db.engine.dispose()


def test_summary_report_export_history_and_compare_read_it_back(study_in_postgresql):
    ran, url, root, _ = study_in_postgresql
    summary = fslab_in_process("summary", "--db", url, cwd=root)
    assert summary.returncode == 0, summary.stderr
    assert "seq_write" in summary.stdout and "ext4" in summary.stdout and "Ranking by write IOPS" in summary.stdout
    assert (root / "reports" / "pgrun-1" / "summary.md").read_text().count("| ext4 ") >= 1
    report = fslab_in_process("report", "--db", url, "-o", str(root / "page"), cwd=root)
    assert report.returncode == 0 and (root / "page" / "report.html").stat().st_size > 10_000, report.stderr
    export = fslab_in_process("export", "1", "--db", url, "-o", str(root / "tables"), cwd=root)
    assert export.returncode == 0, export.stderr
    assert len((root / "tables" / "runs.csv").read_text().splitlines()) > 4
    history = fslab_in_process("history", "--db", url, cwd=root)
    assert history.returncode == 0 and "pgrun" in history.stdout and "finished" in history.stdout
    compare = fslab_in_process("compare", "1", "1", "--db", url, cwd=root)
    assert compare.returncode == 0 and "no regression" in compare.stdout
    missing = fslab_in_process("summary", "7", "--db", url, cwd=root)
    assert missing.returncode == 2 and "no study run 7 in postgresql://fslab:***@" in missing.stderr


def test_the_password_is_never_printed_stored_or_written(study_in_postgresql, pg_cluster):
    ran, url, root, workdir = study_in_postgresql
    assert postgres.PASSWORD in url
    said = ran.stdout + ran.stderr + fslab_in_process("summary", "--db", url, cwd=root).stdout
    assert "postgresql://fslab:***@127.0.0.1" in said and postgres.PASSWORD not in said
    assert postgres.PASSWORD not in database_dump(pg_cluster, "commands"), (
        "not in the settings, environment or owner stored"
    )
    written = [path for path in [*root.rglob("*"), *workdir.root.rglob("*")] if path.is_file()]
    assert written and not [path for path in written if postgres.PASSWORD.encode() in path.read_bytes()], (
        "not in a report, runs file or the journal"
    )


def test_two_runs_writing_into_one_new_database_at_once_both_complete(pg_cluster, tmp_path, needs_root):
    """Both make the tables of a new database at once (one waits for the other), then store their
    runs side by side: distinct ids, nothing lost. (On the raw device: the writers are tested, not
    a filesystem.)"""
    url = pg_cluster.new_database("two_writers")
    study = write_study(tmp_path, RAW)
    with fresh_workdir() as one, fresh_workdir() as other:
        started = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "fslab",
                    "run",
                    str(study),
                    "--no-ceiling",
                    "--db",
                    url,
                    "--workdir",
                    str(wd.root),
                ],
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for wd in (one, other)
        ]
        done = [(*proc.communicate(timeout=600), proc.returncode) for proc in started]
    assert [status for _, _, status in done] == [0, 0], done
    assert (
        pg_cluster.sql("SELECT string_agg(status, ',' ORDER BY id) FROM study_runs", "two_writers")
        == "finished,finished"
    )
    per_study_run = pg_cluster.sql(
        "SELECT string_agg(n::text, ',' ORDER BY study_run_id) FROM (SELECT "
        "study_run_id, count(*) n FROM runs GROUP BY study_run_id) c",
        "two_writers",
    )
    assert per_study_run == "1,1"
    assert (
        pg_cluster.sql(
            "SELECT count(*) FROM runs r WHERE NOT EXISTS (SELECT 1 FROM "
            "metrics m WHERE m.run_id = r.id AND m.name = 'write_iops')",
            "two_writers",
        )
        == "0"
    )
    assert pg_cluster.sql("SELECT count(DISTINCT uid) FROM study_runs", "two_writers") == "2"
    db = ResultsDB(url)
    assert [len(db.stored_runs(sr["id"])) for sr in db.study_runs()] == [1, 1]
    db.engine.dispose()
