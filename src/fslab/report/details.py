"""What a report page shows beyond the summary's statistics, from the stored runs the summary
read (each run's figures, a point each, are its samples: StudySummary.samples): what each
workload's kind offers through its report hook (workloads/offered.py: latency distributions,
series over time), the exact job files and the devices.

The statistics themselves come from the summary (summary.py); nothing here computes one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from fslab.model import RawOutput
from fslab.model.records import measured
from fslab.report.summary import StudySummary
from fslab.results import ResultsDB
from fslab.workloads import report_of
from fslab.workloads.offered import (
    LatencyHistogram,
    LatencyTrace,
    Offered,
    Percentiles,
    SeriesTrace,
    ThroughputTrace,
)

# What the page reads of each run beside the summary's (summary.RUN_FACTS).
RUN_DETAILS = (
    "id",
    "target",
    "workload",
    "repetition",
    "status",
    "warmup",
    "redone",
    "job_file",
    "device_facts",
    "source",
    "host",
)


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
    unreadable: list[str] = field(default_factory=list)  # stored outputs that could not be read, and why
    percentiles: dict[str, list[Percentiles]] = field(
        default_factory=dict
    )  # workload → which of its metrics are latency percentiles (its kind's)
    series: list[SeriesTrace] = field(default_factory=list)


@dataclass(frozen=True)
class StoredOfKind:
    """A study run's stored runs of one kind, as the kind's report hook reads them (offered.Stored)."""

    db: ResultsDB
    study_run: int
    runs: list[dict]

    def outputs(self, tool: str, only: Iterable[int] | None = None) -> dict[int, list[RawOutput]]:
        mine = {r["id"] for r in self.runs}
        return self.db.outputs_of_study_run(
            self.study_run, tool, phase=None, only=mine if only is None else set(only) & mine
        )

    def phases(self, tool: str) -> dict[int, list[str]]:
        mine = {r["id"] for r in self.runs}
        return {run: phases for run, phases in self.db.output_phases(self.study_run, tool).items() if run in mine}

    def values(self, metrics: Iterable[str]) -> dict[tuple[int, str, str], float]:
        mine = {r["id"] for r in self.runs}
        return {key: v for key, v in self.db.metric_values(self.study_run, metrics).items() if key[0] in mine}


def run_details(db: ResultsDB, s: StudySummary) -> RunDetails:
    """What the page adds to a summary: of its runs (as it read them), what each workload's kind
    offers (its report hook, workloads.report_of), and the job files and devices."""
    runs = [
        r | {"target": s.hosts.cell_target(r["target"], r["host"])}
        for r in db.runs(s.study_run["id"], RUN_DETAILS)
        if measured(r)
    ]  # each as its cell knows it
    job_files: dict[tuple[str, str], str] = {}
    devices: dict[str, list[dict]] = {}
    for r in runs:
        if r["job_file"]:
            job_files.setdefault((r["workload"], r["target"]), r["job_file"])
        if r["device_facts"]:
            devices.setdefault(r["target"], r["device_facts"])
    kinds = s.samples.kinds
    offered = Offered()
    percentiles: dict[str, list[Percentiles]] = {}  # workload → its kind's
    for kind in dict.fromkeys(kinds[w] for w in s.workloads if w in kinds):
        hook = report_of(kind)
        if hook is None:
            continue
        workloads = {w for w in s.workloads if kinds.get(w) == kind}
        offered += hook.offered(StoredOfKind(db, s.study_run["id"], [r for r in runs if r["workload"] in workloads]))
        percentiles |= {w: list(hook.percentiles) for w in workloads}
    return RunDetails(
        offered.histograms,
        offered.traces,
        offered.latency_traces,
        job_files,
        devices,
        offered.unreadable,
        percentiles,
        offered.series,
    )
