"""What fio's runs offer a report (the fio kind's report hook, offered.KindReport): its latency
percentiles per direction, its json+ latency bins added up per cell, and of each cell's median
run its throughput over time (its bandwidth and IOPS logs) and its completion latency over time
(its histogram logs); to the summary, of a workload as stored: its cells' steady state and
preconditioning (fio_steady_notes), the data its jobs read, its files' preallocation (fio's
fallocate) and what fslab rewrote in its job file. Light, as fio_output is: reading stored runs
loads no kind (fio's job parser and option tables only where a stored workload needs them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from fslab.core.errors import Refused
from fslab.fio.hist import HIST_TOOL, latency_over_time
from fslab.fio.output import (
    BINS_TOOL,
    DIRECTIONS,
    KEPT_APART,
    LOG_TOOL,
    PERCENTILES,
    Columns,
    bin_columns,
    latency_bins,
    stored_latency_bins,
    throughput_over_time,
)
from fslab.fio.preallocation import preallocates, stored_preallocation
from fslab.fio.steady_notes import steady_notes
from fslab.model import RawOutput

if TYPE_CHECKING:
    import numpy as np

from fslab.workloads.offered import (
    Drawn,
    Key,
    KindReport,
    LatencyHistogram,
    LatencyTrace,
    Offered,
    Percentiles,
    Stored,
    ThroughputTrace,
    median_runs,
    over_time,
)

# Which latency's distribution is drawn: the total latency the tables show (fio keeps its bins
# since fslab asks for lat_percentiles), else completion latency, the bins fio always keeps; the
# bins each run keeps apart from fio's JSON (fio_output.stored_bins).
DISTRIBUTED = KEPT_APART
LATENCY_NAMES = {"lat": "total latency (submission + completion)", "clat": "completion latency"}
BANDWIDTH = {f"{d}_mb_s": d for d in DIRECTIONS}  # what picks the run whose throughput and latency over time are drawn
COMPLETION = "completion latency (clat: submission to completion; the tables' latency adds the submission)"
# Total latency P50, P95, P99 and P99.9 of each direction a phase measured (it has its IOPS).
PERCENTILE_METRICS = [
    Percentiles(
        d,
        f"{d}_iops",
        {"P" + p[1:].replace("_", "."): f"{d}_lat_{p}_us" for p in PERCENTILES},
        1.0,
        "fio's total latency per I/O (submission + completion)",
    )
    for d in DIRECTIONS
]


class FioReport(KindReport):
    percentiles = PERCENTILE_METRICS

    def offered(self, stored: Stored) -> Offered:
        """Of a study run's fio runs (each as its cell knows it), the raw outputs are read: every
        run's bins, and of each cell's median run its logs."""
        runs = stored.runs
        bins = stored.outputs(BINS_TOOL)
        # runs stored before their bins were, imported, or from fio's clients: their JSON is read
        lacking = {r["id"] for r in runs} - set(bins)
        if lacking:
            bins |= stored.outputs("fio", only=lacking)
        histograms, unreadable = _histograms(bins, runs)
        bandwidths = stored.values(BANDWIDTH)
        drawn = {tool: median_runs(stored.phases(tool), runs, bandwidths, BANDWIDTH) for tool in (LOG_TOOL, HIST_TOOL)}
        outputs = {
            tool: stored.outputs(tool, only={d.run_id for d in each.values()}) for tool, each in drawn.items()
        }  # only those drawn
        traces, unreadable_logs = throughput_traces(drawn[LOG_TOOL], outputs[LOG_TOOL])
        latency, unreadable_histograms = latency_traces(drawn[HIST_TOOL], outputs[HIST_TOOL])
        return Offered(
            histograms=histograms,
            traces=traces,
            latency_traces=latency,
            unreadable=unreadable + unreadable_logs + unreadable_histograms,
        )

    def cell_notes(self, workload: Mapping, values: Mapping[str, list[float]]) -> list[str]:
        return steady_notes(values, workload)

    def data_read(self, workload: Mapping, zvol: bool) -> int:
        """The room the stored job's files take where any of its jobs reads; 0 for a job that only writes."""
        job_text = workload.get("job")
        if not isinstance(job_text, str):
            return 0
        from fslab.fio.jobs import reads, stored_job  # fio's records: only for a cell on a capped ARC
        from fslab.fio.space import room_needed

        try:
            job = stored_job(job_text)
        except Refused:
            return 0
        return room_needed(job, zvol) if reads(job) else 0

    def preallocated(self, workload: Mapping) -> str:
        recorded = stored_preallocation(workload)
        return f"fio fallocate={recorded}" if preallocates(recorded) else ""

    def rewritten(self, workload: Mapping) -> str:
        if not (records := workload.get("rewritten")):
            return ""
        from fslab.fio.rewrite import (
            described,
        )  # with fio's option tables: only for a study run that has a rewritten workload

        return described(records)


FIO_REPORT = FioReport()
REPORT = FIO_REPORT  # as the registry finds a shipped kind's (workloads.report_of)


# A run's bins in columns: as fio's output reads (lists), or as stored and checked (numpy arrays).
BinColumns = Columns | tuple["np.ndarray", "np.ndarray"]


def _histograms(outputs: dict[int, list[RawOutput]], runs: Sequence[dict]) -> tuple[list[LatencyHistogram], list[str]]:
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
                    f"{r['target']} · {r['workload']} · run {r['repetition']}: "
                    f"fio's stored output has no readable latency bins ({type(exc).__name__}: {exc})"
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
        found.append(
            LatencyHistogram(
                workload,
                target,
                direction,
                LATENCY_NAMES[latency],
                total,
                len(each_run),
                phase,
                source="fio's json+ latency bins",
            )
        )
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


def throughput_traces(
    drawn: dict[Key, Drawn], outputs: dict[int, list[RawOutput]]
) -> tuple[list[ThroughputTrace], list[str]]:
    """The throughput over time of each cell's run drawn (median_runs), in its phase and direction,
    from that run's fio logs (`outputs`, by run id; LOG_TOOL)."""

    def trace(workload: str, target: str, phase: str, repetition: int, runs: int, found) -> ThroughputTrace:
        return ThroughputTrace(
            workload, target, phase, repetition, runs, found, "fio's bandwidth log, every job added up"
        )

    return over_time(drawn, outputs, throughput_over_time, trace, "fio's stored logs")


def latency_traces(
    drawn: dict[Key, Drawn], outputs: dict[int, list[RawOutput]]
) -> tuple[list[LatencyTrace], list[str]]:
    """The completion latency over time of each cell's run drawn (median_runs), in its phase and
    direction, from that run's histogram logs (`outputs`, by run id; fio_hist.HIST_TOOL)."""

    def trace(workload: str, target: str, phase: str, repetition: int, runs: int, found) -> LatencyTrace:
        return LatencyTrace(
            workload,
            target,
            phase,
            repetition,
            runs,
            found,
            COMPLETION,
            "from the window's histogram bins merged over the jobs — fio's own way, each within 3 % of fio's figure —, "
            "never a mean of percentiles",
            f"fio's histogram logs of {COMPLETION}, every job's bins added up window by window",
        )

    return over_time(drawn, outputs, latency_over_time, trace, "fio's stored histogram logs")
