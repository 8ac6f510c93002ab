"""`fslab run STUDY --plan` (issue 32, item 8): what a study would do here — targets and workloads
after --scale, runs, disk space, estimated time from this host's stored runs, what is skipped
and what is missing — printed with nothing attached, formatted, locked or stored."""

import hashlib
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import fslab_in_process, write_study
from fslab.results import ResultsDB
from fslab.results.timings import stored_timings
from fslab.running import doctor
from fslab.running.preview import DEFAULT_OVERHEAD, Overhead
from fslab.study import load_study
from short_studies import SKIPPED_STACK
from synthetic import SyntheticHost, store_study_run

SMALL = """\
[study]
name = "small"
repetitions = 2
workloads = ["seq_read", "rand_write"]
image_size = "1GiB"
[fio]
runtime = "2s"
ramp_time = "1s"
size = "64MiB"
[[target]]
filesystem = ["ext4", "xfs"]
"""


def plan_of(*args: str) -> subprocess.CompletedProcess[str]:
    result = fslab_in_process("run", *args, "--plan")
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_the_plan_of_a_study_says_what_it_would_do_and_makes_nothing(tmp_path):
    """Fails on the old code: there was no --plan."""
    db, workdir = tmp_path / "r.db", tmp_path / "work"
    shown = plan_of("quick", "--scale", "0.5", "--db", str(db), "--workdir", str(workdir)).stdout
    assert not db.exists() and not workdir.exists(), "no database made, no work directory claimed"
    lines = shown.splitlines()
    assert lines[0] == "quick: the plan (nothing is attached, formatted, locked or stored)"
    assert "scale: 0.5 × the study file's image sizes, file sizes and runtimes" in lines
    assert "  xfs: xfs, image 1GiB (full)" in lines and "  raw: raw, image 1GiB (full)" in lines, (
        "each target with its image after --scale"
    )
    assert "  seq_read: fio, 256MiB of files, 1.25 s a run, direct I/O" in lines, "runtime 2 s and ramp 500 ms × 0.5"
    assert "runs: 16 cells × 3 = 48" in lines and "disk: 4GiB for 4 filled images in " + str(workdir) in shown
    # 48 runs × (1.25 s + the default overhead), said to be a default: this database holds no run
    assert (
        f"time: about {round(48 * (1.25 + DEFAULT_OVERHEAD) / 60)} min — " in shown
        and "(a default: this host has stored no run in this database)" in shown
    )
    assert re.search(
        r"^  and writing 4 image\(s\) whole once \(4GiB; this host's speed at it is not yet measured\)$", shown, re.M
    )


def test_the_plan_says_what_runs_and_adaptive_repetitions_and_sizes_only_change(tmp_path):
    study = write_study(tmp_path, SMALL)
    at = (
        "--db",
        str(tmp_path / "r.db"),
        "--workdir",
        str(tmp_path / "w"),
        "--no-ceiling",
    )  # its ceiling: the test below
    fixed = plan_of(str(study), "--runs", "5", "--warmup", "1", *at).stdout
    assert "runs: 4 cells × 5 = 20, and 4 warm-up runs (1 a cell) first" in fixed
    block = 4 * (3 + DEFAULT_OVERHEAD)  # a run of every cell: runtime 2 s + ramp 1 s, and the overhead
    assert f"time: about {round(6 * block / 60)} min" in fixed
    adaptive = plan_of(str(study), "--target-ci", "2", "--max-runs", "12", *at).stdout
    assert (
        "runs (adaptive, until each cell is within ±2.0% or decided; 11 looks): 4 cells × 2 to 12 = 8 to 48" in adaptive
    )
    assert f"time: from about {round(2 * block)} s to about {round(12 * block / 60)} min" in adaptive
    budget = plan_of(str(study), "--target-ci", "2", "--max-runs", "12", "--time-budget", "3m", *at).stdout
    assert (
        ", no block started that would end after 180 s" in budget
        and f"from about {round(2 * block)} s to about 3 min" in budget
    )
    sizes_only = plan_of(str(study), "--scale", "0.5", "--scale-sizes-only", *at).stdout
    assert "scale: 0.5 × the study file's image and file sizes (runtimes as the study says)" in sizes_only
    assert (
        "  rand_write: fio, 32MiB of files, 3 s a run, direct I/O" in sizes_only
        and "  ext4: ext4, image 512MiB (full)" in sizes_only
    )


def test_the_plan_holds_the_ceiling_a_study_without_a_raw_target_gets(tmp_path):
    """Issue 32, item 1: the raw reference is part of the plan, its cells at least three runs each."""
    study = write_study(tmp_path, SMALL)
    at = ("--db", str(tmp_path / "r.db"), "--workdir", str(tmp_path / "w"))
    shown = plan_of(str(study), "--runs", "1", *at).stdout
    assert "targets (3):" in shown and "  (ceiling): raw, image 1GiB (full)" in shown.splitlines()
    assert "runs: 4 cells × 1 + the ceiling's 2 cells × 3 = 10" in shown
    block = 4 * (3 + DEFAULT_OVERHEAD) + 2 * 3 * (
        3 + DEFAULT_OVERHEAD
    )  # the ceiling's cells three times in the one block
    assert f"time: about {round(block)} s" in shown or f"time: about {round(block / 60)} min" in shown, shown
    adaptive = plan_of(str(study), "--target-ci", "2", "--max-runs", "12", *at).stdout
    assert "4 cells × 2 to 12 + the ceiling's 2 cells × 4 to 12 = 16 to 72" in adaptive
    opted_out = plan_of(str(study), "--no-ceiling", *at).stdout
    assert "(ceiling)" not in opted_out and "runs: 4 cells × 2 = 8" in opted_out


def test_the_plan_lists_what_this_machine_cannot_run_skipped_or_refused(tmp_path):
    at = ("--scale", "0.05", "--db", str(tmp_path / "r.db"), "--workdir", str(tmp_path / "w"))
    unsupported = doctor.unsupported_targets(load_study("nas-stack", scale=0.05))
    refused, skipped = plan_of("nas-stack", *at).stdout, plan_of("nas-stack", "--skip-unsupported", *at).stdout
    for u in unsupported:  # what this machine lacks, as `fslab run` would find it
        assert f"  {u}\n" in refused and f"  {u}\n" in skipped
    if unsupported:
        assert "cannot run here — `fslab run` refuses the study unless --skip-unsupported skips them:" in refused
        assert "skipped (--skip-unsupported), this machine cannot run them:" in skipped
        assert f"  {unsupported[0].target}: " in refused and f"  {unsupported[0].target}: " not in skipped, (
            "a skipped target is not planned"
        )
    else:
        assert "cannot run here" not in refused and "skipped" not in skipped


def test_a_skipped_targets_raw_baselines_are_skipped_with_it_and_the_ceiling_is_planned_for_those_that_run(
    tmp_path, monkeypatch
):
    """nas-stack --skip-unsupported on a kernel without md skipped ext4-stack but ran its raw
    baselines, ranked them with zfs-mirror and took them for the study's raw target, so that no
    ceiling was added. A machine without md, whatever this one has: the stack's raw baselines go
    with it, said so, and the study that runs (one plain ext4) gets fslab's ceiling."""
    monkeypatch.setattr(doctor.layers, "missing", lambda layer: "this kernel has no md RAID1 (the test's)")
    monkeypatch.setattr(
        doctor.FILESYSTEMS["ext4"], "machine_checks", lambda: []
    )  # mkfs.ext4 or not: only md is lacking
    study = write_study(tmp_path, SKIPPED_STACK)
    at = ("--runs", "1", "--db", str(tmp_path / "r.db"), "--workdir", str(tmp_path / "w"))
    shown = plan_of(str(study), "--skip-unsupported", *at).stdout.splitlines()
    targets = shown[shown.index("targets (2):") + 1 : shown.index("workloads (1):")]
    assert [line.split(":")[0].strip() for line in targets] == ["plain", "(ceiling)"], shown
    skipped = shown[shown.index("skipped (--skip-unsupported), this machine cannot run them:") + 1 :]
    assert "  target 'stack': it needs md-raid1, and this kernel has no md RAID1 (the test's)" in skipped
    for raw in ("stack/raw-1", "stack/raw-2"):
        assert (
            f"  target '{raw}': it is the raw baseline of 'stack', which "
            "cannot run here: it measures that target's devices alone" in skipped
        )
    refused = plan_of(
        str(study), *at
    ).stdout.splitlines()  # nothing skipped: the stack and its raw baselines, no ceiling (as before)
    assert "targets (4):" in refused and not any("(ceiling)" in line for line in refused)


def test_the_time_per_run_comes_from_this_hosts_stored_runs(tmp_path):
    """The overhead is what this host's stored runs took beyond their workload's ramp and runtime
    (fio's start and its layout included), read without writing a byte; another host's runs do
    not count."""
    db_path = tmp_path / "r.db"
    db = ResultsDB(str(db_path))
    here = socket.gethostname()
    store_study_run(
        db, load_study(write_study(tmp_path, SMALL)), seed=3, rng=random.Random(3), hosts={here: SyntheticHost()}
    )
    store_study_run(
        db, load_study(write_study(tmp_path, SMALL)), seed=4, rng=random.Random(4), hosts={"elsewhere": SyntheticHost()}
    )
    stored = [r for r in db.runs(1) if r["status"] == "ok"]
    beyond = statistics.median(
        (r["finished_at"] - r["started_at"]).total_seconds() - r["timings"].get("image", 0) - 3.0 for r in stored
    )
    overhead = Overhead.of(stored_timings(str(db_path), here))
    assert overhead.measured_runs == len(stored) == 8 and overhead.seconds == pytest.approx(beyond)
    before = hashlib.sha256(db_path.read_bytes()).hexdigest()
    shown = plan_of(str(write_study(tmp_path, SMALL)), "--db", str(db_path), "--workdir", str(tmp_path / "w")).stdout
    assert f"{beyond:.1f} s of fslab's own work per run (the median of this host's last 8 stored runs)" in shown
    assert hashlib.sha256(db_path.read_bytes()).hexdigest() == before and len(ResultsDB(str(db_path)).study_runs()) == 2


def test_an_older_or_foreign_database_gives_no_timings_and_is_left_as_it_is(tmp_path):
    old = tmp_path / "old.db"
    old.write_bytes((Path(__file__).parent / "fixtures" / "schema-v7.db").read_bytes())
    before = old.read_bytes()
    assert stored_timings(str(old), socket.gethostname()) == [] and old.read_bytes() == before, "not migrated"
    assert stored_timings(str(tmp_path / "none.db"), "h") == [] and not (tmp_path / "none.db").exists()


@pytest.mark.root
def test_the_plan_needs_no_root_and_says_that_the_runs_do(needs_root):
    """Run as nobody: the plan is printed, and says the study run itself needs root."""
    with tempfile.TemporaryDirectory() as where:
        os.chmod(where, 0o777)  # nobody's, under /tmp (pytest's own directories are root's alone)
        ran_as_nobody(Path(where))


def ran_as_nobody(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src"), "HOME": str(tmp_path)}
    argv = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        sys.executable,
        "-m",
        "fslab",
        "run",
        "quick",
        "--plan",
    ]
    result = subprocess.run(
        [*argv, "--db", str(tmp_path / "r.db"), "--workdir", str(tmp_path / "w")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "to install or set up first:\n  root: running as uid 65534 — run fslab as root (sudo)" in result.stdout
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "w").exists()


ON_ZRAM = """\
[study]
name = "on-zram"
workloads = ["seq_read"]
image_size = "256MiB"
[fio]
runtime = "2s"
size = "64MiB"
[[target]]
filesystem = "ext4"
zram = true
"""


def test_the_plan_of_a_zram_study_loads_no_kernel_module(tmp_path, monkeypatch):
    """A kernel without zram-control loaded but with the zram module to load: the plan says zram
    can be had, and asks modprobe only whether it could load it (--dry-run), never to load it —
    loading a module changes the machine. Fails on the old code: zram.missing() loaded it."""
    from fslab.core import system
    from fslab.devices import zram

    asked: list[list[str]] = []

    def recorded(argv, **kwargs):  # the real run, each command kept; a module's loading kept, not done
        asked.append(list(argv))
        if argv[:1] == ["modprobe"] and "--dry-run" not in argv:
            return subprocess.CompletedProcess(list(argv), 0, "", "")
        return real_run(argv, **kwargs)

    real_run = system.run
    monkeypatch.setattr(zram, "CONTROL", tmp_path / "no-zram-control")  # as before the module is loaded
    monkeypatch.setattr(zram, "kernel_has_module", lambda module: module == "zram")
    monkeypatch.setattr(zram, "run", recorded)
    monkeypatch.setattr(system, "run", recorded)
    shown = plan_of(
        str(write_study(tmp_path, ON_ZRAM)), "--db", str(tmp_path / "r.db"), "--workdir", str(tmp_path / "w")
    )
    assert "  ext4: ext4, zram 256MiB" in shown.stdout.splitlines(), shown.stdout
    assert "this kernel has no zram" not in shown.stdout, "the module is there to load: zram can be had"
    loading = [argv for argv in asked if argv[:1] == ["modprobe"] and "--dry-run" not in argv]
    assert loading == [], f"the plan loaded a kernel module: {loading}"
