"""What reached the devices under the target (monitors/traffic.py): bytes written per byte the
workload wrote, the bytes written where the workload does not say what it wrote, and the bytes
read per byte it read — a cache (the page cache, the ARC) answering reads shows as far fewer."""

from __future__ import annotations

import statistics

from fslab.core.units import format_size
from fslab.monitors.traffic import AMPLIFICATION_FROM, REWRITTEN_BY_COMMITS
from fslab.statistics.explain import DIFFERENCE, RULES, Rule, percent, times

RULES.add(
    Rule(
        "write_amplification",
        "write_amplification",
        "the bytes its devices wrote per byte the workload wrote differ by more than 10 % "
        "(not where it is withheld: a workload that wrote under 64 MiB; its runs flagged rewritten_by_commits "
        "are counted)",
        lambda d: (
            f"a write amplification of {d.mean:.2f}× at its devices ({d.against}: {d.baseline_mean:.2f}×"
            f"{d.noted_text('rewritten by its commits')})"
        ),
        priority=20,
        note=REWRITTEN_BY_COMMITS,  # a ratio that follows how many commits the runs spanned: said so
    ),
    own=True,
)
RULES.add(
    Rule(
        "device_written_bytes",
        "device_written_bytes",
        "the bytes its devices wrote differ by more than 10 %, where the workload does not say what it "
        "wrote (no write_amplification in both cells) and either cell's devices wrote 64 MiB or more (median)",
        lambda d: (
            f"{times(d.ratio)} the bytes written at its devices "
            f"({format_size(d.mean)}; {d.against}: {format_size(d.baseline_mean)})"
        ),
        priority=21,
        instead_of="write_amplification",
        # a few KiB of journal beside a read workload is no story, as traffic.py withholds the ratio of so little
        applies=lambda mine, theirs: max(statistics.median(mine), statistics.median(theirs)) >= AMPLIFICATION_FROM,
    ),
    own=True,
)
RULES.add(
    Rule(
        "device_read_ratio",
        "device_read_ratio",
        "the bytes its devices read per byte the workload read differ by more than 10 points "
        "(its runs flagged served_by_cache are counted)",
        lambda d: (
            f"its devices reading {percent(d.mean)} of the bytes it read ({d.against}: "
            f"{percent(d.baseline_mean)}{d.noted_text('served by a cache')})"
        ),
        priority=22,
        scale=DIFFERENCE,
        threshold=0.10,
        note="served_by_cache",
    ),
    own=True,
)
