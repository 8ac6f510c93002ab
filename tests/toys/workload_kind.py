"""A toy workload kind, as a new one is added: one module that declares its table in a study file,
its tool record, how it runs and what it reports, and joins the registry itself. It runs `true`
`times` times in the target's directory and reports how long each took on average; and, through
its report hook, how long each took over the run (a Series the page draws).

    [[workload]]
    name = "truth"
    kind = "true"
    times = 3
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from fslab.core.journal import Journal
from fslab.core.system import run_held
from fslab.model import Metric, MetricKind, RawOutput, Workload
from fslab.model.findings import Finding
from fslab.workloads import KINDS, Needed, Registered
from fslab.workloads.base import Measured, StudyScope, directory_of, tool_of
from fslab.workloads.offered import KindReport, Offered, Series, SeriesTrace, Stored, median_runs, over_time
from fslab.workloads.tables import Building, Name, OnTargets, WorkloadLimits, run_timeout

METRICS = {"true_ms": MetricKind("ms", False, primary=True, compared=True)}
CALLS = "true_calls"  # the raw output of each call's end (s) and time (ms), a line each


@dataclass(frozen=True)
class TrueRuns:
    """What a workload of the kind runs (model.Tool)."""

    kind: ClassVar[str] = "true"
    needs_directory: ClassVar[bool] = True
    takes_snapshots: ClassVar[bool] = False

    times: int

    def spec(self) -> dict[str, Any]:
        return {"times": self.times}

    def data_pattern(self) -> str:
        return "none (true writes nothing)"

    def bytes_needed(self, block_device: bool) -> int:
        return 0

    def measured_seconds(self) -> float:
        return 0.0


def each_call(text: str) -> list[Series]:
    """The calls' output (CALLS) as a series: each call's time at its end."""
    ends, took = zip(*(map(float, line.split()) for line in text.splitlines())) if text else ((), ())
    return [Series("time per call", "ms", "", tuple(ends), tuple(took))]


class TrueReport(KindReport):
    """What the toy's runs offer a report: of each cell's median run, each call's time over the run."""

    def offered(self, stored: Stored) -> Offered:
        drawn = median_runs(stored.phases(CALLS), stored.runs, stored.values(METRICS), {"true_ms": ""})
        outputs = stored.outputs(CALLS, only={d.run_id for d in drawn.values()})
        series, unreadable = over_time(drawn, outputs, each_call, self.trace, "true's stored calls")
        return Offered(series=series, unreadable=unreadable)

    def trace(self, workload: str, target: str, phase: str, repetition: int, runs: int, found: Series) -> SeriesTrace:
        return SeriesTrace(workload, target, phase, repetition, runs, found, "each call of true, timed by fslab")


class TrueKind:
    name = "true"
    metrics = METRICS
    report = TrueReport()
    accepted_options: dict[str, str] = {}

    def problems(self, workloads: list[Workload], workdir: Any) -> list[str]:
        return []

    def command(self, workload: Workload, ready: Any) -> str:
        return f"true × {tool_of(workload, TrueRuns).times}"

    def prepare(
        self, journal: Journal, workload: Workload, ready: Any, scratch: Path, scope: StudyScope
    ) -> list[RawOutput]:
        return []

    def run(
        self,
        journal: Journal,
        workload: Workload,
        ready: Any,
        command: str,
        scratch: Path,
        scope: StudyScope,
        measured: Measured,
    ) -> list[RawOutput]:
        times, calls = tool_of(workload, TrueRuns).times, []
        with measured(""):
            began = last = time.monotonic()
            for _ in range(times):
                run_held(journal, ["true"], cwd=directory_of(ready, self.name))
                now = time.monotonic()
                calls.append(f"{now - began:.6f} {(now - last) * 1000:.6f}\n")  # its end (s), its time (ms)
                last = now
            took = time.monotonic() - began
        return [RawOutput("", self.name, f"{took * 1000 / times:.6f}"), RawOutput("", CALLS, "".join(calls))]

    def parse(self, outputs: list[RawOutput]) -> list[Metric]:
        return [METRICS["true_ms"].of("true_ms", float(o.text)) for o in outputs if o.tool == self.name]

    def judge(self, workload: Workload, outputs: list[RawOutput]) -> list[Finding]:
        return []


class TrueSection(OnTargets, WorkloadLimits):
    name: Name
    kind: Literal["true"]
    times: int = Field(1, ge=1, le=100)


def build(section: TrueSection, building: Building) -> Workload:
    return Workload(section.name, TrueRuns(section.times), 0.0, direct=False, timeout=run_timeout(0.0, None))


KINDS.add(Registered(TrueKind(), section=TrueSection, build=build, tool=Needed(("true", "--version"), "coreutils")))
