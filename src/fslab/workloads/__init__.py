"""What runs on a target: one module per workload kind behind one protocol (base.py). fio jobs,
built from a study or a user's job file (fio.py); the built-in workloads (builtin.py); what a
workload writes (data.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fslab.metrics import MetricKind
from fslab.workloads.base import WorkloadKind
from fslab.workloads.fio import FIO

if TYPE_CHECKING:
    from fslab.study import Study, Workload
    from fslab.workdir import Workdir

KINDS: dict[str, WorkloadKind] = {kind.name: kind for kind in (FIO,)}


def kind_of(workload: Workload) -> WorkloadKind:
    return KINDS[workload.kind]


def declared_metrics() -> dict[str, MetricKind]:
    """Every metric a workload kind declares, by name."""
    return {name: m for kind in KINDS.values() for name, m in kind.metrics.items()}


def workload_problems(study: Study, workdir: Workdir) -> list[str]:
    """What each kind finds wrong with the study's workloads of that kind, before anything is made."""
    return [p for name, kind in KINDS.items() for p in kind.problems([w for w in study.workloads if w.kind == name], workdir)]
