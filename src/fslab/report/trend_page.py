"""`fslab report --history STUDY`: a study's trend page, history.html — per cell and metric a chart
of its series over time, a facet per host (each study run's mean with its 95 % interval, the
flagged steps marked), the series' tables (trend.py, as `fslab history STUDY` prints them) and the
list of flagged steps. Laid out by the page's own template (base.html.j2) and drawn as the report
page's charts are (html.render_page); with --figures, each chart also as SVG and PNG."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import altair as alt

from fslab.core.names import file_name
from fslab.report import trend
from fslab.report.bundle import vega_bundle_meanwhile
from fslab.report.chart_parts import WIDTH, Chart
from fslab.report.charts import VERDICT_COLOURS
from fslab.report.figures import figures_meanwhile
from fslab.report.formatting import fmt_mean_ci, metric_label
from fslab.report.html import Table, render_page
from fslab.report.output import own_folder, write_own
from fslab.report.page import FIGURES, ReportFiles
from fslab.statistics.history import History, Point, Series

PAGE = "history.html"
FACET_HEIGHT = 180  # px: each host's plot


@dataclass(frozen=True)
class TrendSection:
    """One cell's metric across the study runs: its chart (a facet per host) and a table per host."""

    anchor: str
    title: str
    chart: Chart
    tables: list[tuple[str, Table]]  # host → its series' table


@dataclass(frozen=True)
class TrendPage:
    title: str
    method: str
    flagged: list[tuple[str, bool]]  # each flagged step and drift, one line each, and whether it is a regression
    sections: list[TrendSection]

    @property
    def charts(self) -> list[Chart]:
        return [s.chart for s in self.sections]


def trend_page(study: str, h: History) -> TrendPage:
    groups: dict[tuple[str, str, str], list[Series]] = {}
    for series in h.series:
        groups.setdefault((series.key.workload, series.key.target, series.key.metric), []).append(series)
    sections, columns = [], trend.series_columns(h)
    for (workload, target, metric), its in groups.items():
        name = f"history-{workload}-{target}-{metric}"
        sections.append(TrendSection(
            anchor=file_name(name), title=f"{workload} · {target} · {metric_label(metric)}",
            chart=trend_chart(name, its),
            tables=[(s.key.host, Table(columns, trend.series_rows(s), trend.row_classes(s))) for s in its],
        ))  # fmt: skip
    return TrendPage(
        f"{study} — history of {len({p.study_run for s in h.series for p in s.points})} study runs",
        trend.method_line(h),
        trend.flagged_lines(h),
        sections,
    )


def trend_chart(name: str, series: list[Series]) -> Chart:
    """One cell's metric over its study runs, a row per host: each study run's mean (a point,
    joined in order; the axis names the study run, its kernel and fslab version) with its 95 %
    interval where printed (a whisker), and each flagged step marked at the study run it leads
    into, coloured by its verdict."""
    key = series[0].key
    points: list[dict[str, Any]] = []
    for s in series:
        steps = {step.newer.study_run: step for step in s.steps if step.change}
        for p in s.points:
            step = steps.get(p.study_run)
            points.append({
                "host": s.key.host, "run": axis_label(p), "study_run": p.study_run,
                "started": f"{p.started_at:%Y-%m-%d %H:%M}", "kernel": p.kernel, "fslab": p.fslab_version,
                "mean": p.summary.mean, "n": p.summary.n, "interval": fmt_mean_ci(p.summary),
                **dict(zip(("low", "high"), p.summary.interval or (None, None))),
                "flag": step.comparison.verdict if step else None, "step": trend.step_line(step) if step else None,
            })  # fmt: skip
    label = metric_label(key.metric)
    order = [row["run"] for row in sorted(points, key=lambda row: (row["started"], row["study_run"]))]
    x = alt.X(
        "run:O",
        sort=list(dict.fromkeys(order)),
        title="study run · kernel · fslab (oldest first)",
        axis=alt.Axis(labelAngle=-30, labelLimit=220),
    )
    y = alt.Y("mean:Q", title=label, scale=alt.Scale(zero=False))
    tooltip = [alt.Tooltip("study_run:Q", title="study run"), alt.Tooltip("started:N", title="started (UTC)"),
               alt.Tooltip("kernel:N"), alt.Tooltip("fslab:N"),
               alt.Tooltip("n:Q", title="runs"), alt.Tooltip("interval:N", title="mean ± 95 % CI")]  # fmt: skip
    layers = [
        alt.Chart().mark_line(color="#8c959f").encode(x, y),
        alt.Chart()
        .transform_filter("datum.low != null")
        .mark_rule(strokeWidth=2, color="#24292f")
        .encode(x, alt.Y("low:Q", title=label, scale=alt.Scale(zero=False)), alt.Y2("high:Q")),
        alt.Chart().mark_point(filled=True, size=50, color="#24292f").encode(x, y, tooltip=tooltip),
    ]
    if any(row["flag"] for row in points):
        layers.append(
            alt.Chart()
            .transform_filter("datum.flag != null")
            .mark_point(shape="diamond", size=260, filled=False, strokeWidth=2.5)
            .encode(
                x,
                y,
                alt.Color(
                    "flag:N",
                    scale=alt.Scale(
                        domain=["faster", "slower"], range=[VERDICT_COLOURS["faster"], VERDICT_COLOURS["slower"]]
                    ),
                    title="flagged step",
                ),
                tooltip=[alt.Tooltip("step:N", title="flagged step")],
            )
        )
    hosts = [s.key.host for s in series]
    body = alt.layer(*layers, data=alt.Data(values=points)).properties(width=WIDTH, height=FACET_HEIGHT)
    faceted = body.facet(row=alt.Row("host:N", sort=hosts, title="host")).resolve_scale(x="independent")
    spec = faceted.properties(title=f"{key.workload} · {key.target}: {label} over its study runs").to_dict(
        validate=False
    )
    caption = (
        "Each study run's mean (point, with its 95 % Student-t interval as a whisker where printed), one row per host, "
        "oldest first; the axis names each study run, its kernel and "
        "fslab version. A ringed point ends a step decided faster or slower, a change "
        "(red: slower, green: faster; the table beside it says which), as listed above."
    )
    return Chart(name, key.workload, spec["title"], caption, spec)


def axis_label(p: Point) -> str:
    """A study run as the trend chart's axis names it: its id, kernel and fslab version."""
    return f"{p.study_run} · {p.kernel} · {p.fslab_version}"


def write_trend(
    db_history: History,
    study: str,
    folder: Path,
    *,
    figures: bool = False,
    png_scale: int | None = None,
    rendered: Callable[[int, int], None] | None = None,
) -> ReportFiles:
    """The trend page of `study` (its history, read) in `folder` as history.html, and with
    `figures` every chart of it as SVG, and PNG of `png_scale` pixels a CSS pixel unless None, in figures/."""
    with vega_bundle_meanwhile() as vega_bundle, figures_meanwhile(figures, png_scale) as renderers:
        page = trend_page(study, db_history)
        own_folder(folder)
        drawing = renderers.draw(page.charts) if renderers else None  # drawn while the page is made
        written = write_own(folder / PAGE, render_page(page, vega_bundle, template="history.html.j2"))
        return ReportFiles(written, drawing.write(folder / FIGURES, rendered) if drawing else [])


def trend_folder(reports: Path, study: str) -> Path:
    """Where a trend page goes unless told: `reports/STUDY-history/`, beside the study runs' own."""
    own_folder(reports)
    return reports / file_name(f"{study}-history")
