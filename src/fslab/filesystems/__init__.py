"""One module per filesystem, all behind `Filesystem` (base.py), each joining `FILESYSTEMS`
(kind → Filesystem) itself as it is imported:

    @register
    class Ext4(Filesystem):
        kind = "ext4"
        ...

Importing this package loads no filesystem: the first lookup of a kind imports its module
(fslab's own through the table below; others from installed packages' `fslab.plugins` entry
points, fslab.core.registry).
"""

from __future__ import annotations

from typing import TypeVar

from fslab.core.registry import Registry
from fslab.filesystems.base import Filesystem, Provisioned

FILESYSTEMS: Registry[Filesystem] = Registry(
    {
        "ext4": "fslab.filesystems.ext4",
        "xfs": "fslab.filesystems.xfs",
        "btrfs": "fslab.filesystems.btrfs",
        "zfs": "fslab.filesystems.zfs",
        "raw": "fslab.filesystems.raw",
    }
)

F = TypeVar("F", bound=type[Filesystem])


def register(cls: F) -> F:
    """Registers the Filesystem class it decorates (one instance of it) under its kind."""
    FILESYSTEMS.add(cls.kind, cls())
    return cls


__all__ = ["FILESYSTEMS", "Filesystem", "Provisioned", "register"]
