"""Metrics: named numbers with a unit, a direction and a role, whatever tool measured them.

A workload kind declares the metrics it reports (`MetricKind`: unit, direction, and whether a
metric is *primary* — it decides a cell's precision, its rank and when adaptive runs stop — or
*compared* — every pair of targets is compared on it); its parser turns raw output into
`Metric`s with `MetricKind.of`. A kind also declares each metric's *resolution*: the step its
tool prints it to (sysbench's latencies 0.01 ms), below which runs cannot differ; statistics
never claim an interval narrower than it (stats.py). Every metric is stored with its role (results/db.py), and
statistics, plans and reports read the role from what is stored (`Roles`), never from a metric's
name: a cell whose only metric is `elapsed_s` (lower is better) is summarised, compared and ranked
as one with IOPS is.

A metric of one phase of a multi-phase workload carries the phase's name; it is keyed
"<phase>.<name>" (`after.read_mb_s`) wherever samples are grouped.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PHASE_SEPARATOR = "."


def qualified(phase: str, name: str) -> str:
    """How a metric is keyed in samples: its name, after its phase's when it has one."""
    return f"{phase}{PHASE_SEPARATOR}{name}" if phase else name


def unqualified(key: str) -> str:
    """The metric's own name, without its phase."""
    return key.rpartition(PHASE_SEPARATOR)[2]


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    unit: str
    higher_is_better: bool
    primary: bool = False  # decides precision, rank and adaptive stopping
    compared: bool = False  # compared between every pair of targets
    phase: str = ""  # the scenario phase that measured it; "" for a workload of one phase

    @property
    def key(self) -> str:
        return qualified(self.phase, self.name)


@dataclass(frozen=True)
class MetricKind:
    """What a metric is, declared by the workload kind that reports it."""

    unit: str
    higher_is_better: bool
    primary: bool = False
    compared: bool = False
    # The step the tool prints it to, in its unit (0.01 for a latency printed in ms to two
    # decimals); 0: finer than any spread between runs (sysbench's events/s: a count ÷ a time).
    resolution: float = 0.0

    def of(self, name: str, value: float, phase: str = "") -> Metric:
        return Metric(name, value, self.unit, self.higher_is_better, self.primary, self.compared, phase)


@dataclass(frozen=True)
class Roles:
    """Which metrics (workload, key) are primary and which compared, as stored with them: per
    workload, since kinds share names (dd's write_mb_s is primary, fio's is not). Both are read in
    name order, so a report lists them the same way however they were stored."""

    primary: frozenset[tuple[str, str]] = frozenset()
    compared: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def of(cls, workload: str, metrics: Iterable[Metric]) -> Roles:
        return cls.flagged((workload, m.key, m.primary, m.compared) for m in metrics)

    @classmethod
    def flagged(cls, rows: Iterable[tuple[str, str, bool, bool]]) -> Roles:
        """From (workload, key, primary, compared) rows: metrics as the database stores them."""
        found = list(rows)
        return cls(frozenset((w, key) for w, key, primary, _ in found if primary), frozenset((w, key) for w, key, _, compared in found if compared))

    @classmethod
    def declared(cls, keys: Iterable[tuple[str, str]], kinds: Mapping[str, MetricKind]) -> Roles:
        """The roles `kinds` declare for these (workload, key) (each looked up by its own name,
        without its phase): for samples that come without stored roles."""
        found = [(key, kinds.get(unqualified(key[1]))) for key in keys]
        return cls(frozenset(k for k, kind in found if kind and kind.primary), frozenset(k for k, kind in found if kind and kind.compared))

    def __or__(self, other: Roles) -> Roles:
        return Roles(self.primary | other.primary, self.compared | other.compared)

    def primary_in(self, workload: str, metrics: Iterable[str]) -> list[str]:
        """The primary metrics among a cell's of `workload`, in name order."""
        return sorted(m for m in metrics if (workload, m) in self.primary)

    def compared_in(self, workload: str, metrics: Iterable[str]) -> list[str]:
        return sorted(m for m in metrics if (workload, m) in self.compared)
