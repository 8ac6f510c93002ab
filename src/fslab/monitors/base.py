"""What every monitor offers the runner: started just before the measured phase, stopped just
after it, then asked for its values once the workload's own figures are known.

The runner (runner.Windows) uses them so, for each measured window of every run:

    monitors = for_run(devices, mountpoint, ratio)   # [CpuMonitor(), TrafficMonitor(devices), SpaceMonitor(…)]
    with measuring(monitors):
        ... the measured phase ...
    found = collect(monitors, WorkloadSaid(read_bytes=..., written_bytes=...))
    found.values   # [Measured(name, value, unit, higher_is_better), ...]: stored as the run's metrics
    found.flags    # [Finding("served_by_cache", "reads were served by a cache: ...", False), ...]: its notes

`start` and `stop` do as little as they can (read a counter, start or end a thread): they sit
at the edges of the measured window. Everything else — parsing, arithmetic, asking a tool such
as btrfs — waits for `values`, after the window has closed.

Every figure of a window covers the interval the workload's own figures cover. The window opens
before the workload starts; a workload whose figures begin later (fio's start-up and ramp_time)
says when (WorkloadSaid.counted_from, on time.monotonic()'s clock), and the monitors that count
over time (CPU, traffic) sample their counters through the whole window (`Sampler`) and count
from that moment on (`counted_from`), the counters interpolated between the samples around it.

A window ends with a sync of the target's filesystem (runner.Windows), so that what it still
held of the workload's writes (Btrfs's transaction, ZFS's transaction group, dirty pages) has
reached its devices: the devices' bytes are counted through it, CPU stops where it began
(WorkloadSaid.synced) — the sync is no part of the workload's own figures.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from fslab.core.registry import Registry
from fslab.model.findings import Finding
from fslab.model.records import (
    Histogram,
    Records,  # noqa: F401 (the monitors' name for it: fslab.monitors.Records)
)


@dataclass(frozen=True)
class Measured:
    """One value a monitor found: maps one to one onto a stored metric (which adds its phase)."""

    name: str
    value: float
    unit: str
    higher_is_better: bool


@dataclass(frozen=True)
class Synced:
    """The sync of the target's filesystem that ended a window: when it began (time.monotonic())
    and how long it took, to the window's end."""

    began: float
    seconds: float


@dataclass(frozen=True)
class WorkloadSaid:
    """What the workload itself says it moved in the measured phase (None: it does not say) and
    how many fsyncs it issued (None: it does not count them), when its figures began counting
    (time.monotonic()), if later than the window opened, and the sync that ended the window
    (None: the window ended with the workload); whether it asked for direct I/O (the study's
    `direct`); how many reads and writes it completed (None: it does not count them)."""

    read_bytes: float | None = None
    written_bytes: float | None = None
    counted_from: float | None = None
    synced: Synced | None = None
    fsyncs: float | None = None
    direct: bool = False
    ios: float | None = None

    @property
    def counted_until(self) -> float | None:
        """When the workload's own figures ended: the sync's start (None: the window's end)."""
        return self.synced.began if self.synced else None


@dataclass
class Found:
    """Every monitor's values, what they flag about the run (stored with it as its notes), and the
    distributions an opt-in one counted (run_histograms)."""

    values: list[Measured] = field(default_factory=list)
    flags: list[Finding] = field(default_factory=list)
    histograms: list[Histogram] = field(default_factory=list)  # an opt-in monitor's (stored with the run)


class Monitor(Protocol):
    name: str  # "cpu", "traffic", …: says whose cost the bench measures

    def start(self) -> None:
        """Just before the measured phase: take the first reading."""
        ...

    def stop(self) -> None:
        """Just after it: take the last reading."""
        ...

    def values(self, workload: WorkloadSaid, found: Found) -> None:
        """Add this monitor's values (and flags) to `found`; called after `stop`."""
        ...


@dataclass(frozen=True)
class Watched:
    """What a measured window watches: the block devices that reach storage under the target
    (not the layers above them as well, or bytes count twice), the filesystem's mount point (None
    on a raw device), and its way to its compression ratio (Filesystem.compression_ratio; None
    where it does not compress); the opt-in monitors the run asked for (`--trace`: their
    MonitorKind.trace names), and the journal a monitor that starts a process or mounts
    something holds it in (None: such a monitor does not run); whether the workload asks for direct
    I/O (the study's `direct`), and the kernel's backing device its filesystem's page cache is
    counted on (Filesystem.bdi; None: none, or unknown); how it writes data in records
    (Filesystem.records; None: it does not, or not a filesystem)."""

    devices: Sequence[str]
    mountpoint: Path | None
    compression: Callable[[Path], float | None] | None = None
    traces: frozenset[str] = frozenset()
    journal: Journal | None = None
    direct: bool = False
    bdi: str | None = None
    records: Records | None = None


@dataclass(frozen=True)
class Figure:
    """A value a monitor reports (Measured.name), as a summary shows it: its column in the
    monitors' table and how that prints it ("pct", "size", "ratio", "seconds"); no column: kept
    in the database and the files alone; its timing class, as a MetricKind's."""

    name: str
    column: str = ""
    shape: str = ""
    timing: str = "speed"  # how it depends on the machine's timing (model.MetricKind.timing)


@dataclass(frozen=True)
class MonitorKind:
    """A monitor as the registry holds it: `make` builds one for a window (None: nothing to
    watch there, as space on a raw device), `figures` what it reports, in the order shown."""

    name: str
    order: int  # where it comes among the monitors: their figures, and their columns, in this order
    figures: tuple[Figure, ...]
    make: Callable[[Watched], Monitor | None]
    # Opt-in: the name `--trace` turns it on by (its cost is more than every run should pay); "":
    # always on. `help` says in a line what it finds and what it costs (`fslab list`, `--help`).
    trace: str = ""
    help: str = ""
    # What it costs a run while the workload runs, as bench/monitors.py measured it (`fslab list`,
    # docs/monitors.md); "": not measured yet.
    cost: str = ""
    # What this machine needs for it (`fslab doctor`; an opt-in one's failed required checks
    # refuse `fslab run --trace` before anything runs); an always-on monitor that cannot measure
    # here says so in its values' place, never fails a run.
    checks: Callable[[], Sequence[Check]] | None = None


# Every monitor, each joining as its module (of this package) is imported; reading it imports them all.
MONITORS: Registry[MonitorKind] = Registry("monitor", package="fslab.monitors")


@contextmanager
def measuring(monitors: Sequence[Monitor]) -> Iterator[None]:
    """Start the monitors, run the block (the measured phase), stop them — stopped even when
    the block fails, in reverse order, so that a sampling thread never outlives a run. A monitor
    that fails to start stops those already started."""
    started: list[Monitor] = []
    try:
        for monitor in monitors:
            monitor.start()
            started.append(monitor)
        yield
    finally:
        failure: BaseException | None = None
        for monitor in reversed(started):
            try:
                monitor.stop()
            except BaseException as exc:  # stop the others all the same; say the first failure
                failure = failure or exc
        if failure is not None:
            raise failure


def collect(monitors: Sequence[Monitor], workload: WorkloadSaid = WorkloadSaid()) -> Found:
    """Every monitor's values once the measured phase is over and the workload's figures known."""
    found = Found()
    for monitor in monitors:
        monitor.values(workload, found)
    return found


PERIOD = 0.2  # seconds between samples of a counter: five a second

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from fslab.core.checks import Check
    from fslab.core.journal import Journal

# One reading of cumulative counters: a dataclass whose fields are all numbers.
R = TypeVar("R", bound="DataclassInstance")


@dataclass(frozen=True)
class Sample(Generic[R]):
    at: float  # time.monotonic() when read
    reading: R


EARLIEST = 0.005  # seconds a sample may always come early to share a wake-up (a thread's wake is ms-coarse)


def next_interval(elapsed: float, period: float, growth: float, longest: float) -> float:
    """Seconds to the next sample, `elapsed` seconds after the first: `period`; with `growth`, that
    fraction of the time elapsed, at least `period` and at most `longest`."""
    return min(max(period, growth * elapsed), max(longest, period)) if growth else period


class Sampler(Generic[R]):
    """Reads counters with `read` at start, while it runs, and at stop, each reading stamped: what
    lets a monitor count from any moment inside its window. Samples come every `period` seconds;
    with `growth`, the interval grows with the time since start (next_interval): dense where a
    window's counting starts — fio's start-up is short — sparse after, where the rate is steady.
    The samples while it runs are taken by one thread for every sampler (CLOCK): a wake-up of a
    thread, not the read, is most of a sample's cost (50–300 µs of CPU here), so samplers due
    together share one."""

    def __init__(
        self, read: Callable[[], R], name: str, period: float = PERIOD, *, growth: float = 0.0, longest: float = 0.0
    ):
        self.read, self.name, self._spacing = read, name, (period, growth, longest)
        self.samples: list[Sample[R]] = []
        self.failure: Exception | None = None  # a read that failed while it ran

    def _take(self) -> None:
        self.samples.append(Sample(time.monotonic(), self.read()))

    def due(self) -> tuple[float, float]:
        """When its next sample is due — from its last, not on a fixed grid: a clock woken late
        does not catch up in a burst — and how much earlier it may be taken to share a wake-up:
        a quarter of a growing sampler's interval, half a fixed one's (its period is a resolution,
        not a deadline: CPU's peak is then of 0.1–0.2 s), EARLIEST at least (samplers of one
        period started together share every wake-up from the first on)."""
        first, last = self.samples[0].at, self.samples[-1].at
        interval = next_interval(last - first, *self._spacing)
        return last + interval, max(EARLIEST, interval / (4 if self._spacing[1] else 2))

    @property
    def running(self) -> bool:
        return CLOCK.holds(self)

    def start(self) -> None:
        self.samples, self.failure = [], None
        self._take()
        CLOCK.add(self)

    def stop(self) -> None:
        if CLOCK.remove(self):
            self._take()
        elif self.failure is not None:
            failure, self.failure = self.failure, None
            raise failure


class Clock:
    """The one thread that takes the samples of every running Sampler when each is due; it ends
    when none runs (a sampling thread never outlives a window)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running: set[Sampler[Any]] = set()
        self._thread: threading.Thread | None = None

    def holds(self, sampler: Sampler[Any]) -> bool:
        with self._changed:
            return sampler in self._running

    def add(self, sampler: Sampler[Any]) -> None:
        with self._changed:
            self._running.add(sampler)
            if self._thread is None:
                self._thread = threading.Thread(target=self._tick, name="fslab-monitors-clock", daemon=True)
                self._thread.start()
            self._changed.notify()

    def remove(self, sampler: Sampler[Any]) -> bool:
        """Whether it was running; it takes no sample after this returns (samples are taken with
        the lock held)."""
        with self._changed:
            if sampler not in self._running:
                return False
            self._running.discard(sampler)
            self._changed.notify()
            return True

    def _tick(self) -> None:
        with self._changed:
            try:
                while self._running:
                    now = time.monotonic()
                    due = {sampler: sampler.due() for sampler in self._running}
                    if all(at > now for at, _ in due.values()):
                        self._changed.wait(min(at for at, _ in due.values()) - now)
                        continue
                    for sampler, (at, early) in due.items():
                        if at - early <= now:
                            try:
                                sampler._take()
                            except Exception as exc:  # its counter unreadable: said at its stop
                                sampler.failure = exc
                                self._running.discard(sampler)
            finally:
                self._thread = None


CLOCK = Clock()


def counted_from(samples: Sequence[Sample[R]], moment: float | None, until: float | None = None) -> list[R]:
    """The readings of a window counted from `moment` on: the counters as they stood then
    (interpolated between the samples around it), and every later reading. All of them when
    `moment` is None or comes before the first; only the last when it comes after it (nothing
    left to count). With `until`, up to that moment alone: the counters as they stood then,
    interpolated alike, end the readings."""
    if until is not None and samples and until < samples[-1].at:
        samples = _cut_at(samples, until)
    if moment is None or not samples or moment <= samples[0].at:
        return [s.reading for s in samples]
    later = [s for s in samples if s.at > moment]
    if not later:
        return [samples[-1].reading]
    before, after = samples[len(samples) - len(later) - 1], later[0]
    fraction = (moment - before.at) / (after.at - before.at)
    return [interpolated(before.reading, after.reading, fraction), *(s.reading for s in later)]


def _cut_at(samples: Sequence[Sample[R]], until: float) -> list[Sample[R]]:
    """The samples before `until`, and the counters as they stood at `until` (before the last)."""
    earlier = [s for s in samples if s.at < until]
    if not earlier:
        return [samples[0]]
    before, after = earlier[-1], samples[len(earlier)]
    return [
        *earlier,
        Sample(until, interpolated(before.reading, after.reading, (until - before.at) / (after.at - before.at))),
    ]


def interpolated(a: R, b: R, fraction: float) -> R:
    """Counters `fraction` of the way from reading `a` to reading `b`, field by field, rounded (a
    field not counted in either, None, stays None)."""
    values: dict[str, Any] = {}
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        values[f.name] = None if x is None or y is None else round(x + (y - x) * fraction)
    return type(a)(**values)
