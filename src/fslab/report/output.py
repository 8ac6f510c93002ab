"""Where report files go and how they are written: into folders fslab makes, never through a
symlink someone left at a file's or a folder's name. Text and bytes alike (a page, an SVG, a PNG)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from fslab.core.errors import FslabError, Refused
from fslab.core.identity import open_own


def own_folder(path: Path) -> Path:
    """A folder to write report files into, made if missing (its parent must exist); refused when
    it is a symlink or not a directory."""
    if path.is_symlink():
        raise Refused(f"{path} is a symlink: fslab writes its reports into a directory, never through a symlink")
    if path.exists() and not path.is_dir():
        raise Refused(f"{path} is not a directory: name a directory for the report (it is made if missing)")
    if not path.parent.is_dir():
        raise Refused(f"{path.parent} does not exist: name a directory in an existing one")
    try:
        path.mkdir(exist_ok=True)
    except OSError as exc:
        raise FslabError(f"cannot make the folder {path} for the report files: {exc.strerror}") from None
    return path


# The extended attribute a report file keeps the digest of what it was made of in (formats.made_of),
# with its size and modification time as written: it is current while that digest is the one it
# would be made of now and the file is as written (another writer — an older fslab, an editor —
# keeps the attribute of the file it rewrites in place, not its time), and is rewritten otherwise.
MADE_OF = "user.fslab.made-of"


def write_own(path: Path, data: str | bytes, made_of: bytes | None = None) -> Path:
    """Write one report file (text as UTF-8), never through a symlink at its name; returns the path.
    `made_of`: the digest of what it is made of, kept with it (MADE_OF) where its filesystem keeps
    extended attributes; the one it had is removed before its old content is, so that a write cut
    short never leaves a digest beside content it does not describe."""
    fd = open_own(path, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if made_of is None else 0), 0o644)
    with os.fdopen(fd, "wb") as f:
        if made_of is not None:
            with contextlib.suppress(OSError):  # none there, or a filesystem without them
                os.removexattr(fd, MADE_OF)
            os.ftruncate(fd, 0)
        f.write(data.encode() if isinstance(data, str) else data)
        if made_of is not None:
            f.flush()
            written = os.fstat(fd)
            with contextlib.suppress(OSError):  # a filesystem without them: written again every time
                os.setxattr(fd, MADE_OF, made_of + f" {written.st_size} {written.st_mtime_ns}".encode())
    return path


def made_of_kept(path: Path) -> bytes | None:
    """The digest a report file keeps of what it was made of (write_own's `made_of`); None where it
    keeps none, is no longer as written (its size or time changed since), is missing, or is not a
    regular file (never read through a symlink)."""
    try:
        fd = open_own(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            return None
        digest, _, written = os.getxattr(fd, MADE_OF).partition(b" ")
    except OSError:
        return None
    finally:
        os.close(fd)
    return digest if written == f"{found.st_size} {found.st_mtime_ns}".encode() else None


def write_all(folder: Path, files: Mapping[str, str | bytes]) -> list[Path]:
    """Each named file written into `folder` (made if missing, as own_folder); the paths written."""
    own_folder(folder)
    return [write_own(folder / name, data) for name, data in files.items()]
