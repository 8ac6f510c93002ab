"""Scratch: a private directory for one run's side files (job files, fio's verify state, dd's
random data, the fill job's), journalled before it is made, proven by its (device, inode), and
removed afterwards — by `fslab cleanup` when a killed fslab could not."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.core.errors import Refused
from fslab.core.identity import FileId, own_directory
from fslab.core.journal import Entry, Journal, releaser
from fslab.core.names import workdir_tag

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir

# A run's side files (job files, fio's verify state, dd's random data) live in RAM where the
# machine has it, so that what a workload reads from them never touches the disks measured.
SCRATCH_IN_RAM = Path("/dev/shm")
_SCRATCH_NUMBERS = itertools.count(1)


def _scratch_parent() -> Path:
    return SCRATCH_IN_RAM if SCRATCH_IN_RAM.is_dir() else Path(tempfile.gettempdir())


@contextmanager
def scratch_directory(journal: Journal) -> Iterator[Path]:
    """A private directory for a run's side files, removed afterwards. Journalled before it is
    made and proven by its (device, inode): what dd reads from it (up to 1 GiB of random data)
    sits in RAM, and a killed fslab must not leave it there for good — `fslab cleanup` removes it."""
    path = _scratch_parent() / f"{workdir_tag(journal.workdir.root)}job{os.getpid()}_{next(_SCRATCH_NUMBERS)}"
    with journal.holding("scratch", str(path)) as held:
        os.mkdir(path, 0o700)
        held.prove(**FileId.of(os.lstat(path)).proof())
        yield path


@releaser("scratch")
def remove_scratch(entry: Entry, workdir: Workdir) -> None:
    """Remove a run's scratch directory, if that very one is there: directly in the place fslab
    makes them, named for this work directory, a directory (not a symlink) with the recorded
    (device, inode). Its contents are fslab's side files; rmtree follows no symlink in them."""
    path = Path(entry.ident)
    if (
        path.parent != _scratch_parent()
        or path.name in (".", "..")
        or not path.name.startswith(workdir_tag(workdir.root))
    ):
        raise Refused(f"{path} is not a scratch directory fslab makes for this work directory; left alone")
    if own_directory(path, entry.proof, "scratch directory"):
        shutil.rmtree(path)
