"""The report hook of the workload-kind protocol (workloads/offered.py): each kind offers its series
and distributions as records, and the page draws what is offered — a toy kind's series
(toys/workload_kind.py), sysbench's intervals and percentiles, a scenario's phases' —, all
on stored study runs (tests/synthetic.py: no root, no device); and report/ imports no kind."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from altair.vegalite.v6.schema.core import TopLevelSpec

from conftest import FIXTURES
from fslab.model import RawOutput, Workload
from fslab.report.chart_parts import Chart
from fslab.report.details import run_details
from fslab.report.html import Page, render_page, run_section
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB
from fslab.workloads import SHIPPED, registered, report_of
from short_studies import mixed_scenario
from synthetic import OUTPUTS, stored_study
from test_imports import import_graph
from test_workload_registry import TRUTH, toy_registered  # noqa: F401 (a fixture)

ROOT = Path(__file__).parent.parent
SYSBENCH = """\
[study]
name = "mail"
repetitions = 3

[[target]]
filesystem = ["ext4", "xfs"]

[[workload]]
name = "mail"
kind = "sysbench"
options = { "file-num" = 8, "file-total-size" = "16M", "file-block-size" = "16k", threads = 2, time = 5 }

[[workload]]
name = "copy"
kind = "dd"
options = { bs = "1M", count = 64 }
"""


def page_of(db: ResultsDB, study_run: int) -> tuple[str, dict[str, Chart]]:
    """The page of a stored study run (its JavaScript left out), and its charts' specs by name."""
    s = summarize_study_run(db, study_run)
    page = Page("hook", [run_section(s, run_details(db, s))])
    specs = {c.name: c for c in page.charts}
    return render_page(page, vega_bundle=lambda: ""), specs


def calls(workload: Workload) -> list[RawOutput]:
    """What a run of the toy kind leaves (as its `run` writes it): its mean, and each call's end and time."""
    return [RawOutput("", "true", "1.500000"), RawOutput("", "true_calls", "0.001 1.0\n0.003 2.0\n0.0045 1.5\n")]


def test_a_toy_kinds_series_reaches_the_page_through_its_hook(toy_registered, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setitem(OUTPUTS, "true", calls)
    db = ResultsDB(str(tmp_path / "results.db"))
    html, charts = page_of(db, stored_study(tmp_path, TRUTH, db))
    [chart] = [c for name, c in charts.items() if name.endswith("over-time")]
    assert chart.name == "truth-time-per-call-over-time" and chart.title == "truth: time per call over time"
    assert 'id="chart-truth-time-per-call-over-time"' in html and "each call of true, timed by fslab" in html
    rows = chart.spec["datasets"][chart.spec["data"]["name"]]
    assert [(r["seconds"], r["value"]) for r in rows] == [(0.001, 1.0), (0.003, 2.0), (0.0045, 1.5)], (
        "the stored calls, as the toy's hook read them"
    )
    assert chart.spec["encoding"]["y"]["title"] == "time per call (ms)"
    TopLevelSpec.validate(chart.spec)


def test_a_series_a_kind_cannot_read_is_said_not_drawn(toy_registered, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setitem(OUTPUTS, "true", lambda w: [RawOutput("", "true", "1.5"), RawOutput("", "true_calls", "x")])
    db = ResultsDB(str(tmp_path / "results.db"))
    study_run = stored_study(tmp_path, TRUTH, db)
    details = run_details(db, summarize_study_run(db, study_run))
    [said] = details.unreadable
    assert not details.series and re.fullmatch(
        r"ext4 · truth · run \d: true's stored calls cannot be read \(could not convert string to float: 'x'\)", said
    )


def test_sysbench_offers_its_intervals_and_percentiles_and_dd_nothing_more(tmp_path, monkeypatch):
    intervals = (FIXTURES / "sysbench" / "run-intervals.txt").read_text()
    monkeypatch.setitem(OUTPUTS, "sysbench", lambda w: [RawOutput("", "sysbench", intervals)])
    db = ResultsDB(str(tmp_path / "results.db"))
    html, charts = page_of(db, stored_study(tmp_path, SYSBENCH, db))
    assert [name for name in charts if name.startswith("mail-")] == [
        "mail-events_per_s",
        "mail-latency-percentiles",
        "mail-read-throughput",
        "mail-write-throughput",
        "mail-latency-over-time",
    ], "no heatmap: sysbench keeps no bins"
    percentiles = charts["mail-latency-percentiles"].spec
    rows = percentiles["datasets"][percentiles["data"]["name"]]
    assert {r["percentile"] for r in rows} == {"P95", "max"} and {r["target"] for r in rows} == {"ext4", "xfs"}
    over_time = charts["mail-latency-over-time"]
    [ext4] = [r for r in over_time.spec["datasets"][over_time.spec["data"]["name"]] if r["target"] == "ext4"]
    assert ext4["to_s"] == [1, 2, 3, 4, 5] and ext4["P95"] == pytest.approx([3187, 3425, 4028, 2347, 2710])
    assert "P95 (solid) of the latency of each sysbench event" in over_time.caption
    throughput = charts["mail-read-throughput"]
    assert "sysbench's report of each interval" in throughput.caption
    assert "iops" not in json.dumps(throughput.spec), "sysbench counts no I/Os per interval"
    for chart in charts.values():
        TopLevelSpec.validate(chart.spec)
    assert [name for name in charts if name.startswith("copy-")] == ["copy-read_mb_s", "copy-write_mb_s"], (
        "dd: its primary metrics, each run a dot; one copy a step, nothing over time"
    )


def test_a_scenarios_phases_offer_what_their_tools_offer(tmp_path):
    db = ResultsDB(str(tmp_path / "results.db"))
    html, charts = page_of(db, stored_study(tmp_path, mixed_scenario(repetitions=2), db))
    assert {"mix-fill-write-latency-percentiles", "mix-mail-latency-percentiles"} <= set(charts), (
        "fio's phase by fio's hook, sysbench's by sysbench's"
    )
    assert not [name for name in charts if name.startswith("mix-sanity") and not name.endswith("_mb_s")], (
        "dd's phase: its primary metrics alone"
    )


def test_every_shipped_kind_and_its_report_hook_agree():
    for name, shipped in SHIPPED.items():
        assert report_of(name) is registered(name).kind.report, f"{shipped.report} holds what {name} offers"


def test_the_report_imports_no_workload_kind():
    """report/ draws what the hook offers: it imports the protocol, its records and the registry,
    never a kind's module (nor fio's policy)."""
    kinds = tuple(
        name for shipped in SHIPPED.values() for name in (shipped.module, shipped.metrics, shipped.report)
    ) + ("fslab.workloads.fio_", "fslab.guard.fio_", "fslab.fio")
    graph = import_graph()
    found = {
        module: sorted(m for m in imported if m.startswith(kinds) and m != "fslab.workloads.offered")
        for module, imported in graph.items()
        if module.startswith("fslab.report.")
    }
    assert {m: i for m, i in found.items() if i} == {}
