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
    compiled files left out: the code that runs, whatever installed it (some 2 MB, 200 files: a few
    hundredths of a second)."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(path.relative_to(package).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]
