"""What runs on a target: one module per workload kind behind one protocol (base.py): fio jobs,
built from a study or a user's job file (fio.py), sysbench fileio (sysbench.py), dd (dd.py), rsync
ingestion (rsync.py), multi-phase scenarios (scenario.py); the built-in workloads (builtin.py);
what a fio workload writes (data.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fslab.model import MetricKind, Study, Workload, unqualified
from fslab.workloads.base import WorkloadKind
from fslab.workloads.dd import DD
from fslab.workloads.scenario import SCENARIOS
from fslab.workloads.fio import FIO
from fslab.workloads.rsync import RSYNC
from fslab.workloads.sysbench import SYSBENCH

if TYPE_CHECKING:
    from fslab.workdir import Workdir

KINDS: dict[str, WorkloadKind] = {kind.name: kind for kind in (FIO, SYSBENCH, DD, RSYNC, SCENARIOS)}


def kind_of(workload: Workload) -> WorkloadKind:
    return KINDS[workload.kind]


def declared_metrics() -> dict[str, MetricKind]:
    """Every metric a workload kind declares, by name; where kinds share a name, the first
    kind's (fio's): for samples that come without their roles, which are fio's."""
    return {name: m for kind in reversed(KINDS.values()) for name, m in kind.metrics.items()}


def resolution(kind: str | None, key: str) -> float:
    """The step a workload of `kind` prints a metric to (MetricKind.resolution), keyed as in
    samples (a phase's metric by its own name); of no known kind, as declared_metrics has it;
    0 for a metric no kind declares (a monitor's)."""
    found = (KINDS[kind].metrics if kind in KINDS else declared_metrics()).get(unqualified(key))
    return found.resolution if found else 0.0


def workload_problems(study: Study, workdir: Workdir) -> list[str]:
    """What each kind finds wrong with the study's workloads of that kind, before anything is made."""
    return [p for name, kind in KINDS.items() for p in kind.problems([w for w in study.workloads if w.kind == name], workdir)]
