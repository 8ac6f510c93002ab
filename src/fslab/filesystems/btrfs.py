import fcntl
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

from fslab.core.names import check_snapshot_name
from fslab.core.system import run
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.base import Filesystem, MountReadBack, NoSnapshots, Provisioned, SizeFloor, TargetFields
from fslab.model.options import (
    Flag,
    Integer,
    Matches,
    Maybe,
    OneOf,
    Size,
    Suboptions,
    ToolOptions,
    mount_options,
    option_value,
)
from fslab.monitors.space import CompressionRatio, btrfs_compresses, btrfs_compression_ratio

SYS_FS_BTRFS = Path("/sys/fs/btrfs")
# BTRFS_IOC_FS_INFO: _IOR(0x94, 31, struct btrfs_ioctl_fs_info_args), 1,024 bytes; fsid at 16.
FS_INFO, FS_INFO_SIZE, FSID_AT = 0x8400941F, 1024, 16
BY_FSLAB = "fslab passes it itself"
SNAPSHOTS = ".snapshots"  # in the mount point: where snapshot() puts them
PROFILES = ("single", "dup", "raid0", "raid1", "raid1c3", "raid1c4", "raid10", "raid5", "raid6")
PROFILE = OneOf(PROFILES)
FEATURES = Suboptions(
    {
        name: Flag()
        for name in (
            "mixed-bg",
            "extref",
            "raid56",
            "skinny-metadata",
            "no-holes",
            "raid1c34",
            "free-space-tree",
            "block-group-tree",
            "quota",
        )
    },
    refused={"zoned": "it needs a zoned device"},
    negatable=True,
)
RUNTIME_FEATURES = Suboptions({name: Flag() for name in ("quota", "free-space-tree")}, negatable=True)
CHECKSUM = OneOf(("crc32c", "xxhash", "sha256", "blake2"))

MKFS_OPTIONS = ToolOptions(
    "mkfs.btrfs",
    {
        "-d": PROFILE,
        "--data": PROFILE,
        "-m": PROFILE,
        "--metadata": PROFILE,
        "-M": Flag(),
        "--mixed": Flag(),
        "--csum": CHECKSUM,
        "--checksum": CHECKSUM,
        "-n": Size(4096, 65536),
        "--nodesize": Size(4096, 65536),
        "-s": Size(4096, 65536),
        "--sectorsize": Size(4096, 65536),
        "-O": FEATURES,
        "--features": FEATURES,
        "-R": RUNTIME_FEATURES,
        "--runtime-features": RUNTIME_FEATURES,
    },
    refused={
        "-f": BY_FSLAB,
        "--force": BY_FSLAB,
        "-q": BY_FSLAB,
        "--quiet": BY_FSLAB,
        "-K": BY_FSLAB,
        "--nodiscard": BY_FSLAB,
        "-r": "it names a directory to copy in",
        "--rootdir": "it names a directory to copy in",
        "-b": "fslab's image size is the device's size",
        "--byte-count": "fslab's image size is the device's size",
        "-U": "a fixed UUID can collide with another filesystem's",
        "--uuid": "a fixed UUID can collide with another filesystem's",
    },
)

COMPRESSION = Matches(
    r"(zlib(:[1-9])?|lzo|zstd(:(1[0-5]|[1-9]))?|no|none)", "zlib, zlib:1 … zlib:9, lzo, zstd, zstd:1 … zstd:15 or no"
)

MOUNT_OPTIONS = mount_options(
    {
        **{
            name: Flag()
            for name in (
                "acl",
                "noacl",
                "autodefrag",
                "noautodefrag",
                "barrier",
                "nobarrier",
                "datacow",
                "nodatacow",
                "datasum",
                "nodatasum",
                "nodiscard",
                "flushoncommit",
                "noflushoncommit",
                "ssd",
                "ssd_spread",
                "nossd",
                "nossd_spread",
                "treelog",
                "notreelog",
            )
        },
        "commit": Integer(1, 86400),  # seconds
        "compress": Maybe(COMPRESSION),
        "compress-force": Maybe(COMPRESSION),
        "discard": Maybe(OneOf(("sync", "async"))),
        "max_inline": Size(0, 2**20, power_of_two=False),
        "metadata_ratio": Integer(0, 2**31),
        "space_cache": OneOf(("v2",)),
        "thread_pool": Integer(1, 1024),
        "subvolid": OneOf(("5",)),  # the top level, the only subvolume of a new filesystem
    },
    refused={
        "device": "it names another device (fslab scans the target's own devices itself)",
        "subvol": "it names a path",
        "fatal_errors": "an error would crash the host (BUG or panic)",
    },
)

# Measured on Linux 6.18: mount with each option alone, read /proc/mounts. datacow and datasum
# are the defaults, never echoed; nodatacow shows with nodatasum, and is dropped (absent) when
# compress follows it, as compress is when nodatacow follows.
READ_BACK = MountReadBack(
    silent=frozenset(
        {
            "acl",
            "noautodefrag",
            "barrier",
            "datacow",
            "datasum",
            "nodiscard",
            "noflushoncommit",
            "nossd_spread",
            "treelog",
            "commit=30",
            "compress=no",
            "compress=none",
            "compress-force=no",
            "compress-force=none",
            "max_inline=2048",
            "metadata_ratio=0",
        }
    ),
    silent_names=frozenset(
        {"thread_pool"}
    ),  # echoed only when not min(CPUs + 2, 8): the default depends on the machine
    reported_as={"discard=sync": "discard"},
)

# mkfs.btrfs's smallest device depends on the profiles (measured with btrfs-progs 6.2 on sparse
# images: "minimum size for each btrfs device is …"). The largest of each case is kept.
FLOOR = SizeFloor(109 * 2**20, "mkfs.btrfs makes no filesystem on a smaller device")
FLOOR_RAID = SizeFloor(125 * 2**20, "mkfs.btrfs needs that much on each device for a raid data profile")
FLOOR_DUP = SizeFloor(229 * 2**20, "mkfs.btrfs needs that much for the dup data profile")


COPIES = {
    "single": 1,
    "raid0": 1,
    "dup": 2,
    "raid1": 2,
    "raid10": 2,
    "raid1c3": 3,
    "raid1c4": 4,
}  # of each block, by profile


def metadata_chunk(raw: int) -> int:
    """The first metadata chunk's size on a filesystem of `raw` bytes in all (btrfs-progs 6.2 and
    Linux 6.x, measured): 5 % of it from 32MiB, 256MiB from 2.5GiB, 1GiB from 50GiB."""
    if raw >= 50 * 2**30:
        return 2**30
    if raw >= 2560 * 2**20:
        return 256 * 2**20
    return max(32 * 2**20, raw // 20)


def fsid(mountpoint: Path) -> str:
    """The fsid of the Btrfs mounted at `mountpoint` (the name of its /sys/fs/btrfs directory),
    asked of the filesystem through a descriptor on its mount point (no symlink followed)."""
    fd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = fcntl.ioctl(fd, FS_INFO, bytes(FS_INFO_SIZE))
    finally:
        os.close(fd)
    return str(uuid.UUID(bytes=bytes(info[FSID_AT : FSID_AT + 16])))


class BtrfsFields(TargetFields):
    """What a Btrfs target may set beyond every target's fields."""

    nocow: bool = False  # chattr +C on the workload's directory (per-file No_COW)


class Btrfs(Filesystem):
    kind = "btrfs"
    mkfs = ("mkfs.btrfs", "-f", "-q")
    nodiscard = ("-K",)
    version_command = ("mkfs.btrfs", "--version")
    package = "btrfs-progs"
    accepted_mkfs_options = MKFS_OPTIONS
    accepted_mount_options = MOUNT_OPTIONS
    read_back = READ_BACK
    fields = BtrfsFields
    own_fields_refusal = "nocow (chattr +C) is for Btrfs targets"
    supports_snapshots = True
    spans_devices = True
    spans_devices_with = "with -d/-m profiles"

    def size_floor(self, mkfs_arguments: Sequence[str], devices: int) -> SizeFloor:
        data = option_value(mkfs_arguments, "-d", "--data") or ""
        return FLOOR_DUP if data == "dup" else FLOOR_RAID if data.startswith("raid") else FLOOR

    def free_after_mkfs(self, device_size: int, devices: int, mkfs_options: Sequence[str]) -> int:
        """All devices less the system chunks (18MiB) and the first metadata chunk in each of its
        copies (metadata_chunk), shared as the data profile stores data; --mixed keeps no
        separate metadata. Measured on 1 and 2 devices from 110MiB to 100GiB, 0 to 6 % low."""
        raw = devices * device_size
        data = option_value(mkfs_options, "-d", "--data") or "single"
        metadata = option_value(mkfs_options, "-m", "--metadata") or ("dup" if devices == 1 else "raid1")
        mixed = any(a in ("-M", "--mixed") for a in mkfs_options) or "mixed-bg" in (
            option_value(mkfs_options, "-O", "--features") or ""
        ).split(",")
        copies = 0 if mixed else COPIES.get(metadata, 2)
        share = {"raid5": (devices - 1) / devices, "raid6": (devices - 2) / devices}.get(data, 1 / COPIES.get(data, 1))
        return max(0, int((raw - 18 * 2**20 - copies * metadata_chunk(raw)) * share))

    def before_mount(self, devices: list[str]) -> None:
        # Without udev the kernel learns of a multi-device filesystem's other members only so.
        if len(devices) > 1:
            run(["btrfs", "device", "scan", *devices])

    def after_mount(self, target, devices: list[str], mountpoint: Path) -> None:  # noqa: ANN001
        if target.nocow:
            run(["chattr", "+C", str(mountpoint)])  # files fio creates inside inherit No_COW

    def compresses(self, mount_options_effective: str | None, details: str) -> bool:
        """Mounted with compress= or compress-force= (not =no/none), as /proc/mounts shows it."""
        return btrfs_compresses(mount_options_effective)

    def compression_ratio(self, ready: Provisioned) -> CompressionRatio | None:
        return (
            btrfs_compression_ratio
            if ready.directory and self.compresses(ready.mount_options_effective, ready.details)
            else None
        )

    def bdi(self, ready: Provisioned) -> str | None:
        """Btrfs's own bdi ("btrfs-N"), not its devices' nor its anonymous st_dev's: the one
        /sys/fs/btrfs/<fsid>/bdi links to, the fsid asked of the mounted filesystem itself."""
        if ready.directory is None:
            return None
        try:
            link = SYS_FS_BTRFS / fsid(ready.directory) / "bdi"
        except OSError:  # not a Btrfs there any more, or a kernel without the ioctl: unknown
            return None
        return link.resolve().name if link.is_symlink() else None

    def snapshot(self, ready: Provisioned, name: str) -> str:
        """A read-only snapshot of the top-level subvolume (where the workload's files are) in
        `.snapshots/` of the mount: inside the filesystem, gone when the next run formats it."""
        if ready.directory is None:
            raise NoSnapshots("this btrfs target has no mounted filesystem to snapshot")
        snapshots = ready.directory / SNAPSHOTS
        snapshots.mkdir(mode=0o700, exist_ok=True)
        path = snapshots / check_snapshot_name(name)
        run(["btrfs", "subvolume", "snapshot", "-r", str(ready.directory), str(path)])
        return str(path)

    def details(self, device: str, mountpoint: Path) -> str:
        usage = run(["btrfs", "filesystem", "df", str(mountpoint)], check=False).stdout
        attributes = run(["lsattr", "-d", str(mountpoint)], check=False).stdout
        return f"{usage}\nlsattr -d {mountpoint}: {attributes.split()[0] if attributes else '?'}\n"


FILESYSTEMS.add(Btrfs(), own=True)
