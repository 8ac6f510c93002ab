"""ZFS: a pool on fslab's images, one dataset mounted where the workload runs.

The same `zpool` and `zfs` commands drive the OpenZFS kernel module and zfs-fuse (real ZFS
code through FUSE, pool version 23). Which engine ran is part of every ZFS result: a FUSE
result must never pass for a kernel one. Without the kernel module, fslab starts the zfs-fuse
daemon for each run (a cold ARC every run, like a fresh mount) and stops it after.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.devices.loop import LoopDevice, assert_ours
from fslab.filesystems.base import Filesystem, Provisioned, mounted_options
from fslab.journal import Journal, releaser
from fslab.system import CommandError, run

if TYPE_CHECKING:
    from fslab.study import Target

KERNEL_MODULE = Path("/sys/module/zfs")
PIDFILE_DIR = Path("/run/fslab")


@dataclass(frozen=True)
class Engine:
    name: str  # "OpenZFS kernel module" or "zfs-fuse"
    version: str
    fuse: bool

    def describe(self) -> str:
        return f"{self.name} {self.version}" + (" (through FUSE, pool version 23)" if self.fuse else "")


class NotSupported(RuntimeError):
    pass


def engine() -> Engine | None:
    """The ZFS this machine has: the kernel module, else zfs-fuse, else none."""
    if KERNEL_MODULE.exists():
        version = (KERNEL_MODULE / "version").read_text().strip() if (KERNEL_MODULE / "version").exists() else "unknown"
        return Engine("OpenZFS kernel module", version, fuse=False)
    if shutil.which("zfs-fuse"):
        version = run(["dpkg-query", "-W", "-f=${Version}", "zfs-fuse"], check=False).stdout.strip() or "unknown"
        return Engine("zfs-fuse", version, fuse=True)
    return None


def _daemon_answers() -> bool:
    return run(["zpool", "list", "-H"], check=False, timeout=10).returncode == 0


@releaser("zfs-daemon")
def stop_daemon(pidfile: str) -> None:
    """Stop the zfs-fuse daemon fslab started (its pid is in `pidfile`) and wait until it is gone."""
    try:
        pid = int(Path(pidfile).read_text().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        Path(pidfile).unlink(missing_ok=True)
        return
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    if Path(f"/proc/{pid}").exists():
        os.kill(pid, signal.SIGKILL)
    Path(pidfile).unlink(missing_ok=True)


@contextmanager
def zfs_fuse_daemon(journal: Journal) -> Iterator[None]:
    """zfs-fuse running for the block: started (and stopped after) unless one already runs."""
    if run(["pgrep", "-x", "zfs-fuse"], check=False).returncode == 0:
        yield  # someone else's daemon: use it, leave it
        return
    PIDFILE_DIR.mkdir(parents=True, exist_ok=True)
    pidfile = PIDFILE_DIR / "zfs-fuse.pid"
    with journal.holding("zfs-daemon", str(pidfile)):
        run(["zfs-fuse", "--pidfile", str(pidfile)])
        deadline = time.monotonic() + 20
        while not _daemon_answers():
            if time.monotonic() > deadline:
                raise RuntimeError("zfs-fuse started but does not answer zpool commands")
            time.sleep(0.1)
        # zfs-fuse re-imports the pools in its cache: fslab's, left by a run that died, go now.
        for pool in run(["zpool", "list", "-H", "-o", "name"]).stdout.split():
            if pool.startswith(POOL_PREFIX):
                destroy_pool(pool)
        yield


@releaser("zpool")
def destroy_pool(pool: str) -> None:
    """Destroy the pool if it exists; zfs-fuse may call it busy for a moment after an unmount."""
    deadline = time.monotonic() + 15
    while run(["zpool", "list", "-H", pool], check=False).returncode == 0:
        try:
            run(["zpool", "destroy", "-f", pool])
        except CommandError as exc:
            if "busy" not in exc.stderr or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


POOL_PREFIX = "fslab_"


def pool_name(target_name: str) -> str:
    return POOL_PREFIX + hashlib.sha1(target_name.encode()).hexdigest()[:10]


class Zfs(Filesystem):
    kind = "zfs"
    package = "zfs-fuse"  # Debian's; OpenZFS's is zfsutils-linux with its kernel module
    version_command = ("zpool", "upgrade", "-v")

    def version(self) -> str | None:
        found = engine()
        return found.describe() if found else None

    def pool_command(self, pool: str, devices: list[str], target: Target) -> list[str]:
        options = [arg for name, value in target.pool_options.items() for arg in ("-o", f"{name}={value}")]
        layout = [target.vdev] if len(devices) > 1 and target.vdev == "mirror" else []
        return ["zpool", "create", "-f", *options, "-O", "mountpoint=none", pool, *layout, *devices]

    def dataset_command(self, pool: str, mountpoint: Path, target: Target) -> list[str]:
        properties = [arg for name, value in target.properties.items() for arg in ("-o", f"{name}={value}")]
        return ["zfs", "create", *properties, "-o", f"mountpoint={mountpoint}", f"{pool}/data"]

    @contextmanager
    def provision(self, journal: Journal, loops: list[LoopDevice], mountpoint: Path, target: Target) -> Iterator[Provisioned]:
        found = engine()
        if found is None:
            raise NotSupported("no ZFS here: neither the OpenZFS kernel module nor zfs-fuse (apt-get install zfs-fuse)")
        for loop in loops:
            assert_ours(loop)
        devices = [loop.device for loop in loops]
        pool = pool_name(target.name)
        commands = [self.pool_command(pool, devices, target), self.dataset_command(pool, mountpoint, target)]
        mountpoint.parent.mkdir(parents=True, exist_ok=True)
        with zfs_fuse_daemon(journal) if found.fuse else nullcontext(), journal.holding("zpool", pool):
            for command in commands:
                run(command)
            with journal.holding("mount", str(mountpoint)):
                if mounted_options(mountpoint) is None:
                    raise CommandError(commands[-1], 0, "", f"the dataset {pool}/data is not mounted on {mountpoint}")
                yield Provisioned(
                    device=devices[0],
                    directory=mountpoint,
                    mkfs_command=[arg for command in commands for arg in (*command, ";")][:-1],
                    mount_options_effective=mounted_options(mountpoint),
                    details=self.details_of(found, pool),
                )

    def details_of(self, found: Engine, pool: str) -> str:
        """The engine, the pool's layout, and every dataset property with its source."""
        status = run(["zpool", "status", pool], check=False).stdout
        properties = run(["zfs", "get", "-H", "-o", "property,value,source", "all", f"{pool}/data"], check=False).stdout
        ashift = [line.strip() for line in run(["zdb", "-C", pool], check=False).stdout.splitlines() if "ashift" in line]
        return f"engine: {found.describe()}\n{status}\n{' '.join(sorted(set(ashift)))}\n{properties}"


def properties_not_in_effect(requested: dict[str, str], details: str) -> list[str]:
    """Requested dataset properties whose value `zfs get` reports differently (from a run's
    stored details), e.g. "compression=lz4 (is lzjb)"."""
    reported = {}
    for line in details.splitlines():
        fields = line.split("\t")
        if len(fields) == 3:
            reported[fields[0]] = fields[1]
    return [
        f"{name}={value} (is {reported.get(name, 'unknown')})"
        for name, value in requested.items()
        if reported.get(name, "").lower() != str(value).lower()
    ]
