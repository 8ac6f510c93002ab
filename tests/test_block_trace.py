"""`--trace block` without root: reading bpftrace's output of fslab's block program (a fixture the
real tool wrote: tests/fixtures/bpftrace/block-loop.jsonl), the histograms and metrics made of it,
the program's text (numbers only, never a study's text), the namespace trampoline's refusals, and
the page's sentences. The real runs are tests/test_block_trace_root.py's."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import FIXTURES
from fslab.monitors.block_trace import METRICS, Depths, judged
from fslab.report.sections import device_notes
from fslab.report.summary import CellSummary
from fslab.statistics.stats import summarize
from fslab.tracing import block, namespace, output

# Written by the real bpftrace 0.17 running block.PROGRAM on loop0 (7:0, tracepoint number 7340032)
# while: fio 4 KiB random direct writes at QD 4 for 1 s; dd 16 × 1 MiB direct reads (each split in
# two 512 KiB requests); dd 2,048 × 4 KiB O_SYNC writes; dd 256 × 64 KiB buffered writes and a
# sync (4 KiB bios merged into 512 KiB requests). sysfs said 32 reads and 4,064 write merges.
FIXTURE = FIXTURES / "bpftrace" / "block-loop.jsonl"
LOOP0 = block.kernel_dev(7, 0)


def parsed() -> block.BlockWindow:
    return block.parse(FIXTURE.read_text())


def test_the_real_output_is_read_whole():
    """Catches a misread map key (device, direction, size) or a missing map: the counts are those
    the kernel's own counters gave for the same window (32 reads, 4,064 merges, 16 splits)."""
    window = parsed()
    assert set(window.devices) == {LOOP0}
    loop0 = window.devices[LOOP0]
    assert loop0.sizes["read"] == {524288: 32}, "16 × 1 MiB reads, each split in two"
    assert loop0.split == 16 and loop0.merged == 4064 and loop0.unmatched == 0
    assert loop0.sizes["write"][4096] > 2048 and loop0.sizes["write"][524288] == 32
    assert "other" not in loop0.sizes, "flushes carry no data: left out"
    for direction in ("read", "write"):
        assert sum(loop0.times[direction].values()) == loop0.completed(direction), "one time per request"
    assert 0 < loop0.busy_ns and 0 < window.window_ns


def test_output_cut_short_is_refused():
    """Catches histograms made of a trace killed before its END: without its last line the
    window's length is unknown, and so is what its counts cover."""
    text = "\n".join(line for line in FIXTURE.read_text().splitlines() if "window ended" not in line)
    with pytest.raises(ValueError, match="did not run to its end"):
        block.parse(text)


def test_histograms_have_bounds_and_counts_that_add_up_to_the_requests():
    """Catches a histogram whose buckets leave gaps, overlap, are fewer than five, or count
    other than the requests completed (block_requests_<direction>)."""
    found = judged(parsed(), {LOOP0: "loop0"}, ["loop0"], [Depths(((0, 3),)), Depths(((1, 0),))])
    values = {v.name: v.value for v in found.values}
    by_kind = {(h.direction, h.kind): h for h in found.histograms}
    assert {k for k in by_kind} == {
        (d, k) for d in ("read", "write") for k in ("request_bytes", "device_time_ns", "queue_depth")
    }
    for histogram in found.histograms:
        buckets = histogram.buckets
        assert len(buckets) >= block.MIN_BUCKETS, histogram
        assert all(low < high for low, high, _ in buckets)
        assert all(a[1] == b[0] for a, b in zip(buckets, buckets[1:])), "contiguous, no overlap"
        assert histogram.device == "loop0"
    for direction in ("read", "write"):
        for kind in ("request_bytes", "device_time_ns"):
            assert sum(n for _, _, n in by_kind[(direction, kind)].buckets) == values[f"block_requests_{direction}"]
    assert sum(n for _, _, n in by_kind[("write", "queue_depth")].buckets) == 2, "one count per sample"
    assert (4096.0, 8192.0) in {(lo, hi) for lo, hi, n in by_kind[("write", "request_bytes")].buckets if n}


def test_the_metrics_other_helpers_read_are_made_under_their_names():
    """Catches a renamed metric (the verdicts' explanations read these names) or a median of the
    buckets instead of the exact sizes."""
    found = judged(parsed(), {LOOP0: "loop0"}, ["loop0"], [Depths(((0, 3),)), Depths(((1, 4),))])
    values = {v.name: v.value for v in found.values}
    assert set(values) | {"block_device_time_includes_host_file"} == set(METRICS)
    assert values["block_request_bytes_read"] == 524288 and values["block_request_bytes_write"] == 4096
    assert values["block_requests_merged"] == 4064 and values["block_requests_split"] == 16
    assert values["block_queue_depth_max"] == 5, "the devices' reads and writes together, at one sample"
    assert 0 < values["block_device_time_p50_us_write"] <= values["block_device_time_p99_us_write"]
    assert values["block_queue_depth_mean"] == pytest.approx(parsed().devices[LOOP0].busy_ns / parsed().window_ns)


def test_quantiles_interpolate_within_their_bucket_and_medians_are_exact():
    """Catches a quantile read off the wrong bucket or a median of an even count taken at one side."""
    buckets = [(0.0, 10.0, 50), (10.0, 20.0, 0), (20.0, 40.0, 50)]
    assert block.quantile(buckets, 0.5) == 10.0
    assert block.quantile(buckets, 0.75) == 30.0
    assert block.quantile([], 0.5) is None
    assert block.median_exact({4096: 2, 8192: 2}) == 6144 and block.median_exact({4096: 1, 8192: 2}) == 8192


def test_device_time_buckets_are_quarters_of_powers_of_two():
    """Catches a bucket bound that does not match the program's arithmetic ((t − 2^o)·4 >> o)."""
    for t in (0, 1, 2, 3, 4, 5, 7, 8, 1000, 65535, 65536, 98304, 123456789):
        octave = max(t.bit_length() - 1, 0)
        quarter = (((t - (1 << octave)) << 2) >> octave) if octave >= 2 else 0
        low, high, _ = (
            block.time_histogram({(octave, quarter): 1})[0]
            if t < 2
            else next(b for b in block.time_histogram({(octave, quarter): 1}) if b[2])
        )
        assert low <= t < high, (t, low, high)
        assert t < 4 or (high - low) / low <= 0.25


@pytest.mark.parametrize(
    "given",
    [['7340032"} BEGIN { system("id") } {'], [True], [7.5], [-1], [2**32], [], ["7340032"]],
)
def test_the_program_takes_device_numbers_and_nothing_else(given):
    """Catches text reaching bpftrace's program: a study's names, a string, a bool, a float."""
    with pytest.raises(ValueError, match="integers"):
        block.program(given)


def test_the_program_is_fslabs_own_text_with_numbers_filled_in():
    """Catches any other change to the program than its device filter (digits and `||` alone)."""
    text = block.program([block.kernel_dev(7, 0), block.kernel_dev(259, 3)])
    assert text.replace("args->dev == 7340032 || args->dev == 271581187", "DEVICES") == block.PROGRAM


def test_bpftrace_words_are_kept_for_the_message_and_its_routine_warning_left_out():
    """Catches a failure message that says only the memlock warning bpftrace prints every time."""
    text = (
        "ERROR: Unknown error -1: couldn't set RLIMIT_MEMLOCK for bpftrace. If your program...\n"
        '{"type": "attached_probes", "data": {"probes": 8}}\n'
        "stdin:3:1-10: ERROR: tracepoint not found: block:nothing\n"
    )
    assert output.said(text) == "stdin:3:1-10: ERROR: tracepoint not found: block:nothing"
    assert not output.attached(text)
    assert output.attached(text + '{"type": "printf", "data": "fslab: attached 12\\n"}\n')


def test_tracefs_is_found_at_its_mount_point_only():
    """Catches a tracefs mounted elsewhere (debugfs's tracing) taken for the one bpftrace reads."""
    mountinfo = (
        "22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n"
        "40 22 0:12 / /sys/kernel/debug/tracing rw shared:9 - tracefs nodev rw\n"
    )
    assert not namespace.tracefs_at("/sys/kernel/tracing", mountinfo)
    assert namespace.tracefs_at(
        "/sys/kernel/tracing", mountinfo + "41 22 0:13 / /sys/kernel/tracing rw - tracefs nodev rw\n"
    )


@pytest.mark.parametrize("argv", [["/usr/bin/bpftrace", "--version"], ["/bin/sh", "-c", "id"]])
def test_the_trampoline_mounts_nothing_outside_a_namespace_of_its_own_and_runs_bpftrace_alone(argv):
    """Catches the trampoline mounting tracefs in fslab's own namespace (the host's), or running
    another program than bpftrace."""
    done = subprocess.run(
        [sys.executable, "-I", "-m", "fslab.tracing.namespace", *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done
    assert "bpftrace only" in done.stderr or "mount namespace of its own" in done.stderr


def _cell(**medians: float) -> CellSummary:
    return CellSummary("rand-write", "ext4", 0, {name: summarize([value, value]) for name, value in medians.items()})


def test_the_page_says_the_devices_share_of_the_latency_and_its_request_size():
    """Catches the sentences the issue asks for missing, or the loop label left out."""
    cell = _cell(
        write_lat_p99_us=4100,
        write_iops=1000,
        write_mb_s=4.096,
        block_device_time_p99_us_write=600,
        block_request_bytes_write=131072,
        block_device_time_includes_host_file=1,
    )
    assert device_notes(cell, "write") == [
        "p99 4.10 ms, of which the device (loop: with the host's file) 600.0 µs",
        "the workload wrote 4 KiB, the device saw 128 KiB requests",
    ]
    assert device_notes(_cell(write_lat_p99_us=4100, write_iops=1000, write_mb_s=4.096), "write") == [], "untraced"


def test_the_namespace_lets_go_of_every_device_and_fuse_mount_but_the_root():
    """Catches a bpftrace namespace that keeps its copies of the host's mounts on devices: a
    filesystem the host unmounts then stays mounted there, its device busy while bpftrace lives."""
    mountinfo = (
        "36 1 254:1 / / rw - ext4 /dev/vda rw\n"
        "40 36 7:0 / /var/tmp/wd/mnt/a\\040b rw - ext4 /dev/loop0 rw\n"
        "41 36 0:55 / /mnt/z rw - fuse.zfs pool rw\n"
        "42 36 0:20 / /proc rw - proc proc rw\n"
        "43 36 0:31 / /sys/kernel/tracing rw - tracefs nodev rw\n"
    )
    assert namespace.holding_devices(mountinfo) == ["/mnt/z", "/var/tmp/wd/mnt/a b"], "deepest first, the root kept"


def test_a_trace_that_does_not_end_loses_its_own_figures_not_the_run():
    """Catches a bpftrace that did not end as asked (seen under heavy load: 30 s after SIGINT)
    failing the run whose own figures stand: it is killed, and the run says its trace is lost."""
    from fslab.monitors.base import Found, Sampler, WorkloadSaid
    from fslab.monitors.block_trace import TRACE_LOST, BlockTraceMonitor
    from fslab.tracing.bpftrace import TraceFailed

    class Stuck:
        def stop(self) -> str:
            raise TraceFailed("bpftrace did not end within 30 s of SIGINT: killed")

    monitor = object.__new__(BlockTraceMonitor)
    monitor.trace, monitor.output, monitor.lost = Stuck(), "", ""
    monitor.depths = Sampler(lambda: 0, "test-depths", 1.0)
    monitor.stop()
    found = Found()
    monitor.values(WorkloadSaid(), found)
    assert found.values == [] and [f.kind for f in found.flags] == [TRACE_LOST]
    assert "request figures are lost: bpftrace did not end within 30 s" in found.flags[0].says
