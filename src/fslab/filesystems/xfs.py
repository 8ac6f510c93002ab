from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from fslab.core.system import run
from fslab.core.units import format_size, parse_size
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.base import Filesystem, MountReadBack, SizeFloor, formatted_size
from fslab.model import Target
from fslab.model.options import (
    ZERO_ONE,
    Flag,
    Integer,
    Maybe,
    OneOf,
    Size,
    Suboptions,
    ToolOptions,
    mount_options,
    option_value,
)

BY_FSLAB = "fslab passes it itself"

# mkfs.xfs sizes take a unit (k, m, g; s for sectors and b for blocks are left out) or bytes.
MKFS_OPTIONS = ToolOptions(
    "mkfs.xfs",
    {
        "-b": Suboptions({"size": Size(1024, 65536)}),
        "-d": Suboptions(
            {
                "agcount": Integer(1, 2**31),
                "agsize": Size(16 * 2**20, 2**40, power_of_two=False),
                "su": Size(512, 2**30, power_of_two=False),
                "sw": Integer(1, 2**16),
                "sunit": Integer(0, 2**31),
                "swidth": Integer(0, 2**31),
                "noalign": Maybe(ZERO_ONE),
                "size": Size(300 * 2**20, 2**50, units="kmgt", power_of_two=False),
            },
            refused={"file": "it makes the data section a regular file", "name": "it names a file or device"},
        ),
        "-i": Suboptions(
            {
                "size": Size(256, 2048),
                "perblock": Integer(1, 64),
                "maxpct": Integer(0, 100),
                "align": ZERO_ONE,
                "projid32bit": ZERO_ONE,
                "sparse": ZERO_ONE,
                "nrext64": ZERO_ONE,
            }
        ),
        "-l": Suboptions(
            {
                "size": Size(64 * 2**20, 2**31, power_of_two=False),  # xfsprogs 5.19 and later: at least 64MiB
                "version": OneOf(("2",)),
                "su": Size(512, 256 * 2**10, power_of_two=False),
                "sunit": Integer(0, 512),
                "lazy-count": ZERO_ONE,
                "internal": Maybe(OneOf(("1",))),
                "agnum": Integer(0, 2**31),
            },
            refused={"logdev": "it names another device: an external log"},
        ),
        "-m": Suboptions(
            {name: ZERO_ONE for name in ("crc", "finobt", "rmapbt", "reflink", "inobtcount", "bigtime")},
            refused={"uuid": "a fixed UUID can collide with another filesystem's"},
        ),
        "-n": Suboptions({"size": Size(512, 65536), "version": OneOf(("2", "ci")), "ftype": ZERO_ONE}),
        "-r": Suboptions(
            {"extsize": Size(4096, 2**30, power_of_two=False)},
            refused={"rtdev": "it names another device: a realtime device"},
        ),
        "-s": Suboptions({"size": Size(512, 32768)}),
    },
    refused={
        "-f": BY_FSLAB,
        "-q": BY_FSLAB,
        "-K": BY_FSLAB,
        "-c": "it names a file (a configuration file)",
        "-p": "it names a file (a prototype file)",
        "-N": "it makes nothing (a dry run), and the run would fail at mount",
    },
)

MOUNT_OPTIONS = mount_options(
    {
        "allocsize": Size(4096, 2**30),
        "discard": Flag(),
        "nodiscard": Flag(),
        "filestreams": Flag(),
        "inode32": Flag(),
        "inode64": Flag(),
        "largeio": Flag(),
        "nolargeio": Flag(),
        "logbufs": Integer(2, 8),
        "logbsize": Size(16384, 262144, units="k"),
        "noalign": Flag(),
        "swalloc": Flag(),
        "wsync": Flag(),
        "sunit": Integer(1, 2**31),  # with swidth, on a filesystem made with -d su/sw or sunit/swidth
        "swidth": Integer(1, 2**31),
        "nouuid": Flag(),
        "grpid": Flag(),
        "nogrpid": Flag(),
    },
    refused={
        "logdev": "it names another device: an external log",
        "rtdev": "it names another device: a realtime device",
        "barrier": "XFS dropped it in Linux 4.19, and the kernel refuses the mount",
        "nobarrier": "XFS dropped it in Linux 4.19, and the kernel refuses the mount",
        "norecovery": "it skips the log's recovery, and needs a read-only mount",
    },
)

# Measured on Linux 6.18: XFS echoes inode64, logbufs=8 and logbsize=32k (sizes as 4k, 256k).
READ_BACK = MountReadBack(silent=frozenset({"nodiscard", "nolargeio", "nogrpid"}))


# mkfs.xfs 6.1 on one device (measured from 300MiB to 15TiB): a log of 1/2048 of the filesystem,
# at least 64MiB and at most 521728 blocks of 4KiB; 4 allocation groups up to 4TiB, above that
# as many as it takes of at most 1TiB (2^28 - 1 blocks), a last one under 16MiB dropped.
LOG_RANGE = (64 * 2**20, 521728 * 4096)
AG_LIMIT = (2**28 - 1) * 4096


def default_log_bytes(device_size: int) -> int:
    """The log mkfs.xfs makes when -l size= does not say."""
    return max(LOG_RANGE[0], min(device_size // 2048, LOG_RANGE[1]))


def default_ag_count(device_size: int) -> int:
    """The allocation groups mkfs.xfs makes on one device when -d agcount= or agsize= does not say."""
    if device_size < 4 * 2**40:
        return 4
    whole, rest = divmod(device_size, AG_LIMIT)
    return whole + (rest >= 16 * 2**20)


class Xfs(Filesystem):
    kind = "xfs"
    mkfs = ("mkfs.xfs", "-f", "-q")
    nodiscard = ("-K",)
    version_command = ("mkfs.xfs", "-V")
    package = "xfsprogs"
    accepted_mkfs_options = MKFS_OPTIONS
    accepted_mount_options = MOUNT_OPTIONS
    read_back = READ_BACK
    # xfsprogs 5.19 and later refuse filesystems under 300MiB (measured: 299MiB fails, 300MiB works).
    floor = SizeFloor(300 * 2**20, "mkfs.xfs makes no filesystem smaller (xfsprogs 5.19 and later)")

    def free_after_mkfs(self, device_size: int, devices: int, mkfs_options: Sequence[str]) -> int:
        """The device less its log (-l size=, else mkfs.xfs's 64MiB, or 1/2048 of a larger
        filesystem) and 0.75 % + 32MiB for the rest (allocation groups' headers and btrees, the
        blocks XFS reserves): measured from 300MiB to 100GiB, 0 to 6 % below the truth."""
        asked = dict(o.partition("=")[::2] for o in (option_value(mkfs_options, "-l") or "").split(","))
        log = parse_size(asked["size"]) if asked.get("size") else default_log_bytes(device_size)
        return max(0, device_size - log - device_size * 3 // 400 - 32 * 2**20)

    def scaled(self, target: Target, full_size: int, scale: float) -> Target:
        """The same filesystem at any size under 128GiB; from a larger full size, its log and
        (from 4TiB) its allocation groups shrink with the image unless the study sets them
        (-l size=, -d agcount= or agsize=): said, not kept (a full-size log may not fit)."""
        full, size = formatted_size(target, full_size), formatted_size(target, target.image_size)
        log = dict(o.partition("=")[::2] for o in (option_value(target.mkfs_options, "-l") or "").split(","))
        data = dict(o.partition("=")[::2] for o in (option_value(target.mkfs_options, "-d") or "").split(","))
        changed = []
        if not log.get("size") and default_log_bytes(size) != default_log_bytes(full):
            changed.append(
                f"a log of {format_size(default_log_bytes(size))}, not "
                f"the full size's {format_size(default_log_bytes(full))}"
            )
        if not data.keys() & {"agcount", "agsize"} and default_ag_count(size) != default_ag_count(full):
            changed.append(f"{default_ag_count(size)} allocation groups, not the full size's {default_ag_count(full)}")
        return replace(target, scaling_changed=(*target.scaling_changed, *changed))

    def details(self, device: str, mountpoint: Path) -> str:
        return run(["xfs_info", str(mountpoint)], check=False).stdout


FILESYSTEMS.add(Xfs(), own=True)
