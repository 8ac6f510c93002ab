"""What runs on a target: workload kinds, each one module that joins this registry itself.

A kind's module declares everything about it — the kind (base.WorkloadKind: how it runs, parses
and judges), its [[workload]] table (a pydantic model, `kind = "<name>"`, with its validation),
how a Workload is built from that table, and the tool it drives — and ends with

    KINDS.add(Registered(DD, section=DdSection, build=tool_workload), own=True)

fslab's own kinds are found through SHIPPED (name → module), imported only when one is asked
for; so are a kind's metric declaration (its `metrics` module) and its report hook (its `report`
module, offered.py): fio's and the others' are light, so that reading stored runs loads no kind.
Kinds from elsewhere come from installed packages' entry points, group `fslab.plugins`
(fslab.core.registry: imported when a lookup misses or a listing is asked), or from a module
imported in the process before (a test's toy) — never from anything a study file names: fslab runs
as root.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fslab.core.errors import FslabError
from fslab.core.registry import Registry
from fslab.model import MetricKind, Study, Workload, unqualified
from fslab.workloads.base import WorkloadKind

if TYPE_CHECKING:
    from pydantic import BaseModel

    from fslab.core.workdir import Workdir
    from fslab.workloads.offered import KindReport
    from fslab.workloads.tables import Building


@dataclass(frozen=True)
class Shipped:
    """One of fslab's own kinds: its module, the module declaring its metrics (METRICS) and the
    one holding its report hook (REPORT), light where reading stored runs needs them without the kind."""

    module: str
    metrics: str
    report: str


SHIPPED: dict[str, Shipped] = {
    "fio": Shipped("fslab.fio.workload", "fslab.fio.output", "fslab.fio.report"),
    "sysbench": Shipped(
        "fslab.workloads.sysbench", "fslab.workloads.sysbench_metrics", "fslab.workloads.sysbench_report"
    ),
    "dd": Shipped("fslab.workloads.dd", "fslab.workloads.dd_metrics", "fslab.workloads.offered"),
    "rsync": Shipped("fslab.workloads.rsync", "fslab.workloads.rsync_metrics", "fslab.workloads.offered"),
    "scenario": Shipped("fslab.scenarios.kind", "fslab.scenarios.metrics", "fslab.scenarios.report"),
}


@dataclass(frozen=True)
class Needed:
    """The tool a kind drives: its version command (recorded with every study run, shown by
    `fslab doctor`), the package that has it, and whether fslab refuses to start without it
    (else only the studies using the kind need it)."""

    version_command: tuple[str, ...]
    package: str
    required: bool = False

    @property
    def command(self) -> str:
        return self.version_command[0]


@dataclass(frozen=True)
class Registered:
    """A workload kind as the registry holds it."""

    kind: WorkloadKind
    section: type[BaseModel]  # its [[workload]] table
    build: Callable[[Any, Building], Workload]  # its validated table → a Workload
    tool: Needed | None = None  # None: it drives nothing beyond what every Linux has

    @property
    def name(self) -> str:
        return self.kind.name


class UnknownKind(FslabError):
    pass


KINDS: Registry[Registered] = Registry("workload kind", {name: shipped.module for name, shipped in SHIPPED.items()})


def registered(name: str) -> Registered | None:
    """The kind named `name` (loaded on first use), or None when there is none."""
    return KINDS.get(name)


def names() -> list[str]:
    """Every kind's name: fslab's own in SHIPPED's order, then the others as they registered."""
    return list(KINDS)


def kinds() -> list[Registered]:
    """Every kind, loaded, in names()'s order."""
    return list(KINDS.values())


def kind_of(workload: Workload) -> WorkloadKind:
    found = registered(workload.kind)
    if found is None:
        raise UnknownKind(f"no workload kind {workload.kind!r} is installed")
    return found.kind


def metrics_of(kind: str) -> Mapping[str, MetricKind]:
    """The metrics a kind declares: a shipped kind's from its light metrics module, any other's
    from the kind itself; none for a kind not installed here."""
    if kind in SHIPPED and kind not in KINDS.registered:
        return importlib.import_module(SHIPPED[kind].metrics).METRICS
    found = registered(kind)
    return found.kind.metrics if found else {}


def report_of(kind: str) -> KindReport | None:
    """A kind's report hook (offered.KindReport): a shipped kind's from its light report module
    (REPORT), any other's from the kind itself; None for a kind not installed here."""
    if kind in SHIPPED and kind not in KINDS.registered:
        return importlib.import_module(SHIPPED[kind].report).REPORT
    found = registered(kind)
    return found.kind.report if found else None


def declared_metrics() -> dict[str, MetricKind]:
    """Every metric fslab's own kinds declare, by name; where kinds share a name, the first
    kind's (fio's): for samples that come without their roles, which are fio's."""
    return {name: m for kind in reversed(SHIPPED) for name, m in metrics_of(kind).items()}


def resolution(kind: str | None, key: str) -> float:
    """The step a workload of `kind` prints a metric to (MetricKind.resolution), keyed as in
    samples (a phase's metric by its own name); of no known kind, as declared_metrics has it;
    0 for a metric no kind declares (a monitor's)."""
    declared = metrics_of(kind) if kind is not None else {}
    found = (declared or declared_metrics()).get(unqualified(key))
    return found.resolution if found else 0.0


def workload_problems(study: Study, workdir: Workdir) -> list[str]:
    """What each kind finds wrong with the study's workloads of that kind, before anything is made."""
    used = {w.kind for w in study.workloads}
    return [
        p
        for found in kinds()
        if found.name in used
        for p in found.kind.problems([w for w in study.workloads if w.kind == found.name], workdir)
    ]
