"""fslab's own directory: loop images, mount points, the journal, and the lock that keeps two
fslab processes from using it at once.

A work directory is fslab's only when fslab made it: it is root's, written by no one else, and
either empty (or absent) when first claimed, or proven fslab's: it holds fslab's marker (MARKER,
which fslab writes when it first claims a directory), or — one an older fslab made, before the
marker — only fslab's names and a journal whose every line is one fslab writes. Below it fslab makes every file
and directory itself and never follows a symlink: a symlink or a stranger's file found where
fslab would put its own is refused, never used, truncated or deleted.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from fslab.core.errors import FslabError, Refused
from fslab.core.identity import FileId, Owned, open_own, same_disk
from fslab.core.journal import Journal
from fslab.core.names import NAME

DEFAULT_WORKDIR = Path("/var/tmp/fslab")
MARKER = ".fslab-workdir"
# Journal kinds of whole block devices fslab holds during a run: a user's confirmed device, and a
# zram device it made. Their proofs (device number and diskseq) make them fslab's while held.
HELD_DEVICES = ("device", "zram")


class WorkdirBusy(FslabError):
    pass


# The longest pause between two tries of a busy work directory (Workdir.claim with `waiting`).
BUSY_PAUSE_LONGEST = 30.0


@dataclass(frozen=True)
class Workdir:
    """fslab's own directory: loop images, mount points, the journal."""

    root: Path
    # What owned() found, kept while a release pass runs (one_pass): it reads the journal, scans
    # images/ and asks sysfs, and a pass asks it once per entry.
    _pass: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # The user named this path: resolve it once; nothing below it is followed again.
        object.__setattr__(self, "root", Path(os.path.realpath(self.root)))

    @property
    def images(self) -> Path:
        return self.root / "images"

    @property
    def mounts(self) -> Path:
        return self.root / "mnt"

    @property
    def journal(self) -> Journal:
        return Journal(self)

    def subdirectory(self, path: Path) -> Path:
        """images/ or mnt/, made by fslab if missing, refused if anything else is there."""
        with _refusing(path):
            os.mkdir(path, 0o700)
        _check_own_directory(path)
        return path

    def inside(self, ident: str, directory: Path) -> Path:
        """A journal entry's path, refused unless it names a plain entry of fslab's `directory`."""
        path = Path(ident)
        if path.parent != directory or not NAME.fullmatch(path.name.removesuffix(".img")):
            raise Refused(f"{ident} is not a path fslab makes in {directory}")
        _check_own_directory(directory)
        return path

    def owned(self) -> Owned:
        """What this work directory owns, as the kernel would prove it: its image files, and the
        whole devices its journal holds whose proof still matches. (A planted journal line can at
        most make fslab take down a layer or mount it named and made itself on that device.)
        Within one_pass(), found once."""
        if "active" not in self._pass:
            return self._owned()
        if "owned" not in self._pass:
            self._pass["owned"] = self._owned()
        return self._pass["owned"]

    @contextmanager
    def one_pass(self) -> Iterator[None]:
        """A pass releasing the journal's entries: owned() is found once for all of them (what
        the pass releases only leaves it owning less, never something else)."""
        if "active" in self._pass:
            yield
            return
        self._pass["active"] = True
        try:
            yield
        finally:
            self._pass.clear()

    def _owned(self) -> Owned:
        held = self.journal.read()[0]
        devices = {n for e in held if e.kind in HELD_DEVICES and (n := same_disk(e.proof)) is not None}
        if not os.path.lexists(self.images):
            return Owned(devices=frozenset(devices))
        _check_own_directory(self.images)
        files = {
            FileId.of(e.stat(follow_symlinks=False))
            for e in os.scandir(self.images)
            if e.name.endswith(".img") and e.is_file(follow_symlinks=False)
        }
        return Owned(files=frozenset(files), devices=frozenset(devices))

    @property
    def written_path(self) -> Path:
        return self.root / "written.json"

    def written(self) -> dict[str, list[list[str]]]:
        """What fslab left on each user's device at the end of its last run there ([type, UUID]
        of each signature), by the device's identity. A file that is not fslab's reads as empty:
        then every signature is shown to the user, the safe side."""
        try:
            fd = open_own(self.written_path, os.O_RDONLY)
        except (OSError, Refused):
            return {}
        with os.fdopen(fd) as f:
            try:
                found = json.load(f)
            except ValueError:
                return {}
        return found if isinstance(found, dict) else {}

    def record_written(self, identity: str, signatures: list[list[str]]) -> None:
        """Remember what fslab left on a device (written anew, never through a symlink)."""
        record = self.written() | {identity: signatures}
        fd = open_own(self.written_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, indent=1)

    @contextmanager
    def claim(self, waiting: Callable[[WorkdirBusy, float], None] | None = None) -> Iterator[None]:
        """Exclusive use of the work directory: one study (or clean-up) at a time, so none
        deletes or unmounts what another still uses. Busy, it is refused (WorkdirBusy), or with
        `waiting` tried again after pauses growing to BUSY_PAUSE_LONGEST, each told to
        `waiting(why, pause)` first: what the other fslab holds, it releases when it ends."""
        pause = 1.0
        while True:
            try:
                lock = self._locked()
                break
            except WorkdirBusy as exc:
                if waiting is None:
                    raise
                waiting(exc, pause)
            time.sleep(pause)  # a signal ends the wait (KeyboardInterrupt)
            pause = min(pause * 2, BUSY_PAUSE_LONGEST)
        with lock:
            yield

    def _locked(self) -> IO[str]:
        """The work directory's lock file, open and locked with this process's pid in it
        (closing it releases the lock)."""
        self.prepare()
        fd = open_own(self.root / "lock", os.O_RDWR | os.O_CREAT)
        lock = os.fdopen(fd, "r+")
        try:
            found = os.fstat(fd)
            if not stat.S_ISREG(found.st_mode) or found.st_nlink != 1:
                raise Refused(
                    f"{self.root / 'lock'} is not a regular file of fslab's "
                    "own (another name links to it): fslab leaves it alone"
                )
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = lock.read().strip() or "unknown"
                raise WorkdirBusy(
                    f"another fslab (pid {holder}) is using {self.root}; wait for it, or choose another --workdir"
                ) from None
            lock.truncate(0)
            lock.write(str(os.getpid()))
            lock.flush()
        except BaseException:
            lock.close()
            raise
        return lock

    def prepare(self) -> None:
        """The root exists, is root's alone, and is fslab's: empty when first claimed, or proven
        fslab's (the marker; else see _not_fslabs). Anything else is refused, naming what is there, and nothing in
        it is touched."""
        with _refusing(self.root):
            self.root.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(self.root, 0o700)
        _check_own_directory(self.root)
        marker = self.root / MARKER
        if os.path.lexists(marker):
            if not stat.S_ISREG(os.lstat(marker).st_mode):
                raise Refused(f"{marker} is not a regular file: {self.root} is not an fslab work directory")
            return
        found = sorted(os.listdir(self.root))
        if found:
            why = self._not_fslabs(found)
            if why:
                shown = ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
                raise Refused(
                    f"{self.root} is not an fslab work directory ({why}); "
                    f"it holds {shown}, and fslab touches none of it: "
                    "choose an empty or new directory with --workdir"
                )
        with _refusing(marker):
            fd = open_own(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            os.write(fd, MARKER_TEXT)
            os.close(fd)

    def _not_fslabs(self, found: list[str]) -> str | None:
        """Why a directory without the marker is not one an older fslab made, or None when it is:
        it holds only the names fslab gives, images/ and mnt/ are real directories, and it has a
        journal whose every line is one fslab writes (a user's `lock` or `journal.jsonl` alone
        proves nothing)."""
        strangers = [name for name in found if name not in _FSLAB_NAMES]
        if strangers:
            return f"no {MARKER} marker, and {', '.join(strangers[:3])} is no name fslab gives"
        for name in found:
            kind = stat.S_ISDIR if name in ("images", "mnt") else stat.S_ISREG
            if not kind(os.lstat(self.root / name).st_mode):
                return (
                    f"no {MARKER} marker, and {name} is not the "
                    f"{'directory' if kind is stat.S_ISDIR else 'regular file'} fslab makes"
                )
        if "journal.jsonl" not in found:
            return f"no {MARKER} marker, and no journal of fslab's"
        problems = self.journal.read()[1]
        if problems or not os.path.getsize(self.journal.path):
            return (
                f"no {MARKER} marker, and journal.jsonl holds {'lines fslab never writes' if problems else 'nothing'}"
            )
        return None


MARKER_TEXT = b"fslab's work directory: loop images, mount points and the journal of what it holds\n"
# What an fslab made in its work directory before work directories carried the marker.
_FSLAB_NAMES = {"images", "mnt", "lock", "journal.jsonl"}


@contextmanager
def _refusing(path: Path) -> Iterator[None]:
    try:
        yield
    except FileExistsError:
        pass
    except OSError as exc:
        raise Refused(f"cannot make {path}: {exc.strerror}") from None


def _check_own_directory(path: Path) -> None:
    """A real directory (not a symlink), owned by this user and writable by no one else: only
    then may fslab put images and mount points in it."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise Refused(f"{path}: {exc.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise Refused(f"{path} is not a directory (a symlink or a file is there): fslab does not follow or replace it")
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise Refused(
            f"{path} is owned by uid {st.st_uid} or writable by others (mode {stat.filemode(st.st_mode)}): "
            "fslab keeps its images and mounts only in a directory of its own"
        )
