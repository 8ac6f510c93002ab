from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from fslab.core.system import run
from fslab.core.units import format_size
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.base import Filesystem, MountReadBack, SizeFloor, formatted_size
from fslab.model import Target
from fslab.model.options import (
    ZERO_ONE,
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

EXTERNAL_JOURNAL = "it names another device: an external journal"
BY_FSLAB = "fslab passes it itself"

# mke2fs's feature names (-O, man ext4); ^name turns one off.
FEATURES = Suboptions(
    {
        name: Flag()
        for name in (
            "64bit",
            "bigalloc",
            "dir_index",
            "dir_nlink",
            "ea_inode",
            "ext_attr",
            "extent",
            "extents",
            "extra_isize",
            "fast_commit",
            "filetype",
            "flex_bg",
            "has_journal",
            "huge_file",
            "inline_data",
            "large_dir",
            "large_file",
            "meta_bg",
            "metadata_csum",
            "metadata_csum_seed",
            "mmp",
            "orphan_file",
            "project",
            "quota",
            "resize_inode",
            "sparse_super",
            "sparse_super2",
            "uninit_bg",
        )
    },
    refused={"journal_dev": "it makes an external journal device, not a filesystem"},
    negatable=True,
)

MKFS_OPTIONS = ToolOptions(
    "mkfs.ext4",
    {
        "-b": OneOf(("1024", "2048", "4096")),  # the kernel mounts no block larger than a page
        "-C": Size(1024, 2**28),  # cluster size, with bigalloc
        "-E": Suboptions(
            {
                "stride": Integer(1, 2**32 - 1),
                "stripe_width": Integer(1, 2**32 - 1),
                "stripe-width": Integer(1, 2**32 - 1),
                "resize": Integer(1, 2**32 - 1),
                "lazy_itable_init": Maybe(ZERO_ONE),
                "lazy_journal_init": Maybe(ZERO_ONE),
                "packed_meta_blocks": Maybe(ZERO_ONE),
                "num_backup_sb": OneOf(("0", "1", "2")),
                "mmp_update_interval": Integer(1, 300),
                "orphan_file_size": Size(4096, 2**30, power_of_two=False),
                "quotatype": Matches(
                    r"(usr|grp|prj)quota(:(usr|grp|prj)quota){0,2}", "usrquota, grpquota or prjquota, joined by ':'"
                ),
                "discard": Flag(),
                "nodiscard": Flag(),
            },
            refused={
                "assume_storage_prezeroed": "fslab's images are filled with random data, not "
                "zeros: the filesystem would read garbage as metadata",
                "offset": "it places the filesystem inside the device; fslab gives the whole image",
            },
        ),
        "-G": Integer(1, 2**20),  # flex_bg group size
        "-g": Integer(256, 65528),  # blocks per group
        "-i": Integer(1024, 2**26),  # bytes per inode
        "-I": OneOf(("128", "256", "512", "1024")),  # inode size
        "-J": Suboptions(
            {"size": Integer(1, 10240000), "fast_commit_size": Integer(1, 10240000)},
            refused={"device": EXTERNAL_JOURNAL, "location": "fslab leaves the journal where mkfs puts it"},
        ),
        "-j": Flag(),
        "-m": Integer(0, 50),  # reserved blocks, percent
        "-N": Integer(16, 2**32 - 1),  # number of inodes
        "-O": FEATURES,
        "-T": OneOf(("default", "small", "floppy", "news", "largefile", "largefile4", "big", "huge")),
        "-e": OneOf(("continue", "remount-ro"), refused={"panic": "an error would panic the host"}),
    },
    refused={
        "-F": BY_FSLAB,
        "-q": BY_FSLAB,
        "-t": "the target's filesystem field says what is made",
        "-d": "it names a directory to copy in",
        "-l": "it names a file (a bad-block list)",
        "-z": "it names a file (an undo file)",
        "-M": "it names a directory",
        "-S": "it writes superblocks only: a recovery tool, not a new filesystem",
        "-n": "it makes nothing (a dry run), and the run would fail at mount",
    },
)

MOUNT_OPTIONS = mount_options(
    {
        "data": OneOf(("journal", "ordered", "writeback")),
        "commit": Integer(0, 86400),  # seconds
        "barrier": Maybe(ZERO_ONE),
        "nobarrier": Flag(),
        "journal_checksum": Flag(),
        "nojournal_checksum": Flag(),
        "journal_async_commit": Flag(),  # with data=writeback or journal; the kernel refuses it with data=ordered
        "journal_ioprio": Integer(0, 7),
        "delalloc": Flag(),
        "nodelalloc": Flag(),
        "dioread_lock": Flag(),
        "dioread_nolock": Flag(),
        "inode_readahead_blks": Size(0, 2**30, units=""),
        "stripe": Integer(0, 2**32 - 1),
        "max_batch_time": Integer(0, 10**7),  # microseconds
        "min_batch_time": Integer(0, 10**7),
        "discard": Flag(),
        "nodiscard": Flag(),
        "errors": OneOf(("continue", "remount-ro"), refused={"panic": "an error would panic the host"}),
        "data_err": OneOf(("ignore", "abort")),
        "auto_da_alloc": Maybe(ZERO_ONE),
        "noauto_da_alloc": Flag(),
        "block_validity": Flag(),
        "noblock_validity": Flag(),
        "init_itable": Maybe(Integer(0, 1000)),
        "noinit_itable": Flag(),
        "max_dir_size_kb": Integer(0, 2**32 - 1),
        "nombcache": Flag(),
        "mb_optimize_scan": ZERO_ONE,
        "prefetch_block_bitmaps": Flag(),
        "no_prefetch_block_bitmaps": Flag(),
        "acl": Flag(),
        "noacl": Flag(),
        "user_xattr": Flag(),
    },
    refused={
        "journal_path": "it names a file: an external journal",
        "journal_dev": EXTERNAL_JOURNAL,
        "usrjquota": "it names a quota file",
        "grpjquota": "it names a quota file",
        "jqfmt": "it goes with usrjquota and grpjquota, which name files",
        "sb": "it reads a backup superblock: a recovery option",
        "noload": "it skips the journal's recovery",
        "norecovery": "it skips the journal's recovery",
    },
)

# Measured on Linux 6.18: mount with each option alone, read /proc/mounts.
READ_BACK = MountReadBack(
    silent=frozenset(
        {
            "barrier",
            "delalloc",
            "journal_checksum",
            "auto_da_alloc",
            "block_validity",
            "dioread_nolock",
            "acl",
            "user_xattr",
            "commit=5",
            "commit=0",
            "errors=continue",
            "data_err=ignore",
            "init_itable",
            "init_itable=10",
            "nodiscard",
            "mb_optimize_scan=1",
            "prefetch_block_bitmaps",
            "max_batch_time=15000",
            "min_batch_time=0",
            "inode_readahead_blks=32",
            "stripe=0",
            "max_dir_size_kb=0",
            "data=ordered",  # data=ordered is echoed when asked for; the default either way
        }
    ),
    silent_names=frozenset({"journal_ioprio"}),
    reported_as={
        "barrier=0": "nobarrier",
        "barrier=1": "barrier",
        "auto_da_alloc=0": "noauto_da_alloc",
        "auto_da_alloc=1": "auto_da_alloc",
        "dioread_lock": "nodioread_nolock",
    },
)


# The usage type mke2fs picks by the filesystem's size when -T does not name one (man mke2fs),
# and each type's block size and bytes per inode (/etc/mke2fs.conf, e2fsprogs 1.47).
USAGE_TYPES = (
    (3 * 2**20, "floppy"),
    (512 * 2**20, "small"),
    (4 * 2**40, "default"),
    (16 * 2**40, "big"),
    (2**63, "huge"),
)
TYPES = {
    "floppy": (1024, 8192),
    "small": (1024, 4096),
    "default": (4096, 16384),
    "news": (4096, 4096),
    "largefile": (4096, 2**20),
    "largefile4": (4096, 4 * 2**20),
    "big": (4096, 32768),
    "huge": (4096, 65536),
}


def usage_type(device_size: int, mkfs_options: Sequence[str]) -> str:
    """The usage type mke2fs makes a filesystem of: -T's, else the one for its size."""
    return option_value(mkfs_options, "-T") or next(kind for limit, kind in USAGE_TYPES if device_size < limit)


def _journal_bytes(blocks: int, block: int, asked: str | None, features: str) -> int:
    """The journal mke2fs makes: -J size= (MiB), none with ^has_journal, else its default by
    the filesystem's blocks (ext2fs_default_journal_size)."""
    if "^has_journal" in features.split(","):
        return 0
    if asked and asked.startswith("size="):
        return int(asked.split(",")[0].removeprefix("size=")) * 2**20
    for limit, journal in (
        (2048, 0),
        (32768, 1024),
        (256 * 1024, 4096),
        (512 * 1024, 8192),
        (4096 * 1024, 16384),
        (8192 * 1024, 32768),
        (16384 * 1024, 65536),
        (32768 * 1024, 131072),
    ):
        if blocks < limit:
            return journal * block
    return 262144 * block


class Ext4(Filesystem):
    kind = "ext4"
    mkfs = ("mkfs.ext4", "-F", "-q")
    version_command = ("mke2fs", "-V")
    package = "e2fsprogs"
    nodiscard = ("nodiscard",)  # an -E suboption, joined with the others below
    accepted_mkfs_options = MKFS_OPTIONS
    accepted_mount_options = MOUNT_OPTIONS
    read_back = READ_BACK
    # Measured with mkfs.ext4 -q on a sparse image (e2fsprogs 1.47): 103KiB fails, 104KiB works.
    floor = SizeFloor(104 * 2**10, "mkfs.ext4 makes no filesystem smaller")

    def free_after_mkfs(self, device_size: int, devices: int, mkfs_options: Sequence[str]) -> int:
        """The device less mke2fs's inode tables, journal and reserved blocks (-m, 5 %), what
        ext4 holds back (2 %, at most 4096 blocks), and 0.5 % + 2MiB for the rest (group
        descriptors, bitmaps, the blocks kept to grow): within 0.5 % of the truth from 8MiB to 100GiB."""
        block, inode_ratio = TYPES[usage_type(device_size, mkfs_options)]
        block = int(option_value(mkfs_options, "-b") or block)
        blocks = device_size // block
        inodes = int(
            option_value(mkfs_options, "-N") or device_size // int(option_value(mkfs_options, "-i") or inode_ratio)
        )
        inode_tables = inodes * int(option_value(mkfs_options, "-I") or 256)
        journal = _journal_bytes(
            blocks, block, option_value(mkfs_options, "-J"), option_value(mkfs_options, "-O") or ""
        )
        reserved = blocks * int(option_value(mkfs_options, "-m") or 5) // 100 * block
        held_back = min(blocks // 50, 4096) * block
        return max(0, device_size - inode_tables - journal - reserved - held_back - device_size // 200 - 2 * 2**20)

    def scaled(self, target: Target, full_size: int, scale: float) -> Target:
        """mke2fs picks its usage type by size (1KiB blocks and an inode every 4KiB under 512MiB):
        a scaled image is made with the full size's type (-T), unless the study names one or
        sets what the types set (-b, and -i or -N) itself. Its journal, sized by block count,
        shrinks with the image; below 2048 blocks mke2fs makes none, which is said."""
        options = target.mkfs_options
        full, size = formatted_size(target, full_size), formatted_size(target, target.image_size)
        sets_all = option_value(options, "-b") and (option_value(options, "-i") or option_value(options, "-N"))
        if not option_value(options, "-T") and not sets_all and usage_type(full, options) != usage_type(size, options):
            options = (*options, "-T", usage_type(full, options))
        block = int(option_value(options, "-b") or TYPES[usage_type(size, options)][0])
        journal_asked, features = option_value(options, "-J"), option_value(options, "-O") or ""
        changed: tuple[str, ...] = ()
        if (
            _journal_bytes(size // block, block, journal_asked, features)
            == 0
            < _journal_bytes(full // block, block, journal_asked, features)
        ):
            changed = (
                f"no journal: mkfs.ext4 makes none on {size // block} blocks of "
                f"{format_size(block)} (under 2048), and the full size's {format_size(full)} has one",
            )
        return replace(target, mkfs_options=options, scaling_changed=(*target.scaling_changed, *changed))

    def default_mkfs_options(self, requested: list[str]) -> list[str]:
        """ext4's are all -E suboptions ("nodiscard", …), not arguments: mkfs_command joins
        them with the study's own -E suboptions into the one -E mke2fs keeps."""
        # mkfs.ext4 defers inode-table and journal zeroing to a kernel thread that would run
        # inside the measured window; do it up front unless the study says otherwise.
        extended = super().default_mkfs_options(requested)
        if not any("lazy_itable_init" in o or "lazy_journal_init" in o for o in requested):
            extended.insert(0, "lazy_itable_init=0,lazy_journal_init=0")
        return extended

    def mkfs_command(self, devices: list[str], options: list[str]) -> list[str]:
        # mke2fs keeps only the last -E it is given: the study's suboptions join fslab's in one,
        # or `-E stride=16` would silently drop nodiscard and the up-front inode-table zeroing.
        checked = self.check_mkfs_options(options)
        extended = [value for flag, value in zip(checked, checked[1:]) if flag == "-E"]
        rest = [arg for i, arg in enumerate(checked) if arg != "-E" and (i == 0 or checked[i - 1] != "-E")]
        joined = ",".join([*self.default_mkfs_options(checked), *extended])
        return [*self.mkfs, *(["-E", joined] if joined else []), *rest, *devices]

    def details(self, device: str, mountpoint: Path) -> str:
        return run(["dumpe2fs", "-h", device], check=False).stdout


FILESYSTEMS.add(Ext4(), own=True)
