"""A study run killed outright (SIGKILL: no handler runs) is found interrupted by the next fslab
and resumed with its own plan: every planned run stored exactly once, under the same id."""

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from conftest import fio_children, fslab, held_by, runs_stored, write_study
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
EVERY_RUN = {(t, w, n): 1 for t in ("ext4", "xfs") for w in ("rand_read", "seq_write") for n in (1, 2)}


def _killed_while_fio_runs(study: Path, db: Path, workdir: Path, *args: str, after_runs: int) -> None:
    """Start the study, SIGKILL fslab while fio runs (once `after_runs` runs are stored), and wait
    for the orphaned fio to end: it finishes its 1 s job on its own."""
    proc = subprocess.Popen([sys.executable, "-m", "fslab", "run", str(study), "--db", str(db), "--workdir", str(workdir), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (fio := fio_children(proc.pid)) or runs_stored(db) < after_runs:
        assert time.monotonic() < deadline and proc.poll() is None, "the study should be running fio"
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    while any(Path(f"/proc/{pid}").exists() for pid in fio):
        assert time.monotonic() < deadline, "the orphaned fio should end with its job"
        time.sleep(0.1)


def test_a_killed_study_run_is_resumed_with_every_run_stored_once(workdir, tmp_path):
    study, db = write_study(tmp_path, STUDY), tmp_path / "r.db"
    _killed_while_fio_runs(study, db, workdir.root, after_runs=3)
    results = ResultsDB(str(db))
    study_run = results.study_run()
    before = {r["id"]: r for r in results.runs(study_run["id"])}
    assert 3 <= len(before) < 8 and study_run["status"] == "running", "nothing ran to mark it"

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
    assert finished["id"] == study_run["id"] and finished["status"] == "finished" and finished["plan_seed"] == study_run["plan_seed"]
    assert results.study_runs() == [finished], "no new study run"
    assert held_by(workdir.root) == []

    again = fslab("run", "--resume", str(study_run["id"]), "--db", str(db), "--workdir", str(workdir.root))
    assert again.returncode == 2 and f"study run {study_run['id']} (resumed) finished" in again.stderr and "nothing to resume" in again.stderr


def test_an_adaptive_study_run_goes_on_deciding_from_its_stored_runs(workdir, tmp_path):
    text = STUDY.replace('["rand_read", "seq_write"]', '["rand_read"]').replace('["ext4", "xfs"]', '["xfs", "raw"]')
    study, db = write_study(tmp_path, text), tmp_path / "r.db"
    _killed_while_fio_runs(study, db, workdir.root, "--runs", "2", "--target-ci", "0.5", "--max-runs", "4", after_runs=3)
    assert fslab("cleanup", "--workdir", str(workdir.root)).returncode == 0
    result = fslab("run", "--resume", "--db", str(db), "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    results = ResultsDB(str(db))
    study_run = results.study_run()
    assert study_run["status"] == "finished" and study_run["settings"]["target_ci"] == 0.005
    runs = results.runs(study_run["id"])
    for target in ("xfs", "raw"):
        cell = study_run["outcome"][f"{target} · rand_read"]
        assert sorted(r["repetition"] for r in runs if r["target"] == target) == list(range(1, cell["runs"] + 1))
        assert 2 <= cell["runs"] <= 4 and cell["status"] in ("converged", "decided", "max runs")


def test_a_killed_study_run_shows_as_interrupted_once_with_how_to_resume(workdir, tmp_path):
    study, db = write_study(tmp_path, STUDY), tmp_path / "r.db"
    _killed_while_fio_runs(study, db, workdir.root, after_runs=0)
    study_run_id = ResultsDB(str(db)).study_run()["id"]

    history = fslab("history", "--db", str(db))
    assert history.returncode == 0 and "interrupted" in history.stdout
    told = " ".join(history.stderr.split())
    assert f"study run {study_run_id} (resumed) was interrupted" in told
    assert f"`fslab run --resume {study_run_id} --db {db} --workdir {workdir.root}` continues it" in told
    again = fslab("history", "--db", str(db))
    assert "interrupted" in again.stdout and "--resume" not in again.stderr, "told once"

    changed = fslab("run", "--resume", "--seed", "4", "--db", str(db), "--workdir", str(workdir.root))
    assert changed.returncode == 2 and "--seed cannot change a resumed study run" in changed.stderr
    assert fslab("cleanup", "--workdir", str(workdir.root)).returncode == 0


def test_a_resume_is_refused_when_a_job_file_changed(workdir, tmp_path):
    (tmp_path / "mine.fio").write_text("[mine]\nrw=randread\nbs=8k\ndirect=1\nsize=16m\nruntime=1\ntime_based=1\n")
    text = STUDY.replace('workloads = ["rand_read", "seq_write"]', "") + '\n[[workload]]\nname = "mine"\njob_file = "mine.fio"\n'
    study, db = write_study(tmp_path, text.replace('["ext4", "xfs"]', '"xfs"')), tmp_path / "r.db"
    _killed_while_fio_runs(study, db, workdir.root, after_runs=0)
    (tmp_path / "mine.fio").write_text("[mine]\nrw=randread\nbs=64k\ndirect=1\nsize=16m\nruntime=1\ntime_based=1\n")
    result = fslab("run", "--resume", "--db", str(db), "--workdir", str(workdir.root))
    assert result.returncode == 2
    assert "cannot be resumed: 'mine' no longer as it ran (a job file or fslab's defaults changed since)" in " ".join(result.stderr.split())
    assert fslab("cleanup", "--workdir", str(workdir.root)).returncode == 0
