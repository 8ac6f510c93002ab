"""Where report files go and how they are written: into folders fslab makes, never through a
symlink someone left at a file's or a folder's name. Text and bytes alike (a page, an SVG, a PNG)."""

from __future__ import annotations

import os
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


def write_own(path: Path, data: str | bytes) -> Path:
    """Write one report file (text as UTF-8), never through a symlink at its name; returns the path."""
    with os.fdopen(open_own(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return path


def write_all(folder: Path, files: Mapping[str, str | bytes]) -> list[Path]:
    """Each named file written into `folder` (made if missing, as own_folder); the paths written."""
    own_folder(folder)
    return [write_own(folder / name, data) for name, data in files.items()]
