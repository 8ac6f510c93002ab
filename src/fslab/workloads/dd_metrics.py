"""The metrics dd reports (dd.py), declared apart from the kind so that reading stored runs needs no kind."""

from __future__ import annotations

from fslab.model import MetricKind
from fslab.workloads.base import READ_BYTES, WRITTEN_BYTES

DIRECTIONS = ("write", "read")
# The bytes dd says it copied in a step, under the name every kind reports them by: what the
# runner's traffic monitor weighs the devices' bytes against. Reported, not compared.
MOVED = {"write": WRITTEN_BYTES, "read": READ_BYTES}
# Every metric metric_values reports, per direction. MB/s decides a cell's precision and rank,
# and is compared between targets, as fio's IOPS is.
METRICS: dict[str, MetricKind] = {
    name: kind
    for d in DIRECTIONS
    for name, kind in (
        (f"{d}_mb_s", MetricKind("MB/s", True, primary=True, compared=True)),
        (f"{d}_mib_s", MetricKind("MiB/s", True)),
        (f"{d}_elapsed_s", MetricKind("s", False)),
        (MOVED[d], MetricKind("B", False)),
    )
}
