"""A toy workload kind, as a new one is added: one module that declares its table in a study file,
its tool record, how it runs and what it reports, and joins the registry itself. It runs `true`
`times` times in the target's directory and reports how long each took on average.

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
from fslab.workloads.tables import Building, Name, OnTargets, WorkloadLimits, run_timeout

METRICS = {"true_ms": MetricKind("ms", False, primary=True, compared=True)}


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


class TrueKind:
    name = "true"
    metrics = METRICS
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
        times = tool_of(workload, TrueRuns).times
        with measured(""):
            began = time.monotonic()
            for _ in range(times):
                run_held(journal, ["true"], cwd=directory_of(ready, self.name))
            took = time.monotonic() - began
        return [RawOutput("", self.name, f"{took * 1000 / times:.6f}")]

    def parse(self, outputs: list[RawOutput]) -> list[Metric]:
        return [METRICS["true_ms"].of("true_ms", float(output.text)) for output in outputs]

    def judge(self, workload: Workload, outputs: list[RawOutput]) -> list[Finding]:
        return []


class TrueSection(OnTargets, WorkloadLimits):
    name: Name
    kind: Literal["true"]
    times: int = Field(1, ge=1, le=100)


def build(section: TrueSection, building: Building) -> Workload:
    return Workload(section.name, TrueRuns(section.times), 0.0, direct=False, timeout=run_timeout(0.0, None))


KINDS.add(Registered(TrueKind(), section=TrueSection, build=build, tool=Needed(("true", "--version"), "coreutils")))
