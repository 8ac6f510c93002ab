"""How many extents files have, from filefrag (e2fsprogs): the measure of fragmentation that
a copy-on-write ageing scenario would read before and after its random overwrites (fslab has no
such scenario yet).

filefrag prints one line per file, "<path>: <n> extent(s) found"; a path may itself hold ": ",
so the count is read from the line's end. The parser is pure; `extent_counts` runs filefrag.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from fslab.monitors.base import Found, Measured, Workload
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


class ExtentsMonitor:
    """The files' extents after the phase: `extents` summed over them (one file: its own)."""

    name = "extents"

    def __init__(self, files: Sequence[Path]):
        self.files = list(files)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass  # filefrag runs in `values`, after the window

    def values(self, workload: Workload, found: Found) -> None:
        counts = extent_counts(self.files)
        found.values.append(Measured("extents", sum(counts.values()), "extents", False))
