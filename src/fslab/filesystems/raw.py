from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.filesystems.base import Filesystem, Provisioned
from fslab.journal import Journal

if TYPE_CHECKING:
    from fslab.devices.layers import Stack
    from fslab.study import Target


class Raw(Filesystem):
    """No filesystem: the workload runs on the block device itself, the physical reference."""

    kind = "raw"
    version_command = ("losetup", "--version")
    package = "util-linux"

    @contextmanager
    def provision(self, journal: Journal, stack: Stack, mountpoint: Path, target: Target) -> Iterator[Provisioned]:
        stack.assert_ours()  # fio writes over the device
        yield Provisioned(device=stack.devices[0], directory=None)
