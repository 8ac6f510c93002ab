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

from collections.abc import Sequence
from typing import Literal, cast

from fslab import monitors, workloads
from fslab.model import TIMINGS, Host, unqualified

Timing = Literal["speed", "independent", "dependent"]

EMULATED = "emulated (TCG): not a performance result"  # the label of an emulated host's figures of speed

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


def why_not_compared(metric_key: str, a: Host | None, b: Host | None) -> str | None:
    """Why a metric may not be compared between samples of host `a` and host `b` (the same host
    twice: between targets on it), or None where it may: the one rule of which metrics two hosts
    share. A side whose host's facts were not recorded (before schema 10) is not held back."""
    timing = timing_of(metric_key)
    if timing == "independent" or a is None or b is None:
        return None
    if timing == "speed" and (a.emulated or b.emulated):
        return EMULATED
    if a.accelerator != b.accelerator:
        return f"different accelerators: {a.accelerator} vs {b.accelerator}"
    if timing == "speed" and a.vm != b.vm:
        return "different VM configurations"
    return None


def why_not_within(metric_key: str, hosts: Sequence[Host | None]) -> str | None:
    """Why a metric may not be compared among samples pooled from `hosts` (one host: between
    targets on it), or None where every pair of them (each with itself too) may (why_not_compared)."""
    for i, a in enumerate(hosts):
        for b in hosts[i:]:
            if (why := why_not_compared(metric_key, a, b)) is not None:
                return why
    return None
