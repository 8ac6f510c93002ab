"""fslab: a laboratory for filesystem performance on Linux."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__version__ = "0.1.0"  # the package's release, as pyproject.toml says it


@cache
def version() -> str:
    """Which fslab this is, as a study run, an export and a fleet's worker record it: the release
    and, after "+", its source's hash (source_hash). Two checkouts at different commits, or one
    with changes, thus never record the same version, as they did with `__version__` alone; an
    installed fslab has one too, without git. Read once, the first time asked, not at import: most
    commands never ask."""
    from pathlib import Path

    return f"{__version__}+{source_hash(Path(__file__).parent)}"


def source_hash(package: Path) -> str:
    """The first 12 hex digits of a SHA-256 of every file of `package` (by relative path), its
    compiled files left out: the code that runs, whatever installed it (some 2.5 MB, 200 files: a
    few thousandths of a second)."""
    import hashlib
    import os

    # os.walk and plain names, not Path.rglob: the same files in the same order (a path's parts
    # compared in turn, as Paths sort), in a quarter of the time (`fslab summary` asks it:
    # runs_files_current); __pycache__ is never walked into.
    top, found = os.fspath(package), []
    for folder, folders, files in os.walk(top, followlinks=True):
        folders[:] = [name for name in folders if name != "__pycache__"]
        under = [] if folder == top else os.path.relpath(folder, top).split(os.sep)
        found += [
            [*under, name]
            for name in files
            if os.path.splitext(name)[1] != ".pyc" and os.path.isfile(os.path.join(folder, name))
        ]
    digest = hashlib.sha256()
    for parts in sorted(found):
        with open(os.path.join(top, *parts), "rb") as file:
            digest.update("/".join(parts).encode() + b"\0")
            digest.update(file.read() + b"\0")
    return digest.hexdigest()[:12]
