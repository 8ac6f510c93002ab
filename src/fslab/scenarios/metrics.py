"""The metrics a scenario reports (scenario.py): its phases' tools' (fio's, sysbench's, dd's) and its
own, declared apart from the kind so that reading stored runs needs no kind."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from fslab.fio import METRICS as FIO_METRICS
from fslab.model import MetricKind
from fslab.workloads.dd_metrics import METRICS as DD_METRICS
from fslab.workloads.sysbench_metrics import METRICS as SYSBENCH_METRICS


def _declared(*declarations: Mapping[str, MetricKind]) -> dict[str, MetricKind]:
    """Every metric a phase may report, by name. Where kinds share a name (read_mb_s: fio's,
    sysbench's, dd's), unit, direction and timing class must agree; a name is primary or compared where any
    phase's kind makes it so, and is known to the coarsest resolution any of them prints it to: dd's
    write_mb_s decides a cell, fio's does not. What is stored is exact: each metric carries the role
    its own kind gives it, per key, phase and all (Roles)."""
    merged: dict[str, MetricKind] = {}
    for declared in declarations:
        for name, kind in declared.items():
            was = merged.get(name)
            if was and (was.unit, was.higher_is_better, was.timing) != (kind.unit, kind.higher_is_better, kind.timing):
                raise ValueError(
                    f"phase kinds declare metric {name} as {was} and as "
                    f"{kind}: in a scenario, one name must mean one thing"
                )
            merged[name] = replace(
                kind,
                primary=kind.primary or bool(was and was.primary),
                compared=kind.compared or bool(was and was.compared),
                resolution=max(
                    kind.resolution, was.resolution if was else 0.0
                ),  # the coarsest: a phase's tool is not known by name
            )
    return merged


METRICS: dict[str, MetricKind] = _declared(
    FIO_METRICS,
    SYSBENCH_METRICS,  # the tools a phase may run (scenario.PHASE_TOOLS)
    DD_METRICS,
    {
        "extents": MetricKind(
            "extents", False, compared=True, timing="dependent"
        ),  # fewer is better: what copy-on-write ageing scatters
        "snapshots": MetricKind("snapshots", True),  # taken while the phase ran
    },
)
