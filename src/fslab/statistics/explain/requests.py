"""The size of the requests the devices saw (--trace block: block_request_bytes_read/_write): a
filesystem splits or merges what the workload issued."""

from __future__ import annotations

from collections.abc import Callable

from fslab.core.units import format_size
from fslab.statistics.explain import RULES, Difference, Rule


def _says(direction: str) -> Callable[[Difference], str]:
    def says(d: Difference) -> str:
        said = f"{direction} requests of {format_size(d.mean)} at its devices"
        return f"{said} ({d.against}: {format_size(d.baseline_mean)})"

    return says


for _priority, _direction in ((30, "write"), (31, "read")):
    RULES.add(
        Rule(
            f"block_request_bytes_{_direction}",
            f"block_request_bytes_{_direction}",
            f"the size of the {_direction} requests its devices saw differs by more than 10 %",
            _says(_direction),
            priority=_priority,
        ),
        own=True,
    )
