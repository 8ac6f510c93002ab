"""How long the devices took (--trace block: block_device_time_p99_us_read/_write, issue to
completion): a device idle while latency grows above it, or one that is the bottleneck."""

from __future__ import annotations

from collections.abc import Callable

from fslab.statistics.explain import RULES, Difference, Rule, microseconds


def _says(direction: str) -> Callable[[Difference], str]:
    def says(d: Difference) -> str:
        said = f"a device time p99 of {microseconds(d.mean)} for {direction}"
        return f"{said} ({d.against}: {microseconds(d.baseline_mean)})"

    return says


for _priority, _direction in ((40, "write"), (41, "read")):
    RULES.add(
        Rule(
            f"block_device_time_p99_us_{_direction}",
            f"block_device_time_p99_us_{_direction}",
            f"the p99 of the time its devices took per {_direction} request differs by more than 10 %",
            _says(f"{_direction}s"),
            priority=_priority,
        ),
        own=True,
    )
