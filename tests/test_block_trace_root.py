"""`fslab run --trace block` for real: a 4 KiB random write study traced by bpftrace on loop images,
its histograms stored and exported; bpftrace gone and tracefs mounted nowhere on the host
afterwards — after a run, a run that fails, a Ctrl-C, and a kill -9 and `fslab cleanup`."""

from __future__ import annotations

import csv
import os
import re
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import BPFTRACE, fresh_workdir, ran_study, wait_for, write_study
from fslab.core.workdir import Workdir
from fslab.monitors.base import measuring
from fslab.monitors.block_trace import TRACE_LOST, BlockTraceMonitor
from fslab.tracing import block
from fslab.tracing.bpftrace import Trace, TraceFailed
from fslab.tracing.namespace import holding_devices

pytestmark = [pytest.mark.root, BPFTRACE]

STUDY = """\
[study]
name = "traced"
repetitions = {repetitions}
image_size = "256MiB"
image_fill = "sparse"

[[target]]
name = "ext4"
filesystem = "ext4"

[[workload]]
name = "rand-write"
rw = "randwrite"
bs = "4k"
size = "32MiB"
runtime = "{runtime}"
direct = true
"""


def tracers() -> list[int]:
    """fslab's bpftrace processes on the machine: their program's BEGIN line is in their argv."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if block.READY.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
            except OSError:
                continue
    return found


def tracefs_here() -> int:
    """tracefs mounts this (the host's) mount namespace shows where bpftrace looks for one (not
    the one the kernel automounts under the page cache monitor's own debugfs, in the work directory)."""
    return sum(
        " - tracefs " in line and line.split()[4] in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
    )


@pytest.fixture(scope="module")
def traced(tmp_path_factory, needs_root):
    tmp = tmp_path_factory.mktemp("traced")
    mounted = tracefs_here()
    with fresh_workdir() as workdir:  # which fails the test if a loop device, mount or scratch is left
        _, results, study_run = ran_study(
            tmp, STUDY.format(repetitions=2, runtime="1s"), workdir, "--trace", "block", "--no-ceiling"
        )
    assert not tracers() and tracefs_here() == mounted, "bpftrace ended, tracefs mounted nowhere here"
    return tmp, results, study_run


def test_a_traced_4k_random_write_stores_histograms_that_fslab_export_writes_as_a_table(traced):
    """Catches histograms not stored, not exported, without bounds, or counting other than the
    requests completed — and a program that missed the workload's I/O (fewer requests than fio's)."""
    tmp, results, study_run = traced
    out = tmp / "exported"
    done = subprocess.run(
        [sys.executable, "-m", "fslab", "export", str(study_run), "--db", results.location, "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    with open(out / "histograms.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        "study_run", "run_id", "target", "workload", "repetition", "phase",
        "device", "direction", "kind", "bucket_low", "bucket_high", "count",
    ]  # fmt: skip
    buckets: dict[tuple[str, str, str], list[tuple[float, float, int]]] = defaultdict(list)
    for row in rows:
        key = (row["run_id"], row["direction"], row["kind"])
        buckets[key].append((float(row["bucket_low"]), float(row["bucket_high"]), int(row["count"])))
    metrics = {(str(m.run_id), m.metric): m.value for m in results.run_metrics(study_run) if m.metric is not None}
    runs = [r for r in results.runs(study_run) if r["status"] == "ok"]
    assert len(runs) == 2
    # (a bpftrace that did not end as asked, seen under heavy load, loses its run's figures alone)
    run_ids = {r["id"] for r in runs if not any(n["kind"] == TRACE_LOST for n in r["notes"])}
    assert run_ids, [r["notes"] for r in runs]
    for run_id in map(str, run_ids):
        completed = metrics[(run_id, "block_requests_write")]
        for kind in ("request_bytes", "device_time_ns"):
            found = buckets[(run_id, "write", kind)]
            assert len(found) >= 5 and all(low < high for low, high, _ in found)
            assert sum(n for *_, n in found) == completed, kind
        assert completed >= 0.95 * metrics[(run_id, "write_bytes")] / 4096, "every I/O fio made reached the device"
        assert metrics[(run_id, "block_request_bytes_write")] == 4096
        assert (
            0
            < metrics[(run_id, "block_device_time_p50_us_write")]
            <= metrics[(run_id, "block_device_time_p99_us_write")]
        )
        assert metrics[(run_id, "block_device_time_includes_host_file")] == 1, "a loop image"
        assert buckets[(run_id, "write", "queue_depth")], "queue depth sampled"


def _started(tmp: Path, workdir: Workdir) -> tuple[subprocess.Popen[str], int]:
    """`fslab run --trace block` of a long run, once its bpftrace has attached and fio runs."""
    study = write_study(tmp, STUDY.format(repetitions=1, runtime="60s"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "fslab", "run", str(study), "--trace", "block", "--no-ceiling",
         "--db", str(tmp / "r.db"), "--workdir", str(workdir.root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_for("bpftrace to attach", lambda: proc.poll() is None and tracers(), deadline=120)
    wait_for("fio to run", lambda: ("process", "fio") in workdir.journal.outstanding(), deadline=120)
    # the tracer of the window fio runs in (one seen before it may have been a window's that ended since)
    tracer = wait_for("its bpftrace", lambda: proc.poll() is None and tracers(), deadline=120)
    assert isinstance(tracer, list) and len(tracer) == 1, proc.poll() or tracer
    return proc, tracer[0]


def test_a_running_trace_runs_fslabs_program_in_a_namespace_of_its_own_and_ctrl_c_removes_it(tmp_path, needs_root):
    """Catches study text reaching the program, tracefs mounted on the host, a namespace that
    keeps its copy of the host's device mounts (the target's: its loop device then stays busy
    after the run unmounts it, as another test's did for 30 s), and a bpftrace (or its
    namespace's tracefs) outliving a Ctrl-C."""
    mounted = tracefs_here()
    with fresh_workdir() as workdir:
        proc, tracer = _started(tmp_path, workdir)
        argv = Path(f"/proc/{tracer}/cmdline").read_bytes().split(b"\0")
        program = argv[argv.index(b"-e") + 1].decode()
        numbers = [int(n) for n in re.findall(r"args->dev == (\d+)", program)]
        assert program == block.program(numbers), "fslab's text, device numbers filled in"
        assert os.readlink(f"/proc/{tracer}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        inside = Path(f"/proc/{tracer}/mountinfo").read_text()
        assert " /sys/kernel/tracing " in inside, "tracefs in its namespace"
        assert holding_devices(inside) == [], "no copy of a device's mount (the target's) kept busy by it"
        assert tracefs_here() == mounted, "and not in the host's"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) != 0
    assert not tracers()


def test_bpftrace_left_by_a_killed_fslab_is_removed_by_fslab_cleanup(tmp_path, needs_root):
    """Catches a journal entry whose proof does not match the running bpftrace (its name is not
    unshare's, nor python's, once it runs): cleanup would leave it running for good."""
    with fresh_workdir() as workdir:
        proc, tracer = _started(tmp_path, workdir)
        proc.kill()  # kill -9: nothing released
        proc.wait()
        assert tracer in tracers()
        done = subprocess.run(
            [sys.executable, "-m", "fslab", "cleanup", "--workdir", str(workdir.root)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "bpftrace" in done.stdout
    assert not tracers()


def _root_device() -> str:
    """The block device under / (only traced here, never written by the test)."""
    number = os.stat("/").st_dev
    return "/dev/" + Path(f"/sys/dev/block/{os.major(number)}:{os.minor(number)}").resolve().name


def test_a_window_that_fails_stops_its_trace(tmp_path, needs_root):
    """Catches a bpftrace left running when the measured phase raises."""
    with fresh_workdir() as workdir:
        monitor = BlockTraceMonitor([_root_device()], workdir.journal)
        with pytest.raises(RuntimeError, match="the workload failed"), measuring([monitor]):
            assert tracers()
            raise RuntimeError("the workload failed")
        assert not tracers() and not workdir.journal.outstanding()


def test_a_program_bpftrace_refuses_fails_with_its_words_and_leaves_nothing(needs_root):
    """Catches a trace that waits forever for a program that never attaches, or says only
    bpftrace's routine memlock warning."""
    with fresh_workdir() as workdir:
        trace = Trace(workdir.journal, "tracepoint:block:no_such_tracepoint { @n = count(); }")
        with pytest.raises(TraceFailed, match="no_such_tracepoint"):
            trace.start()
        assert not workdir.journal.outstanding()
    assert not tracers()


ZRAM_STUDY = """\
[study]
name = "traced-zram"
repetitions = 1
image_size = "128MiB"

[[target]]
name = "z"
filesystem = "raw"
zram = true

[[workload]]
name = "rand-write"
rw = "randwrite"
bs = "4k"
size = "16MiB"
runtime = "1s"
direct = true
"""


def test_a_bio_based_device_is_said_not_counted(tmp_path, needs_root):
    """Catches a zram target (bio-based: no requests to trace) shown as if its device had seen
    nothing: its cell says its sizes and device times are not counted."""
    with fresh_workdir() as workdir:
        _, results, study_run = ran_study(tmp_path, ZRAM_STUDY, workdir, "--trace", "block", "--no-ceiling")
    (run,) = results.runs(study_run)
    assert any("takes bios, not requests" in note["says"] for note in run["notes"]), run["notes"]
    assert not tracers()
