"""What a report page shows beyond the summary's statistics, from the stored runs the summary
read (each run's figures, a point each, are its samples: StudySummary.samples): fio's latency
distribution, its throughput over time, the exact job files and the devices.

The statistics themselves come from the summary (summary.py); nothing here computes one.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from fslab.model import RawOutput
from fslab.report.summary import StudySummary
from fslab.results import ResultsDB
from fslab.workloads.fio_output import DIRECTIONS, LOG_TOOL, Throughput, latency_bins, throughput_over_time

# Which latency's distribution is drawn: the total latency the tables show (fio keeps its bins
# since fslab asks for lat_percentiles), else completion latency, the bins fio always keeps.
DISTRIBUTED = ("lat", "clat")
BANDWIDTH = {f"{d}_mb_s": d for d in DIRECTIONS}  # what picks the run whose throughput over time is drawn
# What the page reads of each run beside the summary's (summary.RUN_FACTS).
RUN_DETAILS = ("id", "target", "workload", "repetition", "status", "warmup", "job_file", "device_facts", "source", "host")


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
class RunDetails:
    histograms: list[LatencyHistogram] = field(default_factory=list)
    traces: list[ThroughputTrace] = field(default_factory=list)
    job_files: dict[tuple[str, str], str] = field(default_factory=dict)  # (workload, target) → what its first measured run ran
    devices: dict[str, list[dict]] = field(default_factory=dict)  # target → facts of each device under it (its first run)
    unreadable: list[str] = field(default_factory=list)  # stored outputs whose bins could not be read, and why


def run_details(db: ResultsDB, s: StudySummary) -> RunDetails:
    """What the page adds to a summary: of its runs (as it read them), the raw outputs are read."""
    runs = [r | {"target": s.hosts.cell_target(r["target"], r["host"])} for r in db.runs(s.study_run["id"], RUN_DETAILS) if r["status"] == "ok" and not r["warmup"]]  # each as its cell knows it
    job_files: dict[tuple[str, str], str] = {}
    devices: dict[str, list[dict]] = {}
    for r in runs:
        if r["job_file"]:
            job_files.setdefault((r["workload"], r["target"]), r["job_file"])
        if r["device_facts"]:
            devices.setdefault(r["target"], r["device_facts"])
    histograms, unreadable = _histograms(db.outputs_of_study_run(s.study_run["id"], "fio", phase=None), runs)
    bandwidths = db.metric_values(s.study_run["id"], BANDWIDTH)
    traces, unreadable_logs = throughput_traces(db.outputs_of_study_run(s.study_run["id"], LOG_TOOL, phase=None), runs, bandwidths)
    return RunDetails(histograms, traces, job_files, devices, unreadable + unreadable_logs)


def _histograms(outputs: dict[int, list[RawOutput]], runs: list[dict]) -> tuple[list[LatencyHistogram], list[str]]:
    """Each cell's bins per phase and direction, added up over its runs, of the one latency every
    run of the cell kept bins of (DISTRIBUTED, in that order), from fio's outputs of every phase
    (`outputs`, by run id). An imported run's file may hold other jobs and hosts: only its own are
    read (its fio job name, which its workload's name may extend by options: importer.py)."""
    per_cell: dict[tuple[str, str, str], list[dict[tuple[str, str], dict[int, int]]]] = defaultdict(list)
    unreadable = []
    for r in runs:
        source = r.get("source") or {}
        for output in outputs.get(r["id"], []):
            try:
                bins = latency_bins(output.text, job=source.get("job", r["workload"]), host=source.get("host"), kinds=DISTRIBUTED) if source else latency_bins(output.text, kinds=DISTRIBUTED)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                unreadable.append(f"{r['target']} · {r['workload']} · run {r['repetition']}: fio's stored output has no readable latency bins ({type(exc).__name__}: {exc})")
                continue
            per_cell[(r["workload"], r["target"], output.phase)].append(bins)
    return [h for (workload, target, phase), each_run in per_cell.items() for h in cell_histograms(workload, target, each_run, phase)], unreadable


def cell_histograms(workload: str, target: str, each_run: list[dict[tuple[str, str], dict[int, int]]], phase: str = "") -> list[LatencyHistogram]:
    """A cell's histogram per direction (of one phase) from its runs' bins (fio.latency_bins of
    each): of the first latency in DISTRIBUTED that every run kept bins of, so no cell mixes two
    latencies."""
    found = []
    for direction in dict.fromkeys(d for bins in each_run for d, _ in bins):
        latency = next((k for k in DISTRIBUTED if all((direction, k) in bins for bins in each_run)), None)
        if latency is None:
            continue
        total: dict[int, int] = defaultdict(int)
        for bins in each_run:
            for value, n in bins[(direction, latency)].items():
                total[value] += n
        found.append(LatencyHistogram(workload, target, direction, latency, dict(total), len(each_run), phase))
    return found


def throughput_traces(outputs: dict[int, list[RawOutput]], runs: list[dict], bandwidths: dict[tuple[int, str, str], float]) -> tuple[list[ThroughputTrace], list[str]]:
    """Per cell, phase and direction, the throughput over time of its median run by the
    bandwidth stored of it (`bandwidths`: (run id, phase, "<direction>_mb_s") → its value, as fio's
    JSON gave it: what the logs average to), from that run's fio logs of that phase (`outputs`,
    by run id). Only the runs drawn are parsed."""
    candidates: dict[tuple[str, str, str, str], list[tuple[float, int, RawOutput]]] = defaultdict(list)
    for r in runs:
        for output in outputs.get(r["id"], []):
            for metric, direction in BANDWIDTH.items():
                if (found := bandwidths.get((r["id"], output.phase, metric))) is not None:
                    candidates[(r["workload"], r["target"], output.phase, direction)].append((found, r["repetition"], output))
    traces, unreadable = [], []
    for (workload, target, phase, direction), each_run in candidates.items():
        _, repetition, output = sorted(each_run, key=lambda e: e[:2])[(len(each_run) - 1) // 2]
        try:
            throughput = next((t for t in throughput_over_time(output.text) if t.direction == direction), None)
        except ValueError as exc:
            unreadable.append(f"{target} · {workload} · run {repetition}: fio's stored logs cannot be read ({exc})")
            continue
        if throughput is not None:
            traces.append(ThroughputTrace(workload, target, phase, repetition, len(each_run), throughput))
    return traces, unreadable
