"""What a workload kind offers a report beyond its metrics: the report hook of the workload-kind
protocol (base.WorkloadKind.report), and the typed records it answers in. The report draws what a
kind offers and knows no kind; a kind says what it has, from what its runs stored:

    series          a run's course over time (Throughput, LatencyOverTime, PercentilesOverTime, or
                    any other quantity: Series), of each cell the run whose figure is the median
                    of its runs (median_runs)
    distributions   which of its metrics are latency percentiles (Percentiles), and latency
                    histograms added up over a cell's runs (LatencyHistogram)
    per-run notes   what a cell's table says beside its figures (cell_notes, below)

The page adds charts alone to what it shows of a study run (its sections, tables and words stay as
they are: tests/test_baseline.py), so a kind offers no table of its own: what its runs say goes
into the summary's tables and notes, where every format shows it.

`KindReport.offered(stored)` gets the kind's measured runs of a study run and a reader of what they
stored (`Stored`, over the results database: this floor reads no database itself); it is pure
otherwise, and says what it cannot read rather than failing (`Offered.unreadable`). The summary
asks the hook too, of a workload as stored: what its cells' tables say beside their figures
(cell_notes), the data its runs read (data_read: whether a cache may hold it), how its files were
preallocated and what fslab rewrote of its command. A kind's hook lives apart from the kind, in a
module as light as its metrics (workloads.report_of), so that reading stored runs loads no kind.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from fslab.model import RawOutput

if TYPE_CHECKING:
    import numpy as np

DIRECTIONS = ("read", "write")  # every per-direction metric is named "<direction>_<metric>"
Key = tuple[str, str, str, str]  # a cell's workload, target, phase and direction ("" for a kind with none)


class Stored(Protocol):
    """What one study run stored, as a kind's hook reads it: its runs of the kind (ok and measured,
    each a dict with id, workload, target as its cell names it, repetition and source), and their
    outputs and metrics."""

    @property
    def runs(self) -> Sequence[dict]: ...

    def outputs(self, tool: str, only: Iterable[int] | None = None) -> dict[int, list[RawOutput]]:
        """The runs' stored outputs of `tool`, every phase, by run id (of the runs `only` names)."""
        ...

    def phases(self, tool: str) -> dict[int, list[str]]:
        """Each run's phases with an output of `tool`, their text not read."""
        ...

    def values(self, metrics: Iterable[str]) -> dict[tuple[int, str, str], float]:
        """The runs' stored values of `metrics`: (run id, phase, metric) → value."""
        ...


# --- series: a run over time -----------------------------------------------------------------------


@dataclass(frozen=True)
class Throughput:
    """A measured run's throughput over time in one direction, window by window."""

    direction: str
    window_ms: int
    seconds: list[float]  # each window's end, from the start of the measured run
    bytes_s: list[float]
    iops: list[float] | None  # None: the tool gives none per window

    def coarsened(self, most: int) -> Throughput:
        """At most `most` windows: each run of k consecutive windows as one, their mean, at the last one's time."""
        k = math.ceil(len(self.seconds) / most)
        if k <= 1:
            return self
        groups = range(0, len(self.seconds), k)
        return Throughput(
            self.direction,
            self.window_ms * k,
            [self.seconds[min(i + k, len(self.seconds)) - 1] for i in groups],
            [statistics.fmean(self.bytes_s[i : i + k]) for i in groups],
            None if self.iops is None else [statistics.fmean(self.iops[i : i + k]) for i in groups],
        )


class BinLayout(Protocol):
    """A latency histogram's bins: how many, and the latency (ns) each stands for. Hashable: what
    is drawn of it is kept per layout."""

    @property
    def count(self) -> int: ...

    def values_ns(self) -> np.ndarray: ...

    def __hash__(self) -> int: ...


@dataclass(frozen=True, eq=False)
class LatencyOverTime:
    """A run's latency over time in one direction: a histogram per window (every job's added up),
    consecutive windows from the first with completions to the last."""

    direction: str
    window_ms: int
    bins: BinLayout
    starts_s: tuple[float, ...]  # each window's start, from the run's epoch
    ends_s: tuple[float, ...]  # and its end
    counts: np.ndarray  # windows × bins: completions

    def window_bins(self, window: int) -> dict[int, int]:
        """One window's bins with completions: index → completions."""
        import numpy as np

        row = self.counts[window]
        return {int(i): int(row[i]) for i in np.flatnonzero(row)}

    def percentiles(self, percent: float) -> list[float | None]:
        """Each window's percentile (ns) from its bins: the value of the first bin at which the
        running count reaches percent·N (fio's way); None where nothing completed."""
        running = self.counts.cumsum(axis=1)
        totals = running[:, -1]
        first = (running >= (percent / 100.0 * totals)[:, None]).argmax(axis=1)
        values = self.bins.values_ns()
        return [float(values[i]) if n else None for i, n in zip(first, totals)]

    def coarsened(self, most: int) -> LatencyOverTime:
        """At most `most` windows: each run of k consecutive ones as one, their bins added up (its
        percentiles are those of all its completions, never a mean of percentiles)."""
        import numpy as np

        k = math.ceil(len(self.ends_s) / most)
        if k <= 1:
            return self
        firsts = range(0, len(self.ends_s), k)
        padded = np.zeros((len(firsts) * k, self.bins.count), dtype=self.counts.dtype)
        padded[: len(self.ends_s)] = self.counts
        counts = padded.reshape(len(firsts), k, self.bins.count).sum(axis=1)
        ends = tuple(self.ends_s[min(i + k, len(self.ends_s)) - 1] for i in firsts)  # the last group may be shorter
        return LatencyOverTime(
            self.direction, self.window_ms * k, self.bins, tuple(self.starts_s[i] for i in firsts), ends, counts
        )


@dataclass(frozen=True)
class PercentilesOverTime:
    """A run's latency percentiles over time as its tool reports them, window by window (no bins:
    a tool that prints each window's percentile)."""

    direction: str  # "" for a tool that reports latency of every kind of request together
    window_ms: int
    ends_s: tuple[float, ...]  # each window's end, from the start of the measured run
    percentiles_us: dict[str, list[float | None]]  # "P95" → each window's, µs; None where nothing completed


@dataclass(frozen=True)
class Series:
    """Any other quantity of a run over time, as its tool reports it: a value at each moment."""

    quantity: str  # what it is, as a chart's axis names it ("time per call")
    unit: str
    direction: str  # "" for a quantity of no direction
    ends_s: tuple[float, ...]  # each value's moment (the end of its window), from the start of the measured run
    values: tuple[float | None, ...]  # None: nothing to tell of that moment


@dataclass(frozen=True)
class SeriesTrace:
    """One cell's Series in one phase, of its run drawn (median_runs)."""

    workload: str
    target: str
    phase: str
    repetition: int
    runs: int
    series: Series
    source: str  # what the figures are, as a caption says it


@dataclass(frozen=True)
class ThroughputTrace:
    """One cell's throughput over time in one direction of one phase: of its run whose bandwidth
    is the cell's median (median_runs)."""

    workload: str
    target: str
    phase: str  # "" for a workload of one phase
    repetition: int  # the run drawn
    runs: int  # the cell's runs with the series, it the median of
    throughput: Throughput
    source: str  # what the figures are, as a caption says it ("fio's bandwidth log, every job added up")


@dataclass(frozen=True)
class LatencyTrace:
    """One cell's latency over time in one direction of one phase, of the same run as its
    ThroughputTrace: bins per window (a heatmap and its percentiles are drawn) or the tool's own
    percentiles per window."""

    workload: str
    target: str
    phase: str
    repetition: int
    runs: int
    latency: LatencyOverTime | PercentilesOverTime
    # as captions say them: what the latency is, how each window's percentiles come from it, and
    # what a heatmap of its bins draws (LatencyOverTime's alone)
    latency_is: str
    percentiles_from: str
    bins_are: str = ""


# --- distributions -------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)  # one of a kind's declarations, itself: a chart is drawn per phase of each
class Percentiles:
    """Which of a kind's metrics are latency percentiles in one direction: drawn per cell (each the
    median over its runs), wherever a phase measured that direction (`measured_by`: its metric)."""

    direction: str  # "" for a kind whose latency is of every request together
    measured_by: str  # the metric a phase has when it measured this direction
    metrics: dict[str, str]  # "P50" → its metric, in the order drawn
    to_us: float  # each metric's value × this: µs
    latency_is: str  # what the latency is, as a caption says it


@dataclass(frozen=True)
class LatencyHistogram:
    """One cell's latency distribution in one direction: its bins added up over its measured runs."""

    workload: str
    target: str
    direction: str
    latency: str  # which latency, in words ("completion latency")
    bins: dict[int, int]  # latency in ns (a bin's value) → I/Os, added up over `runs`
    runs: int
    phase: str = ""  # a scenario's phase; "" for a workload of one phase
    source: str = field(kw_only=True)  # what the bins are, as a caption says it ("fio's json+ latency bins")


# --- what a kind offers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Offered:
    histograms: list[LatencyHistogram] = field(default_factory=list)
    traces: list[ThroughputTrace] = field(default_factory=list)
    latency_traces: list[LatencyTrace] = field(default_factory=list)
    series: list[SeriesTrace] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # stored outputs that could not be read, and why

    def __add__(self, other: Offered) -> Offered:
        return Offered(
            self.histograms + other.histograms,
            self.traces + other.traces,
            self.latency_traces + other.latency_traces,
            self.series + other.series,
            self.unreadable + other.unreadable,
        )


class KindReport:
    """The report hook: what a kind offers a report beyond its metrics. A kind's hook overrides
    what it has; each default offers nothing. All pure but `offered`, which reads what it needs."""

    # Which of its metrics are latency percentiles, per direction: drawn per cell, and the columns
    # of the summary's table of a workload measured per direction.
    percentiles: Sequence[Percentiles] = ()

    def offered(self, stored: Stored) -> Offered:
        """What a kind's runs of one study run offer the page (`stored`: them, and their outputs)."""
        return Offered()

    def cell_notes(self, workload: Mapping, values: Mapping[str, list[float]]) -> list[str]:
        """What a cell's table says beside its figures (fio's steady state), from its workload's
        stored spec and its runs' values by key."""
        return []

    def data_read(self, workload: Mapping, zvol: bool) -> int:
        """The bytes a measured run of the stored workload reads (what a cache may hold; 0: none
        or not known); `zvol`: on a ZFS volume."""
        return 0

    def preallocated(self, workload: Mapping) -> str:
        """How the stored workload's files were preallocated, as a note says it ("fio fallocate=native");
        "" when they were not."""
        return ""

    def rewritten(self, workload: Mapping) -> str:
        """What fslab rewrote of the stored workload's command, from what, in words; "" when nothing."""
        return ""


NOTHING = KindReport()
REPORT = NOTHING  # the hook of a shipped kind that offers nothing else (rsync: one copy, its figures its metrics)


# --- shared by the kinds' hooks -------------------------------------------------------------------


@dataclass(frozen=True)
class Drawn:
    """The run drawn of a cell in one phase and direction, among its runs that have what is drawn."""

    run_id: int
    repetition: int
    runs: int  # the cell's runs it was chosen among


def median_runs(
    phases: Mapping[int, Iterable[str]],
    runs: Iterable[dict],
    values: Mapping[tuple[int, str, str], float],
    by: Mapping[str, str],
) -> dict[Key, Drawn]:
    """Per cell, phase and direction, its run whose figure is the median (the lower of the middle
    two) among its runs that have an output of that phase (`phases`: run id → its phases with one),
    by the value stored of each (`values`: (run id, phase, metric) → its value; `by`: metric → the
    direction it is of). Chosen before any output is read: only those drawn are."""
    candidates: dict[Key, list[tuple[float, int, int]]] = defaultdict(list)
    for r in runs:
        for phase in phases.get(r["id"], ()):
            for metric, direction in by.items():
                if (found := values.get((r["id"], phase, metric))) is not None:
                    candidates[(r["workload"], r["target"], phase, direction)].append((found, r["repetition"], r["id"]))
    drawn = {}
    for key, each_run in candidates.items():
        _, repetition, run_id = sorted(each_run)[(len(each_run) - 1) // 2]
        drawn[key] = Drawn(run_id, repetition, len(each_run))
    return drawn


def over_time(
    drawn: Mapping[Key, Drawn],
    outputs: Mapping[int, list[RawOutput]],
    parse: Callable[[str], list],
    trace: Callable,
    what: str,
) -> tuple[list, list[str]]:
    """Each drawn run's output of its phase parsed (`parse`: per direction, each with its
    .direction) into `trace`s of its direction; what cannot be parsed, said (`what` it is)."""
    traces, unreadable = [], []
    parsed: dict[tuple[int, str], list] = {}  # a run's output of a phase is parsed once, for both its directions
    for (workload, target, phase, direction), d in drawn.items():
        output = next((o for o in outputs.get(d.run_id, []) if o.phase == phase), None)
        if output is None:
            continue
        if (d.run_id, phase) not in parsed:
            try:
                parsed[(d.run_id, phase)] = parse(output.text)
            except ValueError as exc:
                parsed[(d.run_id, phase)] = []
                unreadable.append(f"{target} · {workload} · run {d.repetition}: {what} cannot be read ({exc})")
        found = next((t for t in parsed[(d.run_id, phase)] if t.direction == direction), None)
        if found is not None:
            traces.append(trace(workload, target, phase, d.repetition, d.runs, found))
    return traces, unreadable
