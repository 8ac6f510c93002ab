from pathlib import Path

from fslab.filesystems.base import Filesystem
from fslab.system import run


class Btrfs(Filesystem):
    kind = "btrfs"
    mkfs = ("mkfs.btrfs", "-f", "-q")
    nodiscard = ("-K",)
    version_command = ("mkfs.btrfs", "--version")
    package = "btrfs-progs"

    def details(self, device: str, mountpoint: Path) -> str:
        return run(["btrfs", "filesystem", "df", str(mountpoint)], check=False).stdout
