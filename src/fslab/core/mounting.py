"""Mount points: made by fslab in its work directory, proven after mounting, unmounted only when
the filesystem mounted there is still the one fslab mounted (a filesystem's, rsync's, the page
cache monitor's debugfs)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.core.errors import Refused
from fslab.core.identity import mount_proof, mounts_at, rests_on, unmount
from fslab.core.journal import Entry, Held, Journal, releaser
from fslab.core.names import workdir_tag

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir


@contextmanager
def mount_point(journal: Journal, path: Path) -> Iterator[Held]:
    """An empty directory of fslab's own at `path`; the caller mounts on it and calls `proven`.
    Whatever is mounted there is unmounted afterwards (if it is what fslab mounted)."""
    journal.workdir.subdirectory(path.parent)
    # Released even unproven: a signal can come once `mount` has mounted and before its proof is
    # recorded; release_mount then asks the kernel whether what is there rests on fslab's own.
    with journal.holding("mount", str(path), release_unproven=True) as held:
        _fresh(path)
        yield held


def proven(held: Held) -> None:
    """Record what proves the mount just made: its device number, type and source."""
    held.prove(**mount_proof(Path(held.ident)))


def _fresh(path: Path) -> None:
    try:
        os.mkdir(path, 0o700)
        return
    except FileExistsError:
        pass
    if os.path.islink(path) or not os.path.isdir(path):
        raise Refused(
            f"{path} is not a directory fslab made (a symlink or a file is there): fslab mounts nothing on it"
        )
    if mounts_at(path) or os.listdir(path):
        raise Refused(f"{path} is in use (something is mounted on it or it holds files): fslab mounts nothing on it")


@releaser("mount")
def release_mount(entry: Entry, workdir: Workdir) -> None:
    """Unmount what fslab mounted at the entry's mount point (the kernel follows no symlink)."""
    path = workdir.inside(entry.ident, workdir.mounts)
    mounted = mounts_at(path)
    if not mounted:
        return
    dev = entry.proof.get("dev")
    if dev is None:  # killed between mounting and recording the proof: ask the kernel what it is
        top = mounted[-1]
        major, minor = (int(x) for x in top.dev.split(":"))
        ours = rests_on(os.makedev(major, minor), workdir.owned()) or top.source.startswith(workdir_tag(workdir.root))
        if not ours:
            raise Refused(f"{path}: {top.source} is mounted there and nothing shows fslab mounted it; left mounted")
        dev = top.dev
    mount = entry.proof.get("mnt")  # where recorded (a mount of a superblock mounted elsewhere too: debugfs)
    unmount(path, str(dev), None if mount is None else str(mount))
