"""A study run's conclusions at a glance (pure): its main comparisons — each target against its
baseline on the primary metrics — those decided faster or slower as a forest plot, a row each
(the ratio a point, its interval a line, the ±threshold band shaded, the verdict a word and a
marker shape, so that colour is never all that tells them apart), sorted by effect (|log ratio|,
largest first); the equivalent and the undecided counted, a line each, listed where a reader
can open them (the page) or pointed to in the tables (console, summary.md). The page draws it
as a chart (charts.forest_chart), the console and summary.md as text (forest_lines), from one
Forest. No altair here: the console's summary imports this (startup is benchmarked).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fslab.report.formatting import explained_phrase, metric_label
from fslab.report.summary import StudySummary
from fslab.statistics.analysis import Row
from fslab.statistics.stats import EQUIVALENT, FASTER, SLOWER, UNDECIDED, ratio_text

# Each verdict's marker: Vega-Lite's shape on the page, a character in the console.
VERDICT_SHAPES = {FASTER: "triangle-up", SLOWER: "triangle-down", EQUIVALENT: "diamond", UNDECIDED: "circle"}
VERDICT_MARKS = {FASTER: "▲", SLOWER: "▼", EQUIVALENT: "◆", UNDECIDED: "○"}
TEXT_WIDTH = 100  # the console's forest plot fits this many columns
PLOT_COLUMNS = 34  # of them, the plot's (its log axis)
NAME_COLUMNS = 44  # of them, at most a row's name (cut short with "…")
# At a glance: the plot draws the largest effects only, so a study of hundreds of decided
# comparisons keeps one small chart (the page's load time); the rest are counted beneath it.
PLOTTED_ROWS = 20


@dataclass(frozen=True)
class Forest:
    """The main comparisons split by verdict: `decided` faster or slower, by effect, largest first."""

    decided: list[Row]
    equivalent: list[Row]
    undecided: list[Row]
    threshold: float

    @property
    def band(self) -> tuple[float, float]:
        """The ratios within ±threshold: where a ratio is equivalent (stats.decide)."""
        return 1 / (1 + self.threshold), 1 + self.threshold

    @property
    def plotted(self) -> list[Row]:
        """The decided rows the plot draws: the PLOTTED_ROWS largest effects."""
        return self.decided[:PLOTTED_ROWS]

    @property
    def empty(self) -> bool:
        return not (self.decided or self.equivalent or self.undecided)


def forest(rows: list[Row], threshold: float) -> Forest:
    """`rows` split by verdict, the faster and slower sorted by effect (|log ratio|, largest first;
    ties in the order given)."""
    decided = [r for r in rows if r.comparison.verdict in (FASTER, SLOWER)]
    return Forest(
        sorted(decided, key=lambda r: -effect(r)),
        [r for r in rows if r.comparison.verdict == EQUIVALENT],
        [r for r in rows if r.comparison.verdict == UNDECIDED],
        threshold,
    )


def forest_of(s: StudySummary) -> Forest:
    """The forest of a study run's main comparisons (Analysis.main_rows)."""
    return forest(s.analysis.main_rows(), s.analysis.threshold)


def effect(r: Row) -> float:
    """How far a ratio lies from 1, either way: |log ratio| (a halving is as large as a doubling)."""
    ratio = r.comparison.ratio
    return abs(math.log(ratio)) if ratio > 0 and math.isfinite(ratio) else math.inf


def row_name(r: Row) -> str:
    """A comparison as a row of the forest names it: target vs baseline · workload · metric."""
    return f"{r.target} vs {r.baseline} · {r.workload} · {metric_label(r.metric)}"


def row_verdict(r: Row) -> str:
    """The verdict word with the ratio: "faster 1.31×"."""
    return f"{r.comparison.verdict} {ratio_text(r.comparison.ratio)}×"


def counted_lines(f: Forest) -> list[tuple[str, list[str]]]:
    """A line each for the decided rows the plot leaves out (beyond PLOTTED_ROWS), the equivalent
    and the undecided: its count and words, and what it counts (each comparison named with its
    verdict_phrase); nothing for a count of 0."""
    more = f.decided[PLOTTED_ROWS:]
    counts = [
        (f"{len(more)} more faster or slower, of smaller effect", more),
        (f"{len(f.equivalent)} {EQUIVALENT} within ±{f.threshold * 100:g} %", f.equivalent),
        (f"{len(f.undecided)} {UNDECIDED}", f.undecided),
    ]
    return [
        (said, [f"{row_name(r)}: {explained_phrase(r.comparison, r.explanation)}" for r in rows])
        for said, rows in counts
        if rows
    ]


def heading(f: Forest) -> str:
    main = len(f.decided) + len(f.equivalent) + len(f.undecided)
    drawn = f" (the {PLOTTED_ROWS} largest drawn)" if len(f.decided) > PLOTTED_ROWS else ""
    said = f"{len(f.decided)} of {main} main comparison{'s' if main != 1 else ''} faster or slower"
    return f"{said}, largest effect first{drawn}"


# --- the console's and summary.md's text ------------------------------------------------------


def forest_lines(f: Forest, width: int = TEXT_WIDTH) -> list[str]:
    """The forest as the console prints it, within `width` columns: its heading, its plot
    (plot_lines), then a line each for the decided it does not draw, the equivalent and the
    undecided, counted (counted_lines). Nothing for no main comparison."""
    if f.empty:
        return []
    return [f"At a glance: {heading(f)}.", *plot_lines(f, width), *explained_lines(f), *count_lines(f)]


def explained_lines(f: Forest) -> list[str]:
    """Beside each decided comparison the plot draws, its explanation (fslab.statistics.explain): what the
    monitors measured differently in its two cells, or that nothing measured differed."""
    return [
        f"{VERDICT_MARKS[r.comparison.verdict]} {row_name(r)}: {r.explanation.sentence}"
        for r in f.plotted
        if r.explanation is not None
    ]


def count_lines(f: Forest) -> list[str]:
    return [f"{count} — see the tables." for count, _ in counted_lines(f)]


def plot_lines(f: Forest, width: int = TEXT_WIDTH) -> list[str]:
    """A row per decided comparison — its name, its verdict's marker and word, its ratio, and its
    interval drawn on a log axis (├──▲──┤, the point its verdict's marker), the ±threshold band
    as ░ and 1 as │ — an axis beneath and what it draws; a line saying none is decided if so."""
    if not f.decided:
        return ["No main comparison is decided faster or slower."]
    names = [_cut(row_name(r), NAME_COLUMNS) for r in f.plotted]
    said = [f"{VERDICT_MARKS[r.comparison.verdict]} {row_verdict(r)}" for r in f.plotted]
    name_w, said_w = max(map(len, names)), max(map(len, said))
    axis = _Axis(f, max(12, min(PLOT_COLUMNS, width - name_w - said_w - 4)))
    lines = [
        f"{name:<{name_w}}  {verdict:<{said_w}}  {axis.row(r)}".rstrip()
        for r, name, verdict in zip(f.plotted, names, said)
    ]
    band = "–".join(ratio_text(x) for x in f.band)
    return [
        *lines,
        " " * (name_w + said_w + 4) + axis.scale(),
        f"░ the ±{f.threshold * 100:g} % band ({band}×), │ a ratio of 1; log scale.",
    ]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


class _Axis:
    """A log axis `columns` wide over every plotted interval and the band, a little beyond."""

    def __init__(self, f: Forest, columns: int) -> None:
        ends = [*f.band, 1.0]
        for r in f.plotted:
            ends += [x for x in (r.comparison.ratio, *(r.comparison.interval or ())) if x > 0 and math.isfinite(x)]
        self.low, self.high = math.log(min(ends)), math.log(max(ends))
        pad = (self.high - self.low) * 0.04
        self.low, self.high, self.columns = self.low - pad, self.high + pad, columns
        self.band = f.band

    def at(self, x: float) -> int:
        """The column of a ratio (a value beyond the axis at its end)."""
        if not x > 0:
            return 0
        place = (math.log(x) - self.low) / (self.high - self.low) * (self.columns - 1)
        return min(self.columns - 1, max(0, round(place)))

    def background(self) -> list[str]:
        cells, one = [" "] * self.columns, self.at(1.0)
        # a column of the band at least on each side of 1, however narrow it is drawn
        for i in range(min(self.at(self.band[0]), one - 1), max(self.at(self.band[1]), one + 1) + 1):
            cells[min(self.columns - 1, max(0, i))] = "░"
        cells[one] = "│"
        return cells

    def row(self, r: Row) -> str:
        c, cells = r.comparison, self.background()
        if c.interval is not None:
            low, high = self.at(c.interval[0]), self.at(c.interval[1])
            for i in range(low, high + 1):
                cells[i] = "─"
            cells[low], cells[high] = "├", "┤"
        cells[self.at(c.ratio)] = VERDICT_MARKS[c.verdict]
        return "".join(cells)

    def scale(self) -> str:
        """The axis's ends and 1 where they fit, each under its column."""
        cells = [" "] * self.columns
        for x, align in ((math.exp(self.low), "left"), (1.0, "centre"), (math.exp(self.high), "right")):
            text = "1×" if x == 1 else ratio_text(x) + "×"
            start = self.at(x) - {"left": 0, "centre": len(text) // 2, "right": len(text) - 1}[align]
            start = min(max(0, start), self.columns - len(text))
            if all(cell == " " for cell in cells[max(0, start - 1) : start + len(text) + 1]):
                cells[start : start + len(text)] = text
        return "".join(cells).rstrip()
