"""`fslab db copy SRC DST`: a SQLite database's study runs moved into another database — the
team's PostgreSQL (a real server, tests/postgres.py), or another SQLite file — with everything
stored of them, ids remapped, nothing lost, and nothing added by a second copy."""

from __future__ import annotations

import pytest

import postgres
from conftest import fslab_in_process
from fslab.model import Host
from fslab.model.records import RunFailure, RunRecord, now
from fslab.report.formats.markdown import to_markdown
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB
from fslab.results.copy import copy_study_runs
from fslab.results.schema import run_histograms, study_runs
from fslab.running.environment import host
from synthetic import stored_study, study_run_of

STUDY = """[study]\nname = "{name}"\nworkloads = ["rand_read", "seq_write"]\nrepetitions = 3\n
[[target]]\nname = "raw"\nfilesystem = "raw"\n
[[target]]\nname = "ext4"\nfilesystem = "ext4"\n"""


def everything_of(db: ResultsDB, study_run_id: int) -> dict:
    """All that is stored of a study run, ids left out (each database has its own)."""
    run_ids = [r["id"] for r in db.runs(study_run_id)]
    return {
        "study_run": {k: v for k, v in study_run_of(db, study_run_id).items() if k != "id"},
        "targets": [{k: v for k, v in t.items() if k != "study_run_id"} for t in db.targets(study_run_id)],
        "workloads": [{k: v for k, v in w.items() if k != "study_run_id"} for w in db.workloads(study_run_id)],
        "hosts": db.hosts(study_run_id),
        "runs": [{k: v for k, v in r.items() if k not in ("id", "study_run_id")} for r in db.runs(study_run_id)],
        "metrics": [m[2:] for m in db.run_metrics(study_run_id)],
        "outputs": [db.outputs(run_id) for run_id in run_ids],
        "histograms": [h[1:] for h in db.histograms(study_run_id)],
    }


@pytest.fixture
def sqlite_with_two_study_runs(tmp_path):
    """Two study runs (one with a failing target and a second host), and one still running."""
    db = ResultsDB(str(tmp_path / "laptop.db"))
    first = stored_study(tmp_path, STUDY.format(name="one"), db, seed=3)
    db.record_host(first, host())
    db.record_host(first, Host("other-host", "0" * 32, "6.1.0", "a CPU", 4, 2**33))
    with db.engine.begin() as conn:  # what `--trace block` stores (schema 17) goes with its run
        conn.execute(
            run_histograms.insert().values(
                run_id=db.runs(first)[0]["id"], phase="", device="loop0", direction="write",
                kind="request_bytes", buckets=[[4096.0, 8192.0, 7], [8192.0, 16384.0, 0]],
            )
        )  # fmt: skip
    second = stored_study(
        tmp_path,
        STUDY.format(name="two"),
        db,
        seed=4,
        name="two.toml",
        failing={"ext4": ("mkfs failed", RunFailure("provision", "Traceback …", ["mkfs.ext4"], 1, "bad"))},
    )
    running = stored_study(tmp_path, STUDY.format(name="three"), db, seed=5, name="three.toml")
    with db.engine.begin() as conn:
        conn.execute(study_runs.update().where(study_runs.c.id == running).values(status="running", owner=None))
    return db, [first, second], running


def check_copied(source: ResultsDB, destination: ResultsDB, copied: dict[int, int]) -> None:
    for old_id, new_id in copied.items():
        assert everything_of(destination, new_id) == everything_of(source, old_id)
        renumbered = to_markdown(summarize_study_run(destination, new_id)).replace(
            f"study run {new_id}", f"study run {old_id}"
        )
        assert renumbered == to_markdown(summarize_study_run(source, old_id)), "the same summary, under its new id"


def test_a_sqlite_database_is_copied_into_postgresql_with_nothing_lost_and_once(
    pg_cluster, sqlite_with_two_study_runs, tmp_path
):
    source, (first, second), running = sqlite_with_two_study_runs
    url = pg_cluster.new_database("team")
    team = ResultsDB(url)
    stored_study(
        tmp_path, STUDY.format(name="theirs"), team, seed=9, name="theirs.toml"
    )  # ids 1 and up are taken there
    seen = []
    outcome = copy_study_runs(source, team, lambda done, total: seen.append((done, total)))
    assert list(outcome.copied) == [first, second] and list(outcome.copied.values()) == [2, 3], (
        "ids remapped past the destination's own"
    )
    assert outcome.left == {running: "still running: copy it once it has finished (or been interrupted)"}
    assert outcome.runs == 24 and seen[-1] == (24, 24) and seen == sorted(seen)
    check_copied(source, team, outcome.copied)
    assert pg_cluster.sql("SELECT count(*) FROM runs", "team") == "36"
    again = copy_study_runs(source, team)
    assert again.copied == {} and again.already == {first: 2, second: 3} and again.runs == 0
    assert (
        pg_cluster.sql("SELECT count(*) FROM study_runs", "team") == "3"
        and pg_cluster.sql("SELECT count(*) FROM runs", "team") == "36"
    )
    later = RunRecord("raw", "rand_read", 4, False, 9, 99, now(), now(), "ok", False)
    assert team.record_run(2, later) == 37, "the id sequence goes on past the copied runs"
    team.engine.dispose()


def test_the_command_copies_into_sqlite_and_says_what_it_did(sqlite_with_two_study_runs, tmp_path):
    source, (first, second), running = sqlite_with_two_study_runs
    destination = tmp_path / "archive.db"
    result = fslab_in_process("db", "copy", source.location, str(destination))
    assert result.returncode == 0, result.stderr
    assert (
        f"study run {first} copied as study run 1" in result.stdout
        and f"study run {second} copied as study run 2" in result.stdout
    )
    assert (
        "2 study run(s), 24 run(s) copied into" in result.stdout
        and f"left study run {running}: still running" in result.stderr
    )
    check_copied(source, ResultsDB(str(destination)), {first: 1, second: 2})
    again = fslab_in_process("db", "copy", source.location, str(destination))
    assert (
        again.returncode == 0
        and "0 study run(s), 0 run(s) copied" in again.stdout
        and "2 already there" in again.stdout
    )


def test_a_copy_of_a_database_copied_again_adds_nothing(sqlite_with_two_study_runs, tmp_path):
    """The identity travels with the study run: a copy of a copy is recognised too."""
    source, _, _ = sqlite_with_two_study_runs
    middle, last = ResultsDB(str(tmp_path / "middle.db")), ResultsDB(str(tmp_path / "last.db"))
    copy_study_runs(source, last)
    copy_study_runs(source, middle)
    assert copy_study_runs(middle, last).copied == {}


def test_what_cannot_be_copied_is_said(sqlite_with_two_study_runs, tmp_path):
    source, _, _ = sqlite_with_two_study_runs
    missing = fslab_in_process("db", "copy", str(tmp_path / "nowhere.db"), str(tmp_path / "x.db"))
    assert missing.returncode == 2 and "no database file" in missing.stderr and "nowhere.db" in missing.stderr
    assert not (tmp_path / "nowhere.db").exists()
    itself = fslab_in_process("db", "copy", source.location, source.location)
    assert itself.returncode == 2 and "both the source and the destination" in itself.stderr
    unreachable = fslab_in_process(
        "db", "copy", source.location, f"postgresql://fslab:{postgres.PASSWORD}@127.0.0.1:1/x"
    )
    assert unreachable.returncode == 2 and "cannot use postgresql://fslab:***@127.0.0.1:1/x" in unreachable.stderr
    assert postgres.PASSWORD not in unreachable.stderr + unreachable.stdout
    assert "name another DST" in unreachable.stderr, "the argument named, not --db"
    nowhere = fslab_in_process("db", "copy", source.location, str(tmp_path / "no" / "x.db"))
    assert (
        nowhere.returncode == 2
        and f"DST {tmp_path / 'no' / 'x.db'}: the directory {tmp_path / 'no'} does not exist"
        in " ".join(nowhere.stderr.split())
    )
