"""Neighbours: what else wanted the machine while a run measured — the kernel's pressure stall
information (PSI: /proc/pressure/{cpu,io,memory}) and the time the hypervisor stole (/proc/stat),
over the workload's own interval (from base.WorkloadSaid.counted_from to the sync ending the
window, as cpu.py counts). Always on, and cheap: the counters are cumulative, so a reading every
PRESSURE_PERIOD seconds (to cut the window where fio's ramp ends) is all it takes.

PSI's `total=` is the time, in µs, in which *some* task (or, `full`, every non-idle task) was
stalled waiting for that resource; as a share of the window's wall time:
    psi_cpu_some_pct     a runnable task waited for a CPU
    psi_io_some_pct      a task waited on I/O (psi_io_full_pct: every task did)
    psi_memory_some_pct  a task waited on reclaim or a refault (…_full_pct: every task did)
    steal_pct            CPU time the hypervisor gave to other guests, of all CPUs' time

The rule (`disturbed_by`), written so that nothing the workload does to itself counts:
- I/O pressure is never a neighbour's: the workload's own waits for its device are I/O
  stalls, system-wide and in any cgroup. Reported, never judged.
- Steal is always another's: from STEAL_FROM % of the CPUs' time.
- CPU pressure from CPU_PRESSURE_FROM % of the window: a task could run and found no CPU.
  Where the workload runs in a cgroup v2 group of its own (core/cgroups.py makes one for a
  memory limit), that group's cpu.pressure: the workload's own tasks waited
  (psi_workload_cpu_some_pct), whatever other tasks did among themselves. Elsewhere (no limit;
  or cgroup v1, which has no pressure files: this machine) system-wide, which also counts others
  waiting for each other, and fslab's own threads. Either way it includes the workload's own
  threads when they outnumber the CPUs (fio's numjobs above the CPU count): such a run is flagged
  too, for its figures then depend on whatever else runs.
- Memory pressure from MEMORY_PRESSURE_FROM % of the window, unless the run has a memory limit
  (core/cgroups.py): reclaim inside its limit is what the limit is for.

Thresholds: the verdicts' practical threshold is 3 %, and a workload that waited for a CPU a
tenth of its window may have lost up to that tenth of its pace — well beyond it; under a tenth,
a run's own short waits (its filesystem's workers, fslab's monitor threads waking) are left
alone. Measured here (2 CPUs, a 4 KiB psync fio job): a busy process pinned to each CPU beside
it gave 77–78 % — far above. Steal is CPU taken outright, so its threshold is lower: 5 % of the
CPUs' time, fifty times this VM's steal since boot (0.1 %).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fslab.core.checks import Check
from fslab.model.findings import DISTURBED, Finding
from fslab.monitors.base import (
    MONITORS,
    Figure,
    Found,
    Measured,
    MonitorKind,
    Sampler,
    Watched,
    WorkloadSaid,
    counted_from,
)
from fslab.monitors.cpu import parse_proc_stat

PRESSURE = Path("/proc/pressure")
PROC_STAT = Path("/proc/stat")
PRESSURE_PERIOD = 1.0  # seconds between readings: where fio's ramp ends is interpolated between two
CPU_PRESSURE_FROM = 10.0  # % of the window some task waited for a CPU: disturbed
MEMORY_PRESSURE_FROM = 10.0  # % of the window some task waited on memory (no memory limit): disturbed
STEAL_FROM = 5.0  # % of all CPUs' time stolen by the hypervisor: disturbed


@dataclass(frozen=True)
class Stall:
    """One resource's line pair of /proc/pressure: µs since boot with some (full) tasks stalled."""

    some: int
    full: int


def parse_pressure(text: str) -> Stall:
    """A /proc/pressure file: the `total=` of its `some` and `full` lines (cpu's `full` is 0 at
    the system level, and absent before Linux 5.13)."""
    totals: dict[str, int] = {}
    for line in text.splitlines():
        kind, *pairs = line.split()
        for pair in pairs:
            name, _, value = pair.partition("=")
            if name == "total":
                totals[kind] = int(value)
    if "some" not in totals:
        raise ValueError(f"no `some … total=` line in a pressure file: {text[:80]!r}")
    return Stall(totals["some"], totals.get("full", 0))


@dataclass(frozen=True)
class Reading:
    """Cumulative counters at one moment: the clock (µs), PSI's stall totals (µs), and the CPUs'
    stolen and total ticks. All numbers: base.Sampler interpolates them field by field."""

    clock_us: int
    cpu_some: int
    io_some: int
    io_full: int
    memory_some: int
    memory_full: int
    steal: int
    ticks: int
    workload_cpu_some: int = 0  # the workload's cgroup's cpu.pressure (0: it has none)


@dataclass(frozen=True)
class Stalls:
    """Shares of a window (%), as stored: PSI's of its wall time (None: no PSI here), steal of all
    CPUs' time (None: no tick passed)."""

    cpu_some: float | None
    io_some: float | None
    io_full: float | None
    memory_some: float | None
    memory_full: float | None
    steal: float | None
    workload_cpu_some: float | None = None  # the workload's own tasks waited for a CPU (None: no cgroup v2 of its own)


def stalls_between(before: Reading, after: Reading, psi: bool = True, group: bool = False) -> Stalls | None:
    """The shares of the time between two readings; None when no time passed."""
    elapsed = after.clock_us - before.clock_us
    if elapsed <= 0:
        return None

    def pct(name: str) -> float | None:
        if not psi:
            return None
        return 100.0 * min(max(getattr(after, name) - getattr(before, name), 0), elapsed) / elapsed

    ticks = after.ticks - before.ticks
    steal = 100.0 * min(max(after.steal - before.steal, 0), ticks) / ticks if ticks > 0 else None
    return Stalls(
        pct("cpu_some"),
        pct("io_some"),
        pct("io_full"),
        pct("memory_some"),
        pct("memory_full"),
        steal,
        pct("workload_cpu_some") if group else None,
    )


def disturbed_by(stalls: Stalls, memory_limited: bool = False) -> list[str]:
    """What disturbed a window, by the rule of this module's docstring, each with its share and
    threshold ("CPU pressure 23 % of the window (threshold 10 %)"); empty: undisturbed."""
    said = []
    if stalls.workload_cpu_some is not None:  # its own tasks' waits, where its cgroup tells them apart
        if stalls.workload_cpu_some >= CPU_PRESSURE_FROM:
            said.append(
                f"CPU pressure {stalls.workload_cpu_some:.0f} % of the window on the workload's own tasks "
                f"(threshold {CPU_PRESSURE_FROM:.0f} %)"
            )
    elif stalls.cpu_some is not None and stalls.cpu_some >= CPU_PRESSURE_FROM:
        said.append(f"CPU pressure {stalls.cpu_some:.0f} % of the window (threshold {CPU_PRESSURE_FROM:.0f} %)")
    if stalls.steal is not None and stalls.steal >= STEAL_FROM:
        said.append(f"steal {stalls.steal:.0f} % of the CPUs' time (threshold {STEAL_FROM:.0f} %)")
    if not memory_limited and stalls.memory_some is not None and stalls.memory_some >= MEMORY_PRESSURE_FROM:
        said.append(
            f"memory pressure {stalls.memory_some:.0f} % of the window (threshold {MEMORY_PRESSURE_FROM:.0f} %)"
        )
    return said


def judged(stalls: Stalls, memory_limited: bool = False) -> Found:
    """The window's values, and a `disturbed` finding when the rule says so."""
    named = {
        "psi_cpu_some_pct": stalls.cpu_some,
        "psi_io_some_pct": stalls.io_some,
        "psi_io_full_pct": stalls.io_full,
        "psi_memory_some_pct": stalls.memory_some,
        "psi_memory_full_pct": stalls.memory_full,
        "steal_pct": stalls.steal,
        "psi_workload_cpu_some_pct": stalls.workload_cpu_some,
    }
    found = Found([Measured(name, value, "%", False) for name, value in named.items() if value is not None])
    by = disturbed_by(stalls, memory_limited)
    if by:
        found.flags.append(
            Finding(DISTURBED, f"disturbed: {'; '.join(by)} — something else ran beside it", implausible=False)
        )
    return found


def psi_available(root: Path = PRESSURE) -> str | None:
    """Why PSI cannot be read here, or None when it can (a kernel built without it has no
    /proc/pressure; one booted with psi=0 has the files and refuses to read them)."""
    try:
        for name in ("cpu", "io", "memory"):
            parse_pressure((root / name).read_text())
    except FileNotFoundError:
        return f"no {root} (a kernel built with CONFIG_PSI)"
    except (OSError, ValueError) as exc:
        return f"{root} unreadable: {exc} (boot with psi=1)"
    return None


def read(psi: bool, clock: float, root: Path = PRESSURE, stat: Path = PROC_STAT, group: Path | None = None) -> Reading:
    """One reading; `group`: the workload's cgroup (v2), whose cpu.pressure is read too."""
    times = parse_proc_stat(stat.read_text())
    cpu = io = memory = own = Stall(0, 0)
    if psi:
        cpu, io, memory = (parse_pressure((root / name).read_text()) for name in ("cpu", "io", "memory"))
        if group is not None:
            own = parse_pressure((group / "cpu.pressure").read_text())
    return Reading(
        round(clock * 1e6), cpu.some, io.some, io.full, memory.some, memory.full, times.steal, times.total, own.some
    )


def workload_group(path: Path | None) -> Path | None:
    """The run's own cgroup, where it tells the workload's CPU waits apart: a cgroup v2 group has
    cpu.pressure; v1 has none (core/cgroups.py makes one only for a memory limit)."""
    if path is None:
        return None
    try:
        parse_pressure((path / "cpu.pressure").read_text())
    except (OSError, ValueError):
        return None
    return path


def window(samples: Sequence[Reading], psi: bool, group: bool = False) -> Stalls | None:
    return stalls_between(samples[0], samples[-1], psi, group) if len(samples) >= 2 else None


class PressureMonitor:
    """Reads PSI and /proc/stat from start to stop; judges the workload's own interval."""

    name = "pressure"

    def __init__(self, memory_limited: bool = False, group: Path | None = None):
        self.psi = psi_available() is None
        self.memory_limited = memory_limited
        self.group = workload_group(group) if self.psi else None
        self.sampler = Sampler(
            lambda: read(self.psi, time.monotonic(), group=self.group), "fslab-pressure-monitor", PRESSURE_PERIOD
        )

    def start(self) -> None:
        self.sampler.start()

    def stop(self) -> None:
        self.sampler.stop()

    def values(self, workload: WorkloadSaid, found: Found) -> None:
        readings = counted_from(self.sampler.samples, workload.counted_from, workload.counted_until)
        stalls = window(readings, self.psi, self.group is not None)
        if stalls is not None:
            more = judged(stalls, self.memory_limited)
            found.values.extend(more.values)
            found.flags.extend(more.flags)


def pressure_monitor(watched: Watched) -> PressureMonitor:
    from fslab.core.cgroups import current  # the run's memory-limited group, when it has one

    group = current()
    return PressureMonitor(memory_limited=group is not None, group=group.path if group is not None else None)


def pressure_checks() -> list[Check]:
    why = psi_available()
    return [
        Check(
            "PSI",
            why is None,
            why or str(PRESSURE),
            "CONFIG_PSI, psi=1",
            required=False,
        )
    ]


MONITORS.add(
    MonitorKind(
        "pressure",
        order=60,
        figures=(  # no column: the summary counts the disturbed runs, their cells' notes say by what
            Figure("psi_cpu_some_pct"),
            Figure("psi_io_some_pct"),
            Figure("psi_io_full_pct"),
            Figure("psi_memory_some_pct"),
            Figure("psi_memory_full_pct"),
            Figure("steal_pct"),
            Figure("psi_workload_cpu_some_pct"),
        ),
        make=pressure_monitor,
        help="neighbours: pressure stalls (PSI) and steal over each run's window; flags a disturbed run",
        checks=pressure_checks,
        cost="~0.015 % of one core: 1 reading a second of /proc/pressure's 3 files and /proc/stat, ~70 µs each here",
    ),
    own=True,
)
