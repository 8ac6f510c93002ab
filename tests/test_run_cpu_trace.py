"""`fslab run --trace cpu` for real: a tiny study through fslab's runner stores CPU per I/O and
the window's CPU split by kind, adding up to the window's total; no PMU here is a note, no
value; and nothing it started is left running."""

import os
import subprocess

import pytest

from conftest import fresh_workdir, ran_study

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")
KINDS = ("workload", "kworker", "btrfs", "loop", "zfs_fuse", "other")

STUDY = """\
[study]
name = "cpu-traced"
repetitions = 1
image_size = "256MiB"
image_fill = "sparse"

[[target]]
filesystem = ["btrfs", "ext4"]

[[workload]]
name = "randwrite"
rw = "randwrite"
bs = "4k"
size = "32MiB"
runtime = "1s"
direct = true

[[workload]]
name = "mail"
kind = "sysbench"
options = { "file-num" = 16, "file-total-size" = "4M", time = 1 }
targets = ["ext4"]
"""


@pytest.fixture(scope="module")
def traced(tmp_path_factory, needs_root):
    with fresh_workdir() as workdir:
        ran = ran_study(tmp_path_factory.mktemp("cpu-traced"), STUDY, workdir, "--trace", "cpu")
        assert not workdir.journal.outstanding(), "nothing fslab started or made is still held"
        return ran


def stored(results, study_run: int, target: str, workload: str = "randwrite") -> dict[str, float]:
    return {key: values[0] for key, values in results.sample_groups(study_run).values[(workload, target)].items()}


@pytest.mark.root
@pytest.mark.parametrize("target", ["btrfs", "ext4"])
def test_a_traced_run_stores_cpu_per_io_and_kinds_that_add_up(traced, target):
    """A traced run stores cpu_us_per_io > 0 from fio's own I/O count, and each kind's CPU in its
    window, adding up to the window's total (other is its rest: a kind counted twice overshoots)."""
    _, results, study_run = traced
    run = stored(results, study_run, target)
    assert run["ios"] > 0, "fio's total_ios, the workload's own count"
    assert run["cpu_us_per_io"] > 0
    assert run["cpu_ms_workload"] > 0, "fio's own CPU, reaped inside the window"
    kinds = sum(run[f"cpu_ms_{kind}"] for kind in KINDS)
    assert kinds == pytest.approx(run["cpu_ms_total"], abs=4 * TICK_MS)
    # Above the baseline kind by kind: at least the workload's own CPU (it has no background),
    # however busy the machine is with other work (its total minus its baseline then reads ~0).
    assert run["cpu_us_per_io"] * run["ios"] / 1000 >= run["cpu_ms_workload"] - TICK_MS
    assert "cpu_cycles" not in run, "no PMU here: no value, never 0"


@pytest.mark.root
def test_sysbench_counts_its_ios_and_its_cpu_per_io(traced):
    """sysbench's reads and writes are its I/Os: without them (a kind that does not say) no
    CPU per I/O could be given of it."""
    _, results, study_run = traced
    run = stored(results, study_run, "ext4", "mail")
    assert run["ios"] > 0 and run["cpu_us_per_io"] > 0 and run["cpu_ms_workload"] > 0


@pytest.mark.root
def test_btrfs_work_is_counted_as_btrfs(traced):
    """A Btrfs target's own threads (kworkers of its workqueues, btrfs-transaction) did some of its
    work: none counted as Btrfs's means the split sees only the workload."""
    _, results, study_run = traced
    run = stored(results, study_run, "btrfs")
    assert run["cpu_ms_btrfs"] > 0, {key: value for key, value in run.items() if key.startswith("cpu_")}


@pytest.mark.root
def test_no_pmu_is_said_and_nothing_is_left_running(traced):
    """Where no PMU is, the cell's note says the counters are not measurable; no perf or fio
    process fslab started outlives the run."""
    result, results, study_run = traced
    notes = [n["says"] for r in results.runs(study_run) for n in r.get("notes") or []]
    assert "CPU cycles and instructions not measurable here: no PMU" in notes
    left = subprocess.run(["ps", "-eo", "comm="], capture_output=True, text=True).stdout.split()
    assert "perf" not in left
