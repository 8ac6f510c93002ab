"""Measurements taken around a run's measured phase, one monitor a module, each joining the
registry itself (base.MONITORS) with the values it reports, in the order a report shows them:
system-wide CPU (cpu.py), the traffic of the devices under the target (traffic.py), the space the
filesystem uses and its compression (space.py), and for direct I/O the share its filesystem put
through the page cache (page_cache.py); all behind one small protocol (base.py). The
extents of files (extents.py) are a scenario's, counted after a phase (scenarios/kind.py).

The runner (runner.Windows) watches every measured window of every run with them:

    monitors = for_run(devices=ready.bottom, mountpoint=ready.directory, compression=...)
    with measuring(monitors):
        ... the measured phase ...
    found = collect(monitors, WorkloadSaid(read_bytes=..., written_bytes=...))

and stores found.values as the run's metrics (of the window's phase) and found.flags as its notes.

A new monitor is one module here (and its test): a Monitor, and a maker registered with
`MONITORS.add(MonitorKind(name, order=..., figures=(Figure(name, column, shape), ...), make=maker))`.
The registry imports every module of this package the first time it is read (fslab.core.registry).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.core.errors import Refused
from fslab.monitors.base import (
    MONITORS,
    Figure,
    Found,
    Measured,
    Monitor,
    MonitorKind,
    Records,
    Synced,
    Watched,
    WorkloadSaid,
    collect,
    measuring,
)

__all__ = [
    "ALWAYS_ON_COST",
    "MONITORS",
    "NOT_MEASURED",
    "Figure",
    "MonitorKind",
    "Found",
    "Measured",
    "Monitor",
    "Records",
    "Synced",
    "WorkloadSaid",
    "collect",
    "figures",
    "for_run",
    "kinds",
    "measuring",
    "metric_names",
    "known_traces",
    "traces",
]

if TYPE_CHECKING:
    from fslab.core.journal import Journal

_names: tuple[int, frozenset[str]] = (-1, frozenset())

# What the always-on monitors together cost a run, and a monitor whose cost is not yet measured
# (MonitorKind.cost): bench/monitors.py measures each level (docs/monitors.md, "What they cost").
ALWAYS_ON_COST = (
    "0.38 % of one core, IOPS ratio 1.000 (95% 0.988–1.011) on 4 KiB QD1 direct reads on zram "
    "(2026-11-29, a quiet 2-vCPU VM)"
)
NOT_MEASURED = "not measured yet (bench/monitors.py)"


def kinds() -> list[MonitorKind]:
    """Every registered monitor, in order."""
    return sorted(MONITORS.values(), key=lambda k: (k.order, k.name))


def figures() -> list[Figure]:
    """Every value the monitors report, in the order a report shows them."""
    return [figure for kind in kinds() for figure in kind.figures]


def metric_names() -> frozenset[str]:
    """The names of every value the monitors report: how a summary tells what a run cost (these)
    from what its workload measured (the kind's metrics). Asked of every metric of a report, so
    kept until the registry changes."""
    global _names
    names = None if _names[0] != MONITORS.version else _names[1]
    if names is None:
        names = frozenset(figure.name for figure in figures())  # loads the registry first: its version is read after
        _names = (MONITORS.version, names)
    return names


def traces() -> dict[str, MonitorKind]:
    """The opt-in monitors, by the name `--trace` turns each on by."""
    return {kind.trace: kind for kind in kinds() if kind.trace}


def known_traces(asked: Iterable[str]) -> tuple[str, ...]:
    """The names `--trace` was given (each may be a comma-separated list), checked, in order,
    each once; refused with the names there are."""
    names = list(dict.fromkeys(n.strip() for given in asked for n in given.split(",") if n.strip()))
    known = traces()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise Refused(
            f"--trace {', '.join(map(repr, unknown))}: no such trace; there are "
            f"{', '.join(sorted(known)) or 'none'} (`fslab list` says what each finds and costs)"
        )
    return tuple(names)


def for_run(
    devices: Sequence[str],
    mountpoint: Path | None,
    compression: Callable[[Path], float | None] | None = None,
    *,
    traces: frozenset[str] = frozenset(),
    journal: Journal | None = None,
    direct: bool = False,
    bdi: str | None = None,
    records: Records | None = None,
) -> list[Monitor]:
    """The monitors of one measured phase: every one always on, and the opt-in ones `traces`
    names (base.Watched says what each argument is)."""
    watched = Watched(devices, mountpoint, compression, traces, journal, direct, bdi, records)
    return [
        made
        for kind in kinds()
        if (not kind.trace or kind.trace in traces) and (made := kind.make(watched)) is not None
    ]
