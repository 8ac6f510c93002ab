"""fslab's own directory: loop images, mount points, the journal, and the lock that keeps two
fslab processes from using it at once."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fslab.journal import Journal

DEFAULT_WORKDIR = Path("/var/tmp/fslab")


class WorkdirBusy(RuntimeError):
    pass


@dataclass(frozen=True)
class Workdir:
    """fslab's own directory: loop images, mount points, the journal."""

    root: Path

    @property
    def images(self) -> Path:
        return self.root / "images"

    @property
    def mounts(self) -> Path:
        return self.root / "mnt"

    @property
    def journal(self) -> Journal:
        return Journal(self.root / "journal.jsonl")

    @contextmanager
    def claim(self) -> Iterator[None]:
        """Exclusive use of the work directory: one study (or clean-up) at a time, so none
        deletes or unmounts what another still uses."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                holder = lock.read().strip() or "unknown"
                raise WorkdirBusy(f"another fslab (pid {holder}) is using {self.root}; wait for it, or choose another --workdir") from None
            lock.truncate(0)
            lock.write(str(os.getpid()))
            lock.flush()
            yield


def slug(name: str) -> str:
    """A file name for a target's image and mount point: readable, and distinct for distinct
    names (the hash keeps "ext4[noatime]" and "ext4_noatime" apart)."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")[:60]
    return f"{readable}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"


KERNEL_NAME_PREFIX = "fslab_"


def kernel_name(journal: Journal, target_name: str) -> str:
    """The name of a target's pool, array, mapping or volume group: fslab's prefix, then a
    hash of the work directory (whose journal records it) and the target's name. The names
    are machine-wide, and fslab processes in two work directories must not share one; the
    kernel and the tools allow few characters and little length."""
    scope = f"{journal.path.parent.resolve()}\0{target_name}"
    return KERNEL_NAME_PREFIX + hashlib.sha1(scope.encode()).hexdigest()[:10]
