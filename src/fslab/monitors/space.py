"""The space a filesystem uses after the workload, and what its compression saves.

Space: statvfs of the mount point (what `df` shows), blocks in use × fragment size, after the
filesystem has been synced (`sync -f`: delayed allocation reserves blocks only at writeback).
`space_used_bytes` is the total after the measured phase; `space_grown_bytes` what it added.

Compression ratio = the bytes the files hold ÷ the bytes their data takes on the devices:
- Btrfs: the files' allocated bytes (st_blocks × 512, which Btrfs counts uncompressed) summed
  over the filesystem, over the data in use that `btrfs filesystem df -b` reports (compressed
  extents, before any RAID copy). Data inlined in metadata (files under max_inline, 2 KiB by
  default) counts above, not below: many tiny files raise the ratio a little. Debian's
  btrfs-compsize measures the same per extent; fslab does not need it.
- ZFS: the dataset's `compressratio` property, as `parse_zfs_compressratio` reads the text of
  `zfs get compressratio` (`zfs_compression_ratio`).
A filesystem that does not compress has no ratio (no value, rather than 1). Whether a run's
filesystem compresses is the filesystem's to say (Filesystem.compression_ratio: Btrfs from its
effective mount options, `btrfs_compresses`; ZFS from its compression property, `zfs_compresses`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from fslab.monitors.base import MONITORS, Figure, Found, Measured, MonitorKind, Watched, WorkloadSaid

CompressionRatio = Callable[[Path], "float | None"]  # the mount point → its ratio
# A ratio from which the filesystem is taken to have compressed what was written: below it,
# what it wrote is stored as it came (metadata and a few inlined files move a ratio a little).
COMPRESSED_FROM = 1.1


def used_bytes(mountpoint: Path) -> int:
    """Bytes in use on the filesystem mounted at `mountpoint`, as df counts them."""
    st = os.statvfs(mountpoint)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


_BTRFS_DF = re.compile(r"^(\w+), [\w]+: total=(\d+), used=(\d+)$")


def parse_btrfs_df(text: str) -> dict[str, int]:
    """`btrfs filesystem df -b` → bytes used per block-group type (Data, Metadata, System …),
    summed over profiles ("Data, single" and "Data, RAID1" during a balance)."""
    used: dict[str, int] = {}
    for line in text.splitlines():
        match = _BTRFS_DF.match(line.strip())
        if match:
            used[match[1]] = used.get(match[1], 0) + int(match[3])
    if "Data" not in used:
        raise ValueError(f"no Data line in `btrfs filesystem df -b` output: {text[:200]!r}")
    return used


def files_allocated(mountpoint: Path) -> int:
    """Bytes allocated to the regular files under `mountpoint` (this filesystem only)."""
    device = os.lstat(mountpoint).st_dev
    allocated = 0
    for directory, subdirectories, files in os.walk(mountpoint):
        for name in files:
            st = os.lstat(os.path.join(directory, name))
            if st.st_dev == device and not os.path.islink(os.path.join(directory, name)):
                allocated += st.st_blocks * 512
        subdirectories[:] = [d for d in subdirectories if os.lstat(os.path.join(directory, d)).st_dev == device]
    return allocated


def compression_ratio(logical: int, stored: int) -> float | None:
    """Bytes held ÷ bytes stored; None when nothing is stored."""
    return logical / stored if stored > 0 else None


def btrfs_compression_ratio(mountpoint: Path) -> float | None:
    """A Btrfs's ratio (see the module's doc), once synced: SpaceMonitor.values syncs first."""
    from fslab.core.system import run  # subprocess and the journal: for a run, not for a summary reading the registry

    stored = parse_btrfs_df(run(["btrfs", "filesystem", "df", "-b", str(mountpoint)]).stdout)["Data"]
    return compression_ratio(files_allocated(mountpoint), stored)


def parse_zfs_compressratio(text: str) -> float:
    """The ratio in `zfs get compressratio DATASET` output, with or without -H/-p:

        NAME        PROPERTY       VALUE  SOURCE
        tank/data   compressratio  2.13x  -

    ("2.13x"; with -p "2.13")."""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1] == "compressratio":
            value = fields[2].removesuffix("x")
            try:
                return float(value)
            except ValueError:
                break
    raise ValueError(f"no compressratio value in `zfs get` output: {text[:200]!r}")


def btrfs_compresses(effective_options: str | None) -> bool:
    """Whether a Btrfs mounted with these options (as /proc/mounts shows them) compresses what
    is written: compress or compress-force, with any algorithm but no/none."""
    for option in (effective_options or "").split(","):
        name, _, value = option.partition("=")
        if name in ("compress", "compress-force") and value.partition(":")[0] not in ("no", "none"):
            return True
    return False


def zfs_compresses(details: str) -> bool:
    """Whether a dataset compresses, from `zfs get -H -o property,value,source all` (a run's
    stored details): its compression property is set to anything but off."""
    for line in details.splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and fields[0] == "compression":
            return fields[1] != "off"
    return False


def zfs_compression_ratio(dataset: str) -> float:
    """A dataset's compressratio as `zfs get` reports it."""
    from fslab.core.system import run  # subprocess and the journal: for a run, not for a summary reading the registry

    return parse_zfs_compressratio(run(["zfs", "get", "-H", "compressratio", dataset]).stdout)


class SpaceMonitor:
    """Space in use at start and after the phase; the compression ratio where one is given."""

    name = "space"

    def __init__(self, mountpoint: Path, ratio: CompressionRatio | None = None):
        self.mountpoint = mountpoint
        self.ratio = ratio
        self.before: int | None = None

    def start(self) -> None:
        self.before = used_bytes(self.mountpoint)

    def stop(self) -> None:
        pass  # measured in `values`, after the window: syncing belongs to no workload

    def values(self, workload: WorkloadSaid, found: Found) -> None:
        from fslab.core.system import (
            run,
        )  # subprocess and the journal: for a run, not for a summary reading the registry

        run(["sync", "-f", str(self.mountpoint)])
        after = used_bytes(self.mountpoint)
        found.values.append(Measured("space_used_bytes", after, "B", False))
        if self.before is not None:
            found.values.append(Measured("space_grown_bytes", after - self.before, "B", False))
        ratio = self.ratio(self.mountpoint) if self.ratio else None
        if ratio is not None:
            found.values.append(Measured("compression_ratio", ratio, "×", True))


def space_monitor(watched: Watched) -> SpaceMonitor | None:
    """None on a raw device: no filesystem's space to measure."""
    return None if watched.mountpoint is None else SpaceMonitor(watched.mountpoint, watched.compression)


MONITORS.add(
    MonitorKind(
        "space",
        order=30,
        figures=(
            Figure("space_used_bytes", "space used", "size", timing="independent"),
            Figure("space_grown_bytes", timing="independent"),
            Figure("compression_ratio", "compression", "ratio", timing="independent"),
        ),
        make=space_monitor,
        help="the space the filesystem uses after the window (statvfs, once synced) and its compression ratio",
        cost="nothing while the workload runs: a statvfs before it, a sync and a statvfs after the window",
    ),
    own=True,
)
