"""The metrics sysbench fileio reports (sysbench.py), declared apart from the kind so that reading
stored runs needs no kind."""

from __future__ import annotations

from fslab.model import MetricKind
from fslab.workloads.base import FSYNCS, IOS, READ_BYTES, WRITTEN_BYTES

# Every metric metric_values reports. events/s decides a cell's precision and rank; it and the
# tail latency are compared between targets, as fio's IOPS and p99 are.
# Each with its resolution as sysbench prints it (tests/fixtures/sysbench): rates and latencies to
# 2 decimals, the total time to 4; events/s is the exact count of events ÷ that time, and
# lat_avg_ms the latency sum (to 0.01 ms of seconds of latency) ÷ the events, resolved far finer.
METRICS: dict[str, MetricKind] = {
    "events_per_s": MetricKind("events/s", True, primary=True, compared=True),
    "reads_per_s": MetricKind("reads/s", True, resolution=0.01),
    "writes_per_s": MetricKind("writes/s", True, resolution=0.01),
    "fsyncs_per_s": MetricKind("fsyncs/s", True, resolution=0.01),
    "read_mib_s": MetricKind("MiB/s", True, resolution=0.01),
    "write_mib_s": MetricKind("MiB/s", True, resolution=0.01),
    "read_mb_s": MetricKind("MB/s", True, resolution=0.01 * 2**20 / 1e6),
    "write_mb_s": MetricKind("MB/s", True, resolution=0.01 * 2**20 / 1e6),
    "lat_avg_ms": MetricKind("ms", False),
    "lat_p95_ms": MetricKind("ms", False, compared=True, resolution=0.01),
    "lat_max_ms": MetricKind("ms", False, resolution=0.01),
    "elapsed_s": MetricKind("s", False, resolution=0.0001),
    # What the run read and wrote, for the runner's traffic monitor to weigh the devices' bytes
    # against: approximate (SysbenchRun.read_bytes). Reported, not compared.
    READ_BYTES: MetricKind("B", False),
    WRITTEN_BYTES: MetricKind("B", False),
    # The fsyncs it issued (fsyncs/s × the total time: approximate as the bytes are), which the
    # traffic monitor holds the devices' flushes against. Reported, not compared.
    FSYNCS: MetricKind("", False),
    # The reads and writes it completed (their rates × the total time, approximate alike): what
    # --trace cpu divides the window's CPU by. Reported, not compared.
    IOS: MetricKind("", False),
}
