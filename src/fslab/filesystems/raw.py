from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fslab.devices.loop import LoopDevice
from fslab.filesystems.base import Filesystem, Provisioned
from fslab.journal import Journal


class Raw(Filesystem):
    """No filesystem: the workload runs on the block device itself, the physical reference."""

    kind = "raw"
    version_command = ("losetup", "--version")
    package = "util-linux"

    @contextmanager
    def provision(
        self, journal: Journal, loop: LoopDevice, mountpoint: Path, mkfs_options: list[str], mount_options: str
    ) -> Iterator[Provisioned]:
        yield Provisioned(device=loop.device, directory=None)
