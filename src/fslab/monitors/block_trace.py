"""`--trace block`: what reached the devices under a target, in what sizes, and how long each
request spent there — from the block tracepoints by fslab's own bpftrace program (tracing/
block.py), at the bottom devices (md and dm are bio-based: their requests are their members'),
over the whole measured window (from the program's attaching to the window's end, its sync
included, as the devices' traffic is counted).

Per device and direction, stored with the run (run_histograms): request sizes (bytes, buckets of
powers of two) and device times (issue → complete, ns, four buckets to a power of two) of the
requests issued and completed in the window, and the queue depth (requests in flight, read from
sysfs every DEPTH_PERIOD: a count of samples per depth). A loop device's device time includes
its backing file's I/O on the host: the page says so where it shows it.

Its metrics (other modules read these names): block_request_bytes_read/_write (the median
request), block_device_time_p50_us_read/_write and _p99_us_ (interpolated within a bucket),
block_requests_read/_write (completed), block_requests_merged, block_requests_split,
block_queue_depth_mean (the devices' busy time over the window: Little's law, exact),
block_queue_depth_max (the most in flight at one sample, the devices together);
block_device_time_includes_host_file (1: a device is a loop device, whose time includes its
backing file's I/O on the host)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fslab.core.checks import Check, kernel_filesystems, tool_check
from fslab.core.errors import FslabError
from fslab.core.identity import number_of
from fslab.core.journal import Journal
from fslab.model.findings import Finding
from fslab.model.records import Histogram
from fslab.monitors.base import MONITORS, Figure, Found, Measured, MonitorKind, Sampler, Watched, WorkloadSaid
from fslab.monitors.traffic import SYS_CLASS_BLOCK, block_name
from fslab.tracing import block

TRACE = "block"
BIO_BASED = "block_trace_bio_based"  # a finding's kind: a device the request tracepoints cannot see
TRACE_LOST = "block_trace_lost"  # a finding's kind: bpftrace did not end as asked; its figures of the run are lost
DEPTH_PERIOD = 0.01  # seconds between readings of the devices' in-flight counts
BTF = Path("/sys/kernel/btf/vmlinux")
DIRECTED = ("read", "write")  # the directions with metrics of their own
METRICS = (
    "block_request_bytes_read", "block_request_bytes_write",
    "block_device_time_p50_us_read", "block_device_time_p50_us_write",
    "block_device_time_p99_us_read", "block_device_time_p99_us_write",
    "block_requests_read", "block_requests_write",
    "block_requests_merged", "block_requests_split",
    "block_queue_depth_mean", "block_queue_depth_max",
    "block_device_time_includes_host_file",
)  # fmt: skip


@dataclass(frozen=True)
class Depths:
    """Requests in flight at each device, read and write apart (sysfs `inflight`), at one moment."""

    values: tuple[tuple[int, int], ...]


def tracepoint_numbers(name: str) -> list[int]:
    """The device numbers the block tracepoints name a device by: its own, and its disk's for a
    partition (requests carry the disk's, bios the partition's), as the kernel's dev_t."""
    sysfs = (SYS_CLASS_BLOCK / name).resolve()
    found = [number_of(sysfs)] + ([number_of(sysfs.parent)] if (sysfs / "partition").exists() else [])
    return [block.kernel_dev(os.major(n), os.minor(n)) for n in found if n is not None]


def _requests_at(name: str) -> bool:
    """Whether a device takes requests (blk-mq: sysfs mq/), which the request tracepoints see."""
    disk = (SYS_CLASS_BLOCK / name).resolve()
    disk = disk.parent if (disk / "partition").exists() else disk
    return (disk / "mq").is_dir()


def read_depths(names: Sequence[str]) -> Depths:
    values = []
    for name in names:
        read, write = (int(x) for x in (SYS_CLASS_BLOCK / name / "inflight").read_text().split())
        values.append((read, write))
    return Depths(tuple(values))


class BlockTraceMonitor:
    name = "block_trace"

    def __init__(self, devices: Sequence[str], journal: Journal):
        from fslab.tracing.bpftrace import Trace  # the journal and running tools: for a run, not a summary

        self.names = sorted({block_name(device) for device in devices})
        self.numbers = {number: name for name in self.names for number in tracepoint_numbers(name)}
        self.trace = Trace(journal, block.program(self.numbers))
        self.depths = Sampler(lambda: read_depths(self.names), "fslab-block-depth", DEPTH_PERIOD)
        self.output = ""
        self.lost = ""  # why the trace's figures of this window are lost (bpftrace did not end as asked)

    def start(self) -> None:
        self.trace.start()
        try:
            self.depths.start()
        except BaseException:
            self.trace.stop()
            raise

    def stop(self) -> None:
        from fslab.tracing.bpftrace import TraceFailed

        try:
            self.depths.stop()
        finally:
            try:
                self.output = self.trace.stop()
            except TraceFailed as exc:  # killed by its proof already: the run's own figures stand
                self.lost = str(exc)

    def values(self, workload: WorkloadSaid, found: Found) -> None:
        if self.lost:
            found.flags.append(Finding(
                TRACE_LOST, f"--trace block: this run's request figures are lost: {self.lost}", implausible=False
            ))  # fmt: skip
            return
        more = judged(block.parse(self.output), self.numbers, self.names, [s.reading for s in self.depths.samples])
        loop = any((SYS_CLASS_BLOCK / name / "loop").is_dir() for name in self.names)
        more.values.append(Measured("block_device_time_includes_host_file", float(loop), "", False))
        found.values.extend(more.values)
        if bio_based := [name for name in self.names if not _requests_at(name)]:
            found.flags.append(Finding(
                BIO_BASED,
                f"--trace block: {', '.join(bio_based)} take{'s' if len(bio_based) == 1 else ''} bios, not requests "
                "(no request queue: zram is so): request sizes and device times not counted there",
                implausible=False,
            ))  # fmt: skip
        found.histograms.extend(more.histograms)


def judged(window: block.BlockWindow, numbers: dict[int, str], names: Sequence[str], depths: Sequence[Depths]) -> Found:
    """The window's metrics and histograms (pure): `numbers` names each tracepoint device number
    (a partition's disk number names the partition), `depths` are the in-flight readings of
    `names`' devices in order."""
    found = Found()
    by_name: dict[str, list[block.DeviceWindow]] = {}
    for number, counted in window.devices.items():
        if number in numbers:
            by_name.setdefault(numbers[number], []).append(counted)
    sizes_all: dict[str, list[dict[int, int]]] = {d: [] for d in block.DIRECTIONS}
    times_all: dict[str, list[dict[tuple[int, int], int]]] = {d: [] for d in block.DIRECTIONS}
    for name in sorted(by_name):
        for direction in block.DIRECTIONS:
            sizes = block.merge_counts(c.sizes.get(direction, {}) for c in by_name[name])
            times = block.merge_counts(c.times.get(direction, {}) for c in by_name[name])
            if sizes:
                found.histograms.append(
                    Histogram(name, direction, "request_bytes", tuple(block.power_of_two_histogram(sizes)))
                )
                found.histograms.append(
                    Histogram(name, direction, "device_time_ns", tuple(block.time_histogram(times)))
                )
            sizes_all[direction].append(sizes)
            times_all[direction].append(times)
    for direction in DIRECTED:
        sizes = block.merge_counts(sizes_all[direction])
        if not sizes:
            continue
        time_buckets = block.time_histogram(block.merge_counts(times_all[direction]))
        median = block.median_exact(sizes)
        p50, p99 = block.quantile(time_buckets, 0.5), block.quantile(time_buckets, 0.99)
        found.values.append(Measured(f"block_requests_{direction}", sum(sizes.values()), "", False))
        if median is not None:
            found.values.append(Measured(f"block_request_bytes_{direction}", median, "B", True))
        if p50 is not None and p99 is not None:
            found.values.append(Measured(f"block_device_time_p50_us_{direction}", p50 / 1000, "µs", False))
            found.values.append(Measured(f"block_device_time_p99_us_{direction}", p99 / 1000, "µs", False))
    every = [c for many in by_name.values() for c in many]
    found.values.append(Measured("block_requests_merged", sum(c.merged for c in every), "", False))
    found.values.append(Measured("block_requests_split", sum(c.split for c in every), "", False))
    if window.window_ns > 0:
        busy = sum(c.busy_ns for c in every)
        found.values.append(Measured("block_queue_depth_mean", busy / window.window_ns, "", False))
    if depths:
        found.values.append(
            Measured("block_queue_depth_max", max(sum(r + w for r, w in d.values) for d in depths), "", False)
        )
        for i, name in enumerate(names):
            for j, direction in enumerate(DIRECTED):
                counts: dict[int, int] = {}
                for d in depths:
                    if i < len(d.values):
                        counts[d.values[i][j]] = counts.get(d.values[i][j], 0) + 1
                found.histograms.append(
                    Histogram(name, direction, "queue_depth", tuple(block.power_of_two_histogram(counts)))
                )
    return found


def checks() -> list[Check]:
    """What `--trace block` needs here: bpftrace, the kernel's BTF, tracefs, unshare."""
    return [
        tool_check("bpftrace", ("bpftrace", "--version"), "bpftrace"),
        Check(
            "kernel BTF",
            BTF.is_file(),
            str(BTF) if BTF.is_file() else f"no {BTF}: bpftrace cannot read the kernel's types",
            "a kernel built with CONFIG_DEBUG_INFO_BTF (Debian's is)",
        ),
        Check(
            "tracefs",
            "tracefs" in kernel_filesystems(),
            "in /proc/filesystems (fslab mounts it in bpftrace's own mount namespace, never on the host)"
            if "tracefs" in kernel_filesystems()
            else "the kernel has no tracefs: no tracepoints to attach to",
            "a kernel built with CONFIG_TRACING",
        ),
        Check(
            "unshare",
            shutil.which("unshare") is not None,
            shutil.which("unshare") or "not installed",
            "apt-get install util-linux",
        ),
    ]


def block_trace_monitor(watched: Watched) -> BlockTraceMonitor | None:
    if watched.journal is None:
        raise FslabError("--trace block starts bpftrace, which needs the run's journal: none was given")
    return BlockTraceMonitor(watched.devices, watched.journal)


MONITORS.add(
    MonitorKind(
        "block_trace",
        order=5,  # first in, last out: bpftrace's 1–2 s of attaching before the other monitors' windows open
        figures=tuple(Figure(name) for name in METRICS),
        make=block_trace_monitor,
        trace=TRACE,
        help="request sizes, device time (issue → complete) and queue depth at the target's devices, "
        "from block tracepoints (bpftrace): 1–2 s to attach per window",
        cost="1–2 s of wall time (~0.7 s of CPU) for bpftrace to attach before each window, ~0.5 s to end "
        "after it; none of bpftrace's own while the workload runs: a few map updates in the kernel per "
        "request (not measured here yet), and the devices' in-flight counts read 100 times a second",
        checks=checks,
    ),
    own=True,
)
