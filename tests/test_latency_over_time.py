"""Latency over time in the report: which run of a cell is drawn and that only its histogram
logs are read (a stored study run, tests/synthetic.py), and the heatmap and percentiles drawn of
them (pure, on logs binned as fio bins them). The page's drawing is test_report_html.py's."""

from __future__ import annotations

import sqlite3

from altair.vegalite.v6.schema.core import TopLevelSpec

from fslab.fio.hist import COARSENESS, HIST_TOOL, Bins, kept, latency_over_time
from fslab.fio.output import BINS_TOOL
from fslab.report.chart_parts import BUCKETS_PER_DECADE, latency_bucket
from fslab.report.charts import study_charts
from fslab.report.details import LatencyTrace, RunDetails, run_details
from fslab.report.summary import StudySummary, summarize_study_run
from fslab.report.time_charts import (
    LATENCY_WINDOWS,
    heatmap_rows,
    latency_heatmap_chart,
    latency_over_time_chart,
    percentile_rows,
)
from fslab.results import ResultsDB
from synthetic import stored_study
from test_report_html import W, synthetic

BINS = Bins.of_width(1856 >> COARSENESS, COARSENESS)


def drawn_us(ns: int) -> float:
    """A latency as the percentiles chart holds it: the value (µs, 4 digits) of the bin fio counts it in."""
    return float(f"{BINS.value_ns(BINS.index_of(ns)) / 1e3:.4g}")


STUDY = """\
[study]
name = "over-time"
repetitions = 3
workloads = ["rand_read", "nas_mixed"]
image_size = "512MiB"

[fio]
size = "64MiB"
runtime = "1s"

[[target]]
filesystem = ["ext4", "raw"]
"""


def log_of(windows: list[list[int]], window_ms: int = 200, direction: int = 0) -> str:
    """One job's histogram log as a run keeps it: a window a line, of these latencies (ns)."""
    lines = []
    for w, samples in enumerate(windows, 1):
        counts = [0] * BINS.count
        for ns in samples:
            counts[BINS.index_of(ns)] += 1
        lines.append(f"{w * window_ms}, {direction}, 4096, " + ", ".join(map(str, counts)))
    return kept({"fslab_clat_hist.1.log": "\n".join(lines)}, window_ms, COARSENESS, None)


def trace(target: str, windows: list[list[int]], phase: str = "") -> LatencyTrace:
    [latency] = latency_over_time(log_of(windows))
    return LatencyTrace(W, target, phase, 2, 3, latency)


def _stored_counting_reads(tmp_path, monkeypatch) -> tuple[ResultsDB, int, StudySummary, list[tuple[str, int]]]:
    """STUDY stored and summarised; each raw output the database is then asked for, (tool, run id),
    counted in the list returned."""
    db = ResultsDB(str(tmp_path / "results.db"))
    study_run = stored_study(tmp_path, STUDY, db, scale={"raw": 1.0, "ext4": 0.93})
    s = summarize_study_run(db, study_run)
    loaded: list[tuple[str, int]] = []
    reading = db.outputs_of_study_run

    def counted(study_run_id, tool, phase="", only=None):
        found = reading(study_run_id, tool, phase, only)
        loaded.extend((tool, run_id) for run_id in found)
        return found

    monkeypatch.setattr(db, "outputs_of_study_run", counted)
    return db, study_run, s, loaded


def test_the_run_drawn_is_the_throughput_charts_and_only_its_logs_are_read(tmp_path, monkeypatch):
    """Per cell and direction the run whose bandwidth is the median, the throughput chart's: its
    histogram logs, and none other, read from the database. A run not drawn may hold anything."""
    db, study_run, s, loaded = _stored_counting_reads(tmp_path, monkeypatch)
    details = run_details(db, s)
    throughput = {(t.workload, t.target, t.throughput.direction): t.repetition for t in details.traces}
    latency = {(t.workload, t.target, t.latency.direction): t.repetition for t in details.latency_traces}
    assert latency == throughput and len(latency) == 2 * 3, "rand_read reads, nas_mixed reads and writes; ext4 and raw"
    assert {t.runs for t in details.latency_traces} == {3} and not details.unreadable
    drawn = {
        r["id"]
        for r in db.runs(study_run)
        if (r["workload"], r["target"]) in {(w, t) for w, t, _ in latency} and r["repetition"] in latency.values()
    }
    hist_read = [run_id for tool, run_id in loaded if tool == HIST_TOOL]
    assert len(hist_read) == len(set(hist_read)) <= len(latency) and set(hist_read) <= drawn, "only the runs drawn"
    for t in details.latency_traces:
        assert t.latency.counts.shape == (50, BINS.count) and t.latency.counts.sum() > 0

    # a run not drawn, its logs made unreadable: nothing said; the drawn run's: said, the rest drawn
    runs = {(r["workload"], r["target"], r["repetition"]): r["id"] for r in db.runs(study_run) if not r["warmup"]}
    chosen = next(t for t in details.latency_traces if (t.workload, t.target) == ("rand_read", "ext4"))
    other = runs[("rand_read", "ext4", next(k for k in (1, 2, 3) if k != chosen.repetition))]
    with sqlite3.connect(tmp_path / "results.db") as conn:
        conn.execute(
            "UPDATE run_outputs SET output = '{not json', packed = NULL WHERE run_id = ? AND tool = ?",
            (other, HIST_TOOL),
        )
    assert not run_details(db, s).unreadable
    with sqlite3.connect(tmp_path / "results.db") as conn:
        conn.execute(
            "UPDATE run_outputs SET output = '{not json', packed = NULL WHERE run_id = ? AND tool = ?",
            (runs[("rand_read", "ext4", chosen.repetition)], HIST_TOOL),
        )
    again = run_details(db, s)
    [said] = again.unreadable
    assert said.startswith(
        f"ext4 · rand_read · run {chosen.repetition}: fio's stored histogram logs cannot be read (no fio histogram logs"
    )
    assert len(again.latency_traces) == len(latency) - 1 and len(again.traces) == len(throughput)


def test_the_heatmap_draws_each_windows_completions_per_latency_bucket():
    """Each window with completions: its start, its lowest bucket (by each bin's value) and its
    completions per bucket from there up, empty ones between included; nothing of a window
    without; all in one row per target, for the chart to flatten."""
    t = trace("ext4", [[100_000] * 98 + [130_000] + [2_000_000] * 2, [], [100_000] * 10])
    row = heatmap_rows("ext4", t.latency)
    assert (row["target"], row["w"], row["from_s"], row["b0"]) == ("ext4", 0.2, [0.0, 0.4], [20, 20]), (
        "the empty window has no cell"
    )
    assert [latency_bucket(BINS.value_ns(BINS.index_of(v))) for v in (100_000, 130_000, 2_000_000)] == [20, 21, 33]
    assert row["n"] == [[98, 1] + [0] * 11 + [2], [10]]
    assert 10 ** (20 / BUCKETS_PER_DECADE) <= 100 < 10 ** (21 / BUCKETS_PER_DECADE), "bucket 20 holds 100 µs"
    p = percentile_rows("ext4", t.latency)
    assert (p["to_s"], p["ios"]) == ([0.2, 0.4, 0.6], [101, 0, 10])
    assert p["P50"] == [drawn_us(100_000), None, drawn_us(100_000)], "None: a window in which nothing completed"
    assert p["P99"][0] == drawn_us(2_000_000)


def test_a_long_log_is_drawn_in_at_most_fifty_windows_its_bins_added_up():
    t = trace("ext4", [[50_000 + w] for w in range(500)])
    row = heatmap_rows("ext4", t.latency.coarsened(LATENCY_WINDOWS))
    assert (
        len(row["from_s"]) == LATENCY_WINDOWS
        and row["w"] == 2.0
        and row["n"] == [[10]] * LATENCY_WINDOWS
        and row["from_s"][-1] == 98.0
    )
    chart = latency_heatmap_chart([t], ["ext4"])
    assert chart.spec["datasets"]["rows"] == [row] and "windows of 2000 ms" in chart.caption


def test_a_heatmap_of_many_bins_draws_at_most_2000_cells_and_says_what_it_merged_and_keeps_the_tail():
    """Ten targets, each window's completions over four factors of ten (10 µs to 100 ms, every
    bucket): 20,000 cells at 50 windows and 10 buckets a factor of ten, 0.75 s a figure. Drawn in
    at most 2,000: consecutive windows and adjacent buckets merged, their completions added up,
    the resolution said on the axes and in the caption; the one slow I/O of the run still a cell."""
    spread = [int(10_000 * 10 ** (k / 12)) for k in range(48)]
    windows = [spread * 3 for _ in range(50)]
    windows[17] = windows[17] + [700_000_000]  # 0.7 s once: the tail
    targets = [f"fs{i}" for i in range(10)]
    chart = latency_heatmap_chart([trace(t, windows) for t in targets], targets)
    TopLevelSpec.validate(chart.spec)
    rows = chart.spec["datasets"]["rows"]
    assert sum(1 for row in rows for counts in row["n"] for n in counts if n) <= 2000
    assert [sum(map(sum, row["n"])) for row in rows] == [50 * 48 * 3 + 1] * 10, "every completion in a cell"
    [per_decade] = {row["d"] for row in rows}
    [width] = {row["w"] for row in rows}
    assert per_decade < BUCKETS_PER_DECADE and width > 0.2
    slow = [
        n
        for start, b0, counts in zip(rows[0]["from_s"], rows[0]["b0"], rows[0]["n"])
        for i, n in enumerate(counts)
        if n
        and 10 ** ((b0 + i) / per_decade) <= 700_000 < 10 ** ((b0 + i + 1) / per_decade)
        and start <= 17 * 0.2 < start + width
    ]
    assert slow == [1], "the slowest I/O: alone in its cell, in its window"
    said = f"latency in {per_decade} buckets per factor of ten"
    assert (
        said in chart.caption
        and "at most 2,000 cells" in chart.caption
        and f"windows of {round(width * 1000)} ms" in chart.caption
    )
    assert f"{per_decade} buckets per factor of ten" in chart.spec["facet"]["row"]["title"]
    assert f"windows of {round(width * 1000)} ms" in chart.spec["spec"]["encoding"]["x"]["title"]
    few = latency_heatmap_chart([trace("ext4", [[100_000] * 3] * 50)], ["ext4"])
    assert (
        few.spec["datasets"]["rows"][0]["d"] == BUCKETS_PER_DECADE
        and len(few.spec["datasets"]["rows"][0]["from_s"]) == 50
    ), "a heatmap within its cells: as logged"
    assert "merged" not in few.caption


def test_the_charts_are_named_and_valid_and_say_which_runs_they_draw():
    fast, slow = trace("ext4", [[80_000] * 50, [90_000] * 50]), trace("raw", [[60_000] * 50, [3_000_000] * 5])
    heatmap, percentiles = (
        latency_heatmap_chart([slow, fast], ["ext4", "raw"]),
        latency_over_time_chart([fast, slow], ["ext4", "raw"]),
    )
    assert (heatmap.name, heatmap.title) == ("rand_read-read-latency-heatmap", "rand_read: read latency heatmap")
    assert (percentiles.name, percentiles.title) == (
        "rand_read-read-latency-over-time",
        "rand_read: read latency over time",
    )
    for chart in (heatmap, percentiles):
        TopLevelSpec.validate(chart.spec)
        assert "completion latency" in chart.caption and "ext4 run 2 (the median of 3)" in chart.caption
    assert heatmap.spec["facet"]["row"]["sort"] == ["ext4", "raw"], "a row per target, in the study's order"
    assert [r["target"] for r in heatmap.spec["datasets"]["rows"]] == ["ext4", "raw"]
    [ext4, raw] = percentiles.spec["datasets"]["rows-0"]
    assert (raw["P99"], ext4["P50"]) == ([drawn_us(60_000), drawn_us(3_000_000)], [drawn_us(80_000), drawn_us(90_000)])
    assert percentiles.spec["transform"][-1] == {"fold": ["P50", "P99"], "as": ["percentile", "latency_us"]}


def test_study_charts_draw_latency_over_time_after_throughput_per_phase_and_direction():
    s = synthetic({"ext4": {"after.read_iops": [5, 5, 5], "after.read_lat_p99_us": [50, 60, 70]}}, targets=("ext4",))
    charts = study_charts(s, RunDetails(latency_traces=[trace("ext4", [[70_000] * 20], phase="after")]))
    names = [c.name for c in charts]
    assert names[-2:] == ["rand_read-after-read-latency-heatmap", "rand_read-after-read-latency-over-time"]
    assert all(c.title.startswith("rand_read · after: read latency") for c in charts[-2:])


def test_a_pages_latency_distributions_are_read_from_each_runs_bins_not_fios_json(tmp_path, monkeypatch):
    """Each run's json+ bins are stored apart (fio_output.stored_bins): the page adds them up
    without reading fio's JSON. A run stored without them (before they were, imported) is read
    from its JSON, to the same histogram."""
    db, study_run, s, loaded = _stored_counting_reads(tmp_path, monkeypatch)
    histograms = {(h.workload, h.target, h.direction): h for h in run_details(db, s).histograms}
    assert histograms and not [run_id for tool, run_id in loaded if tool == "fio"], "no run's JSON read"
    one = db.runs(study_run, ("id", "workload", "target", "warmup"))[-1]
    with sqlite3.connect(tmp_path / "results.db") as conn:
        conn.execute("DELETE FROM run_outputs WHERE run_id = ? AND tool = ?", (one["id"], BINS_TOOL))
    loaded.clear()
    again = {(h.workload, h.target, h.direction): h for h in run_details(db, s).histograms}
    assert [run_id for tool, run_id in loaded if tool == "fio"] == [one["id"]], "that run's JSON alone"
    assert again == histograms, "the same bins, from fio's JSON"
