"""How many extents files have, from filefrag (e2fsprogs): the measure of fragmentation that
the copy-on-write ageing scenario reads before and after its random overwrites
(scenarios/kind.py).

filefrag prints one line per file, "<path>: <n> extent(s) found"; a path may itself hold ": ",
so the count is read from the line's end. The parser is pure; `extent_counts` runs filefrag.

A count is not always a measurement. filefrag asks the filesystem with FIEMAP, and where the
filesystem has none (FUSE, so zfs-fuse, has none in the kernel) it falls back to FIBMAP, which a
FUSE filesystem on no block device answers with "no block" for every block: filefrag then says
"0 extents found" of a file full of data. A file that holds blocks (st_blocks) has at least one
extent, so 0 of such a file is not a count: it is stored as not measurable, with why, in a line
of fslab's own, "<path>: extents not measurable: <why>", and no figure is made of it. A
filesystem that answers neither (tmpfs; OpenZFS, whose kernel module has no bmap) makes
filefrag say "<path>: FIBMAP/FIEMAP unsupported" and exit non-zero: not measurable either.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fslab.core.units import format_size

_LINE = re.compile(r"^(.*): (\d+) extents? found$")
_NOT_MEASURABLE = re.compile(r"^(.*): extents not measurable: (.+)$")
_UNSUPPORTED = re.compile(r"^(.*): (?:FIBMAP/FIEMAP|FIBMAP) unsupported$", re.MULTILINE)  # filefrag's stderr
_FILESYSTEM_TYPE = re.compile(r"^Filesystem type is: ([0-9a-f]+)$", re.MULTILINE)
FUSE_SUPER_MAGIC = "65735546"  # filefrag -v's "Filesystem type is:" of any FUSE filesystem


@dataclass(frozen=True)
class Extents:
    """A file's extents as filefrag counted them, or why they cannot be counted (count None)."""

    count: int | None
    why: str = ""

    def line(self, path: str) -> str:
        """As stored: filefrag's own line, or fslab's saying why there is no count."""
        return (
            f"{path}: {self.count} extents found\n"
            if self.count is not None
            else f"{path}: extents not measurable: {self.why}\n"
        )


def parse_filefrag(text: str) -> dict[str, Extents]:
    """filefrag's output (and fslab's lines of files it could not count) → extents per path,
    as filefrag printed the path."""
    found = {}
    for line in text.splitlines():
        if match := _LINE.match(line):
            found[match[1]] = Extents(int(match[2]))
        elif match := _NOT_MEASURABLE.match(line):
            found[match[1]] = Extents(None, match[2])
    return found


def not_a_count(count: int, allocated: int, size: int, filesystem_type: str | None, filesystem: str) -> Extents:
    """What filefrag's `count` of a file is worth, from the bytes the file holds on its filesystem
    (`allocated`, st_blocks × 512) and its `size`: a count, or, for 0 extents of a file holding
    blocks, why it is none (`filesystem_type`: filefrag -v's hex magic; `filesystem`: fslab's name)."""
    if count or not allocated:
        return Extents(count)
    how = (
        "FUSE gives no FIEMAP"
        if filesystem_type == FUSE_SUPER_MAGIC
        else "its filesystem answered filefrag with no extent"
    )
    return Extents(
        None,
        f"on {filesystem} ({how}: filefrag found 0 extents in a file "
        f"of {format_size(size)} holding {format_size(allocated)})",
    )


def extent_counts(files: Sequence[Path], filesystem: str) -> dict[Path, Extents]:
    """Extents of each file (filefrag asks the filesystem with FIEMAP), or why they are not
    measurable on `filesystem` (named so in what is said); ValueError if filefrag says nothing of
    a file."""
    from fslab.core.system import run  # subprocess and the journal: for a run, not for a summary reading the registry

    if not files:
        return {}
    asked = run(
        ["filefrag", "--", *(str(f) for f in files)], check=False
    )  # non-zero where it could map no file: said per file
    counts = parse_filefrag(asked.stdout)
    for path in _UNSUPPORTED.findall(asked.stderr):
        counts.setdefault(
            path,
            Extents(None, f"on {filesystem} (it answers neither FIEMAP nor FIBMAP: filefrag cannot map a file there)"),
        )
    missing = [str(f) for f in files if str(f) not in counts]
    if missing:
        raise ValueError(
            f"filefrag reported no extent count for {', '.join(missing)}: {asked.stderr.strip() or 'it said nothing'}"
        )
    found = {}
    for f in files:
        counted, held, kind = counts[str(f)], os.stat(f), None
        if counted.count is None:
            found[f] = counted
            continue
        if (
            counted.count == 0 and held.st_blocks
        ):  # which filesystem answered: filefrag -v names it first (no extent follows)
            kind = next(iter(_FILESYSTEM_TYPE.findall(run(["filefrag", "-v", "--", str(f)]).stdout)), None)
        found[f] = not_a_count(counted.count, held.st_blocks * 512, held.st_size, kind, filesystem)
    return found
