"""How many extents files have, from filefrag (e2fsprogs): the measure of fragmentation that
the copy-on-write ageing scenario reads before and after its random overwrites
(workloads/scenario.py).

filefrag prints one line per file, "<path>: <n> extent(s) found"; a path may itself hold ": ",
so the count is read from the line's end. The parser is pure; `extent_counts` runs filefrag.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from fslab.system import run

_LINE = re.compile(r"^(.*): (\d+) extents? found$")


def parse_filefrag(text: str) -> dict[str, int]:
    """filefrag's output → extents per path, as filefrag printed the path."""
    counts = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            counts[match[1]] = int(match[2])
    return counts


def extent_counts(files: Sequence[Path]) -> dict[Path, int]:
    """Extents of each file (filefrag asks the filesystem with FIEMAP); ValueError if filefrag
    says nothing of a file."""
    if not files:
        return {}
    counts = parse_filefrag(run(["filefrag", "--", *(str(f) for f in files)]).stdout)
    missing = [str(f) for f in files if str(f) not in counts]
    if missing:
        raise ValueError(f"filefrag reported no extent count for {', '.join(missing)}")
    return {f: counts[str(f)] for f in files}
