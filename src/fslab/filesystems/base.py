"""What every filesystem offers fslab: create it on a device, mount it, say what it became."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fslab.devices.loop import LoopDevice, assert_ours
from fslab.journal import Journal, releaser
from fslab.system import CommandError, run, tool_version


@dataclass(frozen=True)
class Provisioned:
    """A target made ready for a workload: fio runs in `directory`, or on `device` when that is None."""

    device: str
    directory: Path | None
    mkfs_command: list[str] = field(default_factory=list)
    mount_options_effective: str | None = None
    details: str = ""  # the filesystem's own tool describing what was created

    @property
    def fio_location(self) -> dict:
        """Where fio works: `directory` on a filesystem, else `device` (the raw block device)."""
        return {"directory": self.directory, "device": None if self.directory else self.device}


def mounted_options(mountpoint: Path) -> str | None:
    """The options the kernel reports for a mount point in /proc/mounts."""
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == str(mountpoint):
            return fields[3]
    return None


@releaser("mount")
def unmount(mountpoint: str) -> None:
    """Unmount if mounted, retrying briefly while the kernel still holds the filesystem busy."""
    for attempt in range(10):
        if mounted_options(Path(mountpoint)) is None:
            return
        try:
            run(["umount", mountpoint])
            return
        except CommandError:
            if attempt == 9:
                raise
            time.sleep(0.3)


class Filesystem:
    """A filesystem made by one mkfs command and mounted with `mount -t kind`."""

    kind: str
    mkfs: tuple[str, ...]  # the command and the flags fslab always passes (force, quiet)
    version_command: tuple[str, ...]
    package: str  # the Debian package that provides the tools

    nodiscard: tuple[str, ...] = ()  # mkfs's flag not to discard the device

    def default_mkfs_options(self, requested: list[str]) -> list[str]:
        """Options fslab adds unless the study names them itself.

        No discard: on a loop image mkfs's discard punches holes in the image file, and the
        next run would measure the host filesystem allocating those blocks again.
        """
        return [] if any("discard" in option for option in requested) else list(self.nodiscard)

    def details(self, device: str, mountpoint: Path) -> str:
        return ""

    def version(self) -> str | None:
        return tool_version(self.version_command)

    def mkfs_command(self, device: str, options: list[str]) -> list[str]:
        return [*self.mkfs, *self.default_mkfs_options(options), *options, device]

    @contextmanager
    def provision(
        self, journal: Journal, loop: LoopDevice, mountpoint: Path, mkfs_options: list[str], mount_options: str
    ) -> Iterator[Provisioned]:
        assert_ours(loop)
        command = self.mkfs_command(loop.device, mkfs_options)
        run(command)
        mountpoint.mkdir(parents=True, exist_ok=True)
        with journal.holding("mount", str(mountpoint)):
            run(["mount", "-t", self.kind, "-o", mount_options or "defaults", loop.device, str(mountpoint)])
            yield Provisioned(
                device=loop.device,
                directory=mountpoint,
                mkfs_command=command,
                mount_options_effective=mounted_options(mountpoint),
                details=self.details(loop.device, mountpoint),
            )
