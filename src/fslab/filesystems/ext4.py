from pathlib import Path

from fslab.filesystems.base import Filesystem
from fslab.system import run


class Ext4(Filesystem):
    kind = "ext4"
    mkfs = ("mkfs.ext4", "-F", "-q")
    version_command = ("mke2fs", "-V")
    package = "e2fsprogs"
    nodiscard = ("nodiscard",)  # an -E suboption, joined with the others below

    def default_mkfs_options(self, requested: list[str]) -> list[str]:
        # mkfs.ext4 defers inode-table and journal zeroing to a kernel thread that would run
        # inside the measured window; do it up front unless the study says otherwise.
        extended = super().default_mkfs_options(requested)
        if not any("lazy_itable_init" in o or "lazy_journal_init" in o for o in requested):
            extended.insert(0, "lazy_itable_init=0,lazy_journal_init=0")
        return ["-E", ",".join(extended)] if extended else []

    def details(self, device: str, mountpoint: Path) -> str:
        return run(["dumpe2fs", "-h", device], check=False).stdout
