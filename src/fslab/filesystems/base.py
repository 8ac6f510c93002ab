"""What every filesystem offers fslab: create it on a device, mount it, say what it became."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from fslab.core.checks import Check, kernel_filesystems, tool_check
from fslab.core.errors import FslabError
from fslab.core.identity import kernel_table, unescape
from fslab.core.journal import Journal
from fslab.core.mounting import mount_point, proven
from fslab.core.registry import Registry
from fslab.core.system import kernel_has_module, run, tool_version
from fslab.core.units import format_size, parse_size
from fslab.model import Target
from fslab.model.options import OptionRefused, Suboptions, ToolOptions, check_arguments, check_mount_options
from fslab.model.records import OptionsApplied

if TYPE_CHECKING:
    from fslab.devices.layers import Stack
    from fslab.model.records import Records
    from fslab.monitors.space import CompressionRatio


@dataclass(frozen=True)
class Provisioned:
    """A target made ready for a workload: fio runs in `directory`, or on `top` when that is None.

    Its block devices, named structurally: `top`, the one the filesystem is mounted from (the
    first of several) or the workload writes to (raw, a zvol); `bottom`, the target's own
    devices (loop images, zram, the user's); `between`, the layers built on them (md, dm),
    bottom first, that are not `top`. `described` is the one text made of them (runs.device).
    """

    top: str
    directory: Path | None
    bottom: tuple[str, ...] = ()
    between: tuple[str, ...] = ()
    mkfs_command: list[str] = field(default_factory=list)
    mount_options_effective: str | None = None
    details: str = ""  # the filesystem's own tool describing what was created
    dataset: str | None = None  # ZFS: the dataset or volume made in fslab's pool
    filesystem: str = ""  # the kind of filesystem that made it (filesystems.FILESYSTEMS): its snapshots, for one

    @classmethod
    def on(cls, filesystem: str, stack: Stack, top: str, directory: Path | None, **made: Any) -> Provisioned:
        """What a filesystem (its kind) made on a stack of devices, `top` the device it is used through."""
        return cls(
            top=top,
            directory=directory,
            bottom=tuple(stack.bottom),
            between=tuple(d for d in stack.between if d != top),
            filesystem=filesystem,
            **made,
        )

    @property
    def described(self) -> str:
        """The stack as runs.device stores it: the bottom devices, or "top on bottom devices"."""
        bottom = " ".join(self.bottom)
        return bottom if self.top in self.bottom else f"{self.top} on {bottom}"

    @property
    def fio_location(self) -> dict:
        """Where fio works: `directory` on a filesystem, else `top` (the block device itself)."""
        return {"directory": self.directory, "device": None if self.directory else self.top}


class NoSnapshots(FslabError):
    """A snapshot asked of a filesystem that has none."""


# What a target's layers take of its image before the filesystem's device: LUKS2's 16MiB
# header, LVM's metadata and extent rounding, md's superblock and bitmap; generous.
LAYER_ALLOWANCE = 32 * 2**20


def formatted_size(target: Target, image_size: int) -> int:
    """The size of the device a target's filesystem is made on, from its image size: what its
    layers leave of it."""
    return image_size - (LAYER_ALLOWANCE if target.layers else 0)


@dataclass(frozen=True)
class Room:
    """Where a workload's files go on a target, and how much of it they may fill."""

    usable: int  # bytes
    block_device: bool = False  # no files: fio's jobs share one region of a block device
    volume: bool = False  # a volume made inside the target's devices (a zvol), not a device itself


@dataclass(frozen=True)
class SizeFloor:
    """The smallest image (per device) the filesystem's mkfs formats, and who says so."""

    size: int  # bytes
    why: str  # "mkfs.xfs formats nothing under 300MiB"

    def problem(self, size: int) -> str | None:
        return f"below {format_size(self.size)} per device: {self.why}" if size < self.size else None


def mounted_options(mountpoint: Path) -> str | None:
    """The options the kernel reports for a mount point in /proc/mounts."""
    for row in kernel_table("/proc/self/mounts"):
        if len(row) >= 4 and unescape(row[1]) == str(mountpoint):
            return os.fsdecode(row[3])
    return None


@dataclass(frozen=True)
class MountReadBack:
    """What a filesystem's mount options look like read back from /proc/mounts, measured on the
    kernel (Linux 6.x): which ones it applies without echoing them (its defaults), which it
    echoes under another name, and which shown options contradict a requested one.

    An option is NOT in effect only when the read-back contradicts it: the kernel shows its
    opposite ("nodatacow" for datacow, "discard=async" for nodiscard), another value of it
    ("data=journal" for data=ordered; "4k" and "4096" are one size, "zstd:3" is zstd), an
    option named in `contradicted_by`, or leaves out an option it always echoes when applied
    (Btrfs drops nodatacow when compress follows). A default it does not echo is in effect.
    """

    silent: frozenset[str] = frozenset()  # options applied without being echoed (defaults), as written
    silent_names: frozenset[str] = frozenset()  # options never echoed, whatever their value
    reported_as: Mapping[str, str] = field(default_factory=dict)  # option → how the kernel echoes it
    contradicted_by: Mapping[str, frozenset[str]] = field(default_factory=dict)  # beyond noX/X and other values

    @cached_property
    def with_vfs(self) -> MountReadBack:
        """This filesystem's knowledge joined with the generic options every filesystem takes
        (made once per read-back: each filesystem class has one)."""
        return MountReadBack(
            VFS_READ_BACK.silent | self.silent,
            VFS_READ_BACK.silent_names | self.silent_names,
            {**VFS_READ_BACK.reported_as, **self.reported_as},
            {**VFS_READ_BACK.contradicted_by, **self.contradicted_by},
        )

    def not_in_effect(self, requested: str, effective: str | None) -> list[str]:
        """Requested options the read-back contradicts, each with what the kernel shows instead:
        "datacow (is nodatacow)", "nodatacow (absent)"."""
        if effective is None:
            return []
        shown = effective.split(",")
        missing = []
        for option in filter(None, (o.strip() for o in requested.split(","))):
            name = self.reported_as.get(option, option)
            against = self._contradiction(option, name, shown)
            if against:
                missing.append(f"{option} (is {against})")
            elif (
                not any(_same(name, s) for s in shown)
                and name not in self.silent
                and _name(name) not in self.silent_names
            ):
                missing.append(f"{option} (absent)")
        return missing

    def _contradiction(self, option: str, name: str, shown: list[str]) -> str | None:
        key, equals, value = name.partition("=")
        for s in shown:
            s_key, s_equals, s_value = s.partition("=")
            if (
                s in self.contradicted_by.get(option, ())
                or s_key == f"no{key}"  # datacow ↔ nodatacow shown
                or (key.startswith("no") and s_key == key[2:])  # nodiscard ↔ discard=async shown
                or (
                    equals and s_equals and s_key == key and not _same_mount_value(value, s_value)
                )  # data=ordered ↔ data=journal
            ):
                return s
        return None


def _name(option: str) -> str:
    return option.partition("=")[0]


def _same(option: str, shown: str) -> bool:
    """Whether a shown option is the requested one: itself, with a level the kernel adds
    (compress=zstd → compress=zstd:3), a flag shown with its value (compress → compress=zlib:3),
    or one size written another way (allocsize=4096 → allocsize=4k)."""
    key, equals, value = option.partition("=")
    s_key, s_equals, s_value = shown.partition("=")
    if key != s_key:
        return False
    return not equals or (bool(s_equals) and _same_mount_value(value, s_value))


def _same_mount_value(value: str, shown: str) -> bool:
    """A mount option's value as the kernel shows it: also with a level it adds (zstd → zstd:3)."""
    return shown.startswith(value + ":") or same_value(value, shown)


def same_value(value: str, shown: str, *, fold_case: bool = False) -> bool:
    """Whether a value read back is the requested one: the same text (in either case, with
    `fold_case`), or one size written another way (4096 and 4k, 128k and 128K)."""
    if value == shown or (fold_case and value.lower() == shown.lower()):
        return True
    try:
        return parse_size(value) == parse_size(shown)
    except ValueError:
        return False


# The generic options (guard.options.VFS_MOUNT_OPTIONS), measured with ext4, XFS and Btrfs alike.
VFS_READ_BACK = MountReadBack(
    silent=frozenset(
        {
            "",
            "defaults",
            "rw",
            "auto",
            "async",
            "dev",
            "exec",
            "suid",
            "nouser",
            "atime",
            "diratime",
            "nolazytime",
            "nostrictatime",
            "strictatime",
        }
    ),
    contradicted_by={
        "strictatime": frozenset({"relatime", "noatime"}),
        "noatime": frozenset({"relatime"}),
        "relatime": frozenset({"noatime"}),
    },
)


class TargetFields(BaseModel):
    """The fields of a study's [[target]] table that one filesystem takes beyond every target's:
    its module declares them as a subclass (types, defaults, checks), its `fields`."""

    model_config = ConfigDict(extra="forbid")


class Filesystem:
    """A filesystem made by one mkfs command and mounted with `mount -t kind`."""

    kind: str  # its name in a study (`filesystem = "ext4"`) and in `mount -t`
    mkfs: tuple[str, ...]  # the command and the flags fslab always passes (force, quiet)
    version_command: tuple[str, ...]  # prints the mkfs tool's version
    package: str  # the Debian package that provides the tools

    nodiscard: tuple[str, ...] = ()  # mkfs's flag not to discard the device

    # What a study may ask for, checked when the study file is loaded (model/options.py);
    # None: the filesystem takes no such options.
    accepted_mkfs_options: ToolOptions | None = None
    accepted_mount_options: Suboptions | None = None
    # A target field of name = value options → what they reach and their allow-list (ZFS's
    # pool_options: zpool create -o); study_file checks those fields against these lists.
    accepted_properties: Mapping[str, tuple[str, Suboptions]] = {}
    floor: SizeFloor | None = None
    read_back: MountReadBack = VFS_READ_BACK  # how its mount options read back from /proc/mounts
    no_mount_options_hint: str = ""  # what to set instead, said where it takes no mount options

    # Target fields only this filesystem takes, checked by this model when the study file is read
    # (study_file.TargetSection); on a target of any other filesystem they are refused, saying
    # `own_fields_refusal`.
    fields: type[TargetFields] | None = None
    own_fields_refusal: str = ""

    spans_devices: bool = False  # made on several devices itself (Btrfs profiles, a ZFS pool), needing no md below
    spans_devices_with: str = ""  # what in a study spreads it over them, as a message says it

    # Whether snapshot() takes one; known before anything is formatted.
    supports_snapshots: bool = False

    @property
    def name(self) -> str:
        """What the registry holds it under: its kind."""
        return self.kind

    @property
    def own_fields(self) -> tuple[str, ...]:
        return tuple(self.fields.model_fields) if self.fields else ()

    def swept(self, own: Any) -> dict[str, list[tuple[str, Any]]]:
        """The sweeps its fields make (`own`: the target's, of `fields`): dimension → each value
        with its label in the target's name, as ZFS's properties (a list of values sweeps them):
        {"property:recordsize": [("recordsize=4k", "4k"), ("recordsize=128k", "128k")]}."""
        return {}

    def target_values(self, own: Any, chosen: Mapping[str, Any], devices: int) -> dict[str, Any]:
        """What a target of its fields `own` carries (by name: a Target attribute, or one of its
        filesystem_fields), for one value of each sweep (`chosen`: dimension → value) and its
        number of devices."""
        return own.model_dump()

    def machine_checks(self) -> list[Check]:
        """What this machine needs for the filesystem: its tools and the kernel's support."""
        in_kernel = self.kind in kernel_filesystems() or kernel_has_module(self.kind)
        return [
            tool_check(f"{self.kind} tools", self.version_command, self.package),
            Check(
                f"{self.kind} in kernel",
                in_kernel,
                "supported" if in_kernel else "not in /proc/filesystems and no module",
                f"a kernel with {self.kind} (CONFIG_{self.kind.upper()}_FS)",
            ),
        ]

    def target_problems(self, target: Target) -> list[str]:
        """What one target asks of the filesystem that this machine's cannot do (beyond machine_checks)."""
        return []

    def room(self, target: Target) -> Room:
        """Space a workload may fill on the target: what its filesystem has free right after mkfs
        and mount (free_after_mkfs), on the device its layers leave it."""
        size = formatted_size(target, target.image_size)
        devices = (
            target.devices if self.spans_devices and "md-raid1" not in target.layers else 1
        )  # md makes one device of them
        return Room(self.free_after_mkfs(size, devices, target.mkfs_options))

    def scaled(self, target: Target, full_size: int, scale: float) -> Target:
        """The target on its image scaled by --scale (`full_size` × `scale`, target.image_size),
        made as it would be at full size where mkfs or the engine would choose otherwise for the
        smaller size (the options fslab adds for that), and with what scaling changes all the
        same in its `scaling_changed` (said once in the report's header). Most make the same
        filesystem at any size (Btrfs: the same nodesize, profiles and no mixed block groups,
        measured with btrfs-progs 6.2 from 114MiB to 100GiB)."""
        return target

    def free_after_mkfs(self, device_size: int, devices: int, mkfs_options: Sequence[str]) -> int:
        """What statfs calls free (f_bavail) on a filesystem fresh from mkfs (these options) on
        `devices` devices of `device_size` each, erring low: a model of mkfs, each filesystem's
        own, tested against the real mkfs and mount at several sizes (tests/test_free_space.py).
        A model, not a measurement, so that a study is refused when it is read (`fslab run` and
        `fslab validate` alike), before anything is formatted, without root or a work directory."""
        raise NotImplementedError(f"{self.kind} has no model of its free space")

    def options_applied(self, spec: Mapping, effective: str | None, details: str) -> OptionsApplied:
        """What a run made of its target's options (`spec`, as stored), judged from its read-back:
        stored with the run, so that a report reads it without this code."""
        not_in_effect = self.not_in_effect(spec["mount_options"], spec.get("properties") or {}, effective, details)
        return OptionsApplied(self.requested_options(spec), not_in_effect, self.compresses(effective, details))

    def requested_options(self, spec: Mapping) -> str:
        """The options a stored target asked for, as the report shows them."""
        return spec["mount_options"] or "defaults"

    def compresses(self, mount_options_effective: str | None, details: str) -> bool:
        """Whether what was made compresses what is written, from its read-back (the effective
        mount options, the filesystem's own details): what the kernel or pool applied, not what
        the study asked — an engine's default counts, an option the kernel dropped does not."""
        return False

    def check_mkfs_options(self, arguments: str | Sequence[str]) -> list[str]:
        """The study's mkfs arguments, split and checked against the allow-list (OptionRefused)."""
        if self.accepted_mkfs_options is None:
            if arguments:
                made_by_mkfs = kinds_that(lambda fs: fs.accepted_mkfs_options is not None)
                raise OptionRefused(f"{self.kind} targets take no mkfs_options: only {made_by_mkfs} are made by mkfs")
            return []
        return check_arguments(self.accepted_mkfs_options, arguments)

    def check_mount_options(self, options: str) -> str:
        """The study's mount-option string, checked against the allow-list (OptionRefused)."""
        if self.accepted_mount_options is None:
            if options:
                raise OptionRefused(f"{self.kind} targets take no mount_options{self.no_mount_options_hint}")
            return options
        return check_mount_options(self.accepted_mount_options, self.kind, options)

    def size_floor(self, mkfs_arguments: Sequence[str], devices: int) -> SizeFloor | None:
        """The smallest image per device this filesystem can be made on with these arguments."""
        return self.floor

    def default_mkfs_options(self, requested: list[str]) -> list[str]:
        """Options fslab adds unless the study names them itself.

        No discard: on a loop image mkfs's discard punches holes in the image file, and the
        next run would measure the host filesystem allocating those blocks again.
        """
        return [] if any("discard" in option for option in requested) else list(self.nodiscard)

    def details(self, device: str, mountpoint: Path) -> str:
        return ""

    def not_in_effect(
        self, mount_options: str, properties: dict[str, str], effective: str | None, details: str
    ) -> list[str]:
        """What a run asked for that its read-back (/proc/mounts, or the stored details) contradicts."""
        return self.read_back.with_vfs.not_in_effect(mount_options, effective)

    def version(self) -> str | None:
        return tool_version(self.version_command)

    def compression_ratio(self, ready: Provisioned) -> CompressionRatio | None:
        """How the space monitor reads this run's compression ratio (monitors/space.py), from
        what was made (`compresses`); None where it does not compress."""
        return None

    def records(self, ready: Provisioned) -> Records | None:
        """How the filesystem writes a file's data in whole records (the traffic monitor's
        rewritten_by_commits), from what was made; None where it writes the blocks written alone."""
        return None

    def bdi(self, ready: Provisioned) -> str | None:
        """The name of the kernel's backing device (/sys/class/bdi) the filesystem's page cache
        is counted on (monitors/page_cache.py), or None where it has none or it is unknown. Most
        use the device number they are mounted with (ext4 and XFS their block device's, FUSE its
        own anonymous one): the mount point's st_dev, where a bdi is named so."""
        if ready.directory is None:
            return None
        return bdi_named(os.stat(ready.directory).st_dev)

    def sync(self, ready: Provisioned) -> None:
        """Write what the filesystem still holds of a workload's writes to its devices (a
        journal's or a transaction's commit, dirty pages): each measured window ends with it
        (runner.Windows). syncfs(2) of this filesystem alone, through coreutils' `sync -f` —
        sync(2) would write every filesystem's dirty data, and fsync(2) of its directory commits
        that directory, not the filesystem."""
        if ready.directory is None:
            raise ValueError(f"{self.kind} made no filesystem to sync: {ready.described}")
        run(["sync", "-f", str(ready.directory)])

    def empty_cache(self, journal: Journal, ready: Provisioned) -> None:
        """Empty what the filesystem caches of a workload's layout that dropping the page cache
        leaves (runner._measure: after the layout, before the measured run). The page cache is
        every kernel filesystem's: nothing more to empty."""

    def snapshot(self, ready: Provisioned, name: str) -> str:
        """Take a read-only snapshot of what the workload uses, named `name` (guard.names
        snapshot_name: fslab's, never the study's); returns what the tools call it. Snapshots
        live inside the filesystem, and go with it when the next run formats its devices or the
        pool is destroyed: none outlives the run that took it."""
        raise NoSnapshots(
            f"{self.kind} targets have no snapshots: {kinds_that(lambda fs: fs.supports_snapshots)} targets do"
        )

    def mkfs_command(self, devices: list[str], options: list[str]) -> list[str]:
        # Checked again here, where the command is built: no other way must lead to mkfs.
        return [*self.mkfs, *self.default_mkfs_options(options), *self.check_mkfs_options(options), *devices]

    def after_mount(self, target: Target, devices: list[str], mountpoint: Path) -> None:
        """Anything the target asks for once the filesystem is mounted."""

    def across_runs(self, journal: Journal) -> AbstractContextManager[None]:
        """What the filesystem keeps for all of a study run's runs, released when it ends (ZFS:
        zfs-fuse's daemon); nothing for most, whose runs each make all they use."""
        return nullcontext()

    def before_mount(self, devices: list[str]) -> None:
        """Anything the kernel must know before mounting (e.g. the other devices of a Btrfs)."""

    @contextmanager
    def provision(self, journal: Journal, stack: Stack, mountpoint: Path, target: Target) -> Iterator[Provisioned]:
        stack.assert_ours()
        devices = stack.devices
        command = self.mkfs_command(devices, list(target.mkfs_options))
        run(command)
        self.before_mount(devices)
        with mount_point(journal, mountpoint) as held:
            options = self.check_mount_options(target.mount_options) or "defaults"
            run(["mount", "-t", self.kind, "-o", options, devices[0], str(mountpoint)])
            proven(held)
            self.after_mount(target, devices, mountpoint)
            yield Provisioned.on(
                self.kind,
                stack,
                devices[0],
                mountpoint,
                mkfs_command=command,
                mount_options_effective=mounted_options(mountpoint),
                details=self.details(devices[0], mountpoint),
            )


FILESYSTEMS: Registry[Filesystem] = Registry(
    "filesystem",
    {
        "ext4": "fslab.filesystems.ext4",
        "xfs": "fslab.filesystems.xfs",
        "btrfs": "fslab.filesystems.btrfs",
        "zfs": "fslab.filesystems.zfs",
        "raw": "fslab.filesystems.raw",
    },
)


SYS_CLASS_BDI = Path("/sys/class/bdi")


def bdi_named(number: int) -> str | None:
    """The bdi named by a device number ("7:3"), if the kernel has one so named."""
    name = f"{os.major(number)}:{os.minor(number)}"
    return name if (SYS_CLASS_BDI / name).is_dir() else None


def kinds_that(can: Callable[[Filesystem], bool], last: str = "and") -> str:
    """The kinds of the filesystems registered that `can` (each loaded), as a message names them:
    "btrfs and zfs" — never a list written out that a filesystem added would make wrong."""
    kinds = [kind for kind, filesystem in FILESYSTEMS.items() if can(filesystem)]
    return f" {last} ".join([", ".join(kinds[:-1]), kinds[-1]] if len(kinds) > 1 else kinds)
