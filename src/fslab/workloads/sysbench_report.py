"""What sysbench's runs offer a report (the sysbench kind's report hook, offered.KindReport): its
latency percentile (P95, as fslab asks for it: sysbench.PERCENTILE) and maximum per cell, and of
each cell's median run what sysbench reports of every interval (--report-interval, fslab's
REPORT_INTERVAL_S): read and write throughput, and the interval's P95 latency. Runs stored before
fslab asked for intervals have none: their cells draw no series. Light, as sysbench_metrics is.

An interval's line, as sysbench 1.0.20 prints it (sb_fileio.c file_report_intermediate):

    [ 2s ] reads: 318.48 MiB/s writes: 212.32 MiB/s fsyncs: 1359.84/s latency (ms,95%): 0.044
"""

from __future__ import annotations

import re

from fslab.workloads.offered import (
    KindReport,
    LatencyTrace,
    Offered,
    Percentiles,
    PercentilesOverTime,
    Stored,
    Throughput,
    ThroughputTrace,
    median_runs,
    over_time,
)

TOOL = "sysbench"  # the raw output a run stores (the kind's name)
REPORT_INTERVAL_S = 1  # --report-interval: what sysbench reports of each second
LATENCY_IS = "latency of each sysbench event (a read, a write or an fsync)"
PERCENTILE_METRICS = [
    Percentiles(
        "",
        "events_per_s",
        {"P95": "lat_p95_ms", "max": "lat_max_ms"},
        1000.0,
        "sysbench's latency per event (a read, a write or an fsync): its P95 and its slowest (max)",
    )
]
# What picks the run drawn: of its throughput, the direction's MB/s; of its latency, its events/s.
MEDIAN_OF = {"read_mb_s": "read", "write_mb_s": "write", "events_per_s": ""}

_INTERVAL = re.compile(
    r"^\[ *(\d+(?:\.\d+)?)s \] reads: (\d+(?:\.\d+)?) MiB/s writes: (\d+(?:\.\d+)?) MiB/s "
    r"fsyncs: (\d+(?:\.\d+)?)/s latency \(ms,(\d+(?:\.\d+)?)%\): (\d+(?:\.\d+)?)\s*$",
    re.MULTILINE,
)
_EVERY = re.compile(r"^Report intermediate results every (\d+) second", re.MULTILINE)


def intervals(text: str) -> list[Throughput | PercentilesOverTime]:
    """A run's report's intervals (pure): throughput per direction that moved any bytes, and the
    latency percentile of each interval (None where no event completed in it); none when sysbench
    reported no interval."""
    lines = _INTERVAL.findall(text)
    every = _EVERY.search(text)
    if not lines or every is None:
        return []
    window_ms = int(every.group(1)) * 1000
    seconds = [float(line[0]) for line in lines]
    found: list[Throughput | PercentilesOverTime] = []
    for direction, column in (("read", 1), ("write", 2)):
        mib_s = [float(line[column]) for line in lines]
        if any(mib_s):
            found.append(Throughput(direction, window_ms, seconds, [v * 2**20 for v in mib_s], None))
    percent = {f"P{float(line[4]):g}" for line in lines}
    if len(percent) == 1:
        idle = [not (float(line[1]) or float(line[2]) or float(line[3])) for line in lines]
        latency = [None if nothing else float(line[5]) * 1000 for line, nothing in zip(lines, idle)]
        found.append(PercentilesOverTime("", window_ms, tuple(seconds), {percent.pop(): latency}))
    return found


class SysbenchReport(KindReport):
    percentiles = PERCENTILE_METRICS

    def offered(self, stored: Stored) -> Offered:
        drawn = median_runs(stored.phases(TOOL), stored.runs, stored.values(MEDIAN_OF), MEDIAN_OF)
        outputs = stored.outputs(TOOL, only={d.run_id for d in drawn.values()})
        throughput, unreadable = over_time(
            {key: d for key, d in drawn.items() if key[3]}, outputs, intervals, _throughput, "sysbench's report"
        )
        latency, _ = over_time({key: d for key, d in drawn.items() if not key[3]}, outputs, intervals, _latency, "")
        return Offered(traces=throughput, latency_traces=latency, unreadable=unreadable)


def _throughput(
    workload: str, target: str, phase: str, repetition: int, runs: int, found: Throughput
) -> ThroughputTrace:
    return ThroughputTrace(
        workload, target, phase, repetition, runs, found, "sysbench's report of each interval (--report-interval)"
    )


def _latency(
    workload: str, target: str, phase: str, repetition: int, runs: int, found: PercentilesOverTime
) -> LatencyTrace:
    return LatencyTrace(
        workload,
        target,
        phase,
        repetition,
        runs,
        found,
        LATENCY_IS,
        "as sysbench reports it of each interval (--report-interval), over the events that completed in it",
    )


SYSBENCH_REPORT = SysbenchReport()
REPORT = SYSBENCH_REPORT  # as the registry finds a shipped kind's (workloads.report_of)
