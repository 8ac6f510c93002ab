"""ZFS: a pool on fslab's images, one dataset mounted where the workload runs.

The same `zpool` and `zfs` commands drive the OpenZFS kernel module and zfs-fuse (real ZFS
code through FUSE, pool version 23). Which engine ran is part of every ZFS result: a FUSE
result must never pass for a kernel one; zfs_engine.py finds it and readies it for each run.
A pool is named for its work directory and known by its guid: fslab destroys no other.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, field_validator

from fslab.core.checks import Check
from fslab.core.errors import Refused
from fslab.core.journal import Entry, Held, Journal, releaser
from fslab.core.mounting import mount_point, proven
from fslab.core.names import check_snapshot_name, kernel_name, workdir_tag
from fslab.core.scratch import scratch_directory
from fslab.core.system import CommandError, joined, run
from fslab.core.units import format_size, parse_size, scaled_size
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.base import Filesystem, Provisioned, Room, SizeFloor, TargetFields, mounted_options, same_value
from fslab.filesystems.zfs_engine import (
    KERNEL_ONLY,
    SCALED_ARC_FLOOR,
    Daemon,
    Engine,
    FuseDaemons,
    NotSupported,
    arc_stat,
    daemon_answers,
    engine,
    kept_daemons,
    kernel_arc_max,
    runs_on_fuse,
)
from fslab.model import ARC_FLOOR_NOTE, Target, arc_caches_data
from fslab.model.options import ON_OFF, Matches, OneOf, Size, Suboptions, check_properties
from fslab.model.records import Records
from fslab.monitors.space import CompressionRatio, zfs_compresses, zfs_compression_ratio

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir
    from fslab.devices.layers import Stack


@contextmanager
def _engine_ready(
    found: Engine, journal: Journal, arc_max: int | None, kept: FuseDaemons | None
) -> Iterator[Daemon | None]:
    """The engine ready for one run: the kernel module's ARC capped, or zfs-fuse to this fslab
    alone — the daemon the study run keeps (`kept`), else one started for this run alone.
    Yields the zfs-fuse daemon (None for the kernel module)."""
    if not found.fuse:
        with kernel_arc_max(journal, arc_max):
            yield None
        return
    with ExitStack() as own:
        daemons = kept if kept is not None else own.enter_context(kept_daemons(journal))
        daemon = daemons.ready(arc_max)
        if daemon.started is not None:
            # Pools of this work directory's in fslab's own daemon are leftovers: one a run failed
            # to destroy, or one a killed fslab left, which the daemon re-imported from its cache
            # when it started. They go before the run makes its own (no other fslab uses
            # zfs-fuse meanwhile: zfs_turn).
            for pool in run(["zpool", "list", "-H", "-o", "name"]).stdout.split():
                if pool.startswith(workdir_tag(journal.workdir.root)):
                    destroy_pool(Entry("zpool", pool), journal.workdir)
        yield daemon


def pool_guid(pool: str) -> str:
    """The pool's guid: what tells the pool fslab made from another of the same name."""
    return pool_property(pool, "guid")


def pool_property(pool: str, name: str) -> str:
    """A pool property's value. (zfs-fuse's `zpool get` knows neither -H nor -o: the value is the
    third column of its one row.)"""
    rows = run(["zpool", "get", name, pool]).stdout.splitlines()
    return rows[-1].split()[2]


def sync_pool(pool: str) -> None:
    """Write the pool's transaction group to its devices, and wait for it: `zpool sync` on
    OpenZFS. zfs-fuse (pool version 23) has no `zpool sync`, and syncfs(2) reaches no FUSE
    daemon; setting a pool property is a sync task, which waits for the transaction group it
    joins (and every dirty one before it) to be written: failmode, set to the value it has —
    it changes nothing but the pool's history, a few hundred bytes."""
    if runs_on_fuse():
        failmode = pool_property(pool, "failmode")
        if failmode not in ("wait", "continue", "panic"):  # zpool's own answer, checked all the same before it is set
            raise Refused(
                f"zpool get failmode {pool} answered {failmode!r}, not a "
                "failmode: fslab does not set it, and cannot sync the pool"
            )
        run(["zpool", "set", f"failmode={failmode}", pool])
    else:
        run(["zpool", "sync", pool])


_POOL = r"fslab_[0-9a-f]{5}_[0-9a-f]{8}"  # kernel_name's
_DATASET = re.compile(_POOL + "/data")  # the one dataset (or volume) fslab makes in its pool


@releaser("zpool")
def destroy_pool(entry: Entry, workdir: Workdir) -> None:
    """Destroy fslab's pool if it exists — named for this work directory, and the very pool made
    (its guid) — retrying while zfs-fuse calls it busy for a moment after an unmount."""
    pool = entry.ident
    if not re.fullmatch(_POOL, pool) or not pool.startswith(workdir_tag(workdir.root)):
        raise Refused(f"{pool} is not a pool name fslab gives in {workdir.root}")
    if shutil.which("zpool") is None or not daemon_answers():
        return  # no ZFS running: the pool waits in zfs-fuse's cache, cleared when fslab next starts it
    deadline = time.monotonic() + 15
    while run(["zpool", "list", "-H", pool], check=False).returncode == 0:
        guid = pool_guid(pool)
        if "guid" in entry.proof and guid != str(entry.proof["guid"]):
            raise Refused(f"pool {pool} is not the one fslab made (guid {guid}, not {entry.proof['guid']})")
        try:
            run(["zpool", "destroy", "-f", pool])
        except CommandError as exc:
            if "busy" not in exc.stderr or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@dataclass(frozen=True)
class MadePool:
    """A pool a run made, as a run's later steps need it: its journal entry (its guid proven) and
    its dataset's mount point's (None: a volume)."""

    pool: Held
    mount: Held | None


def reimport_pool(journal: Journal, made: MadePool) -> None:
    """Export the pool fslab made and import it again — that very pool, by the guid proven when it
    was made, and still in no cache file. Closing a pool flushes its buffers from the ARC
    (dsl_pool_close → arc_flush), so what the pool holds is read from its devices again. The
    dataset is mounted again where it was, and that mount proven anew.

    zpool import records each device at the path it found it by, so a scan (`-d`) of links to the
    devices would leave the pool naming links, gone once removed: `zpool status` and the guard
    against formatting a pool member would no longer see its devices, nor could ZFS open one again.
    The import reads the pool's configuration instead (`-c`, no scan) from a cache file it wrote
    for this pool alone while open, in a scratch directory: the pool keeps its devices' paths."""
    pool, guid = made.pool.ident, str(made.pool.proof.get("guid", ""))
    if not re.fullmatch(_POOL, pool) or not pool.startswith(workdir_tag(journal.workdir.root)):
        raise Refused(f"{pool} is not a pool name fslab gives in {journal.workdir.root}: not exported")
    if not guid.isdigit():
        raise Refused(f"pool {pool}: fslab recorded no guid of it ({guid!r}): not exported")
    if (found := pool_guid(pool)) != guid:
        raise Refused(f"pool {pool} is not the one fslab made (guid {found}, not {guid}): not exported")
    with scratch_directory(journal) as scratch:
        written, kept = scratch / "written.cache", scratch / "pool.cache"
        run(["zpool", "set", f"cachefile={written}", pool])
        shutil.copyfile(written, kept)  # the pool leaves the file it is in when exported, or set to none
        run(["zpool", "set", "cachefile=none", pool])
        _while_busy(["zpool", "export", pool])
        run(["zpool", "import", "-c", str(kept), "-o", "cachefile=none", guid])
    if pool_guid(pool) != guid:
        raise RuntimeError(f"zpool import of guid {guid} did not bring back pool {pool}")
    if made.mount is not None:
        proven(made.mount)


def _while_busy(argv: list[str], seconds: float = 15) -> None:
    """Run a zpool command, again while zfs-fuse calls the pool busy (it does for a moment after
    its files are closed)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            run(argv)
            return
        except CommandError as exc:
            if "busy" not in exc.stderr or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


NAMES_A_PATH = "it names a path"
PANIC = "an I/O failure would panic the host"

# zpool create -o: properties zfs-fuse (pool version 23) and OpenZFS both know.
POOL_OPTIONS = Suboptions(
    {
        "ashift": OneOf(("9", "10", "11", "12", "13", "14", "15", "16")),
        "autoexpand": ON_OFF,
        "autoreplace": ON_OFF,
        "delegation": ON_OFF,
        "listsnapshots": ON_OFF,
        "failmode": OneOf(("wait", "continue"), refused={"panic": PANIC}),
    },
    refused={
        "altroot": NAMES_A_PATH,
        "cachefile": f"{NAMES_A_PATH}: fslab's pools are in no cache file, so nothing imports them again",
        "bootfs": "it names a dataset to boot from",
        "version": "fslab makes pools of the engine's own version",
    },
)

CACHE = OneOf(("all", "none", "metadata"))
ENCRYPTION = ("off", "on", "aes-128-ccm", "aes-192-ccm", "aes-256-ccm", "aes-128-gcm", "aes-192-gcm", "aes-256-gcm")
KEY_BY_FSLAB = (
    "fslab generates each encrypted dataset's key itself "
    "(keyformat=raw, given on zfs's standard input, kept in no file)"
)
BLOCK_SIZE = Size(512, 16 * 2**20, units="km")
# zfs create -o. Some values need OpenZFS (sync, logbias' throughput, lz4, zstd, …); zfs-fuse
# refuses them at zfs create, and the run fails with zfs's own message.
DATASET_PROPERTIES = Suboptions(
    {
        "recordsize": BLOCK_SIZE,
        "volblocksize": Size(512, 128 * 2**10, units="k"),
        "compression": Matches(
            r"on|off|lzjb|zle|lz4|gzip(-[1-9])?|zstd(-(1[0-9]|[1-9]))?|zstd-fast(-([1-9]|10|20|30|40|50|60|70|80|90|100|500|1000))?",
            "on, off, lzjb, zle, lz4, gzip, gzip-1 … gzip-9, zstd, zstd-1 … zstd-19 or zstd-fast[-N]",
        ),
        "checksum": OneOf(("on", "off", "fletcher2", "fletcher4", "sha256", "sha512", "skein", "edonr", "blake3")),
        "dedup": Matches(
            r"on|off|verify|(sha256|sha512|skein|edonr|blake3)(,verify)?",
            "on, off, verify, or a checksum (sha256, …) with an optional ',verify'",
        ),
        "atime": ON_OFF,
        "relatime": ON_OFF,
        "sync": OneOf(("standard", "always", "disabled")),
        "logbias": OneOf(("latency", "throughput")),
        "primarycache": CACHE,
        "secondarycache": CACHE,
        "copies": OneOf(("1", "2", "3")),
        "xattr": OneOf(("on", "off", "sa", "dir")),
        "redundant_metadata": OneOf(("all", "most", "some", "none")),
        "dnodesize": OneOf(("legacy", "auto", "1k", "2k", "4k", "8k", "16k")),
        # Native encryption (OpenZFS 0.8+), keyed by fslab: see `zfs_create`.
        "encryption": OneOf(ENCRYPTION),
        "keyformat": OneOf(("raw",), refused={f: KEY_BY_FSLAB for f in ("passphrase", "hex")}),
    },
    refused={
        "mountpoint": f"{NAMES_A_PATH}: fslab mounts the dataset in its work directory",
        "canmount": "fslab mounts the dataset itself",
        "sharenfs": "it shares the dataset over NFS, running the system's share commands",
        "sharesmb": "it shares the dataset over SMB, running the system's share commands",
        "keylocation": f"it names a file or URL to read a key from; {KEY_BY_FSLAB}",
        "pbkdf2iters": f"it derives a key from a passphrase; {KEY_BY_FSLAB}",
        "readonly": "a read-only dataset fails every write workload",
        "zoned": "it hands the dataset to a container",
        "volsize": "fslab sizes the volume from the pool",
    },
)

# SPA_MINDEVSIZE: zpool refuses a device under 64MiB.
FLOOR = SizeFloor(64 * 2**20, "zpool create refuses smaller devices")


def property_text(value: str | int | float | bool) -> str:
    """How zfs and zpool expect a value: on/off for booleans, the rest as written."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def encrypted(properties: Mapping[str, str]) -> bool:
    return properties.get("encryption", "off") != "off"


def zfs_create(argv: list[str], properties: Mapping[str, str]) -> None:
    """Run `zfs create` (dataset_command's); an encrypted dataset gets a fresh 32-byte key from the
    system's random source on its standard input (keyformat=raw with keylocation=prompt, zfs's
    default, is read from stdin when no terminal is attached), overwritten in fslab's memory as
    soon as zfs has it. No file and no argument list ever holds the key; the kernel keeps it
    loaded until the pool is destroyed at the end of the run, after which nothing reads the data."""
    if not encrypted(properties):
        run(argv)
        return
    key = bytearray(secrets.token_bytes(32))
    try:
        run(argv, stdin=key)
    finally:
        key[:] = bytes(len(key))


def check_pool_options(options: dict[str, str]) -> dict[str, str]:
    return check_properties(POOL_OPTIONS, "zpool property", options)


def check_dataset_properties(properties: dict[str, str]) -> dict[str, str]:
    return check_properties(DATASET_PROPERTIES, "zfs property", properties)


PropertyValue = str | int | float | bool


def _size(value: str) -> str:
    parse_size(value)  # says what is wrong
    return value


class ZfsFields(TargetFields):
    """What a ZFS target may set beyond every target's fields."""

    vdev: Literal["mirror", "stripe"] | None = None  # how the devices form the pool (default: a mirror of several)
    pool_options: dict[str, PropertyValue] = {}  # zpool create -o (ashift, …)
    properties: dict[str, PropertyValue | list[PropertyValue]] = {}  # dataset properties (zfs create -o); a list sweeps
    zvol: bool = False  # the workload runs on a volume (a block device), not a dataset
    arc_max: Annotated[str, AfterValidator(_size)] | None = None  # a cap on the ARC for the run

    @field_validator("pool_options")
    @classmethod
    def _pool_options(cls, value: dict[str, PropertyValue]) -> dict[str, PropertyValue]:
        check_pool_options({name: property_text(v) for name, v in value.items()})
        return value

    @field_validator("properties")
    @classmethod
    def _properties(
        cls, value: dict[str, PropertyValue | list[PropertyValue]]
    ) -> dict[str, PropertyValue | list[PropertyValue]]:
        problems: dict[str, None] = {}  # every value of every sweep checked, each refusal said once
        for name, values in value.items():
            for one in _as_list(values):
                try:
                    check_dataset_properties({name: property_text(one)})
                except ValueError as exc:
                    problems[str(exc)] = None
        if problems:
            raise ValueError("; ".join(problems))
        if "keyformat" in value and "off" in [property_text(one) for one in _as_list(value.get("encryption", "off"))]:
            raise ValueError(
                "keyformat goes with encryption (keyformat=raw is fslab's, and the default): set "
                'encryption = "aes-256-gcm" (or another cipher) on every value, or drop keyformat'
            )
        return value


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


class Zfs(Filesystem):
    kind = "zfs"
    package = "zfs-fuse"  # Debian's; OpenZFS's is zfsutils-linux with its kernel module
    floor = FLOOR
    no_mount_options_hint = ": set ZFS dataset properties instead"
    accepted_properties = {
        "pool_options": ("zpool create -o", POOL_OPTIONS),
        "properties": ("zfs create -o", DATASET_PROPERTIES),
    }
    fields = ZfsFields
    own_fields_refusal = 'properties, pool_options, vdev, zvol and arc_max are for ZFS targets (filesystem = "zfs")'
    supports_snapshots = True
    spans_devices = True

    # The zfs-fuse daemon the study run under way keeps for its ZFS runs (across_runs); None
    # outside one, where each provision starts and stops a daemon of its own. FILESYSTEMS holds
    # one Zfs, and a fslab process runs one study run at a time.
    _kept: FuseDaemons | None = None
    # The pools the runs under way made, by name: what empty_cache exports and imports again.
    _made: dict[str, MadePool] = {}

    @contextmanager
    def across_runs(self, journal: Journal) -> Iterator[None]:
        """One zfs-fuse daemon for all the study run's ZFS runs, stopped when it ends (nothing
        is started before a ZFS run asks; the kernel module needs none)."""
        with kept_daemons(journal) as kept:
            self._kept = kept
            try:
                yield
            finally:
                self._kept = None

    def version(self) -> str | None:
        found = engine()
        return found.describe() if found else None

    def machine_checks(self) -> list[Check]:
        """The engine: optional until a study asks (its targets are then unsupported without it)."""
        found = engine()
        fix = "apt-get install zfs-fuse (or OpenZFS's zfsutils-linux with its kernel module)"
        if found is None and os.environ.get(KERNEL_ONLY) == "1":
            fix = "fslab lab build KERNEL (OpenZFS for that kernel), if one fits it"
            return [Check("zfs engine", False, "no OpenZFS kernel module in this lab VM", fix, required=False)]
        if found is None:
            return [Check("zfs engine", False, "no OpenZFS kernel module and no zfs-fuse", fix, required=False)]
        if found.fuse and not Path("/dev/fuse").exists():
            return [
                Check(
                    "zfs engine",
                    False,
                    f"{found.describe()}, but no /dev/fuse",
                    "a kernel with FUSE (CONFIG_FUSE_FS)",
                    required=False,
                )
            ]
        return [Check("zfs engine", True, found.describe(), required=False)]

    def target_problems(self, target: Target) -> list[str]:
        found = engine()
        if found is None or not found.fuse:
            return []
        return [
            why
            for why, asked in ((ZVOL_ON_FUSE, target.zvol), (ENCRYPTION_ON_FUSE, encrypted(target.properties)))
            if asked
        ]

    def swept(self, own: ZfsFields) -> dict[str, list[tuple[str, Any]]]:
        return {
            f"property:{name}": [(f"{name}={property_text(one)}", one) for one in _as_list(values)]
            for name, values in own.properties.items()
        }

    def target_values(self, own: ZfsFields, chosen: Mapping[str, Any], devices: int) -> dict[str, Any]:
        return {
            "vdev": own.vdev or ("mirror" if devices > 1 else None),
            "pool_options": {name: property_text(value) for name, value in own.pool_options.items()},
            "properties": {name: property_text(chosen[f"property:{name}"]) for name in own.properties},
            "zvol": own.zvol,
            "arc_max": parse_size(own.arc_max) if own.arc_max else None,
        }

    def scaled(self, target: Target, full_size: int, scale: float) -> Target:
        """The ARC cap scaled with the data (arc_max × --scale, as the images and the workloads'
        files), so the ARC holds the same share of it, down to SCALED_ARC_FLOOR; the cap kept
        there, or an ARC left at the engine's default (no arc_max), is said."""
        if target.arc_max is None:
            if not arc_caches_data(target.properties):
                return target  # an ARC of any size holds none of the data
            return replace(
                target,
                scaling_changed=(
                    *target.scaling_changed,
                    "the ARC is the engine's default, not scaled with the data: "
                    "it holds more of it than at full size (arc_max scales with it)",
                ),
            )
        kept = scaled_size(target.arc_max, scale)
        if kept >= SCALED_ARC_FLOOR:
            return replace(target, arc_max=kept)
        changed = (
            f"{ARC_FLOOR_NOTE}{format_size(SCALED_ARC_FLOOR)}, the least both ZFS engines take, "
            f"not {format_size(target.arc_max)} × {scale:g} = {format_size(kept)}: "
            f"{SCALED_ARC_FLOOR / kept:.3g}× the full size's ARC for the data"
        )
        return replace(target, arc_max=SCALED_ARC_FLOOR, scaling_changed=(*target.scaling_changed, changed))

    def room(self, target: Target) -> Room:
        room = super().room(
            replace(target, devices=1) if target.vdev == "mirror" else target
        )  # a mirror holds one device's worth
        return Room(zvol_size(room.usable), block_device=True, volume=True) if target.zvol else room

    def free_after_mkfs(self, device_size: int, devices: int, mkfs_options: Sequence[str]) -> int:
        """What the new pool's dataset has available: zfs-fuse's (pool version 23) or OpenZFS's."""
        pool = device_size * devices
        return fuse_available(pool) if runs_on_fuse() else expected_available(pool)

    def requested_options(self, spec: Mapping) -> str:
        return (
            " ".join(f"{k}={v}" for k, v in spec["properties"].items())
            if spec.get("properties")
            else super().requested_options(spec)
        )

    def compresses(self, mount_options_effective: str | None, details: str) -> bool:
        """`zfs get` (the run's stored details) shows the dataset's compression other than off:
        the engine's default counts (OpenZFS 2.2 compresses unless told not to)."""
        return zfs_compresses(details)

    def compression_ratio(self, ready: Provisioned) -> CompressionRatio | None:
        """A dataset compresses when `zfs get` (the run's stored details) shows its compression
        property other than off; its ratio is then the dataset's compressratio."""
        if (
            ready.directory is None
            or ready.dataset is None
            or not self.compresses(ready.mount_options_effective, ready.details)
        ):
            return None
        dataset = ready.dataset
        return lambda mountpoint: zfs_compression_ratio(dataset)

    def records(self, ready: Provisioned) -> Records | None:
        """A dataset's records, as `zfs get` (the run's stored details) reports recordsize and
        copies; its copies counted on every device under the pool, as a mirror of them all would
        hold them (md RAID1 below, or the pool's own), and twice for the intent log. A volume:
        None (its volblocksize's rewriting was never measured)."""
        reported = reported_properties(ready.details)
        if ready.directory is None or "recordsize" not in reported:
            return None
        try:
            size = parse_size(reported["recordsize"])
        except ValueError:  # not a size zfs writes: no claim rather than a failed run
            return None
        copies = int(reported["copies"]) if reported.get("copies", "").isdigit() else 3  # the most it allows
        return Records(size, copies * max(1, len(ready.bottom)) * 2)

    def empty_cache(self, journal: Journal, ready: Provisioned) -> None:
        """zfs-fuse's ARC, which drop_caches does not reach (it is the daemon's memory, not the
        page cache): the run's pool exported and imported again (reimport_pool), so the measured
        reads start from its devices. The kernel module's ARC is left to drop_caches."""
        if ready.dataset is None or not runs_on_fuse():
            return
        pool = ready.dataset.partition("/")[0]
        if (made := self._made.get(pool)) is None:
            raise Refused(f"{pool} is not a pool this run made: not exported")
        reimport_pool(journal, made)

    def snapshot(self, ready: Provisioned, name: str) -> str:
        """`zfs snapshot pool/data@name`: destroyed with the pool at the end of the run."""
        if ready.dataset is None or not _DATASET.fullmatch(ready.dataset):
            raise Refused(f"{ready.dataset!r} is not a dataset fslab made: no snapshot taken")
        snapshot = f"{ready.dataset}@{check_snapshot_name(name)}"
        run(["zfs", "snapshot", snapshot])
        return snapshot

    def sync(self, ready: Provisioned) -> None:
        """The pool's transaction group written (sync_pool), the dataset's and a zvol's alike."""
        if ready.dataset is None or not _DATASET.fullmatch(ready.dataset):
            raise Refused(f"{ready.dataset!r} is not a dataset fslab made: its pool not synced")
        sync_pool(ready.dataset.partition("/")[0])

    def not_in_effect(
        self, mount_options: str, properties: dict[str, str], effective: str | None, details: str
    ) -> list[str]:
        return properties_not_in_effect(properties, details)

    def pool_command(self, pool: str, devices: list[str], target: Target) -> list[str]:
        options = [
            arg for name, value in check_pool_options(target.pool_options).items() for arg in ("-o", f"{name}={value}")
        ]
        layout = [target.vdev] if len(devices) > 1 and target.vdev == "mirror" else []
        # cachefile=none: a pool a killed fslab left is imported again by nothing (a restarted
        # daemon or boot) but `fslab cleanup`, which destroys it
        return [
            "zpool",
            "create",
            "-f",
            *options,
            "-o",
            "cachefile=none",
            "-O",
            "mountpoint=none",
            pool,
            *layout,
            *devices,
        ]

    def dataset_command(self, pool: str, mountpoint: Path, target: Target) -> list[str]:
        """`zfs create` of the one dataset (or volume); an encrypted one reads its key, raw, on
        its standard input (encryption_key)."""
        checked = check_dataset_properties(target.properties)
        if encrypted(checked):
            checked = checked | {"keyformat": "raw"}
        properties = [arg for name, value in checked.items() for arg in ("-o", f"{name}={value}")]
        if target.zvol:
            available = int(run(["zfs", "get", "-Hp", "-o", "value", "available", pool]).stdout.strip())
            return ["zfs", "create", "-V", f"{zvol_size(available) // 2**20}M", *properties, f"{pool}/data"]
        return ["zfs", "create", *properties, "-o", f"mountpoint={mountpoint}", f"{pool}/data"]

    @contextmanager
    def provision(self, journal: Journal, stack: Stack, mountpoint: Path, target: Target) -> Iterator[Provisioned]:
        found = engine()
        if found is None:
            raise NotSupported("no ZFS here: neither the OpenZFS kernel module nor zfs-fuse (apt-get install zfs-fuse)")
        if found.fuse and (problems := self.target_problems(target)):
            raise NotSupported(problems[0])
        stack.assert_ours()
        devices = stack.devices
        pool = kernel_name(journal.workdir.root, target.name)
        with (
            _engine_ready(found, journal, target.arc_max, self._kept) as daemon,
            journal.holding("zpool", pool, release_unproven=True) as held,
        ):
            create_pool = self.pool_command(pool, devices, target)
            run(create_pool)
            held.prove(guid=pool_guid(pool))
            made = self._made[pool] = MadePool(held, None)
            try:
                if target.zvol:
                    # after the pool: a volume is sized from it
                    create_volume = self.dataset_command(pool, mountpoint, target)
                    zfs_create(create_volume, target.properties)
                    commands = joined([create_pool, create_volume])
                    details = self.details_of(found, daemon, pool, devices, target)
                    device = _zvol_device(f"{pool}/data")
                    yield Provisioned.on(
                        self.kind, stack, device, None, mkfs_command=commands, details=details, dataset=f"{pool}/data"
                    )
                    return
                with mount_point(journal, mountpoint) as mounted:
                    create_dataset = self.dataset_command(pool, mountpoint, target)
                    zfs_create(create_dataset, target.properties)  # ZFS mounts the dataset itself
                    proven(mounted)
                    self._made[pool] = replace(made, mount=mounted)
                    yield Provisioned.on(
                        self.kind,
                        stack,
                        devices[0],
                        mountpoint,
                        mkfs_command=joined([create_pool, create_dataset]),
                        mount_options_effective=mounted_options(mountpoint),
                        details=self.details_of(found, daemon, pool, devices, target),
                        dataset=f"{pool}/data",
                    )
            finally:
                self._made.pop(pool, None)

    def details_of(self, found: Engine, daemon: Daemon | None, pool: str, devices: list[str], target: Target) -> str:
        """The engine (zfs-fuse's daemon too), its ARC cap, the pool's layout, every dataset
        property with its source."""
        status = run(["zpool", "status", pool], check=False).stdout
        properties = run(["zfs", "get", "-H", "-o", "property,value,source", "all", f"{pool}/data"], check=False).stdout
        # The vdevs' ashift: zfs-fuse's `zdb -C` takes a second a run (much of a run's overhead),
        # while `zdb -l` reads it from the devices' labels in a few hundredths; zfs-fuse puts its
        # labels on the devices given. OpenZFS may partition a whole disk, so its labels are
        # not there: the kernel module's pool config, as before.
        configs = [["zdb", "-l", device] for device in devices] if found.fuse else [["zdb", "-C", pool]]
        ashift = [
            line.strip()
            for command in configs
            for line in run(command, check=False).stdout.splitlines()
            if "ashift" in line
        ]
        arc = ""
        if target.arc_max:
            arc = (
                f"arc_max: {target.arc_max // 2**20} MiB ("
                + ("zfs-fuse --max-arc-size" if found.fuse else f"arcstats c_max = {arc_stat('c_max')}")
                + ")\n"
            )
        started = f"{daemon.describe()}\n{EMPTIED}\n" if daemon else ""
        key = (
            "key: 32 random bytes fslab made for this run alone "
            "(keyformat=raw), given on zfs create's standard input, in no file\n"
            if encrypted(target.properties)
            else ""
        )
        return f"engine: {found.describe()}\n{started}{arc}{key}{status}\n{' '.join(sorted(set(ashift)))}\n{properties}"


# How a zfs-fuse run's measured reads start from the devices (Zfs.empty_cache), stored with it.
EMPTIED = (
    "ARC emptied before the measured run: the pool exported and imported again (drop_caches does not reach zfs-fuse's)"
)
ENCRYPTION_ON_FUSE = (
    "ZFS native encryption is not supported by this ZFS engine (zfs-fuse's pool "
    "version 23 predates it); it needs OpenZFS 0.8 or later with its kernel module"
)
ZVOL_ON_FUSE = (
    "zvol targets are not supported by this ZFS engine (zfs-fuse "
    "cannot present block devices); they need the OpenZFS kernel module"
)


# A volume may reserve a little more than its size for its own metadata: it gets this share
# of what the new pool has available.
ZVOL_SHARE = 0.85


def zvol_size(available: int) -> int:
    """Bytes of the volume made on a pool with `available` bytes free, whole MiB (a multiple
    of any volblocksize)."""
    return int(available * ZVOL_SHARE) // 2**20 * 2**20


def fuse_available(image_size: int) -> int:
    """What a fresh zfs-fuse pool on one image of this size has available, erring low: 38MiB
    (labels, metaslab alignment) and 1/48 held back; measured 0 to 3 % low from 128MiB to 4GiB."""
    return max(0, image_size - 38 * 2**20 - image_size // 48)


def expected_available(image_size: int) -> int:
    """Roughly what a fresh pool on one image of this size has available, erring low: the
    pool is ~6 % smaller than the image (labels, metaslab alignment), and OpenZFS holds back
    1/32 of it, at least 128 MiB ("slop space"). OpenZFS 2.1 reports 352 MiB for 512 MiB."""
    pool = image_size * 0.93
    return max(0, int(pool - max(pool / 32, 128 * 2**20)))


BLKZNAME = 0x8100127D  # _IOR(0x12, 125, char[256]): a zvol's dataset name, asked of its block device


def _zvol_device(volume: str) -> str:
    """The zvol's block device: udev's /dev/zvol link where udev runs, else the zd device
    whose dataset name (asked of the device itself) is the volume's."""
    link = Path("/dev/zvol") / volume
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if link.exists():
            return str(link.resolve())
        for entry in Path("/sys/block").glob("zd*"):
            if _zvol_name(f"/dev/{entry.name}") == volume:
                return f"/dev/{entry.name}"
        time.sleep(0.1)
    raise RuntimeError(
        f"no block device for {volume} appeared after zfs create -V (neither {link} nor a /dev/zd* device)"
    )


def _zvol_name(device: str) -> str | None:
    try:
        fd = os.open(device, os.O_RDONLY)
    except OSError:
        return None
    try:
        return fcntl.ioctl(fd, BLKZNAME, bytes(256)).split(b"\0", 1)[0].decode()
    except OSError:
        return None
    finally:
        os.close(fd)


def reported_properties(details: str) -> dict[str, str]:
    """Each dataset property `zfs get -H -o property,value,source` reported (in a run's stored
    details), by name: its value as zfs writes it."""
    return {fields[0]: fields[1] for line in details.splitlines() if len(fields := line.split("\t")) == 3}


def properties_not_in_effect(requested: dict[str, str], details: str) -> list[str]:
    """Requested dataset properties whose value `zfs get` reports differently (from a run's
    stored details), e.g. "compression=lz4 (is lzjb)". zfs get reports every property, those at
    their default too ("default" source), in its own forms: "128K" for 131072 or 128k, "on" for
    on. A property the read-back leaves out contradicts nothing: it is not reported."""
    reported = reported_properties(details)
    return [
        f"{name}={value} (is {reported[name]})"
        for name, value in requested.items()
        if name in reported and not same_value(value, reported[name], fold_case=True)
    ]


FILESYSTEMS.add(Zfs(), own=True)
