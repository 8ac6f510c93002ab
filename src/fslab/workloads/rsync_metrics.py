"""The metrics an rsync ingestion reports (rsync.py), declared apart from the kind so that reading
stored runs needs no kind."""

from __future__ import annotations

from fslab.model import MetricKind
from fslab.workloads.base import WRITTEN_BYTES

METRICS: dict[str, MetricKind] = {
    "mib_s": MetricKind("MiB/s", True, primary=True, compared=True),
    "mb_s": MetricKind("MB/s", True),
    "bytes": MetricKind("B", True),
    "files": MetricKind("files", True),
    "elapsed_s": MetricKind("s", False),
    "cpu_s": MetricKind("s", False),  # rsync's user + system time, its children's included
    WRITTEN_BYTES: MetricKind("B", False),  # the bytes again, under the name the monitors weigh device writes against
}
