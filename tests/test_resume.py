"""A study run killed outright (SIGKILL: no handler runs) is found interrupted by the next fslab
and resumed with its own plan: every planned run stored exactly once, under the same id."""

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import apart, fio_children, fslab, fslab_in_process, held_by, runs_stored, write_study
from fslab.results import ResultsDB

STUDY = """\
[study]
name = "resumed"
repetitions = 2
workloads = ["rand_read", "seq_write"]
image_size = "512MiB"
image_fill = "sparse"

[fio]
size = "32MiB"
runtime = "1s"

[[target]]
filesystem = ["ext4", "xfs"]
"""
ONE_WORKLOAD = STUDY.replace(
    '["rand_read", "seq_write"]', '["seq_write"]'
)  # 2 targets × 2 repetitions: 2 blocks of 2 runs
EVERY_RUN = {(t, "seq_write", n): 1 for t in ("ext4", "xfs") for n in (1, 2)}


def _killed_while_fio_runs(study: Path, db: Path, workdir: Path, *args: str, after_runs: int) -> None:
    """Start the study, SIGKILL fslab while fio runs (once `after_runs` runs are stored), and wait
    for the orphaned fio to end: it finishes its 1 s job on its own."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fslab",
            "run",
            str(study),
            "--no-ceiling",
            "--db",
            str(db),
            "--workdir",
            str(workdir),
            *args,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not (fio := fio_children(proc.pid)) or runs_stored(db) < after_runs:
        assert time.monotonic() < deadline and proc.poll() is None, "the study should be running fio"
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    while any(Path(f"/proc/{pid}").exists() for pid in fio):
        assert time.monotonic() < deadline, "the orphaned fio should end with its job"
        time.sleep(0.1)


@pytest.mark.root
def test_a_killed_study_run_is_resumed_with_every_run_stored_once(workdir, tmp_path):
    """… and with the primary metric its study names (fio's own is write_iops), flagged on every run
    as it is stored, before the kill and after the resume."""
    chosen = ONE_WORKLOAD.replace("repetitions = 2", 'repetitions = 2\nprimary = ["write_mb_s"]')
    study, db = write_study(tmp_path, chosen), tmp_path / "r.db"
    _killed_while_fio_runs(study, db, workdir.root, after_runs=1)  # in block 1, as a rule: its second run
    results = ResultsDB(str(db))
    study_run = results.study_run()
    before = {r["id"]: r for r in results.runs(study_run["id"])}
    assert 1 <= len(before) < 4 and study_run["status"] == "running", "nothing ran to mark it"

    assert fslab("cleanup", "--workdir", str(workdir.root)).returncode == 0
    assert held_by(workdir.root) == []
    result = fslab("run", "--resume", "--db", str(db), "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"resuming study run {study_run['id']}, {len(before)} run(s) already stored" in result.stdout

    after = results.runs(study_run["id"])
    assert Counter((r["target"], r["workload"], r["repetition"]) for r in after) == EVERY_RUN
    assert all(r["status"] == "ok" for r in after)
    assert all(before[r["id"]] == r for r in after if r["id"] in before), "the stored runs are kept as they were"
    assert [r["block"] for r in after] == sorted(r["block"] for r in after), "block 2 only once block 1 is complete"
    finished = results.study_run()
    assert (
        finished["id"] == study_run["id"]
        and finished["status"] == "finished"
        and finished["plan_seed"] == study_run["plan_seed"]
    )
    assert results.study_runs() == [finished], "no new study run"
    assert held_by(workdir.root) == []
    assert {run.roles.primary for run in results.stored_runs(study_run["id"])} == {
        frozenset({("seq_write", "write_mb_s")})
    }, "every run, stored before the kill or after the resume"

    again = fslab_in_process("run", "--resume", str(study_run["id"]), "--db", str(db), "--workdir", str(workdir.root))
    assert (
        again.returncode == 2
        and f"study run {study_run['id']} (resumed) finished" in again.stderr
        and "nothing to resume" in again.stderr
    )


@pytest.mark.root
def test_an_adaptive_study_run_goes_on_deciding_from_its_stored_runs(workdir, tmp_path):
    text = STUDY.replace('["rand_read", "seq_write"]', '["rand_read"]').replace('["ext4", "xfs"]', '["xfs", "raw"]')
    study, db = write_study(tmp_path, text), tmp_path / "r.db"
    _killed_while_fio_runs(
        study, db, workdir.root, "--runs", "2", "--target-ci", "0.5", "--max-runs", "3", after_runs=3
    )
    assert fslab_in_process("cleanup", "--workdir", str(workdir.root)).returncode == 0
    result = fslab("run", "--resume", "--db", str(db), "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    results = ResultsDB(str(db))
    study_run = results.study_run()
    assert study_run["status"] == "finished" and study_run["settings"]["target_ci"] == 0.005
    runs = results.runs(study_run["id"])
    for target in ("xfs", "raw"):
        cell = study_run["outcome"][f"{target} · rand_read"]
        assert sorted(r["repetition"] for r in runs if r["target"] == target) == list(range(1, cell["runs"] + 1))
        assert 2 <= cell["runs"] <= 3 and cell["status"] in ("converged", "decided", "equivalent", "futile", "max runs")


@pytest.mark.root
def test_a_killed_study_run_shows_as_interrupted_once_with_how_to_resume(workdir, tmp_path):
    study, db = write_study(tmp_path, STUDY), tmp_path / "r.db"
    _killed_while_fio_runs(study, db, workdir.root, after_runs=0)
    study_run_id = ResultsDB(str(db)).study_run()["id"]

    history = fslab_in_process("history", "--db", str(db))
    assert history.returncode == 0 and "interrupted" in history.stdout
    told = " ".join(history.stderr.split())
    assert f"study run {study_run_id} (resumed) was interrupted" in told
    assert f"`fslab run --resume {study_run_id} --db {db} --workdir {workdir.root}` continues it" in told
    again = fslab_in_process("history", "--db", str(db))
    assert "interrupted" in again.stdout and "--resume" not in again.stderr, "told once"

    changed = fslab_in_process("run", "--resume", "--seed", "4", "--db", str(db), "--workdir", str(workdir.root))
    assert changed.returncode == 2 and "--seed cannot change a resumed study run" in changed.stderr
    assert fslab_in_process("cleanup", "--workdir", str(workdir.root)).returncode == 0


@pytest.mark.root
def test_a_resume_is_refused_when_a_job_file_changed(workdir, tmp_path):
    (tmp_path / "mine.fio").write_text("[mine]\nrw=randread\nbs=8k\ndirect=1\nsize=16m\nruntime=1\ntime_based=1\n")
    text = (
        STUDY.replace('workloads = ["rand_read", "seq_write"]', "")
        + '\n[[workload]]\nname = "mine"\njob_file = "mine.fio"\n'
    )
    study, db = write_study(tmp_path, text.replace('["ext4", "xfs"]', '"xfs"')), tmp_path / "r.db"
    _killed_while_fio_runs(study, db, workdir.root, after_runs=0)
    (tmp_path / "mine.fio").write_text("[mine]\nrw=randread\nbs=64k\ndirect=1\nsize=16m\nruntime=1\ntime_based=1\n")
    result = fslab_in_process("run", "--resume", "--db", str(db), "--workdir", str(workdir.root))
    assert result.returncode == 2
    assert "cannot be resumed: 'mine' no longer as it ran (a job file or fslab's defaults changed since)" in " ".join(
        result.stderr.split()
    )
    assert fslab_in_process("cleanup", "--workdir", str(workdir.root)).returncode == 0


ONE_CELL = ONE_WORKLOAD.replace('["ext4", "xfs"]', '"ext4"')  # 2 runs: a kill in the first or the second
KILL_ONCE = """#!/bin/sh
# Kills the fslab that runs this tool (its parent) the first time, as a crash at that point would,
# and ends there: a mkfs that went on could format a loop device that `fslab cleanup` had
# detached meanwhile and the resumed run, or another fslab, had attached again.
if [ ! -e "{marker}" ]; then touch "{marker}"; kill -9 $PPID; exit 1; fi
exec {real} "$@"
"""


def _journal_says(workdir: Path, needle: str) -> bool:
    journal = workdir / "journal.jsonl"
    return journal.exists() and needle in journal.read_text()


def lock_holders(lock: Path, killed: int) -> str:
    """Who holds the work directory's lock, by the kernel's /proc/locks (once seen held after its
    fslab, pid `killed`, was killed and waited for, under load: the next time says who)."""
    inode = os.stat(lock).st_ino
    holders = [line.split() for line in Path("/proc/locks").read_text().splitlines()]
    pids = [fields[4] for fields in holders if len(fields) > 5 and fields[5].endswith(f":{inode}")]
    said = [f"{pid}: {Path(f'/proc/{pid}/cmdline').read_bytes().split(bytes(1))!r}" for pid in pids
            if Path(f"/proc/{pid}").exists()]  # fmt: skip
    return f"\n(the killed fslab was pid {killed}; the lock's holders: {said or pids})"


@pytest.mark.root
@pytest.mark.parametrize("point", apart("resume-killed-at", ["mkfs", "teardown", "commit"]))
def test_killed_at_any_point_then_cleaned_up_and_resumed_every_run_is_stored_once(workdir, tmp_path, point):
    """SIGKILL as mkfs runs, as the run is torn down (its workload just ended), and while the run
    is being committed (the database held locked by this test): nothing stays attached after
    `fslab cleanup`, and `--resume` stores every planned run exactly once."""
    study, db = write_study(tmp_path, ONE_CELL), tmp_path / "r.db"
    env = dict(os.environ)
    if point == "mkfs":
        shims = tmp_path / "shims"
        shims.mkdir()
        (shims / "mkfs.ext4").write_text(KILL_ONCE.format(marker=tmp_path / "killed", real=shutil.which("mkfs.ext4")))
        (shims / "mkfs.ext4").chmod(0o755)
        env["PATH"] = f"{shims}:{env['PATH']}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fslab",
            "run",
            str(study),
            "--no-ceiling",
            "--db",
            str(db),
            "--workdir",
            str(workdir.root),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    locked = None
    deadline = time.monotonic() + 120
    if point == "teardown":  # the measured fio has ended and been released: the run is being torn down
        while not _journal_says(workdir.root, '"event": "release", "kind": "process"') or runs_stored(db) < 1:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.005)
        proc.kill()
    elif point == "commit":
        while runs_stored(db) < 1:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        locked = sqlite3.connect(db, timeout=30)
        locked.execute("BEGIN EXCLUSIVE")  # the next run's commit waits on this lock
        waiting = _waiting_for_the_lock(proc.pid)
        image_released = '"event": "release", "kind": "image"'
        while not (_journal_says(workdir.root, image_released) or _released_loops(workdir.root, 2)) or not waiting():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.kill()  # torn down, and waiting to commit
    proc.wait()
    assert proc.returncode == -9
    if locked is not None:
        locked.rollback()
        locked.close()

    results = ResultsDB(str(db))
    study_run = results.study_run()
    before = len(results.runs(study_run["id"]))
    cleanup = fslab_in_process("cleanup", "--workdir", str(workdir.root))
    assert cleanup.returncode == 0, cleanup.stdout + cleanup.stderr + lock_holders(workdir.root / "lock", proc.pid)
    assert held_by(workdir.root) == []
    result = fslab("run", "--resume", "--db", str(db), "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    after = results.runs(study_run["id"])
    assert len(after) == 2 and before < 2
    assert Counter((r["target"], r["workload"], r["repetition"]) for r in after) == {
        key: 1 for key in EVERY_RUN if key[0] == "ext4"
    }
    assert all(r["status"] == "ok" for r in after) and results.study_run()["status"] == "finished"
    assert held_by(workdir.root) == []


def _waiting_for_the_lock(pid: int) -> Callable[[], bool]:
    """Whether fslab is idle, nothing of its own running: its main thread asleep in SQLite's busy
    handler (a nanosleep between tries at the lock), with no child — seen so at two looks in a
    row (each call a look: a poll of the caller's loop), not at one that may catch another sleep."""
    looks = [0]

    def asleep() -> bool:
        try:
            return (
                "nanosleep" in Path(f"/proc/{pid}/wchan").read_text()
                and not Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            )
        except OSError:
            return False

    def waiting() -> bool:
        looks[0] = looks[0] + 1 if asleep() else 0
        return looks[0] >= 2

    return waiting


def _released_loops(workdir: Path, count: int) -> bool:
    journal = workdir / "journal.jsonl"
    return journal.exists() and journal.read_text().count('"event": "release", "kind": "loop"') >= count


def test_a_resource_known_by_name_alone_is_released_only_when_the_holder_says_so(workdir):
    from fslab.core.journal import Entry, releaser

    released: list[Entry] = []
    releaser("test-named")(lambda entry, wd: released.append(entry))
    with workdir.journal.holding("test-named", "unproven"):
        pass
    assert released == [], "nothing proven: nothing made, nothing released"
    with workdir.journal.holding("test-named", "by-name", release_unproven=True):
        pass
    assert released == [Entry("test-named", "by-name", {})]
    workdir.journal.forget()
    # a journal an older fslab wrote, with its placeholder proof: read, and released as before
    workdir.journal.path.write_text(
        '{"event": "acquire", "kind": "test-named", "id": "old", "proof": {"named": "by fslab"}}\n'
    )
    assert [(o.ident, o.status) for o in workdir.journal.clean_up()] == [("old", "released")]


def test_a_clean_up_pass_finds_what_the_work_directory_owns_once(workdir, monkeypatch):
    from fslab.core.journal import releaser
    from fslab.core.workdir import Workdir

    found = []
    real = Workdir._owned
    monkeypatch.setattr(Workdir, "_owned", lambda self: found.append(1) or real(self))
    seen = []
    releaser("test-owner")(lambda entry, wd: seen.append(wd.owned()))
    workdir.journal.path.write_text(
        "".join(f'{{"event": "acquire", "kind": "test-owner", "id": "e{n}"}}\n' for n in range(20))
    )
    assert all(o.status == "released" for o in workdir.journal.clean_up())
    assert len(seen) == 20 and len(found) == 1, "once a pass, not once an entry"
    workdir.owned()
    workdir.owned()
    assert len(found) == 3, "outside a pass, found anew each time"


def test_a_resumed_study_run_compares_each_target_with_its_own_baseline(tmp_path):
    """The study's `baseline` is folded into each target's own when the study is read (a sweep's
    values compare with its first); a resumed study run overrides them only with a --baseline
    given on the command line, never with the study's, as the run that began did."""
    from fslab.results.owner import Owner
    from fslab.running.resume import resumable
    from fslab.study import parse_study

    text = (
        '[study]\nname = "b"\nworkloads = ["rand_read"]\nbaseline = "xfs"\n[[target]]\nfilesystem = '
        '"xfs"\n[[target]]\nname = "e"\nfilesystem = "ext4"\nmount_options = ["defaults", "noatime"]\n'
    )
    study = parse_study(text, "s.toml", base_dir=tmp_path)
    assert {t.name: t.baseline for t in study.targets}["e[noatime]"] == "e[defaults]"
    db = ResultsDB(str(tmp_path / "r.db"))
    for given in ({}, {"baseline": "xfs"}):
        study_run = db.begin_study_run(study, 1, {}, {}, {"runs": 1, **given}, Owner.current(tmp_path))
        db.finish_study_run(study_run, "interrupted", {})
        assert resumable(db, str(study_run)).baseline == given.get("baseline")


def test_a_resumed_study_run_keeps_the_primary_metrics_its_study_named(tmp_path):
    """[study] primary is read again from the study file's text stored with the study run: a
    resumed run flags the same metrics primary as the runs stored before it."""
    from fslab.results.owner import Owner
    from fslab.running.resume import resumable
    from fslab.study import parse_study

    text = STUDY.replace("repetitions = 2", 'repetitions = 2\nprimary = ["rand_read:read_lat_p99_us", "write_mb_s"]')
    study = parse_study(text, "s.toml", base_dir=tmp_path)
    chosen = {w.name: w.primary for w in study.workloads}
    assert chosen == {"rand_read": ("read_lat_p99_us", "write_mb_s"), "seq_write": ("write_mb_s",)}
    db = ResultsDB(str(tmp_path / "r.db"))
    study_run = db.begin_study_run(study, 1, {}, {}, {"runs": 2}, Owner.current(tmp_path))
    db.finish_study_run(study_run, "interrupted", {})
    assert {w.name: w.primary for w in resumable(db, str(study_run)).study.workloads} == chosen
