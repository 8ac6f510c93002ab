"""How many extents the workload's file ended in (scenarios' `extents = true` phases, filefrag):
what copy-on-write scatters."""

from __future__ import annotations

from fslab.statistics.explain import RULES, Rule

RULES.add(
    Rule(
        "extents",
        "extents",
        "the file's extents after the phase differ by more than 10 %",
        lambda d: f"{d.mean:,.0f} extents in its file ({d.against}: {d.baseline_mean:,.0f})",
        priority=60,
    ),
    own=True,
)
