"""What a scenario's runs offer a report (the scenario kind's report hook, offered.KindReport): what
its phases' tools offer — fio's and sysbench's hooks, each reading its own tool's outputs of
the scenario's runs, phase by phase (stored under the phase's name) —, put together; of a scenario
as stored, what fio's hook says of it (its fio phases' preallocation and rewriting). Light, as
scenario_metrics is.
"""

from __future__ import annotations

from collections.abc import Mapping

from fslab.fio import FIO_REPORT
from fslab.workloads.offered import KindReport, Offered, Stored
from fslab.workloads.sysbench_report import SYSBENCH_REPORT

PHASE_REPORTS = (FIO_REPORT, SYSBENCH_REPORT)  # the hooks of the tools a phase may run that offer any (dd offers none)


class ScenarioReport(KindReport):
    percentiles = [p for hook in PHASE_REPORTS for p in hook.percentiles]

    def offered(self, stored: Stored) -> Offered:
        return sum((hook.offered(stored) for hook in PHASE_REPORTS), Offered())

    def cell_notes(self, workload: Mapping, values: Mapping[str, list[float]]) -> list[str]:
        return FIO_REPORT.cell_notes(workload, values)

    def data_read(self, workload: Mapping, zvol: bool) -> int:
        return FIO_REPORT.data_read(workload, zvol)

    def preallocated(self, workload: Mapping) -> str:
        return FIO_REPORT.preallocated(workload)

    def rewritten(self, workload: Mapping) -> str:
        return FIO_REPORT.rewritten(workload)


SCENARIO_REPORT = ScenarioReport()
REPORT = SCENARIO_REPORT  # as the registry finds a shipped kind's (workloads.report_of)
