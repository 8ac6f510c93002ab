"""Runs that fail — a hang past the time-out, a full filesystem — are stored with what is needed
to diagnose them, and the study goes on; a missing tool is refused before anything is made; a
killed fslab's scratch directory (in RAM) is removed by `fslab cleanup`, and only that very one."""

import os
import shutil
from pathlib import Path

import pytest
from conftest import (
    fresh_workdir,
    fslab,
    fslab_in_process,
    held_by,
    killed_fslab,
    plant,
    scratch_of,
    write_study,
)

from fslab.guard.names import workdir_tag
from fslab.results import ResultsDB
from fslab.scratch import SCRATCH_IN_RAM, scratch_directory
from fslab.workdir import Workdir

# A 64 MiB ext4 image made with as few inodes as mke2fs allows (64, 53 free once mounted).
# "fill" passes the study's size check (8 MiB) but its 100 files need more inodes than there
# are: fio's open fails, ENOSPC — the full filesystem no estimate of bytes foresees.
# "hang" writes 32 MiB at one I/O per second: it would take nine hours; its time-out is 10 s,
# from attaching its image to parsing: room for mkfs and mount on a busy machine, so that it is
# the workload the time-out stops.
FAILING = """\
[study]
name = "failing"
repetitions = 2
image_size = "64MiB"
seed = 3

[[target]]
filesystem = "ext4"
mkfs_options = "-N 64"

[[workload]]
name = "fill"
rw = "write"
bs = "1m"
size = "8MiB"
runtime = "0s"
options = { nrfiles = 100 }

[[workload]]
name = "hang"
rw = "randwrite"
size = "32MiB"
runtime = "0s"
timeout = "10s"
options = { rate_iops = 1 }

[[workload]]
name = "fine"
rw = "write"
bs = "1m"
size = "16MiB"
runtime = "1s"
"""


@pytest.fixture(scope="module")
def failing_study(tmp_path_factory, needs_root):
    root = tmp_path_factory.mktemp("failing")
    study, db = write_study(root, FAILING), root / "r.db"
    with fresh_workdir() as workdir:
        result = fslab("run", str(study), "--db", str(db), "--workdir", str(workdir.root))
        assert held_by(workdir.root) == [], "everything released after the failures"
        assert scratch_of(workdir.root) == [], "no run's scratch directory left in RAM"
    results = ResultsDB(str(db))
    yield result, results, {(r["workload"], r["repetition"]): r for r in results.runs(results.study_run()["id"])}


@pytest.mark.root
def test_the_study_goes_on_past_failed_runs_and_exits_1(failing_study):
    result, results, runs = failing_study
    assert result.returncode == 1, result.stdout + result.stderr
    assert "4 run(s) failed" in result.stderr
    assert results.study_run()["status"] == "finished" and len(runs) == 6
    assert [runs[("fine", n)]["status"] for n in (1, 2)] == ["ok", "ok"]
    assert runs[("fine", 1)]["failure"] is None


@pytest.mark.root
def test_a_hang_is_killed_at_its_time_out(failing_study):
    result, _, runs = failing_study
    for n in (1, 2):
        run = runs[("hang", n)]
        failure = run["failure"]
        assert run["status"] == "failed" and run["error"].startswith("timed out after 10 s: `fio ")
        assert failure["phase"] == "workload" and failure["argv"][0] == "fio" and failure["exit_status"] == -9
        assert "TimedOut" in failure["traceback"]
        assert (run["finished_at"] - run["started_at"]).total_seconds() < 25, "killed at 10 s, then torn down"
        assert "rate_iops=1" in run["job_file"]
    assert "failed in workload ext4 · hang · run 1: timed out after 10 s" in " ".join(result.stdout.split())


@pytest.mark.root
def test_a_full_filesystem_fails_the_workload_with_fios_words(failing_study):
    _, results, runs = failing_study
    for n in (1, 2):
        failure = runs[("fill", n)]["failure"]
        assert failure["phase"] == "workload" and failure["argv"][0] == "fio" and failure["exit_status"] == 1
        assert "No space left on device" in failure["stderr_tail"] and "No space left on device" in runs[("fill", n)]["error"]
        assert len(failure["stderr_tail"].splitlines()) <= 40
    summary = (Path(results.location).parent / "reports" / f"failing-{results.study_run()['id']}" / "summary.md").read_text()
    assert "| ext4 | fill | 1 | workload | `fio " in summary and "| ext4 | hang | 2 | workload | timed out after 10 s" in summary


def _path_without(tool: str, directory: Path) -> str:
    """A PATH with every command of this machine but `tool`: as if its package were not installed."""
    directory.mkdir()
    for folder in os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").split(":") + ["/usr/sbin", "/sbin"]:
        for entry in Path(folder).glob("*") if Path(folder).is_dir() else []:
            link = directory / entry.name
            if entry.name != tool and not link.exists() and not link.is_symlink():
                link.symlink_to(entry)
    assert shutil.which(tool, path=str(directory)) is None
    return str(directory)


@pytest.mark.slow
def test_a_missing_tool_is_refused_before_anything_is_made(workdir, tmp_path, monkeypatch):
    study = write_study(tmp_path, FAILING.replace('filesystem = "ext4"\nmkfs_options = "-N 64"', 'filesystem = ["ext4", "xfs"]').replace('image_size = "64MiB"', 'image_size = "512MiB"'))
    db = tmp_path / "r.db"
    monkeypatch.setenv("PATH", _path_without("mkfs.xfs", tmp_path / "bin"))
    result = fslab_in_process("run", str(study), "--db", str(db), "--workdir", str(workdir.root))  # a refusal: in this process, with that PATH
    assert result.returncode == 2, result.stdout + result.stderr
    message = " ".join(result.stderr.split())
    assert "the study cannot run here; nothing was attached or formatted: target 'xfs': xfs tools: not installed — apt-get install xfsprogs" in message and "Traceback" not in message
    assert not any(workdir.images.glob("*.img")) and ResultsDB(str(db)).study_runs() == []


# --- a run's scratch directory ------------------------------------------------------------------


def test_a_runs_scratch_is_in_ram_and_removed_after_it(workdir):
    with scratch_directory(workdir.journal) as scratch:
        assert scratch.parent == SCRATCH_IN_RAM and scratch.is_dir() and scratch_of(workdir.root) == [scratch]
        (scratch / "side").write_text("x")
    assert not scratch.exists() and workdir.journal.read() == ([], [])


_KILLED = """
import os, sys
from pathlib import Path
from fslab.scratch import scratch_directory
from fslab.workdir import Workdir
made = scratch_directory(Workdir(Path(sys.argv[1])).journal)  # held: a context manager dropped would close
scratch = made.__enter__()
(scratch / "random-source").write_bytes(os.urandom(1 << 20))
print(scratch, flush=True)
os._exit(0)  # killed: nothing released
"""


def _killed_fslab_leaves_scratch(wd: Workdir) -> Path:
    path = Path(killed_fslab(_KILLED, wd.root))
    assert (path / "random-source").is_file() and scratch_of(wd.root) == [path]
    return path


def test_cleanup_removes_the_scratch_a_killed_fslab_left(workdir):
    path = _killed_fslab_leaves_scratch(workdir)
    outcomes = workdir.journal.clean_up()
    assert [(o.kind, o.status) for o in outcomes] == [("scratch", "released")]
    assert not path.exists()


def test_cleanup_leaves_a_scratch_directory_fslab_did_not_make(workdir, tmp_path):
    """The journalled path made again by someone else (another inode), or a symlink put there:
    left alone, and what the symlink points to untouched; planted entries naming a directory
    elsewhere, or another work directory's, are never acted on, whatever their identity."""
    path = _killed_fslab_leaves_scratch(workdir)
    shutil.rmtree(path)
    path.mkdir()  # same name, not the directory fslab made
    (path / "theirs").write_text("kept")
    elsewhere = workdir.root / f"{workdir_tag(workdir.root)}job1_1"  # this work directory's name, not where scratch goes
    other = SCRATCH_IN_RAM / "fslab_00000_job1_1"  # where scratch goes, another work directory's tag
    escaping = SCRATCH_IN_RAM / f"{workdir_tag(workdir.root)}job1_1" / ".." / tmp_path.name
    for planted in (elsewhere, other):
        planted.mkdir()
        (planted / "theirs").write_text("kept")
        plant(workdir.journal, "scratch", planted)
    try:
        workdir.journal._append("acquire", "scratch", str(escaping))
        outcomes = {o.ident: o for o in workdir.journal.clean_up()}
        assert outcomes[str(path)].status == "left alone" and "identity differs" in outcomes[str(path)].detail
        for planted in (elsewhere, other, escaping):
            assert outcomes[str(planted)].status == "left alone" and "not a scratch directory fslab makes" in outcomes[str(planted)].detail
        assert all((p / "theirs").read_text() == "kept" for p in (path, elsewhere, other))
    finally:
        shutil.rmtree(path)
        shutil.rmtree(other)


def test_cleanup_never_follows_a_symlink_at_a_scratch_path(workdir, tmp_path):
    path = _killed_fslab_leaves_scratch(workdir)
    shutil.rmtree(path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("kept")
    path.symlink_to(victim)
    try:
        [outcome] = workdir.journal.clean_up()
        assert outcome.status == "left alone" and "identity differs" in outcome.detail
        assert (victim / "precious").read_text() == "kept" and path.is_symlink()
    finally:
        path.unlink()
