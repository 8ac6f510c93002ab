"""Runs that fail — a hang past the time-out, a full filesystem — are stored with what is needed
to diagnose them, and the study goes on; a missing tool is refused before anything is made; a
killed fslab's scratch directory (in RAM) is removed by `fslab cleanup`, and only that very one."""

import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from conftest import (
    fresh_workdir,
    fslab,
    fslab_in_process,
    held_by,
    killed_fslab,
    path_without,
    plant,
    runs_stored,
    scratch_of,
    write_study,
)
from fslab.core.names import workdir_tag
from fslab.core.scratch import SCRATCH_IN_RAM, scratch_directory
from fslab.core.workdir import Workdir
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB
from fslab.results.schema import runs

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
        result = fslab("run", str(study), "--no-ceiling", "--db", str(db), "--workdir", str(workdir.root))
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
        assert (
            "No space left on device" in failure["stderr_tail"]
            and "No space left on device" in runs[("fill", n)]["error"]
        )
        assert len(failure["stderr_tail"].splitlines()) <= 40
    summary = (
        Path(results.location).parent / "reports" / f"failing-{results.study_run()['id']}" / "summary.md"
    ).read_text()
    assert (
        "| ext4 | fill | 1 | workload | `fio " in summary
        and "| ext4 | hang | 2 | workload | timed out after 10 s" in summary
    )


@pytest.mark.slow
def test_a_missing_tool_is_refused_before_anything_is_made(workdir, tmp_path, monkeypatch):
    study = write_study(
        tmp_path,
        FAILING.replace('filesystem = "ext4"\nmkfs_options = "-N 64"', 'filesystem = ["ext4", "xfs"]').replace(
            'image_size = "64MiB"', 'image_size = "512MiB"'
        ),
    )
    db = tmp_path / "r.db"
    monkeypatch.setenv("PATH", path_without("mkfs.xfs", tmp_path / "bin"))
    result = fslab_in_process(
        "run", str(study), "--db", str(db), "--workdir", str(workdir.root)
    )  # a refusal: in this process, with that PATH
    assert result.returncode == 2, result.stdout + result.stderr
    message = " ".join(result.stderr.split())
    assert (
        "the study cannot run here; nothing was attached or formatted: "
        "target 'xfs': xfs tools: not installed — apt-get install xfsprogs"
        in message
        and "Traceback" not in message
    )
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
from fslab.core.scratch import scratch_directory
from fslab.core.workdir import Workdir
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
    elsewhere = (
        workdir.root / f"{workdir_tag(workdir.root)}job1_1"
    )  # this work directory's name, not where scratch goes
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
            assert (
                outcomes[str(planted)].status == "left alone"
                and "not a scratch directory fslab makes" in outcomes[str(planted)].detail
            )
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


# --- runs failing alike (fslab.running.systematic) ------------------------------------------------------

# Two targets, two workloads, two runs each: eight runs in blocks of four.
ALIKE = """\
[study]
name = "alike"
repetitions = 2
image_size = "{size}"
image_fill = "sparse"
seed = 5

[[target]]
name = "{first}"
filesystem = "{first}"

[[target]]
name = "{second}"
filesystem = "{second}"
{options}

[[workload]]
name = "w1"
rw = "write"
bs = "1m"
size = "8MiB"
runtime = "1s"

[[workload]]
name = "w2"
rw = "read"
bs = "1m"
size = "8MiB"
runtime = "1s"
"""


def _removed_once_a_run_is_stored(tool: Path, db: Path) -> threading.Thread:
    """`tool` (a link in a PATH the test made) removed as soon as the study run has stored a run:
    the tool gone from PATH mid-study, as a package removed meanwhile would leave it."""

    def remove() -> None:
        deadline = time.monotonic() + 300
        while runs_stored(db) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        tool.unlink()

    thread = threading.Thread(target=remove, daemon=True)
    thread.start()
    return thread


def _run_as_tool_goes(
    study: Path, tool: str, workdir: Workdir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """`fslab run study` with a PATH of the test's own, `tool` removed from it once a run is stored:
    its result, its database and that PATH's directory."""
    db = tmp_path / "r.db"
    bin_dir = Path(path_without("fslab-none", tmp_path / "bin"))
    monkeypatch.setenv("PATH", str(bin_dir))
    remover = _removed_once_a_run_is_stored(bin_dir / tool, db)
    result = fslab("run", str(study), "--no-ceiling", "--db", str(db), "--workdir", str(workdir.root))
    remover.join(timeout=10)
    return result, db, bin_dir


@pytest.mark.root
def test_a_tool_gone_mid_study_stops_it_in_one_line_and_a_resume_makes_the_runs_again(workdir, tmp_path, monkeypatch):
    text = ALIKE.format(size="64MiB", first="ext4", second="ext4-noatime", options='mount_options = "noatime"')
    study = write_study(tmp_path, text.replace('filesystem = "ext4-noatime"', 'filesystem = "ext4"'))
    result, db, bin_dir = _run_as_tool_goes(study, "fio", workdir, tmp_path, monkeypatch)
    assert result.returncode == 1, result.stdout + result.stderr
    said = [line for line in result.stderr.splitlines() if line.startswith("stopped:")]
    assert len(said) == 1 and "runs in a row failed alike on 2 targets (" in said[0], result.stderr
    assert said[0].endswith(" makes them again"), result.stderr
    assert "fio: command not found" in said[0] and "--resume 1" in said[0]
    results = ResultsDB(str(db))
    assert results.study_run(1)["status"] == "interrupted" and "skipped" not in (results.study_run(1)["settings"] or {})
    with results.engine.connect() as conn:
        query = sa.select(runs.c.status).where(runs.c.study_run_id == 1).order_by(runs.c.id)
        statuses = [s for (s,) in conn.execute(query)]
    superseded = statuses.count("superseded")
    assert superseded >= 3 and "failed" not in statuses and statuses[0] == "ok" and len(statuses) < 8, statuses
    assert all(r["status"] == "ok" for r in results.runs(1)), "superseded runs are not read as runs"
    assert len(results.stored_runs(1)) == len(statuses) - superseded, "a resume makes them again"
    (bin_dir / "fio").symlink_to(shutil.which("fio", path="/usr/local/bin:/usr/bin:/bin"))
    resumed = fslab("run", "--resume", "1", "--db", str(db), "--workdir", str(workdir.root))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "failed" not in resumed.stderr and results.study_run(1)["status"] == "finished"
    assert len(results.runs(1)) == 8 and all(r["status"] == "ok" for r in results.runs(1))
    summary = summarize_study_run(results, 1)
    assert summary.failures == [] and all(c.failed == 0 and c.metrics[c.primary[0]].n == 2 for c in summary.cells)


@pytest.mark.root
def test_a_tool_of_one_target_gone_mid_study_skips_that_target_and_the_rest_go_on(workdir, tmp_path, monkeypatch):
    study = write_study(tmp_path, ALIKE.format(size="512MiB", first="ext4", second="xfs", options=""))
    result, db, _ = _run_as_tool_goes(study, "mkfs.xfs", workdir, tmp_path, monkeypatch)
    assert result.returncode == 1, result.stdout + result.stderr  # xfs's failed runs are failures: they count
    results = ResultsDB(str(db))
    study_run = results.study_run(1)
    assert study_run["status"] == "finished"
    (skip,) = study_run["settings"]["skipped"]
    assert skip["target"] == "xfs"
    gone = "`mkfs.xfs` exited 127: mkfs.xfs: command not found"
    assert skip["why"] == f"its runs failed alike (3 in a row, then skipped): {gone}"
    ext4 = [r for r in results.runs(1) if r["target"] == "ext4"]
    xfs = [r for r in results.runs(1) if r["target"] == "xfs"]
    assert len(ext4) == 4 and all(r["status"] == "ok" for r in ext4), "the rest went on"
    assert [r["status"] for r in xfs].count("failed") == 3 and len(xfs) <= 4, "no xfs run after its skip"
    said = " ".join(result.stdout.split())
    assert "target 'xfs' skipped: its runs failed alike" in said
    summary_md = (Path(results.location).parent / "reports" / "alike-1" / "summary.md").read_text()
    assert (
        "Skipped: 1 target(s) this machine cannot run, or whose runs failed alike: "
        "- xfs: its runs failed alike (3 in a row, then skipped)"
    ) in " ".join(summary_md.split())
