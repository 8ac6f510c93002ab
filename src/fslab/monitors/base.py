"""What every monitor offers the runner: started just before the measured phase, stopped just
after it, then asked for its values once the workload's own figures are known.

The runner (runner.Windows) uses them so, for each measured window of every run:

    monitors = for_run(devices, mountpoint, ratio)   # [CpuMonitor(), TrafficMonitor(devices), SpaceMonitor(…)]
    with measuring(monitors):
        ... the measured phase ...
    found = collect(monitors, Workload(read_bytes=..., written_bytes=...))
    found.values   # [Measured(name, value, unit, higher_is_better), ...]: stored as the run's metrics
    found.flags    # [Finding("served_by_cache", "reads were served by a cache: ...", False), ...]: its notes

`start` and `stop` do as little as they can (read a counter, start or end a thread): they sit
at the edges of the measured window. Everything else — parsing, arithmetic, asking a tool such
as btrfs — waits for `values`, after the window has closed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

from fslab.findings import Finding


@dataclass(frozen=True)
class Measured:
    """One value a monitor found: maps one to one onto a stored metric (which adds its phase)."""

    name: str
    value: float
    unit: str
    higher_is_better: bool


@dataclass(frozen=True)
class Workload:
    """What the workload itself says it moved in the measured phase (None: it does not say)."""

    read_bytes: float | None = None
    written_bytes: float | None = None


@dataclass
class Found:
    """Every monitor's values, and what they flag about the run (stored with it as its notes)."""

    values: list[Measured] = field(default_factory=list)
    flags: list[Finding] = field(default_factory=list)


class Monitor(Protocol):
    name: str  # "cpu", "traffic", …: says whose cost the bench measures

    def start(self) -> None:
        """Just before the measured phase: take the first reading."""
        ...

    def stop(self) -> None:
        """Just after it: take the last reading."""
        ...

    def values(self, workload: Workload, found: Found) -> None:
        """Add this monitor's values (and flags) to `found`; called after `stop`."""
        ...


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


def collect(monitors: Sequence[Monitor], workload: Workload = Workload()) -> Found:
    """Every monitor's values once the measured phase is over and the workload's figures known."""
    found = Found()
    for monitor in monitors:
        monitor.values(workload, found)
    return found
