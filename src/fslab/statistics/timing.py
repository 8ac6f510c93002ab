"""How a stored metric depends on the machine's timing, and so between which hosts it may be compared.

- "speed" (bandwidth, IOPS, latency, CPU, durations; the default): only between hosts of one
  `Host.vm` (bare metal with bare metal, a VM with a VM of the same accelerator, CPU, size, QEMU
  and disks), and never under emulation (TCG): an emulated CPU's speed is not a performance result.
- "dependent" (write amplification, extents): what the kernel did, but shaped by how fast things
  went (writeback timing, allocation under concurrency); only between hosts of one accelerator.
- "independent" (the page-cache share of direct I/O, space used, compression of a fixed pattern):
  what a fixed workload makes the kernel do, whatever the clock; compared across every host.

Each metric declares its class where it is declared: a workload kind's `MetricKind.timing`, a
monitor's `Figure.timing`. `timing_of` looks a stored key up across every kind and monitor; a
name two declarations class differently takes the stricter class.
"""

from __future__ import annotations

from typing import Literal, cast

from fslab import monitors, workloads
from fslab.model import TIMINGS, unqualified

Timing = Literal["speed", "independent", "dependent"]

_table: tuple[tuple[int, int], dict[str, Timing]] = ((-1, -1), {})


def _stricter(a: Timing, b: Timing) -> Timing:
    return a if TIMINGS.index(a) <= TIMINGS.index(b) else b


def timings() -> dict[str, Timing]:
    """Every declared metric's timing class, by name (kinds' and monitors'); kept until a
    registry changes."""
    global _table
    kept_at, kept = _table
    if kept_at == (workloads.KINDS.version, monitors.MONITORS.version):
        return kept
    found: dict[str, Timing] = {}
    declared = [(name, kind.timing) for k in workloads.names() for name, kind in workloads.metrics_of(k).items()]
    declared += [(figure.name, figure.timing) for figure in monitors.figures()]
    for name, timing in declared:
        if timing not in TIMINGS:
            raise ValueError(f"metric {name} declares timing {timing!r}: one of {', '.join(TIMINGS)}")
        known = cast(Timing, timing)
        found[name] = _stricter(found[name], known) if name in found else known
    _table = ((workloads.KINDS.version, monitors.MONITORS.version), found)  # read after loading: versions moved
    return found


def timing_of(metric_key: str) -> Timing:
    """A stored metric's timing class, by its key (a scenario's phase-qualified key as well);
    "speed" for a name nothing declares: the strictest, so an unknown figure is never passed off."""
    return timings().get(unqualified(metric_key), "speed")
