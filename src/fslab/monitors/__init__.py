"""Measurements taken around a run's measured phase: system-wide CPU (cpu.py), the traffic of the
devices under the target (traffic.py), the space the filesystem uses and its compression
(space.py), all behind one small protocol (base.py); and the extents of files (extents.py),
which a scenario counts after a phase (workloads/scenario.py).

The runner (runner.Windows) watches every measured window of every run with them:

    monitors = for_run(devices=ready.bottom, mountpoint=ready.directory, compression=...)
    with measuring(monitors):
        ... the measured phase ...
    found = collect(monitors, Workload(read_bytes=..., written_bytes=...))

and stores found.values as the run's metrics (of the window's phase) and found.flags as its notes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fslab.monitors.base import Found, Measured, Monitor, Synced, Workload, collect, measuring
from fslab.monitors.cpu import CpuMonitor
from fslab.monitors.space import CompressionRatio, SpaceMonitor
from fslab.monitors.traffic import TrafficMonitor

__all__ = ["METRICS", "Found", "Measured", "Monitor", "Synced", "Workload", "collect", "for_run", "measuring"]

# Every value the monitors report (Measured.name), in the order a report shows them: how a
# summary tells what a run cost (these) from what its workload measured (the kind's metrics).
METRICS = (
    "host_cpu_busy_pct", "host_cpu_busy_peak_pct", "host_cpu_user_pct", "host_cpu_system_pct", "host_cpu_iowait_pct",
    "device_read_bytes", "device_written_bytes", "write_amplification", "device_read_ratio", "sync_seconds",
    "space_used_bytes", "space_grown_bytes", "compression_ratio",
)  # fmt: skip


def for_run(devices: Sequence[str], mountpoint: Path | None, compression: CompressionRatio | None = None) -> list[Monitor]:
    """The monitors of one measured phase.

    - `devices`: the block devices that reach storage under the target (its loop images' loop
      devices, a user's disks) — not the layers above them as well, or bytes count twice;
    - `mountpoint`: the filesystem's, None on a raw device (no space to measure);
    - `compression`: the filesystem's way to its compression ratio (Filesystem.compression_ratio:
      space.btrfs_compression_ratio, or space.zfs_compression_ratio of the dataset), None where
      it does not compress.
    """
    monitors: list[Monitor] = [CpuMonitor(), TrafficMonitor(devices)]
    if mountpoint is not None:
        monitors.append(SpaceMonitor(mountpoint, compression))
    return monitors
