"""Boots as the unit of replication between kernels (lab/study.py's `--boots N`).

Runs of one boot share that boot's state — where the kernel's memory landed, what it cached, how
the host scheduled the VM — so two kernels' runs differ by their boots as much as by their kernels,
and runs within a boot are not independent samples of the kernel. Between two hosts of which one
is a lab VM, a host's samples are its boot means wherever its runs span 2 boots or more, and a
speed verdict needs 2 boots on each side; with fewer it is withheld (stats.withhold: undecided,
its ratio still shown; report/summary.py's compare_hosts). How large boot-to-boot variation was
is said per kernel: the CV of its boot means beside the CV within a boot (the mean of each boot's
own)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

ONE_BOOT = "one boot: boots are the unit of replication"
BootValues = Sequence[tuple[str | None, float]]  # (boot id, value) of each run, in run order


def by_boot(values: BootValues) -> dict[str | None, list[float]]:
    """Each boot's values, boots in the order their first run came."""
    found: dict[str | None, list[float]] = {}
    for boot, value in values:
        found.setdefault(boot, []).append(value)
    return found


def boot_count(values: BootValues) -> int:
    """The boots the runs span (runs of no known boot, stored before schema 19: one boot, unknown)."""
    return len(by_boot(values))


def boot_means(values: BootValues) -> list[float]:
    """The samples a host's cell contributes between kernels: its boot means where its runs span
    2 boots or more, else its runs' own values."""
    boots = by_boot(values)
    if len(boots) < 2:
        return [v for _, v in values]
    return [statistics.fmean(v) for v in boots.values()]


@dataclass(frozen=True)
class BootSpread:
    """How much one host's (kernel's) cell varied from boot to boot, on one metric."""

    host: str
    workload: str
    target: str
    metric: str
    boots: int
    runs: int
    between_cv: float  # the CV of its boot means
    within_cv: float | None  # the mean of its boots' own CVs (None: no boot had 2 runs)


def spreads(
    samples: Mapping[tuple[str, str, str], Mapping[str, BootValues]],
    metric_of: Callable[[str, list[str]], Sequence[str]],
) -> list[BootSpread]:
    """Per (workload, target, host) whose runs span 2 boots or more, on each metric `metric_of`
    picks of its workload's (its primary metrics): the boot-to-boot and within-boot CVs."""
    found = []
    for (workload, target, host), metrics in sorted(samples.items()):
        for metric in metric_of(workload, list(metrics)):
            values = metrics.get(metric)
            if not values:
                continue
            boots = by_boot(values)
            if len(boots) < 2:
                continue
            means = [statistics.fmean(v) for v in boots.values()]
            within = [_cv(v) for v in boots.values() if len(v) >= 2]
            found.append(
                BootSpread(
                    host, workload, target, metric, len(boots), len(values), _cv(means),
                    statistics.fmean(within) if within else None,
                )
            )  # fmt: skip
    return found


def _cv(values: Sequence[float]) -> float:
    mean = statistics.fmean(values)
    return statistics.stdev(values) / abs(mean) if mean else 0.0
