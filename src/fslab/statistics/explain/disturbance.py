"""What else was running (PSI and steal time over each run's window): CPU pressure from
neighbours, and time a hypervisor gave another guest. Runs flagged "disturbed" are counted."""

from __future__ import annotations

from fslab.statistics.explain import DIFFERENCE, RULES, Rule

RULES.add(
    Rule(
        "psi_cpu_some_pct",
        "psi_cpu_some_pct",
        "the share of time some task waited for a CPU (PSI cpu some) differs by more than 5 points "
        '(its runs flagged "disturbed" are counted)',
        lambda d: (
            f"tasks waiting for a CPU {d.mean:.1f} % of the time ({d.against}: {d.baseline_mean:.1f} %"
            f"{d.noted_text('disturbed')})"
        ),
        priority=80,
        scale=DIFFERENCE,
        threshold=0.05,
        unit=100,
        note="disturbed",
    ),
    own=True,
)
RULES.add(
    Rule(
        "steal_pct",
        "steal_pct",
        "the share of CPU time stolen by the hypervisor differs by more than 2 points",
        lambda d: f"{d.mean:.1f} % of its CPU time stolen by the hypervisor ({d.against}: {d.baseline_mean:.1f} %)",
        priority=81,
        scale=DIFFERENCE,
        threshold=0.02,
        unit=100,
    ),
    own=True,
)
