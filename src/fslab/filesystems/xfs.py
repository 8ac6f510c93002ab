from pathlib import Path

from fslab.filesystems.base import Filesystem
from fslab.system import run


class Xfs(Filesystem):
    kind = "xfs"
    mkfs = ("mkfs.xfs", "-f", "-q")
    nodiscard = ("-K",)
    version_command = ("mkfs.xfs", "-V")
    package = "xfsprogs"

    def details(self, device: str, mountpoint: Path) -> str:
        return run(["xfs_info", str(mountpoint)], check=False).stdout
