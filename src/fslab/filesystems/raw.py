from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.core.checks import Check
from fslab.core.journal import Journal
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.base import Filesystem, Provisioned, Room
from fslab.model import Target

if TYPE_CHECKING:
    from fslab.devices.layers import Stack


class Raw(Filesystem):
    """No filesystem: the workload runs on the block device itself, the physical reference."""

    kind = "raw"
    version_command = ("losetup", "--version")
    package = "util-linux"

    def machine_checks(self) -> list[Check]:
        return []  # the basic checks (loop devices, fio) are all it needs

    def room(self, target: Target) -> Room:
        return Room(target.image_size, block_device=True)

    def sync(self, ready: Provisioned) -> None:
        """fsync(2) of the block device itself: what the workload wrote through its page cache is
        written, and the device's own cache flushed."""
        fd = os.open(ready.top, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @contextmanager
    def provision(self, journal: Journal, stack: Stack, mountpoint: Path, target: Target) -> Iterator[Provisioned]:
        stack.assert_ours()  # fio writes over the device
        yield Provisioned.on(self.kind, stack, stack.devices[0], None)


FILESYSTEMS.add(Raw(), own=True)
