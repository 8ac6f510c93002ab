"""Direct I/O the filesystem put through the page cache (monitors: write_buffered_share,
read_buffered_share, in [0, 1]): Btrfs's fallback to buffered writes for checksummed files,
zfs-fuse ignoring O_DIRECT."""

from __future__ import annotations

from collections.abc import Callable

from fslab.statistics.explain import DIFFERENCE, RULES, Difference, Rule, percent


def _says(direction: str) -> Callable[[Difference], str]:
    def says(d: Difference) -> str:
        said = f"{percent(d.mean)} of its direct {direction} through the page cache"
        return f"{said} ({d.against}: {percent(d.baseline_mean)})"

    return says


for _priority, _direction in ((10, "write"), (11, "read")):
    RULES.add(
        Rule(
            f"{_direction}_buffered_share",
            f"{_direction}_buffered_share",
            f"the share of its direct {_direction}s that went through the page cache differs by more than 5 points",
            _says(f"{_direction}s"),
            priority=_priority,
            scale=DIFFERENCE,
            threshold=0.05,
        ),
        own=True,
    )
