"""System-wide CPU time from /proc/stat, sampled several times a second during the measured phase.

System-wide, not fio's own: kernel threads (Btrfs workers, kworkers flushing, a RAID's resync)
and daemons (zfs-fuse) do a filesystem's work outside the workload's process, and count here.

/proc/stat's first line sums every CPU's time, in clock ticks, since boot:
    cpu  user nice system idle iowait irq softirq steal guest guest_nice
guest and guest_nice are already inside user and nice, so they are not added again. Of the time
between two samples:
    user    = user + nice
    system  = system + irq + softirq
    iowait  = iowait (idle with I/O outstanding)
    busy    = user + system (neither idle, iowait nor steal)
each as a percentage of all the time that passed on all CPUs (100 % = every CPU busy).

The average covers the window exactly (first sample to last: the counters accumulate), from
the moment the workload's figures begin (base.counted_from: after fio's ramp) to the sync that
ends the window (base.WorkloadSaid.synced: no part of the workload); the peak is the
busiest sampling interval. Parsing and arithmetic are pure; the sampler is a
thin layer around them (base.Sampler).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fslab.monitors.base import (
    MONITORS,
    PERIOD,
    Figure,
    Found,
    Measured,
    MonitorKind,
    Sampler,
    Watched,
    WorkloadSaid,
    counted_from,
)

PROC_STAT = Path("/proc/stat")
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative CPU time of all CPUs, in clock ticks, from one reading of /proc/stat."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def total(self) -> int:
        return sum(getattr(self, name) for name in FIELDS)

    @property
    def busy(self) -> int:
        return self.user + self.nice + self.system + self.irq + self.softirq


def parse_proc_stat(text: str) -> CpuTimes:
    """The summed `cpu` line of /proc/stat (older kernels print fewer fields: the rest are 0)."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            numbers = [int(x) for x in fields[1 : 1 + len(FIELDS)]]
            if len(numbers) < 4:
                break
            return CpuTimes(*numbers, *[0] * (len(FIELDS) - len(numbers)))
    raise ValueError("no `cpu` line with user, nice, system and idle in /proc/stat")


@dataclass(frozen=True)
class CpuUse:
    """Percentages of all CPU time over a window (100 % = every CPU busy all the time)."""

    busy: float
    user: float
    system: float
    iowait: float


def use_between(before: CpuTimes, after: CpuTimes) -> CpuUse | None:
    """How the CPUs spent the time between two readings; None when no tick passed."""
    elapsed = after.total - before.total
    if elapsed <= 0:
        return None

    def pct(part: int) -> float:
        return 100.0 * min(max(part, 0), elapsed) / elapsed

    return CpuUse(
        busy=pct(after.busy - before.busy),
        user=pct(after.user + after.nice - before.user - before.nice),
        system=pct(after.system + after.irq + after.softirq - before.system - before.irq - before.softirq),
        iowait=pct(after.iowait - before.iowait),
    )


@dataclass(frozen=True)
class CpuSummary:
    average: CpuUse
    peak_busy: float  # the busiest interval between two successive samples


def summarize(samples: Sequence[CpuTimes]) -> CpuSummary | None:
    """The window's average (first sample to last) and its busiest interval; None with fewer
    than two samples or no tick between them."""
    if len(samples) < 2:
        return None
    average = use_between(samples[0], samples[-1])
    if average is None:
        return None
    intervals = [use for a, b in zip(samples, samples[1:]) if (use := use_between(a, b)) is not None]
    return CpuSummary(average, max(use.busy for use in intervals))


def measured(summary: CpuSummary) -> list[Measured]:
    use = summary.average
    return [
        Measured("host_cpu_busy_pct", use.busy, "%", False),
        Measured("host_cpu_busy_peak_pct", summary.peak_busy, "%", False),
        Measured("host_cpu_user_pct", use.user, "%", False),
        Measured("host_cpu_system_pct", use.system, "%", False),
        Measured("host_cpu_iowait_pct", use.iowait, "%", False),
    ]


def read_cpu_times() -> CpuTimes:
    return parse_proc_stat(PROC_STAT.read_text())


class CpuMonitor:
    """Samples /proc/stat every `period` seconds on the monitors' clock (base.CLOCK), from start to stop."""

    name = "cpu"

    def __init__(self, period: float = PERIOD):
        self.sampler = Sampler(read_cpu_times, "fslab-cpu-monitor", period)

    def start(self) -> None:
        self.sampler.start()

    def stop(self) -> None:
        self.sampler.stop()

    def values(self, workload: WorkloadSaid, found: Found) -> None:
        summary = summarize(counted_from(self.sampler.samples, workload.counted_from, workload.counted_until))
        if summary is not None:
            found.values.extend(measured(summary))


def cpu_monitor(watched: Watched) -> CpuMonitor:
    return CpuMonitor()


MONITORS.add(
    MonitorKind(
        "cpu",
        order=10,
        figures=(
            Figure("host_cpu_busy_pct", "CPU busy %", "pct"),
            Figure("host_cpu_busy_peak_pct", "CPU peak %", "pct"),
            Figure("host_cpu_user_pct", "user %", "pct"),
            Figure("host_cpu_system_pct", "system %", "pct"),
            Figure("host_cpu_iowait_pct", "iowait %", "pct"),
        ),
        make=cpu_monitor,
        help="system-wide CPU time (/proc/stat) over the window: busy, user, system, iowait, and its busiest 0.1–0.2 s",
        cost="~0.1 % of one core: 5 reads of /proc/stat a second",
    ),
    own=True,
)
