from collections.abc import Sequence
from pathlib import Path

from fslab.filesystems.base import Filesystem, MountReadBack, SizeFloor
from fslab.guard.options import ZERO_ONE, Flag, Integer, Maybe, OneOf, Size, Suboptions, ToolOptions, mount_options, option_value
from fslab.system import run
from fslab.units import parse_size

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
        "-r": Suboptions({"extsize": Size(4096, 2**30, power_of_two=False)}, refused={"rtdev": "it names another device: a realtime device"}),
        "-s": Suboptions({"size": Size(512, 32768)}),
    },
    refused={
        "-f": BY_FSLAB, "-q": BY_FSLAB, "-K": BY_FSLAB,
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
        log = parse_size(asked["size"]) if asked.get("size") else max(64 * 2**20, min(device_size // 2048, 2**31))
        return max(0, device_size - log - device_size * 3 // 400 - 32 * 2**20)

    def details(self, device: str, mountpoint: Path) -> str:
        return run(["xfs_info", str(mountpoint)], check=False).stdout
