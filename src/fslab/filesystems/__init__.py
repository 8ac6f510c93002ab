"""One module per filesystem, all behind `Filesystem` (base.py). `FILESYSTEMS` maps kind → instance."""

from fslab.filesystems.base import Filesystem, Provisioned
from fslab.filesystems.btrfs import Btrfs
from fslab.filesystems.ext4 import Ext4
from fslab.filesystems.raw import Raw
from fslab.filesystems.xfs import Xfs
from fslab.filesystems.zfs import Zfs

FILESYSTEMS: dict[str, Filesystem] = {fs.kind: fs for fs in (Ext4(), Xfs(), Btrfs(), Zfs(), Raw())}

__all__ = ["FILESYSTEMS", "Filesystem", "Provisioned"]
