"""fslab's own directory: loop images, mount points, the journal, and the lock that keeps two
fslab processes from using it at once."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fslab.errors import FslabError
from fslab.journal import Journal

DEFAULT_WORKDIR = Path("/var/tmp/fslab")


class WorkdirBusy(FslabError):
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
