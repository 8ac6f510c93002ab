"""Throughput over time in the report: which run of a cell is drawn, and the chart drawn of it
(pure, on synthetic logs in fio's format; fio's own logs are parsed in test_fio_parse.py); and a
scenario's fio phases, each charted as a workload of one phase is."""

from __future__ import annotations

import json
import re
from dataclasses import replace

from altair.vegalite.v6.schema.core import TopLevelSpec

from fslab.core.units import Bandwidth
from fslab.fio.output import LOG_TOOL, Throughput, throughput_over_time
from fslab.model import RawOutput
from fslab.report.charts import latency_percentiles_chart, study_charts
from fslab.report.details import LatencyHistogram, RunDetails, ThroughputTrace, median_runs, throughput_traces
from fslab.report.time_charts import throughput_chart
from test_report_html import W, layer, synthetic


def logs(kib_s: list[int], direction: int = 0, window_ms: int = 500, phase: str = "") -> RawOutput:
    """One job's logs as the runner stores them: its bandwidth (KiB/s) and IOPS (4 KiB blocks)."""
    bw = "".join(f"{(i + 1) * window_ms}, {v}, {direction}, 4096, 0\n" for i, v in enumerate(kib_s))
    iops = "".join(f"{(i + 1) * window_ms}, {v // 4}, {direction}, 4096, 0\n" for i, v in enumerate(kib_s))
    return RawOutput(
        phase,
        LOG_TOOL,
        json.dumps({"log_avg_msec": window_ms, "files": {"fslab_bw.1.log": bw, "fslab_iops.1.log": iops}}),
    )


def run(run_id: int, repetition: int, target: str = "ext4", workload: str = "seq") -> dict:
    return {"id": run_id, "repetition": repetition, "target": target, "workload": workload}


def bandwidths(outputs: dict[int, list[RawOutput]], direction: str = "read") -> dict[tuple[int, str, str], float]:
    """Each run's bandwidth as stored with it: what its logs average to (MB/s)."""
    return {
        (run_id, o.phase, f"{t.direction}_mb_s"): sum(t.bytes_s) / len(t.bytes_s) / 1e6
        for run_id, each in outputs.items()
        for o in each
        for t in throughput_over_time(o.text)
    }


def chosen_and_read(
    outputs: dict[int, list[RawOutput]], runs: list[dict], stored: dict[tuple[int, str, str], float]
) -> tuple[list[ThroughputTrace], list[str]]:
    """What the report draws of these outputs: the runs chosen by the phases they have, then those read."""
    return throughput_traces(
        median_runs({i: [o.phase for o in each] for i, each in outputs.items()}, runs, stored), outputs
    )


def test_the_cells_median_run_is_drawn():
    runs = [run(1, 1), run(2, 2), run(3, 3), run(4, 1, "xfs"), run(5, 2, "xfs")]
    outputs = {
        1: [logs([100, 100])],
        2: [logs([300, 300])],
        3: [logs([100, 300])],
        4: [logs([50, 60])],
        5: [logs([70, 80])],
    }
    traces, unreadable = chosen_and_read(outputs, runs, bandwidths(outputs))
    assert unreadable == []
    drawn = {t.target: t for t in traces}
    assert (drawn["ext4"].repetition, drawn["ext4"].runs) == (3, 3), "mean 200 KiB/s: the median of 100, 200, 300"
    assert drawn["ext4"].throughput.bytes_s == [100 * 1024, 300 * 1024] and drawn["ext4"].throughput.iops == [25, 75]
    assert (drawn["xfs"].repetition, drawn["xfs"].runs) == (1, 2), "two runs: the lower of the middle two"


def test_the_caption_counts_the_runs_a_run_drawn_is_the_median_of_never_by_its_number():
    """A cell whose run 1 failed (no logs stored): its run 2 is drawn, the one of its runs with
    logs. The caption said "run 2 of 1", the run's number beside a count of other things."""
    runs = [run(2, 2), run(3, 1, "xfs"), run(4, 2, "xfs"), run(5, 3, "xfs")]
    outputs = {2: [logs([100, 100])], 3: [logs([50, 60])], 4: [logs([70, 80])], 5: [logs([90, 90])]}
    traces, _ = chosen_and_read(outputs, runs, bandwidths(outputs))
    assert [(t.target, t.repetition, t.runs) for t in traces] == [("ext4", 2, 1), ("xfs", 2, 3)]
    caption = throughput_chart(traces, ["ext4", "xfs"], Bandwidth.MB).caption
    assert "ext4 run 2 (its one run with logs), xfs run 2 (the median of 3)." in caption
    assert not re.search(r"run \d+ of \d+", caption), caption


def test_each_phase_and_direction_is_its_own_trace_and_a_bad_log_is_said():
    runs = [run(1, 1, workload="ageing")]
    reading, writing = (json.loads(logs(v, direction=d).text) for v, d in (([10], 0), ([20], 1)))
    both = {
        "log_avg_msec": 500,
        "files": reading["files"] | {name.replace(".1.", ".2."): text for name, text in writing["files"].items()},
    }  # job 2 writes
    outputs = {1: [RawOutput("write", LOG_TOOL, json.dumps(both)), logs([30], phase="after")]}
    stored = bandwidths(outputs) | {(2, "after", "read_mb_s"): 0.01}
    outputs[2] = [RawOutput("after", LOG_TOOL, "{not json")]
    runs.append(run(2, 2, workload="ageing"))
    traces, unreadable = chosen_and_read(outputs, runs, stored)
    assert sorted((t.phase, t.throughput.direction) for t in traces) == [("write", "read"), ("write", "write")]
    [said] = unreadable
    assert said.startswith("ext4 · ageing · run 2: fio's stored logs cannot be read"), (
        "phase after: run 2 (0.01 MB/s) the lower of the middle two"
    )
    assert chosen_and_read(outputs, runs, {})[0] == [], "no bandwidth stored, no run to draw"


def trace(target: str, values: list[float], repetition: int = 2, phase: str = "") -> ThroughputTrace:
    seconds = [0.5 * (i + 1) for i in range(len(values))]
    return ThroughputTrace(
        "seq",
        target,
        phase,
        repetition,
        3,
        Throughput("write", 500, seconds, [v * 1e6 for v in values], [v * 250 for v in values]),
    )


def test_the_chart_draws_each_targets_windows_in_the_pages_units():
    chart = throughput_chart(
        [trace("ext4", [100, 200, 200]), trace("xfs", [150, 150, 150], repetition=1)], ["ext4", "xfs"], Bandwidth.MB
    )
    assert chart.name == "seq-write-throughput" and chart.title == "seq: write throughput over time"
    rows = layer(chart.spec, "line")
    assert [(r["target"], r["seconds"], r["bandwidth"]) for r in rows if r["target"] == "ext4"] == [
        ("ext4", 0.5, 100),
        ("ext4", 1.0, 200),
        ("ext4", 1.5, 200),
    ]
    assert {r["run"] for r in rows if r["target"] == "xfs"} == {1}
    assert chart.spec["encoding"]["y"]["title"] == "write MB/s"
    assert "windows of 500 ms" in chart.caption
    assert "ext4 run 2 (the median of 3), xfs run 1 (the median of 3)" in chart.caption
    TopLevelSpec.validate(chart.spec)
    binary = throughput_chart([trace("ext4", [2**20 / 1e6])], ["ext4"], Bandwidth.MIB)
    [row] = [r for r in layer(binary.spec, "line") if r["seconds"] == 0.5]
    assert row["bandwidth"] == 1.0 and binary.spec["encoding"]["y"]["title"] == "write MiB/s"
    phased = throughput_chart([trace("ext4", [1], phase="overwrite")], ["ext4"], Bandwidth.MB)
    assert phased.name == "seq-overwrite-write-throughput" and phased.title.startswith("seq · overwrite:")


def test_a_scenarios_fio_phases_each_get_their_latency_and_throughput_charts():
    """Beside throughput, a scenario's measured fio phases get latency charts of their own, named
    after the phase (the one-phase workload's stay as they were)."""
    s = synthetic(
        {
            "ext4": {
                "fill.write_iops": [1, 2, 3],
                "fill.write_lat_p50_us": [10, 11, 12],
                "after.read_iops": [5, 5, 5],
                "after.read_lat_p99_us": [50, 60, 70],
            }
        },
        targets=("ext4",),
    )
    histograms = [LatencyHistogram(W, "ext4", "read", "lat", {50_000: 5}, 3, phase="after")]
    charts = study_charts(s, RunDetails(histograms, [replace(trace("ext4", [1, 2], phase="after"), workload=W)]))
    names = [c.name for c in charts]
    assert names[:2] == ["rand_read-fill-write-latency-percentiles", "rand_read-after-read-latency-percentiles"]
    assert "rand_read-after-read-latency-distribution" in names and "rand_read-after-write-throughput" in names
    assert all(
        c.title.startswith("rand_read · ")
        for c in charts
        if c.name.endswith(("percentiles", "distribution", "throughput"))
    )
    rows = layer(latency_percentiles_chart(s, W, "read", "after").spec, "line")
    assert [(r["percentile"], r["latency_us"]) for r in rows] == [("P99", 60)], (
        "the phase's own figures, nothing of another phase"
    )
    assert latency_percentiles_chart(s, W, "read") is None, "no phase-less figures in a scenario"


def test_a_long_run_is_drawn_in_coarser_windows():
    long = Throughput("write", 100, [0.1 * i for i in range(1, 1002)], [float(i) for i in range(1, 1002)], [2.0] * 1001)
    drawn = long.coarsened(200)
    assert drawn.window_ms == 600 and len(drawn.seconds) == 167 <= 200
    assert drawn.bytes_s[0] == sum(range(1, 7)) / 6 and drawn.seconds[0] == long.seconds[5]
    assert drawn.bytes_s[-1] == sum(range(997, 1002)) / 5 and drawn.seconds[-1] == long.seconds[-1], (
        "the last, shorter group: its own mean"
    )
    assert set(drawn.iops) == {2.0} and long.coarsened(2000) is long
    chart = throughput_chart([ThroughputTrace("seq", "ext4", "", 1, 1, long)], ["ext4"], Bandwidth.MB)
    assert len(layer(chart.spec, "line")) == 167 and "windows of 600 ms" in chart.caption
