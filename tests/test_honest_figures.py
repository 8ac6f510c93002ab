"""What a summary judges, and only that (issue 20, items 4–6): a flagged figure is in no verdict,
ranking, conclusion or chart; no interval is narrower than its tool's printed resolution; every
output prints an interval, or its absence, by one rule. Stored synthetic samples and synthetic
statistics only: never this machine's speed."""

import json
import math
import re
from datetime import datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from conftest import fslab_in_process
from fslab.model.findings import Finding
from fslab.report.charts import study_charts
from fslab.report.conclusions import conclusions
from fslab.report.console import print_summary
from fslab.report.details import RunDetails
from fslab.report.formats.markdown import to_markdown
from fslab.report.formats.summary_json import to_json
from fslab.report.formatting import fmt_mean_ci, runs_text, verdict_phrase
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB, RunRecord
from fslab.results.owner import Owner
from fslab.statistics.stats import compare, decide, interval_text, summarize
from fslab.study import parse_study
from fslab.workloads.sysbench import METRICS

STUDY = """\
[study]
name = "mail"
repetitions = {runs}
[[target]]
filesystem = ["ext4", "xfs", "btrfs"]
[[workload]]
name = "mail-server"
kind = "sysbench"
options = {{ "file-num" = 100, "file-total-size" = "4000K", "file-test-mode" = "rndrw", threads = 4, time = 5 }}
"""
W = "mail-server"


def stored(
    tmp_path: Path, figures: dict[str, list[tuple[float, float]]], flagged: str | None = None
) -> tuple[ResultsDB, int]:
    """A sysbench study run whose target's runs report (events/s, p95 ms) as `figures` give them,
    each run of `flagged` judged implausible as sysbench.judge judges 4.2 M events/s."""
    runs = len(next(iter(figures.values())))
    study = parse_study(STUDY.format(runs=runs), "s.toml", base_dir=Path("."))
    db = ResultsDB(str(tmp_path / "r.db"))
    study_run = db.begin_study_run(study, 1, {}, {}, {}, Owner.current(tmp_path))
    start = datetime(2026, 1, 1)
    for repetition in range(runs):
        for position, (target, values) in enumerate(figures.items(), start=1):
            events, p95 = values[repetition]
            notes = (
                [Finding("events_too_fast", "1050000 events/s per thread: not events that ran", implausible=True)]
                if target == flagged
                else []
            )
            db.record_run(study_run, RunRecord(
                target=target, workload=W, repetition=repetition + 1, warmup=False, block=repetition + 1,
                position=position, started_at=start, finished_at=start + timedelta(seconds=5), status="ok",
                buffered=True, notes=notes,
                metrics=[METRICS["events_per_s"].of("events_per_s", events),
                         METRICS["lat_p95_ms"].of("lat_p95_ms", p95)],
            ))  # fmt: skip
    db.finish_study_run(study_run, "finished", {})
    return db, study_run


def console_text(s) -> str:
    out = StringIO()
    print_summary(Console(file=out, width=120, color_system=None), s)
    return out.getvalue()


# --- item 4: a flagged figure is judged nowhere -------------------------------------------------

# ext4 first (every target's baseline); btrfs's mail server flagged: 4.2 M events/s, "faster 253×".
FLAGGED = {
    "ext4": [(16500.0, 0.31), (16800.0, 0.30), (16650.0, 0.32)],
    "xfs": [(15000.0, 0.35), (15200.0, 0.36), (15100.0, 0.34)],
    "btrfs": [(4_200_000.0, 0.01), (4_210_000.0, 0.01), (4_190_000.0, 0.01)],
}


def test_a_flagged_cell_is_in_no_verdict_ranking_conclusion_or_chart(tmp_path):
    db, study_run = stored(tmp_path, FLAGGED, flagged="btrfs")
    s = summarize_study_run(db, study_run)
    assert {c.target: c.implausible for c in s.cells} == {"ext4": False, "xfs": False, "btrfs": True}
    # verdicts: no row, no pair of the family, no ranking holds it
    assert {r.target for r in s.analysis.rows} == {"xfs"}
    assert not any("btrfs" in key[2:] for key in s.analysis.pairs)
    assert all("btrfs" not in r.order for r in s.analysis.rankings.values()) and s.analysis.rankings
    assert s.analysis.family_size == 2, "ext4 against xfs, in events/s and p95 latency"
    # conclusions: none judges it; one says it is left out
    said = [c.text for c in conclusions(s)[W]]
    assert not any("253" in text or "btrfs is" in text or "btrfs leads" in text for text in said)
    assert [text for text in said if "btrfs" in text] == [next(t for t in said if t.startswith("Left out"))]
    assert not conclusions(s)[W][0].text.startswith("btrfs")
    # charts: neither bar nor dots, nor any other mark of it, and the caption says why
    charts = study_charts(s, RunDetails())
    assert charts, "ext4 and xfs are drawn"
    for chart in charts:
        drawn = json.dumps(chart.spec.get("datasets", {})) + json.dumps(chart.spec.get("data", {}))
        assert "btrfs" not in drawn, chart.name
        assert "Not drawn: btrfs" in chart.caption
    # console, Markdown and JSON: in the table, marked; in no comparison or ranking
    for text in (console_text(s), to_markdown(s)):
        assert "⚠" in text and "IMPLAUSIBLE" in text
        ranking = [line for line in text.splitlines() if line.startswith("Ranking by")]
        assert ranking and not any("btrfs" in line for line in ranking)
        assert re.search(r"Left out of the comparisons, rankings, conclusions and charts: btrfs", text)
    document = json.loads(to_json(s))
    assert [c["implausible"] for c in document["cells"] if c["target"] == "btrfs"] == [True]
    assert "btrfs" not in json.dumps(document["comparisons"]) + json.dumps(document["rankings"])


def test_fslab_compare_judges_no_flagged_cell_of_either_study_run(tmp_path):
    plain = {**FLAGGED, "btrfs": [(16000.0, 0.33), (16100.0, 0.33), (15900.0, 0.34)]}
    db, older = stored(tmp_path, plain)
    _, newer = stored(tmp_path, FLAGGED, flagged="btrfs")  # "faster 260×" were it judged
    for a, b in (
        (older, newer),
        (newer, older),
    ):  # flagged in the newer, then in the older: "slower 260×", a regression were it judged
        result = fslab_in_process("compare", str(a), str(b), "--db", str(tmp_path / "r.db"))
        assert result.returncode == 0 and "no regression" in result.stdout, result.stdout + result.stderr
        table = result.stdout.split("Ratios of geometric means")[0]
        assert "ext4" in table and "xfs" in table and "btrfs" not in table, result.stdout
        assert "Left out of the comparison: btrfs · mail-server" in result.stdout
    # the page's comparison of the two study runs, as `fslab compare`'s
    page = fslab_in_process(
        "report", str(older), str(newer), "-o", str(tmp_path / "page"), "--db", str(tmp_path / "r.db")
    )
    assert page.returncode == 0, page.stdout + page.stderr
    html = (tmp_path / "page" / "report.html").read_text()
    section = html.split(f'id="compare{older}-{newer}"')[1].split("</section>")[0]
    assert "Left out of the comparison: btrfs · mail-server" in section and "ext4" in section
    assert "btrfs" not in section.replace("Left out of the comparison: btrfs", ""), (
        "no row, no verdict, no chart datum of it"
    )


# --- item 5: no interval narrower than the tool prints ------------------------------------------


def test_two_equal_runs_of_a_coarse_figure_have_an_interval_as_wide_as_its_resolution():
    coarse = summarize([0.12, 0.12, 0.12], higher_is_better=False, resolution=0.01)
    assert (coarse.ci_low, coarse.ci_high) == pytest.approx((0.115, 0.125)), "each value known to ± 0.005"
    assert any("spread is not resolved" in w for w in coarse.warnings)
    exact = summarize([0.12, 0.12, 0.12], higher_is_better=False)
    assert exact.ci_low == exact.ci_high == 0.12 and not any("resolved" in w for w in exact.warnings)
    spread = summarize([10.0, 12.0, 14.0], resolution=0.01)
    assert spread == summarize([10.0, 12.0, 14.0]), "a spread wider than the resolution is its own"


@pytest.mark.parametrize("runs", [2, 3, 10])
def test_a_difference_within_the_resolution_is_never_significant(runs):
    """sysbench's p95 printed 0.12 and 0.13 ms, run after run: each may be 0.125, so no verdict,
    however many runs, and the interval holds 1."""
    within = compare([0.13] * runs, [0.12] * runs, higher_is_better=False, resolution=0.01)
    assert within.verdict == "undecided" and within.p_value >= 0.05
    assert within.ci_low <= 1 <= within.ci_high
    assert within.ci_low <= (0.115 / 0.135) * (1 + 1e-9) and within.ci_high >= 1 - 1e-9, (
        "the interval covers every ratio the printed values allow"
    )
    before = compare([0.13] * runs, [0.12] * runs, higher_is_better=False)
    assert before.p_value == 0.0 and before.ci_low == before.ci_high, "without a resolution: zero variance, certainty"


def test_a_difference_beyond_the_resolution_is_still_found():
    apart = compare([0.30, 0.31, 0.30, 0.31], [0.12, 0.12, 0.13, 0.12], higher_is_better=False, resolution=0.01)
    assert apart.verdict == "faster" and apart.ci_high < 1
    noisy = ([100.0, 104.0, 98.0, 101.0], [120.0, 118.0, 125.0, 121.0])
    assert compare(*noisy, resolution=0.01) == compare(*noisy), "a spread far wider than the step is untouched"


def test_a_value_within_half_a_step_of_zero_is_not_compared():
    c = compare([0.004, 0.004], [0.02, 0.02], resolution=0.01)
    assert c.ci_low is None and c.p_value is None and c.verdict == "undecided" and "resolution" in c.reason
    assert math.isfinite(c.ratio)


def test_the_stored_sysbench_latency_is_judged_at_its_printed_resolution(tmp_path):
    """Two equal runs of sysbench's p95, 0.12 against 0.13 ms, from the database: no verdict, CV
    0 % said to be below what sysbench prints, and the interval as wide as its 0.01 ms."""
    db, study_run = stored(
        tmp_path,
        {
            "ext4": [(16000.0, 0.13), (16100.0, 0.13)],
            "xfs": [(16050.0, 0.12), (16020.0, 0.12)],
            "btrfs": [(16010.0, 0.13), (16090.0, 0.13)],
        },
    )
    assert db.sample_groups(study_run).kinds == {W: "sysbench"}
    s = summarize_study_run(db, study_run)
    [row] = [r for r in s.analysis.rows if r.target == "xfs" and r.metric == "lat_p95_ms"]
    assert row.comparison.verdict == "undecided" and row.comparison.p_adjusted >= 0.05
    cell = next(c for c in s.cells if c.target == "xfs").metrics["lat_p95_ms"]
    assert cell.ci_high - cell.ci_low == pytest.approx(0.01)
    assert any("0.01 its tool prints" in w for w in cell.warnings)


# --- item 6: one interval rule, every output ----------------------------------------------------


def test_every_output_prints_the_interval_a_verdict_is_read_from(tmp_path):
    """A 2-run study run: each comparison's verdict is read from its interval, and every output
    prints that very interval (the family's, at its level) — the conclusions, the JSON, the charts'
    whiskers; a cell's own mean ± x % still needs 3 runs, in every output alike."""
    two = {
        "ext4": [(16500.0, 0.31), (16800.0, 0.30)],
        "xfs": [(12000.0, 0.45), (12100.0, 0.46)],
        "btrfs": [(16600.0, 0.31), (16700.0, 0.33)],
    }
    db, study_run = stored(tmp_path, two)
    s = summarize_study_run(db, study_run)
    assert any(r.comparison.differs for r in s.analysis.rows), "a verdict from 2 runs, read from its interval"
    document, markdown, console = json.loads(to_json(s)), to_markdown(s), console_text(s)
    said = conclusions(s)[W]
    for r in s.analysis.rows:
        c = r.comparison
        assert c.interval is not None and c.verdict == decide(c.ratio, c.interval, c.higher_is_better, c.threshold)
        [sentence] = [x.text for x in said if x.row == r]
        assert verdict_phrase(c) in sentence and interval_text(c.interval) in sentence, sentence
        [stored_row] = [d for d in document["comparisons"] if (d["target"], d["metric"]) == (r.target, r.metric)]
        assert stored_row["verdict"] == c.verdict
        assert stored_row["interval"] == pytest.approx(list(c.interval)) and stored_row["reason"] == c.reason
    for cell in s.cells:
        for name, stats in cell.metrics.items():
            assert stats.interval is None and fmt_mean_ci(stats).endswith(f"(interval {runs_text(3)})")
            assert document["cells"][s.cells.index(cell)]["metrics"][name]["needs_runs"] == 3
    assert markdown.count(f"(interval {runs_text(3)})") == 6, "events/s and p95 of each of 3 cells"
    assert not re.search(r"\d ± \d", markdown + console), "no mean ± x% anywhere"
    for chart in study_charts(s, RunDetails()):
        spec = json.dumps(chart.spec)
        assert "errorbar" not in spec or '"ratio"' in spec, f"{chart.name}: a whisker only on a ratio, never a mean"
