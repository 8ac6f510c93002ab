"""The main comparisons at a glance (report/forest.py, issue 35 item 5), on synthetic comparisons
(pure): the decided ones sorted by effect either way of 1, the ±threshold band, the equivalent
and undecided counted and listed, a marker shape per verdict (never colour alone), the text
plot within 100 columns with its interval, band and 1 in their columns, and the page's chart a
valid Vega-Lite spec whose drawing names each row's verdict."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest
import vl_convert
from altair.vegalite.v6.schema.core import TopLevelSpec

from fslab.report.charts import forest_chart
from fslab.report.forest import (
    PLOTTED_ROWS,
    TEXT_WIDTH,
    VERDICT_MARKS,
    VERDICT_SHAPES,
    count_lines,
    counted_lines,
    forest,
    forest_lines,
    forest_of,
)
from fslab.report.formatting import verdict_phrase
from fslab.report.summary import StudySummary
from fslab.statistics.analysis import Analysis, Row
from fslab.statistics.stats import EQUIVALENT, FASTER, SLOWER, UNDECIDED, VERDICTS, Comparison

THRESHOLD = 0.03


def row(
    target: str, ratio: float, low: float | None, high: float | None, *, higher: bool = True, metric: str = "read_iops"
) -> Row:
    c = Comparison(8, 8, ratio, low, high, 0.01, higher, None, threshold=THRESHOLD)
    return Row("rand_read", target, "raw", metric, c)


# ratio, interval, higher is better → the verdict decide() reads from them
HALVED = row("halved", 0.5, 0.45, 0.56)  # slower, |log| 0.69
PLUS_20 = row("plus20", 1.2, 1.1, 1.3)  # faster, 0.18
LATENCY_0_9 = row("lat09", 0.9, 0.85, 0.95, higher=False, metric="read_lat_p99_us")  # faster, 0.105
PLUS_10 = row("plus10", 1.1, 1.05, 1.15)  # faster, 0.095
SAME = row("same", 1.005, 0.99, 1.02)  # equivalent
WIDE = row("wide", 1.3, 0.7, 2.4)  # undecided
NONE = row("none", 3.0, None, None)  # undecided: no interval


def test_the_verdicts_are_the_ones_the_rows_are_named_for():
    assert [r.comparison.verdict for r in (HALVED, PLUS_20, LATENCY_0_9, PLUS_10, SAME, WIDE, NONE)] == [
        SLOWER, FASTER, FASTER, FASTER, EQUIVALENT, UNDECIDED, UNDECIDED,
    ]  # fmt: skip


def test_decided_rows_are_sorted_by_effect_either_way_of_one():
    """|log ratio|: a halving (0.5) leads a gain of 20 %, and 0.9 (a 10.5 % effect) comes before 1.1 (9.5 %)."""
    f = forest([PLUS_10, SAME, LATENCY_0_9, WIDE, HALVED, NONE, PLUS_20], THRESHOLD)
    assert [r.target for r in f.decided] == ["halved", "plus20", "lat09", "plus10"]
    assert f.equivalent == [SAME] and f.undecided == [WIDE, NONE]


def test_the_band_is_the_equivalence_margin_on_the_log_scale():
    f = forest([PLUS_20], THRESHOLD)
    low, high = f.band
    assert high == pytest.approx(1.03) and low == pytest.approx(1 / 1.03)
    assert math.log(high) == pytest.approx(-math.log(low))
    spec = forest_chart(f).spec
    assert {"low": low, "high": high} in [r for rows in spec["datasets"].values() for r in rows], "the band drawn"


def test_equivalent_and_undecided_are_counted_and_listed_with_their_phrases():
    f = forest([PLUS_20, SAME, WIDE, NONE], THRESHOLD)
    counted = dict(counted_lines(f))
    assert list(counted) == ["1 equivalent within ±3 %", "2 undecided"]
    assert counted["2 undecided"] == [
        f"wide vs raw · rand_read · read IOPS: {verdict_phrase(WIDE.comparison)}",
        f"none vs raw · rand_read · read IOPS: {verdict_phrase(NONE.comparison)}",
    ]
    assert count_lines(f) == ["1 equivalent within ±3 % — see the tables.", "2 undecided — see the tables."]
    assert counted_lines(forest([PLUS_20], THRESHOLD)) == [], "no line for a count of 0"


def test_each_verdict_has_its_own_shape_and_mark_not_colour_alone():
    for marks in (VERDICT_SHAPES, VERDICT_MARKS):
        assert set(marks) == set(VERDICTS) and len(set(marks.values())) == len(VERDICTS)
    spec = forest_chart(forest([HALVED, PLUS_20], THRESHOLD)).spec
    [points] = [layer for layer in spec["layer"] if layer["mark"]["type"] == "point"]
    shape = points["encoding"]["shape"]
    assert shape["field"] == "verdict" and dict(zip(shape["scale"]["domain"], shape["scale"]["range"])) == {
        FASTER: "triangle-up",
        SLOWER: "triangle-down",
    }


def test_the_text_plot_draws_each_interval_its_marker_the_band_and_one_within_100_columns():
    long = row("a-target-named-at-very-great-length-indeed", 1.5, 1.4, 1.6)
    f = forest([HALVED, PLUS_20, LATENCY_0_9, long, SAME, WIDE], THRESHOLD)
    lines = forest_lines(f)
    assert max(map(len, lines)) <= TEXT_WIDTH
    assert lines[0] == "At a glance: 4 of 6 main comparisons faster or slower, largest effect first."
    rows = lines[1:5]
    assert [r.target for r in f.decided] == ["halved", long.target, "plus20", "lat09"]
    assert [re.search(r"(faster|slower) \d\.\d\d×", line).group(1) for line in rows] == [
        "slower", "faster", "faster", "faster"
    ]  # fmt: skip
    assert [line.count("…") for line in rows] == [0, 1, 0, 0], "a long name cut short, the others whole"
    ones = {line.index("│") for line in rows}
    assert len(ones) == 1, "1 in one column on every row"
    [one] = ones
    for line, r in zip(rows, f.decided):
        mark = VERDICT_MARKS[r.comparison.verdict]
        assert line.count(mark) == 2, "its marker beside its word and at its ratio"
        assert line.index("├") < line.rindex(mark) < line.index("┤"), "its ratio within its interval"
        assert line[one - 1] == "░" or line[one + 1] == "░", "the band beside 1"
        # below 1 left of it, above 1 right of it
        assert (line.rindex(mark) < one) == (r.comparison.ratio < 1)
    assert lines[-2:] == ["1 equivalent within ±3 % — see the tables.", "1 undecided — see the tables."]


def test_the_plot_draws_the_largest_effects_and_counts_the_rest():
    many = [row(f"t{i}", 1.1 + i / 100, 1.05 + i / 100, 1.15 + i / 100) for i in range(PLOTTED_ROWS + 3)]
    f = forest([*many, SAME], THRESHOLD)
    assert [r.target for r in f.plotted] == [f"t{i}" for i in reversed(range(3, PLOTTED_ROWS + 3))]
    lines = forest_lines(f)
    assert lines[0].endswith(f"largest effect first (the {PLOTTED_ROWS} largest drawn).")
    assert len(lines) == 1 + PLOTTED_ROWS + 2 + 2
    assert lines[-2:] == [
        "3 more faster or slower, of smaller effect — see the tables.",
        "1 equivalent within ±3 % — see the tables.",
    ]
    assert [name.split(" vs ")[0] for name in dict(counted_lines(f))["3 more faster or slower, of smaller effect"]] == [
        "t2",
        "t1",
        "t0",
    ]
    assert len(forest_chart(f).spec["datasets"]["rows-3"]) == PLOTTED_ROWS


def test_nothing_decided_says_so_and_no_comparison_says_nothing():
    assert forest_lines(forest([SAME, WIDE], THRESHOLD))[1] == "No main comparison is decided faster or slower."
    assert forest_chart(forest([SAME, WIDE], THRESHOLD)) is None
    assert forest_lines(forest([], THRESHOLD)) == []


def test_a_study_runs_forest_is_of_its_main_comparisons_alone():
    """Its primary metrics (Analysis.main_rows): a percentile's row, and a workload against another
    (compare_with), are in no forest."""
    clat = row("x", 1.2, 1.1, 1.3, metric="read_clat_p50_us")
    paired = Row("rand_read", "plus20", "plus20", "read_iops", PLUS_20.comparison, baseline_workload="seq_read")
    primary = frozenset({("rand_read", "read_iops"), ("rand_read", "read_lat_p99_us")})
    s = StudySummary(
        study_run={},
        targets=[],
        workloads=["rand_read"],
        cells=[],
        analysis=Analysis([PLUS_20, clat, LATENCY_0_9, SAME], {}, {}, {}, THRESHOLD, 0.05, primary=primary),
    )
    s = replace(s, analysis=replace(s.analysis, between=[paired]))
    f = forest_of(s)
    assert f.decided == [PLUS_20, LATENCY_0_9] and f.equivalent == [SAME] and f.undecided == []


def test_the_chart_is_valid_and_its_drawing_names_each_rows_verdict():
    chart = forest_chart(forest([HALVED, PLUS_20, LATENCY_0_9], THRESHOLD))
    TopLevelSpec.validate(chart.spec)
    svg = vl_convert.vegalite_to_svg(chart.spec)
    for said in ("slower 0.50×", "faster 1.20×", "faster 0.90×", "halved vs raw · rand_read · read IOPS"):
        assert said in svg
