from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.devices.loop import LoopDevice
from fslab.filesystems.base import Filesystem, Provisioned
from fslab.journal import Journal

if TYPE_CHECKING:
    from fslab.study import Target


class Raw(Filesystem):
    """No filesystem: the workload runs on the block device itself, the physical reference."""

    kind = "raw"
    version_command = ("losetup", "--version")
    package = "util-linux"

    @contextmanager
    def provision(self, journal: Journal, loops: list[LoopDevice], mountpoint: Path, target: Target) -> Iterator[Provisioned]:
        yield Provisioned(device=loops[0].device, directory=None)
