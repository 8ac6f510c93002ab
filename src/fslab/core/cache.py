"""fslab's cache directory (CACHE_DIR, root's): what takes seconds to make and is the same for
the same versions of a tool — fio's answers about its options (fio/table.py), vl-convert's
JavaScript bundle (report/bundle.py).

A kept file is written whole or not at all (a temporary file renamed over its name), and read
only if it is fslab's own: a regular file, not reached through a symlink, root's or this user's
and writable by no one else, in a directory alike. Anything else reads as absent, and is made
again and kept anew, never used: what a file holds is then checked by its reader."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

CACHE_DIR = Path("/var/cache/fslab")  # root's; tests give their own


def read_kept(path: Path, largest: int) -> bytes | None:
    """The bytes kept at `path`, if it is fslab's own file (see above) of at most `largest` bytes;
    else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        found = os.fstat(f.fileno())
        if (
            not stat.S_ISREG(found.st_mode)
            or not _own(found)
            or found.st_size > largest
            or not own_directory(path.parent)
        ):
            return None
        return f.read(largest)


def keep(path: Path, data: bytes) -> None:
    """`data` kept at `path`, whole or not at all; where fslab may not write (not root), or the
    directory is not its own, nothing is kept."""
    try:
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        if not own_directory(path.parent):
            return
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, prefix=f".{path.stem}-", delete=False) as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), 0o644)  # the file made, not whatever its name leads to by then
            os.fsync(f.fileno())
        os.replace(f.name, path)
    except OSError:
        with contextlib.suppress(OSError, NameError):
            os.unlink(f.name)


def _own(found: os.stat_result) -> bool:
    return found.st_uid in (0, os.geteuid()) and not found.st_mode & 0o022


def own_directory(path: Path) -> bool:
    """Whether `path` is a directory (not a symlink to one) fslab may trust as its own (see above)."""
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(found.st_mode) and _own(found)
