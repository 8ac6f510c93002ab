"""What a report page shows beyond the summary's statistics, from the stored runs the summary
read (each run's figures, a point each, are its samples: StudySummary.samples): fio's latency
distribution, its throughput and latency over time, the exact job files and the devices.

The statistics themselves come from the summary (summary.py); nothing here computes one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fslab.fio import (
    BINS_TOOL,
    DIRECTIONS,
    HIST_TOOL,
    KEPT_APART,
    LOG_TOOL,
    Columns,
    LatencyOverTime,
    Throughput,
    bin_columns,
    latency_bins,
    latency_over_time,
    stored_latency_bins,
    throughput_over_time,
)
from fslab.model import RawOutput
from fslab.report.summary import StudySummary
from fslab.results import ResultsDB

if TYPE_CHECKING:
    import numpy as np

# A run's bins in columns: as fio's output reads (lists), or as stored and checked (numpy arrays).
BinColumns = Columns | tuple["np.ndarray", "np.ndarray"]

# Which latency's distribution is drawn: the total latency the tables show (fio keeps its bins
# since fslab asks for lat_percentiles), else completion latency, the bins fio always keeps; the
# bins each run keeps apart from fio's JSON (fio_output.stored_bins).
DISTRIBUTED = KEPT_APART
BANDWIDTH = {f"{d}_mb_s": d for d in DIRECTIONS}  # what picks the run whose throughput and latency over time are drawn
# What the page reads of each run beside the summary's (summary.RUN_FACTS).
RUN_DETAILS = (
    "id",
    "target",
    "workload",
    "repetition",
    "status",
    "warmup",
    "job_file",
    "device_facts",
    "source",
    "host",
)


@dataclass(frozen=True)
class LatencyHistogram:
    """One cell's latency distribution in one direction: fio's json+ bins over its measured runs."""

    workload: str
    target: str
    direction: str
    latency: str  # "lat" (total: submission + completion) or "clat" (completion)
    bins: dict[int, int]  # latency in ns (fio's bin value) → I/Os, added up over `runs`
    runs: int
    phase: str = ""  # a scenario's fio phase; "" for a workload of one phase


@dataclass(frozen=True)
class ThroughputTrace:
    """One cell's throughput over time in one direction of one phase: of its run whose bandwidth
    is the cell's median (the lower of the middle two), fio's logs (fio.Throughput)."""

    workload: str
    target: str
    phase: str  # "" for a workload of one phase
    repetition: int  # the run drawn
    runs: int  # the cell's runs with logs, it the median of
    throughput: Throughput


@dataclass(frozen=True)
class LatencyTrace:
    """One cell's completion latency over time in one direction of one phase: of the same run as
    its ThroughputTrace, fio's histogram logs (fio_hist.LatencyOverTime)."""

    workload: str
    target: str
    phase: str
    repetition: int
    runs: int
    latency: LatencyOverTime


@dataclass(frozen=True)
class RunDetails:
    histograms: list[LatencyHistogram] = field(default_factory=list)
    traces: list[ThroughputTrace] = field(default_factory=list)
    latency_traces: list[LatencyTrace] = field(default_factory=list)
    job_files: dict[tuple[str, str], str] = field(
        default_factory=dict
    )  # (workload, target) → what its first measured run ran
    devices: dict[str, list[dict]] = field(
        default_factory=dict
    )  # target → facts of each device under it (its first run)
    unreadable: list[str] = field(default_factory=list)  # stored outputs whose bins could not be read, and why


def run_details(db: ResultsDB, s: StudySummary) -> RunDetails:
    """What the page adds to a summary: of its runs (as it read them), the raw outputs are read."""
    runs = [
        r | {"target": s.hosts.cell_target(r["target"], r["host"])}
        for r in db.runs(s.study_run["id"], RUN_DETAILS)
        if r["status"] == "ok" and not r["warmup"]
    ]  # each as its cell knows it
    job_files: dict[tuple[str, str], str] = {}
    devices: dict[str, list[dict]] = {}
    for r in runs:
        if r["job_file"]:
            job_files.setdefault((r["workload"], r["target"]), r["job_file"])
        if r["device_facts"]:
            devices.setdefault(r["target"], r["device_facts"])
    bins = db.outputs_of_study_run(s.study_run["id"], BINS_TOOL, phase=None)
    # runs stored before their bins were, imported, or from fio's clients: their JSON is read
    lacking = {r["id"] for r in runs} - set(bins)
    if lacking:
        bins |= db.outputs_of_study_run(s.study_run["id"], "fio", phase=None, only=lacking)
    histograms, unreadable = _histograms(bins, runs)
    bandwidths = db.metric_values(s.study_run["id"], BANDWIDTH)
    drawn = {
        tool: median_runs(db.output_phases(s.study_run["id"], tool), runs, bandwidths) for tool in (LOG_TOOL, HIST_TOOL)
    }
    outputs = {
        tool: db.outputs_of_study_run(s.study_run["id"], tool, phase=None, only={d.run_id for d in each.values()})
        for tool, each in drawn.items()
    }  # only those drawn
    traces, unreadable_logs = throughput_traces(drawn[LOG_TOOL], outputs[LOG_TOOL])
    latency, unreadable_histograms = latency_traces(drawn[HIST_TOOL], outputs[HIST_TOOL])
    return RunDetails(
        histograms, traces, latency, job_files, devices, unreadable + unreadable_logs + unreadable_histograms
    )


def _histograms(outputs: dict[int, list[RawOutput]], runs: list[dict]) -> tuple[list[LatencyHistogram], list[str]]:
    """Each cell's bins per phase and direction, added up over its runs, of the one latency every
    run of the cell kept bins of (DISTRIBUTED, in that order), from each run's bins of every phase
    (`outputs`, by run id: BINS_TOOL's, else fio's JSON). An imported run's file may hold other
    jobs and hosts: only its own are read (its fio job name, which its workload's name may extend
    by options: results/importer.py)."""
    per_cell: dict[tuple[str, str, str], list[dict[tuple[str, str], BinColumns]]] = defaultdict(list)
    unreadable = []
    for r in runs:
        source = r.get("source") or {}
        for output in outputs.get(r["id"], []):
            bins: dict[tuple[str, str], BinColumns]
            try:
                if output.tool == BINS_TOOL:
                    stored = stored_latency_bins(output.text, kinds=DISTRIBUTED)
                    bins = {key: _whole_numbers(c) for key, c in stored.items()}
                else:
                    mine = {"job": source.get("job", r["workload"]), "host": source.get("host")} if source else {}
                    read = latency_bins(output.text, kinds=DISTRIBUTED, **mine)
                    bins = {key: bin_columns(b) for key, b in read.items()}
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                unreadable.append(
                    f"{r['target']} · {r['workload']} · run {r['repetition']}: fio's stored "
                    f"output has no readable latency bins ({type(exc).__name__}: {exc})"
                )
                continue
            per_cell[(r["workload"], r["target"], output.phase)].append(bins)
    return [
        h
        for (workload, target, phase), each_run in per_cell.items()
        for h in cell_histograms(workload, target, each_run, phase)
    ], unreadable


def cell_histograms(
    workload: str, target: str, each_run: list[dict[tuple[str, str], BinColumns]], phase: str = ""
) -> list[LatencyHistogram]:
    """A cell's histogram per direction (of one phase) from its runs' bins (each run's in columns:
    fio_output.stored_latency_bins, bin_columns), added up at once: of the first latency in
    DISTRIBUTED that every run kept bins of, so no cell mixes two latencies."""
    found = []
    for direction in dict.fromkeys(d for bins in each_run for d, _ in bins):
        latency = next((k for k in DISTRIBUTED if all((direction, k) in bins for bins in each_run)), None)
        if latency is None:
            continue
        total = added_columns([bins[(direction, latency)] for bins in each_run])
        found.append(LatencyHistogram(workload, target, direction, latency, total, len(each_run), phase))
    return found


def _whole_numbers(columns: Columns) -> tuple[np.ndarray, np.ndarray]:
    """A run's stored columns as numpy arrays; ValueError when either holds anything but whole numbers."""
    import numpy as np

    values, counts = np.asarray(columns[0]), np.asarray(columns[1])
    if values.size and (values.dtype.kind not in "iu" or counts.dtype.kind not in "iu"):
        raise ValueError("bins that are not latencies in ns with their counts")
    return values, counts


def added_columns(columns: list[BinColumns]) -> dict[int, int]:
    """Bins in columns (lists or arrays of whole numbers) added up: latency in ns → I/Os, in order.
    numpy, not a dict per bin: a page adds up a hundred thousand."""
    import numpy as np

    values = np.concatenate([np.asarray(v, dtype=np.int64) for v, _ in columns] or [np.zeros(0, dtype=np.int64)])
    counts = np.concatenate([np.asarray(c, dtype=np.int64) for _, c in columns] or [np.zeros(0, dtype=np.int64)])
    if not values.size:
        return {}
    order = np.argsort(values, kind="stable")
    values, counts = values[order], counts[order]
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    return dict(zip(values[starts].tolist(), np.add.reduceat(counts, starts).tolist()))


Key = tuple[str, str, str, str]  # a cell's workload, target, phase and direction


@dataclass(frozen=True)
class Drawn:
    """The run drawn of a cell in one phase and direction, among its runs that have what is drawn."""

    run_id: int
    repetition: int
    runs: int  # the cell's runs it was chosen among


def median_runs(
    phases: Mapping[int, Iterable[str]], runs: list[dict], bandwidths: dict[tuple[int, str, str], float]
) -> dict[Key, Drawn]:
    """Per cell, phase and direction, its run whose bandwidth is the median (the lower of the
    middle two) among its runs that have an output of that phase (`phases`: run id → its phases
    with one), by the bandwidth stored of each (`bandwidths`: (run id, phase, "<direction>_mb_s")
    → its value, from fio's JSON: what its logs average to). Chosen before any output is read:
    only those drawn are."""
    candidates: dict[Key, list[tuple[float, int, int]]] = defaultdict(list)
    for r in runs:
        for phase in phases.get(r["id"], ()):
            for metric, direction in BANDWIDTH.items():
                if (found := bandwidths.get((r["id"], phase, metric))) is not None:
                    candidates[(r["workload"], r["target"], phase, direction)].append((found, r["repetition"], r["id"]))
    drawn = {}
    for key, each_run in candidates.items():
        _, repetition, run_id = sorted(each_run)[(len(each_run) - 1) // 2]
        drawn[key] = Drawn(run_id, repetition, len(each_run))
    return drawn


def throughput_traces(
    drawn: dict[Key, Drawn], outputs: dict[int, list[RawOutput]]
) -> tuple[list[ThroughputTrace], list[str]]:
    """The throughput over time of each cell's run drawn (median_runs), in its phase and direction,
    from that run's fio logs (`outputs`, by run id; LOG_TOOL)."""
    return _over_time(drawn, outputs, throughput_over_time, ThroughputTrace, "logs")


def latency_traces(
    drawn: dict[Key, Drawn], outputs: dict[int, list[RawOutput]]
) -> tuple[list[LatencyTrace], list[str]]:
    """The completion latency over time of each cell's run drawn (median_runs), in its phase and
    direction, from that run's histogram logs (`outputs`, by run id; fio_hist.HIST_TOOL)."""
    return _over_time(drawn, outputs, latency_over_time, LatencyTrace, "histogram logs")


def _over_time(
    drawn: dict[Key, Drawn],
    outputs: dict[int, list[RawOutput]],
    parse: Callable[[str], list],
    trace: Callable,
    what: str,
) -> tuple[list, list[str]]:
    """Each drawn run's output of its phase parsed (`parse`: per direction, each with its
    .direction) into `trace`s of its direction; what cannot be parsed, said."""
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
                unreadable.append(
                    f"{target} · {workload} · run {d.repetition}: fio's stored {what} cannot be read ({exc})"
                )
        found = next((t for t in parsed[(d.run_id, phase)] if t.direction == direction), None)
        if found is not None:
            traces.append(trace(workload, target, phase, d.repetition, d.runs, found))
    return traces, unreadable
