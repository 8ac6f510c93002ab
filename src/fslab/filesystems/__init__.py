"""One module per filesystem, all behind `Filesystem` (base.py), each joining `FILESYSTEMS`
(kind → Filesystem) itself as it is imported (fslab.registry):

    class Ext4(Filesystem):
        kind = "ext4"
        ...

    FILESYSTEMS.add(Ext4(), own=True)

Importing this package loads no filesystem: the first lookup of a kind imports its module
(fslab's own through the table beside the protocol, in base.py; others from installed packages'
`fslab.plugins` entry points, fslab.core.registry).
"""

from __future__ import annotations

from fslab.filesystems.base import FILESYSTEMS, Filesystem, Provisioned, kinds_that

__all__ = ["FILESYSTEMS", "Filesystem", "Provisioned", "kinds_that"]
