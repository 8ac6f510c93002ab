"""A toy filesystem, as a new one is added: one module that joins the registry itself. ext2 (made
by mkfs.ext2, mounted by the kernel's ext2 driver), with one target field of its own: `reserved`,
the percentage of its blocks kept for root (tune2fs -m), read back into the run's details and
shown with the target's options in a summary."""

from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import Field

from fslab.core.system import run
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.base import Filesystem, SizeFloor, TargetFields
from fslab.model import Target


class Ext2Fields(TargetFields):
    reserved: int = Field(5, ge=0, le=50)  # percent of the blocks kept for root


class Ext2(Filesystem):
    kind = "ext2"
    mkfs = ("mkfs.ext2", "-F", "-q")
    version_command = ("mke2fs", "-V")
    package = "e2fsprogs"
    floor = SizeFloor(2**20, "mkfs.ext2 makes no smaller filesystem worth a run")
    fields = Ext2Fields
    own_fields_refusal = "reserved is for ext2 targets"

    def free_after_mkfs(self, device_size: int, devices: int, mkfs_options: Sequence[str]) -> int:
        return device_size // 2  # a toy's model: erring low

    def after_mount(self, target: Target, devices: list[str], mountpoint: Path) -> None:
        run(["tune2fs", "-m", str(target.filesystem_fields["reserved"]), devices[0]])

    def details(self, device: str, mountpoint: Path) -> str:
        return "".join(
            line + "\n"
            for line in run(["dumpe2fs", "-h", device]).stdout.splitlines()
            if line.startswith(("Block count", "Reserved block count"))
        )

    def requested_options(self, spec: Mapping) -> str:
        return f"reserved={spec['filesystem_fields']['reserved']}%"


FILESYSTEMS.add(Ext2())
