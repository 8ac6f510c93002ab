"""Measurements taken around a run's measured phase: system-wide CPU (cpu.py), the traffic of the
devices under the target (traffic.py), the space the filesystem uses and its compression
(space.py), and the extents of files (extents.py). All behind one small protocol (base.py).

The runner does not use them yet. When it does, it will build a run's monitors with `for_run`
and use them as base.py shows:

    monitors = for_run(devices=[...], mountpoint=..., compression=...)
    with measuring(monitors):
        ... the measured phase ...
    found = collect(monitors, Workload(read_bytes=..., written_bytes=...))
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fslab.monitors.base import Found, Measured, Monitor, Workload, collect, measuring
from fslab.monitors.cpu import CpuMonitor
from fslab.monitors.extents import ExtentsMonitor
from fslab.monitors.space import CompressionRatio, SpaceMonitor
from fslab.monitors.traffic import TrafficMonitor

__all__ = ["Found", "Measured", "Monitor", "Workload", "collect", "for_run", "measuring"]


def for_run(devices: Sequence[str], mountpoint: Path | None, compression: CompressionRatio | None = None, files: Sequence[Path] = ()) -> list[Monitor]:
    """The monitors of one measured phase.

    - `devices`: the block devices that reach storage under the target (its loop images' loop
      devices, a user's disks) — not the layers above them as well, or bytes count twice;
    - `mountpoint`: the filesystem's, None on a raw device (no space to measure);
    - `compression`: the filesystem's way to its compression ratio (space.btrfs_compression_ratio;
      for ZFS, space.parse_zfs_compressratio reads `zfs get compressratio`, which nothing asks
      yet), None where it does not compress;
    - `files`: files whose extents to count after the phase (none yet: a scenario that ages a
      filesystem, for one, would name its files).
    """
    monitors: list[Monitor] = [CpuMonitor(), TrafficMonitor(devices)]
    if mountpoint is not None:
        monitors.append(SpaceMonitor(mountpoint, compression))
    if files:
        monitors.append(ExtentsMonitor(files))
    return monitors
