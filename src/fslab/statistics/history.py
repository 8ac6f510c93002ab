"""A study's history: each cell's metric across its study runs, per host, and every step between
consecutive study runs that fslab's statistics call a change. Pure: stored samples in, series and
steps out (statistics/history_reading.py reads them from a database; the CLI and the trend page show them).

A step is judged as any two cells are (stats.compare_pairs): the ratio of the geometric means,
newer ÷ older, with Welch's interval on the log values, every test of the history one family whose
intervals are drawn at its false coverage rate (stats.adjust_family: Benjamini–Yekutieli); its
verdict is read from that interval (stats.decide), and a step is a change only when decided
"faster" or "slower" — the interval excludes 1 and the ratio lies beyond the threshold. A
regression is a change the worse way for the metric.

Why not fsperf's rule (a new result outside the old results' mean ± 1.96 sd): that band is the
spread of single runs, whatever n — it neither narrows as runs are added nor widens for a mean of
two, so it misses a real step smaller than the run-to-run noise and calls chance a regression
when few runs stand behind it; Welch's standard error is sd/√n on each side, and the adjusted
intervals bound the false changes over the whole history.

A drift — several steps each within the threshold — flags no step (each step is what it is). So
each series' latest study run is also compared with its first (its `span`, in the same family):
a span that is a change while no step is is reported as a drift, once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from fslab.model import Host
from fslab.statistics.analysis import regressed, resolution_of
from fslab.statistics.stats import (
    CONFIDENCE,
    FASTER,
    SLOWER,
    Comparison,
    SamplePair,
    Summary,
    adjust_family,
    compare_pairs,
    summarize,
    withhold,
)
from fslab.statistics.timing import why_not_compared

DEFAULT_THRESHOLD = 0.03
UNRECORDED_HOST = "this machine"  # a study run stored before runs named their host, and run by no recorded process


@dataclass(frozen=True)
class StoredStudyRun:
    """What a history reads of one study run: when, by which fslab, each host's kernel, and the
    samples of every successful measured run by host (None: not recorded), workload and target."""

    id: int
    started_at: datetime
    fslab_version: str
    kernel: str  # the study run's environment's
    owner_host: str | None  # the host of the process that ran it (results.owner), where recorded
    host_kernels: dict[str, str]  # host → its kernel, as the hosts table keeps it (schema 10 on)
    values: dict[
        tuple[str | None, str, str], dict[str, list[float]]
    ]  # (host, workload, target) → metric → values in run order
    higher_is_better: dict[str, bool]
    kinds: dict[str, str]  # workload → its kind: what printed its figures (their resolution)
    # host → its facts, as the hosts table keeps them (schema 10 on): how it ran its kernel (accelerator)
    host_facts: dict[str, Host] = field(default_factory=dict)


class SeriesKey(NamedTuple):
    host: str
    workload: str
    target: str
    metric: str

    def label(self) -> str:
        return f"{self.workload} · {self.target} · {self.metric} on {self.host}"


@dataclass(frozen=True)
class Point:
    """One study run's cell on one host, in one metric."""

    study_run: int
    started_at: datetime
    kernel: str
    fslab_version: str
    samples: tuple[float, ...]
    summary: Summary
    machine: Host | None = None  # its host's facts, where recorded: a step is judged only where they allow (timing.py)

    @property
    def accelerator(self) -> str:
        """How its host ran its kernel (host, kvm, tcg); "–" where not recorded."""
        return "–" if self.machine is None else self.machine.accelerator


@dataclass(frozen=True)
class Step:
    """`newer` against `older` in one series (consecutive study runs, or for a span the first and
    the latest): the comparison of the one family, adjusted."""

    key: SeriesKey
    older: Point
    newer: Point
    comparison: Comparison

    @property
    def change(self) -> bool:
        """Decided faster or slower, read from the step's interval (stats.decide)."""
        return self.comparison.verdict in (FASTER, SLOWER)

    @property
    def regression(self) -> bool:
        """Decided slower beyond the history's threshold (analysis.regressed: the one rule)."""
        return regressed(self.comparison, self.comparison.threshold)


@dataclass(frozen=True)
class Series:
    key: SeriesKey
    higher_is_better: bool
    points: list[Point]  # oldest first
    steps: list[Step]  # between consecutive points
    span: Step | None  # the latest point against the first, with three points or more

    @property
    def drift(self) -> Step | None:
        """The span, when it is a change and no step is: what added up over small steps."""
        return (
            self.span if self.span is not None and self.span.change and not any(s.change for s in self.steps) else None
        )


@dataclass(frozen=True)
class History:
    series: list[Series]
    threshold: float
    family_size: int  # tests Benjamini–Hochberg corrected together (steps and spans with a p-value)
    latest: int | None  # the newest study run of those in its series (of the hosts and metrics chosen)

    @property
    def level(self) -> float:
        """The confidence the history's intervals are drawn at (one family: stats.family_level)."""
        steps = (st for s in self.series for st in [*s.steps, *([s.span] if s.span else [])])
        return next((st.comparison.level for st in steps if st.comparison.p_value is not None), CONFIDENCE)

    @property
    def flagged(self) -> list[Step]:
        """Every step that is a change (decided faster or slower), series by series, oldest first."""
        return [step for s in self.series for step in s.steps if step.change]

    @property
    def drifts(self) -> list[Step]:
        return [d for s in self.series if (d := s.drift) is not None]

    @property
    def latest_steps(self) -> list[Step]:
        """Every step into the newest study run, series by series: what a CI gate judges of the run
        it just made (analysis.gate)."""
        return [step for s in self.series for step in s.steps if step.newer.study_run == self.latest]

    @property
    def latest_regressions(self) -> list[Step]:
        """Regressions on a step into the newest study run."""
        return [step for step in self.latest_steps if step.regression]


def host_of(run_host: str | None, study_run: StoredStudyRun) -> str:
    """The host a run's samples belong to: as the run recorded it (schema 10 on); before, the
    host whose fslab ran the study run (its recorded owner), else UNRECORDED_HOST — one host."""
    return run_host or study_run.owner_host or UNRECORDED_HOST


def series_points(
    study_runs: Iterable[StoredStudyRun], *, hosts: Iterable[str] | None = None, metrics: Iterable[str] | None = None
) -> dict[SeriesKey, tuple[bool, list[Point]]]:
    """The one grouping by host: each (host, workload, target, metric)'s points, oldest study run
    first, with the metric's direction; only the hosts and metrics named, when named."""
    chosen_hosts, chosen_metrics = (None if hosts is None else set(hosts)), (None if metrics is None else set(metrics))
    found: dict[SeriesKey, tuple[bool, list[Point]]] = {}
    for sr in sorted(study_runs, key=lambda sr: (sr.started_at, sr.id)):
        for (run_host, workload, target), cell in sr.values.items():
            host = host_of(run_host, sr)
            if chosen_hosts is not None and host not in chosen_hosts:
                continue
            for metric, values in cell.items():
                if (chosen_metrics is not None and metric not in chosen_metrics) or not values:
                    continue
                higher = sr.higher_is_better.get(metric, True)
                kernel = sr.host_kernels.get(host, sr.kernel)
                point = Point(
                    sr.id,
                    sr.started_at,
                    kernel,
                    sr.fslab_version,
                    tuple(values),
                    summarize(values, higher, resolution_of(sr.kinds, workload, metric)),
                    sr.host_facts.get(host),
                )
                found.setdefault(SeriesKey(host, workload, target, metric), (higher, []))[1].append(point)
    return found


def history(
    study_runs: list[StoredStudyRun],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    hosts: Iterable[str] | None = None,
    metrics: Iterable[str] | None = None,
) -> History:
    """Every series of `study_runs` (those of `hosts` and `metrics` when named), each step and span
    compared, Benjamini–Hochberg over all of them together."""
    points = series_points(study_runs, hosts=hosts, metrics=metrics)
    kinds = {workload: kind for sr in study_runs for workload, kind in sr.kinds.items()}
    tests: list[tuple[SeriesKey, Point, Point]] = []
    pairs: list[SamplePair] = []
    for key, (higher, found) in points.items():
        ends = [(found[i], found[i + 1]) for i in range(len(found) - 1)] + (
            [(found[0], found[-1])] if len(found) >= 3 else []
        )
        for older, newer in ends:
            # a value of 0 on a side leaves no ratio: undecided, with why (stats.compare_pairs)
            tests.append((key, older, newer))
            pairs.append(
                SamplePair(
                    list(older.samples), list(newer.samples), higher, resolution_of(kinds, key.workload, key.metric)
                )
            )
    made = compare_pairs(pairs, threshold)
    held = [why_not_compared(key.metric, older.machine, newer.machine) for key, older, newer in tests]
    compared = adjust_family([c if why is None else withhold(c, why) for c, why in zip(made, held)], threshold)
    judged = {
        (key, older.study_run, newer.study_run): Step(key, older, newer, c)
        for (key, older, newer), c in zip(tests, compared)
    }
    series = []
    for key, (higher, found) in sorted(points.items()):
        steps = [
            s
            for i in range(len(found) - 1)
            if (s := judged.get((key, found[i].study_run, found[i + 1].study_run))) is not None
        ]
        span = judged.get((key, found[0].study_run, found[-1].study_run)) if len(found) >= 3 else None
        series.append(Series(key, higher, found, steps, span))
    newest = max(
        (p for _, found in points.values() for p in found), key=lambda p: (p.started_at, p.study_run), default=None
    )
    return History(
        series, threshold, sum(c.p_value is not None for c in compared), None if newest is None else newest.study_run
    )
