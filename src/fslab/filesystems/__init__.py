"""One module per filesystem, all behind `Filesystem` (base.py), each joining `FILESYSTEMS`
(kind → Filesystem) itself as it is imported (fslab.registry):

    class Ext4(Filesystem):
        kind = "ext4"
        ...

    FILESYSTEMS.add(Ext4())

Importing this package loads no filesystem: the first lookup of a kind imports its module
(fslab's own through the table below; others from installed packages' `fslab.plugins` entry
points, fslab.registry).
"""

from __future__ import annotations

from collections.abc import Callable

from fslab.filesystems.base import Filesystem, Provisioned
from fslab.registry import Registry

FILESYSTEMS: Registry[Filesystem] = Registry(
    "filesystem",
    {
        "ext4": "fslab.filesystems.ext4",
        "xfs": "fslab.filesystems.xfs",
        "btrfs": "fslab.filesystems.btrfs",
        "zfs": "fslab.filesystems.zfs",
        "raw": "fslab.filesystems.raw",
    },
)


def kinds_that(can: Callable[[Filesystem], bool], last: str = "and") -> str:
    """The kinds of the filesystems registered that `can` (each loaded), as a message names them:
    "btrfs and zfs" — never a list written out that a filesystem added would make wrong."""
    kinds = [kind for kind, filesystem in FILESYSTEMS.items() if can(filesystem)]
    return f" {last} ".join([", ".join(kinds[:-1]), kinds[-1]] if len(kinds) > 1 else kinds)


__all__ = ["FILESYSTEMS", "Filesystem", "Provisioned", "kinds_that"]
