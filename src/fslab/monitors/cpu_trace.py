"""CPU per I/O (opt-in: `fslab run --trace cpu`): the CPU the whole machine spent in a measured
window above its own idle background, per I/O the workload completed, and split by who spent it —
much of a filesystem's CPU is outside the workload's processes (kworkers, Btrfs's workers,
the loop device's workers, zfs-fuse).

What is counted, from the workload's own start to the sync (base.counted_from, as cpu.py):
- the total: /proc/stat's busy time (user, nice, system, irq, softirq; not idle, iowait, steal);
- by kind, from every process's /proc/<pid>/stat (utime + stime of the whole thread group, the
  threads that already exited included), read at each sample, and added up sample to sample:
    workload  fslab's descendants (the tool fslab runs: fio, sysbench, dd, …; not perf or
              bpftrace, the monitors' own), and what they had reaped (cutime + cstime): a tool
              that exits inside the window is counted to its last tick, through its parent's
              cutime (fslab's own, or a workload process's), less what was counted of it before;
    btrfs     Btrfs's threads (btrfs-*), and kworkers named after a Btrfs workqueue (Linux names a
              kworker after the workqueue it runs, kworker/u4:1+btrfs-endio-write, or last ran, -);
    loop      the loop devices' workers (kworker/…-loopN; loopN threads of older kernels);
    zfs_fuse  the zfs-fuse daemon;
    kworker   every other kworker;
    other     the rest of the total: every other process (fslab itself among them), interrupts
              (irq, softirq), and what a process that exited inside the window and was reaped by
              none of the above spent after the previous sample (it is in no /proc reading).
  A process is told apart by pid and start time (a pid reused inside the window is a new one).
- the idle baseline: each kind's CPU rate over BASELINE_SECONDS just before the window, read alike
  (two readings) while fslab waits — the monitors built, the workload not yet started —, times
  the window's length. Kind by kind, not the machine's total: on a machine busy with other work
  the workload takes CPU from it (other falls below its baseline), and the total barely moves —
  total − baseline would read ~0. A kind below its baseline counts 0 above it, never less.
  The sampler's own cost is not in the baseline: it is above it, as any monitor's is.

    cpu_us_per_io = Σ over kinds of max(kind − its baseline, 0) ÷ the workload's I/Os
                    (WorkloadSaid.ios: fio's total_ios, sysbench's reads and writes) — lower is better
    cpu_ms_<kind>  the window's CPU of each kind, baseline included: they add up to cpu_ms_total;
    cpu_ms_baseline  the baseline's CPU over the window (all kinds).

Hardware counters (cycles, instructions) come from perf stat where a PMU exists
(cpu_counters.py); elsewhere the run's note says they are not measurable here, and nothing is stored.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fslab.model.findings import Finding
from fslab.monitors import cpu_counters
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

PROC = Path("/proc")
PERIOD = 0.25  # seconds between readings of every process: ~1.3 ms of CPU each, ~130 processes here
BASELINE_SECONDS = 1.0  # the idle background measured before each window
KINDS = ("workload", "kworker", "btrfs", "loop", "zfs_fuse")  # and "other": the rest of the total
MONITOR_TOOLS = frozenset({"perf", "bpftrace"})  # fslab's descendants that are no workload
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
COUNTERS_NOTE = "cpu_counters"
_LOOP = re.compile(r"loop\d+")
# A kworker's name ends with the workqueue it runs ("+") or last ran ("-"): kworker/u4:1+btrfs-endio-write.
_KWORKER = re.compile(r"kworker/[^+-]*(?:[+-](.*))?")


@dataclass(frozen=True)
class Task:
    """One process as /proc/<pid>/stat shows it: CPU time in clock ticks, of its own threads
    (utime + stime, exited threads included) and of the children it reaped (cutime + cstime)."""

    pid: int
    comm: str
    ppid: int
    ticks: int
    reaped: int
    start: int  # clock ticks after boot: with the pid, which process this is

    @property
    def key(self) -> tuple[int, int]:
        return self.pid, self.start


def parse_task_stat(text: str) -> Task:
    """/proc/<pid>/stat: "pid (comm) state ppid …"; comm may hold spaces and ") ", so it ends at
    the last ")"."""
    open_, close = text.index("("), text.rindex(")")
    rest = text[close + 2 :].split()
    return Task(
        pid=int(text[:open_]),
        comm=text[open_ + 1 : close],
        ppid=int(rest[1]),
        ticks=int(rest[11]) + int(rest[12]),
        reaped=int(rest[13]) + int(rest[14]),
        start=int(rest[19]),
    )


def kind_of(comm: str) -> str:
    """The kind of a process that is not the workload's, by its name."""
    if worker := _KWORKER.match(comm):
        queue = worker.group(1) or ""
        return "btrfs" if queue.startswith("btrfs") else "loop" if _LOOP.fullmatch(queue) else "kworker"
    if comm.startswith("btrfs-"):
        return "btrfs"
    if _LOOP.fullmatch(comm):
        return "loop"
    return "zfs_fuse" if comm == "zfs-fuse" else "other"


@dataclass(frozen=True)
class Reading:
    """The machine's busy ticks (/proc/stat) and every process, at one moment."""

    busy: int
    tasks: Mapping[tuple[int, int], Task]


def workload_of(reading: Reading, own: int) -> set[tuple[int, int]]:
    """The processes descended from `own` (fslab), the monitors' tools and theirs left out."""
    children: dict[int, list[Task]] = {}
    for task in reading.tasks.values():
        children.setdefault(task.ppid, []).append(task)
    found, todo = set(), [t for t in children.get(own, []) if t.comm not in MONITOR_TOOLS]
    while todo:
        task = todo.pop()
        if task.key not in found and task.pid != own:
            found.add(task.key)
            todo += children.get(task.pid, [])
    return found


def spent_between(before: Reading, after: Reading, own: int) -> dict[str, int]:
    """Each kind's ticks from one reading to the next (KINDS; "other" is the total's rest, found later)."""
    spent = dict.fromkeys(KINDS, 0)
    workload = workload_of(before, own) | workload_of(after, own)
    for key, task in after.tasks.items():
        prior = before.tasks.get(key)
        if key in workload:
            spent["workload"] += task.ticks + task.reaped - (prior.ticks + prior.reaped if prior else 0)
        elif task.pid != own and (kind := kind_of(task.comm)) in spent:  # "other": the total's rest
            spent[kind] += max(task.ticks - (prior.ticks if prior else 0), 0)
    mine_before, mine_after = _own(before, own), _own(after, own)
    if mine_before and mine_after:
        spent["workload"] += mine_after.reaped - mine_before.reaped
    # A workload process gone since: its parent reaped it, all of it, and was counted above;
    # what was counted of it before is not counted again.
    for key in workload & before.tasks.keys() - after.tasks.keys():
        gone = before.tasks[key]
        parent = next((t for t in before.tasks.values() if t.pid == gone.ppid), None)
        if parent is not None and (parent.pid == own or parent.key in workload):
            spent["workload"] -= gone.ticks + gone.reaped
    spent["workload"] = max(spent["workload"], 0)
    return spent


def _own(reading: Reading, own: int) -> Task | None:
    return next((t for t in reading.tasks.values() if t.pid == own), None)


@dataclass(frozen=True)
class Spent:
    """Cumulative ticks since the first reading: the machine's busy time and each kind's; when
    (time.monotonic(), in µs): what base.counted_from interpolates."""

    at_us: int
    busy: int
    workload: int
    kworker: int
    btrfs: int
    loop: int
    zfs_fuse: int


class Tally:
    """Readings of /proc added up kind by kind, one reading to the next."""

    def __init__(self, read: Callable[[], Reading] | None = None, own: int | None = None):
        self.read, self.own = read or read_now, own if own is not None else os.getpid()
        self.last: Reading | None = None
        self.spent = dict.fromkeys(KINDS, 0)

    def __call__(self) -> Spent:
        reading = self.read()
        at = time.monotonic()
        if self.last is not None:
            for kind, ticks in spent_between(self.last, reading, self.own).items():
                self.spent[kind] += ticks
        self.last = reading
        return Spent(round(at * 1e6), reading.busy, **self.spent)


def read_now() -> Reading:
    """Every process, then the machine's total (read last: the kinds never run ahead of it)."""
    tasks = {}
    for name in os.listdir(PROC):
        if name.isdigit():
            try:
                task = parse_task_stat(_read(f"{PROC}/{name}/stat"))
            except (OSError, ValueError, IndexError):  # exited meanwhile
                continue
            tasks[task.key] = task
    return Reading(parse_proc_stat(_read(f"{PROC}/stat")).busy, tasks)


def _read(path: str) -> str:
    """One read(2) of a small /proc file: a third of Path.read_text's cost, read ~100 times a sample."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 65536).decode(errors="replace")
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Split:
    """A window's CPU in ms: the total and each kind's (KINDS + "other"), and each kind's idle
    baseline over the window's length."""

    seconds: float
    total_ms: float
    kinds_ms: dict[str, float]
    baseline_ms: dict[str, float]

    @property
    def above_baseline_ms(self) -> float:
        return sum(max(ms - self.baseline_ms.get(kind, 0.0), 0.0) for kind, ms in self.kinds_ms.items())


def split(first: Spent, last: Spent, baseline: Mapping[str, float] | None = None) -> Split:
    """The window from reading `first` to `last`, `baseline` each kind's ms per second (none: 0);
    "other" is the busy total's rest (never below 0)."""
    ms = 1000 / TICKS_PER_SECOND
    seconds = (last.at_us - first.at_us) / 1e6
    kinds = {kind: (getattr(last, kind) - getattr(first, kind)) * ms for kind in KINDS}
    total = (last.busy - first.busy) * ms
    kinds["other"] = max(total - sum(kinds.values()), 0.0)
    return Split(seconds, total, kinds, {kind: rate * seconds for kind, rate in (baseline or {}).items()})


def idle_baseline(seconds: float = BASELINE_SECONDS) -> dict[str, float]:
    """Each kind's CPU, in ms per second, over the next `seconds`: the machine's background."""
    tally = Tally()
    first = tally()
    time.sleep(seconds)
    found = split(first, tally())
    return {kind: ms / found.seconds for kind, ms in found.kinds_ms.items()}


def measured(window: Split, ios: float | None) -> list[Measured]:
    values = [
        Measured("cpu_ms_total", window.total_ms, "ms", False),
        Measured("cpu_ms_baseline", sum(window.baseline_ms.values()), "ms", False),
        *(Measured(f"cpu_ms_{kind}", ms, "ms", False) for kind, ms in window.kinds_ms.items()),
    ]
    if ios and window.above_baseline_ms > 0:
        values.insert(0, Measured("cpu_us_per_io", window.above_baseline_ms * 1000 / ios, "µs", False))
    return values


def counters_measured(counts: Mapping[str, float], ios: float | None) -> Iterable[Measured]:
    yield from (Measured(f"cpu_{event}", n, "", False) for event, n in counts.items())
    if ios and counts.get("cycles"):
        yield Measured("cpu_cycles_per_io", counts["cycles"] / ios, "", False)


class CpuTraceMonitor:
    """Every process's CPU, read every PERIOD seconds through the window, and perf's counters
    where a PMU exists; the idle baseline measured as it is made."""

    name = "cpu_trace"

    def __init__(self, watched: Watched, baseline: Mapping[str, float], pmu: str | None):
        self.baseline = baseline
        self.sampler = Sampler(Tally(), "fslab-cpu-trace", PERIOD)
        self.counting = cpu_counters.Counting(watched.journal) if pmu and watched.journal else None

    def start(self) -> None:
        if self.counting:
            self.counting.start()
        try:
            self.sampler.start()
        except BaseException:
            if self.counting:  # `measuring` stops only the monitors that started
                self.counting.stop()
            raise

    def stop(self) -> None:
        try:
            self.sampler.stop()  # before perf ends: its CPU, reaped, would count as the workload's
        finally:
            if self.counting:
                self.counting.stop()

    def values(self, workload: WorkloadSaid, found: Found) -> None:
        readings = counted_from(self.sampler.samples, workload.counted_from, workload.counted_until)
        if len(readings) < 2:
            return
        first, last = readings[0], readings[-1]
        found.values += measured(split(first, last, self.baseline), workload.ios)
        if self.counting is None:
            found.flags.append(
                Finding(COUNTERS_NOTE, f"CPU cycles and instructions {cpu_counters.NO_PMU}", implausible=False)
            )
        elif self.counting.samples and (
            counts := cpu_counters.between(self.counting.samples, first.at_us / 1e6, last.at_us / 1e6)
        ):
            found.values += counters_measured(counts, workload.ios)


def cpu_trace_monitor(watched: Watched) -> CpuTraceMonitor:
    """Built before the window opens: the idle baseline is measured now, while nothing of the
    run is running and no other monitor samples yet."""
    from fslab.core.system import executable  # subprocess and the journal: not for a summary

    return CpuTraceMonitor(watched, idle_baseline(), cpu_counters.core_pmu() if executable("perf") else None)


MONITORS.add(
    MonitorKind(
        "cpu_trace",
        order=90,  # started last, stopped first: its last reading comes before the others end their tools
        figures=(
            Figure("cpu_us_per_io"),
            *(Figure(f"cpu_ms_{kind}") for kind in (*KINDS, "other")),
            Figure("cpu_ms_total"),
            Figure("cpu_ms_baseline"),
            Figure("cpu_cycles"),
            Figure("cpu_instructions"),
            Figure("cpu_cycles_per_io"),
        ),
        make=cpu_trace_monitor,
        trace="cpu",
        help=(
            "CPU µs per I/O above an idle baseline, split into the workload, kworkers, Btrfs, loop and zfs-fuse "
            "threads, and cycles/instructions where a PMU exists; costs a 1 s baseline before each window and "
            "~0.8 % of one core reading every process 4 times a second"
        ),
        cost="~0.8 % of one core: every process's stat read 4 times a second; and 1 s before each window",
        checks=cpu_counters.checks,
    ),
    own=True,
)
