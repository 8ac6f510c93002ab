"""CPU per I/O (--trace cpu: cpu_us_per_io, the window's CPU above an idle baseline, every thread
kind, per I/O the workload completed), and how busy the host's CPUs were (monitors/cpu.py)."""

from __future__ import annotations

from fslab.statistics.explain import DIFFERENCE, RULES, Rule, microseconds, times

RULES.add(
    Rule(
        "cpu_us_per_io",
        "cpu_us_per_io",
        "the CPU time per I/O differs by more than 10 %",
        lambda d: (
            f"{times(d.ratio)} the CPU per I/O ({microseconds(d.mean)}; {d.against}: {microseconds(d.baseline_mean)})"
        ),
        priority=50,
    ),
    own=True,
)
RULES.add(
    Rule(
        "host_cpu_busy_pct",
        "host_cpu_busy_pct",
        "the share of the host's CPU time that was busy differs by more than 5 points",
        lambda d: f"the host's CPUs {d.mean:.0f} % busy ({d.against}: {d.baseline_mean:.0f} %)",
        priority=70,
        scale=DIFFERENCE,
        threshold=0.05,
        unit=100,
    ),
    own=True,
)
