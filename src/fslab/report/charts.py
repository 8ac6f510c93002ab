"""The charts of a report (pure): a study run's summary and its stored runs in, Vega-Lite specs
(built with altair) out, one function per kind of chart. The page (html.py) embeds the specs and
the figure files (figures.py) are rendered from the very same ones.

Every figure drawn is one the summary already holds — a cell's mean and its 95 % interval
(`Summary`), a comparison of the one family (`Analysis.comparison`), a monitor's median — so a
chart never disagrees with the tables beside it. What only the stored runs have is drawn as
stored: each run's value (a point each), and what its workload's kind offers (details.py: the
kind's report hook) — latency percentiles and histograms, series over time (time_charts.py). A
cell whose figures cannot be real (flagged `implausible`) is drawn in no chart; its workload's
captions say so, as they say each caveat a cell's figures carry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import altair as alt

from fslab.core.units import format_size
from fslab.model import PHASE_SEPARATOR, qualified, unqualified
from fslab.monitors.traffic import AMPLIFICATION_FROM
from fslab.report.chart_parts import (
    BUCKETS_PER_DECADE,
    WIDTH,
    Chart,
    latency_bucket,
    named,
    sized,
    spaced,
    spec_of,
    unchecked,
    where,
)
from fslab.report.details import RunDetails
from fslab.report.forest import VERDICT_SHAPES, Forest, row_name, row_verdict
from fslab.report.formatting import explained_phrase, fmt_mean_ci, metric_label
from fslab.report.sections import is_monitored
from fslab.report.summary import CellSummary, StudySummary
from fslab.report.time_charts import latency_heatmap_chart, latency_over_time_chart, series_chart, throughput_chart
from fslab.statistics.analysis import Row
from fslab.statistics.raw_reference import raw_references
from fslab.statistics.stats import FASTER, SLOWER, Comparison, Summary, interval_text
from fslab.statistics.timing import EMULATED
from fslab.workloads.offered import LatencyHistogram, Percentiles

# Each verdict (stats.VERDICTS) drawn in a colour and a marker of its own (forest.VERDICT_SHAPES):
# never told by colour alone.
VERDICT_COLOURS = {"faster": "#1a7f37", "slower": "#cf222e", "equivalent": "#0969da", "undecided": "#8c959f"}
RATIO_AXIS = "target ÷ raw (ratio of geometric means)"


@unchecked
def study_charts(s: StudySummary, details: RunDetails) -> list[Chart]:
    """Every chart of a study run, workload by workload, in the order the page shows them."""
    targets = _drawn_targets(s)
    charts = []
    for workload in s.workloads:
        left_out = s.left_out(workload)
        drawn: list[Chart | None] = []
        for metric in dict.fromkeys(m for c in s.judged_cells_of(workload) for m in c.primary):
            drawn += [
                primary_chart(s, workload, metric, host) for host in (s.hosts.names if s.hosts.per_host else [None])
            ]  # a facet per host
        offered = details.percentiles.get(workload, [])
        for phase, percentiles in dict.fromkeys(
            pp for c in s.judged_cells_of(workload) for pp in _measured(c, offered)
        ):
            drawn.append(latency_percentiles_chart(s, workload, percentiles, phase))
            drawn.append(
                latency_distribution_chart(
                    [
                        h
                        for h in details.histograms
                        if (h.workload, h.phase, h.direction) == (workload, phase, percentiles.direction)
                        and h.target not in left_out
                    ],
                    targets,
                )
            )
        traces = [t for t in details.traces if t.workload == workload and t.target not in left_out]
        for phase, direction in dict.fromkeys((t.phase, t.throughput.direction) for t in traces):
            drawn.append(
                throughput_chart(
                    [t for t in traces if (t.phase, t.throughput.direction) == (phase, direction)], targets, s.units
                )
            )
        latency = [t for t in details.latency_traces if t.workload == workload and t.target not in left_out]
        for phase, direction in dict.fromkeys((t.phase, t.latency.direction) for t in latency):
            drawn_latency = [t for t in latency if (t.phase, t.latency.direction) == (phase, direction)]
            drawn += [latency_heatmap_chart(drawn_latency, targets), latency_over_time_chart(drawn_latency, targets)]
        series = [t for t in details.series if t.workload == workload and t.target not in left_out]
        for each in dict.fromkeys((t.phase, t.series.direction, t.series.quantity) for t in series):
            drawn.append(
                series_chart([t for t in series if (t.phase, t.series.direction, t.series.quantity) == each], targets)
            )
        drawn += [
            efficiency_chart(s, workload),
            cpu_chart(s, workload),
            write_amplification_chart(s, workload),
            extents_chart(s, workload),
        ]
        said = f" Not drawn: {', '.join(left_out)}, whose figures cannot be real (see its table)." if left_out else ""
        caveats = s.caveats_of(workload).items()
        said += "".join(f" {target}: {'; '.join(its)} (see its notes)." for target, its in caveats)
        emulated = [c.target for c in s.cells_of(workload) if c.emulated]
        said += f" {', '.join(emulated)}: {EMULATED} (their figures of speed)." if emulated else ""
        charts += [replace(c, caption=c.caption + said) for c in drawn if c is not None]
    return charts


# --- per workload -----------------------------------------------------------------------------


def primary_chart(s: StudySummary, workload: str, metric: str, host: str | None = None) -> Chart | None:
    """A primary metric per target: the mean as a bar, its 95 % interval as a whisker where the
    summary prints one (stats.figure_needs), every run as a point; of one `host`'s cells where
    the summary is per host (a chart each, the hosts' facets)."""
    cells = [c for c in s.judged_cells_of(workload) if metric in c.metrics and c.host == host]
    if not cells:
        return None
    label = metric_label(metric)
    unit = s.metric_units.get(metric, "")
    means = [
        {
            "target": c.target,
            "mean": c.metrics[metric].mean,
            "n": c.metrics[metric].n,
            "interval": fmt_mean_ci(c.metrics[metric]),
            **_interval(c.metrics[metric]),
        }
        for c in cells
    ]
    runs = [
        {"target": c.target, "run": i + 1, "value": v}
        for c in cells
        for i, v in enumerate(s.samples.values.get((workload, c.target), {}).get(metric, []))
    ]
    axis = label if not unit or label.endswith(unit) else f"{label} ({unit})"
    x = alt.X("target:N", sort=[m["target"] for m in means], title=None, axis=_band_axis([m["target"] for m in means]))
    bars = (
        alt.Chart(alt.Data(values=means))
        .mark_bar(opacity=0.6)
        .encode(
            x,
            alt.Y("mean:Q", title=axis),
            alt.Color("target:N", scale=_colours(s), legend=None),
            tooltip=[
                alt.Tooltip("target:N"),
                alt.Tooltip("n:Q", title="runs"),
                alt.Tooltip("interval:N", title="mean ± 95 % CI"),
            ],
        )
    )
    layers = [bars]
    if any(m["low"] is not None for m in means):
        layers.append(
            alt.Chart(alt.Data(values=[m for m in means if m["low"] is not None]))
            .mark_errorbar(ticks=True, thickness=2, color="#24292f")
            .encode(x, alt.Y("low:Q", title=axis), alt.Y2("high:Q"))
        )
    if runs:
        layers.append(
            alt.Chart(alt.Data(values=runs))
            .mark_point(filled=True, size=45, color="#24292f", opacity=0.8)
            .encode(
                x,
                alt.Y("value:Q", title=axis),
                tooltip=[alt.Tooltip("target:N"), alt.Tooltip("run:Q"), alt.Tooltip("value:Q", format=",.4~g")],
            )
        )
    title = f"{workload}: {label}" + (f" — on {host}" if host is not None else "")
    caption = (
        "Bar: the mean over the cell's runs; whisker: its 95 % Student-t interval, drawn where the summary prints one "
        "(at least 3 runs and within ±100 %); dots: every measured run."
    )
    return Chart(
        f"{workload}-{metric}" + (f"-{host}" if host is not None else ""),
        workload,
        title,
        caption,
        sized(title, *layers),
    )


def latency_percentiles_chart(
    s: StudySummary, workload: str, percentiles: Percentiles, phase: str = ""
) -> Chart | None:
    """The latency percentiles a kind offers (fio's P50, P95, P99 and P99.9 of a direction) per
    target, each the median over runs of each run's percentile, as the tables show it, on a log
    scale; of one phase of a scenario."""
    rows = [
        {"target": c.target, "percentile": name, "latency_us": c.metrics[key].median * percentiles.to_us}
        for c in s.judged_cells_of(workload)
        for name, metric in percentiles.metrics.items()
        if (key := qualified(phase, metric)) in c.metrics and c.metrics[key].median > 0
    ]
    if not rows:
        return None
    direction = percentiles.direction
    chart = (
        alt.Chart(alt.Data(values=rows))
        .mark_line(point=True)
        .encode(
            alt.X("percentile:O", sort=list(percentiles.metrics), title=None, axis=alt.Axis(labelAngle=0)),
            alt.Y("latency_us:Q", scale=alt.Scale(type="log"), title=spaced(direction, "latency (µs, log scale)")),
            alt.Color("target:N", scale=_colours(s), title="target"),
            tooltip=[
                alt.Tooltip("target:N"),
                alt.Tooltip("percentile:O"),
                alt.Tooltip("latency_us:Q", title="µs", format=",.1f"),
            ],
        )
    )
    title = f"{where(workload, phase)}: {spaced(direction, 'latency percentiles')}"
    caption = f"{percentiles.latency_is}; each point is the median over runs of each run's percentile."
    return Chart(
        named(workload, phase, direction, "latency-percentiles"), workload, title, caption, sized(title, chart)
    )


def latency_distribution_chart(histograms: list[LatencyHistogram], targets: list[str]) -> Chart | None:
    """Each target's latency distribution in one workload and direction: the share of its I/Os in
    each bucket (BUCKETS_PER_DECADE a decade, log scale), from its kind's bins (fio's json+) over
    all its runs."""
    if not histograms:
        return None
    workload, phase, direction = histograms[0].workload, histograms[0].phase, histograms[0].direction
    rows = [row for h in histograms for row in distribution_rows(h)]
    latencies = sorted({h.latency for h in histograms})
    chart = (
        alt.Chart(alt.Data(values=rows))
        .mark_line(interpolate="step-after", point=alt.OverlayMarkDef(size=12))
        .encode(
            alt.X("from_us:Q", scale=alt.Scale(type="log"), title=f"{direction} latency (µs, log scale)"),
            alt.Y("share_pct:Q", title="share of I/Os (%)"),
            alt.Color("target:N", scale=alt.Scale(domain=targets, scheme="tableau10"), title="target"),
            tooltip=[
                alt.Tooltip("target:N"),
                alt.Tooltip("from_us:Q", title="from µs", format=",.1f"),
                alt.Tooltip("to_us:Q", title="to µs", format=",.1f"),
                alt.Tooltip("share_pct:Q", title="% of I/Os", format=".2f"),
            ],
        )
    )
    title = f"{where(workload, phase)}: {spaced(direction, 'latency distribution')}"
    caption = (
        f"{' and '.join(sorted({h.source for h in histograms}))} ({' and '.join(latencies)}), "
        "every run of a cell added up; "
        f"{BUCKETS_PER_DECADE} buckets per factor of ten. Runs: "
        + ", ".join(f"{h.target} {h.runs}" for h in histograms)
        + "."
    )
    return Chart(
        named(workload, phase, direction, "latency-distribution"), workload, title, caption, sized(title, chart)
    )


def distribution_rows(h: LatencyHistogram) -> list[dict]:
    """A histogram's I/Os per log bucket, as shares of all its I/Os: [{target, from_us, to_us, share_pct}]."""
    total = sum(h.bins.values())
    buckets: dict[int, int] = {}
    for ns, n in h.bins.items():
        bucket = latency_bucket(ns)
        buckets[bucket] = buckets.get(bucket, 0) + n
    if not total:
        return []
    return [
        {
            "target": h.target,
            "from_us": 10 ** (b / BUCKETS_PER_DECADE),
            "to_us": 10 ** ((b + 1) / BUCKETS_PER_DECADE),
            "share_pct": n / total * 100,
        }
        for b, n in sorted(buckets.items())
    ]


def efficiency_chart(s: StudySummary, workload: str) -> Chart | None:
    """Each target's primary metric ÷ the raw device under it (the comparison of the one family:
    ratio of geometric means, the interval its verdict is read from, its verdict as colour and
    marker). Targets over
    several devices are held against their sum in the summary's warnings, not here."""
    references = raw_references(s.targets)
    rows = []
    for cell in s.judged_cells_of(workload):
        raws = references.get(cell.target, [])
        if len(raws) != 1:
            continue
        for metric in cell.primary:
            c = s.analysis.comparison(workload, metric, raws[0], cell.target)
            if c is not None and math.isfinite(c.ratio):  # a raw device's 0 gives no bar (the tables say so)
                rows.append(
                    {
                        "target": cell.target,
                        "metric": metric_label(metric),
                        "raw": raws[0],
                        "ratio": c.ratio,
                        "verdict": c.verdict,
                        **_interval(c),
                    }
                )
    if not rows:
        return None
    several = len({r["metric"] for r in rows}) > 1
    for r in rows:
        r["label"] = f"{r['target']} · {r['metric']}" if several else r["target"]
    x = alt.X("label:N", sort=[r["label"] for r in rows], title=None, axis=_band_axis([r["label"] for r in rows]))
    layers = [
        alt.Chart(alt.Data(values=rows))
        .mark_bar(opacity=0.75)
        .encode(
            x,
            alt.Y("ratio:Q", title=RATIO_AXIS),
            _verdict_colour(),
            tooltip=[
                alt.Tooltip("target:N"),
                alt.Tooltip("metric:N"),
                alt.Tooltip("raw:N", title="against"),
                alt.Tooltip("ratio:Q", format=".3f"),
                alt.Tooltip("verdict:N"),
            ],
        ),
        alt.Chart(alt.Data(values=rows))
        .mark_point(filled=True, size=70, opacity=1)
        .encode(x, alt.Y("ratio:Q", title=RATIO_AXIS), _verdict_colour(), _verdict_shape()),
        alt.Chart(alt.Data(values=[{"one": 1}]))
        .mark_rule(strokeDash=[4, 3], color="#57606a")
        .encode(alt.Y("one:Q", title=RATIO_AXIS)),
    ]
    if any(r["low"] is not None for r in rows):
        layers.append(
            alt.Chart(alt.Data(values=[r for r in rows if r["low"] is not None]))
            .mark_errorbar(ticks=True, thickness=2, color="#24292f")
            .encode(x, alt.Y("low:Q", title=RATIO_AXIS), alt.Y2("high:Q"))
        )
    title = f"{workload}: efficiency against the raw device"
    caption = (
        "Each target's primary metric as a ratio to the raw device under it (1 = as fast as the bare device). "
        "Colour and marker: the comparison's verdict (▲ faster, ▼ slower, ◆ equivalent, ● undecided); whisker: the "
        "interval it is read from, the family's."
    )
    return Chart(f"{workload}-efficiency", workload, title, caption, sized(title, *layers))


CPU_PARTS = {"host_cpu_user_pct": "user", "host_cpu_system_pct": "system", "host_cpu_iowait_pct": "iowait"}


def cpu_chart(s: StudySummary, workload: str) -> Chart | None:
    """System-wide CPU during each measured phase (monitors: user, system, iowait), the median over runs."""
    rows: list[dict[str, Any]] = [
        {"label": _cell_phase(c, phase), "part": part, "pct": c.metrics[qualified(phase, name)].median, "order": i}
        for c in s.judged_cells_of(workload)
        for phase in _monitored_phases(c)
        for i, (name, part) in enumerate(CPU_PARTS.items())
        if qualified(phase, name) in c.metrics
    ]
    if not rows:
        return None
    chart = (
        alt.Chart(alt.Data(values=rows))
        .mark_bar()
        .encode(
            alt.X(
                "label:N",
                sort=(labels := list(dict.fromkeys(r["label"] for r in rows))),
                title=None,
                axis=_band_axis(labels),
            ),
            alt.Y("pct:Q", stack="zero", title="CPU (% of all CPUs)"),
            alt.Color(
                "part:N",
                sort=list(CPU_PARTS.values()),
                scale=alt.Scale(domain=list(CPU_PARTS.values()), range=["#0969da", "#bf8700", "#8c959f"]),
                title="CPU time",
            ),
            alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("label:N", title="target"),
                alt.Tooltip("part:N"),
                alt.Tooltip("pct:Q", title="%", format=".1f"),
            ],
        )
    )
    title = f"{workload}: CPU while measured"
    caption = (
        "The whole machine's CPU time during the measured phase (monitors), median "
        "over runs: busy is user + system; iowait is idle with I/O outstanding."
    )
    return Chart(f"{workload}-cpu", workload, title, caption, sized(title, chart))


def write_amplification_chart(s: StudySummary, workload: str) -> Chart | None:
    """Device bytes written ÷ bytes the workload wrote, per target and measured phase (median over
    runs); where the ratio is not given (a workload that wrote too little), no bar: why, in its place."""
    chosen = lambda key: unqualified(key) == "write_amplification"  # noqa: E731
    absent = [(c, key, why) for c in s.judged_cells_of(workload) for key, why in c.withheld.items() if chosen(key)]
    under = f"wrote under {format_size(AMPLIFICATION_FROM)}"
    caption = (
        "Bytes the devices under the target wrote ÷ bytes the workload wrote, during the measured phase and through "
        "the sync of the filesystem that ends it (monitors), median over runs; 1 = nothing added."
    )
    if absent:
        caption += f" No bar where the workload {under}: a ratio of so little says nothing (its place says so)."
    return _median_bars(
        s,
        workload,
        chosen,
        "write amplification (×)",
        "write-amplification",
        caption,
        reference=1.0,
        absent=absent,
        absent_text=f"not given: {under}",
    )


def extents_chart(s: StudySummary, workload: str) -> Chart | None:
    """A scenario's file extents after each phase that counts them (filefrag), median over runs."""
    return _median_bars(
        s,
        workload,
        lambda key: unqualified(key) == "extents",
        "extents (filefrag)",
        "extents",
        "The scenario file's extents after each phase that counts them "
        "(filefrag), median over runs: copy-on-write scatters what was one extent.",
    )


def _median_bars(
    s: StudySummary,
    workload: str,
    chosen: Callable[[str], bool],
    axis: str,
    kind: str,
    caption: str,
    reference: float | None = None,
    absent: Sequence[tuple[CellSummary, str, str]] = (),
    absent_text: str = "not given",
) -> Chart | None:
    """A bar per cell and phase of the figures `chosen`; in the place of each `absent` one (cell,
    key, why), `absent_text` (why, in its tooltip)."""
    rows: list[dict[str, Any]] = [
        {
            "label": _cell_phase(c, key.rpartition(PHASE_SEPARATOR)[0]),
            "target": c.target,
            "median": stats.median,
            "runs": stats.n,
        }
        for c in s.judged_cells_of(workload)
        for key, stats in c.metrics.items()
        if chosen(key)
    ]
    missing: list[dict[str, Any]] = [
        {"label": _cell_phase(c, key.rpartition(PHASE_SEPARATOR)[0]), "target": c.target, "why": why, "at": 0}
        for c, key, why in absent
    ]
    if not rows and not missing:
        return None
    order = {c.target: i for i, c in enumerate(s.judged_cells_of(workload))}  # the cells' order, bars and gaps alike
    labels = list(dict.fromkeys(r["label"] for r in sorted([*rows, *missing], key=lambda r: order[r["target"]])))
    x = alt.X("label:N", sort=labels, title=None, axis=_band_axis(labels))
    layers = [
        alt.Chart(alt.Data(values=rows))
        .mark_bar(opacity=0.75)
        .encode(
            x,
            alt.Y("median:Q", title=axis),
            alt.Color("target:N", scale=_colours(s), legend=None),
            tooltip=[
                alt.Tooltip("label:N", title="target"),
                alt.Tooltip("median:Q", format=",.3~f"),
                alt.Tooltip("runs:Q"),
            ],
        )
    ]
    if missing:
        text = alt.Chart(alt.Data(values=missing)).mark_text(
            angle=270, align="left", dx=4, color="#57606a", text=absent_text
        )
        tooltip = [alt.Tooltip("label:N", title="target"), alt.Tooltip("why:N", title="not given")]
        layers.append(text.encode(x, alt.Y("at:Q", title=axis), tooltip=tooltip))
    if reference is not None:
        layers.append(
            alt.Chart(alt.Data(values=[{"one": reference}]))
            .mark_rule(strokeDash=[4, 3], color="#57606a")
            .encode(alt.Y("one:Q", title=axis))
        )
    title = f"{workload}: {axis.split(' (')[0]}"
    return Chart(f"{workload}-{kind}", workload, title, caption, sized(title, *layers))


# --- several study runs -----------------------------------------------------------------------


@unchecked
def comparison_chart(rows: list[Row], older: int, newer: int) -> Chart | None:
    """Every cell of two study runs: newer ÷ older (`fslab compare`'s rows), the interval its verdict
    is read from, its verdict as colour and marker; one marker a cell and metric, log scale."""
    data = []
    for r in rows:
        c = r.comparison
        if not 0 < c.ratio < math.inf:  # a value of 0 on a side: no point on a log scale (the table says so)
            continue
        data.append(
            {
                "cell": f"{r.workload} · {r.target} · {metric_label(r.metric)}",
                "ratio": c.ratio,
                "verdict": c.verdict,
                **_interval(c),
            }
        )
    if not data:
        return None
    # a cell's label a line each for its workload, target and metric: on a phone the plot keeps its room
    lines = alt.Axis(labelLimit=LABEL_LIMIT, labelExpr="split(datum.label, ' · ')")
    y = alt.Y("cell:N", sort=[d["cell"] for d in data], title=None, axis=lines)
    x_title = [f"study run {newer} ÷ study run {older}", "(log scale)"]
    layers = [
        alt.Chart(alt.Data(values=data))
        .mark_point(filled=True, size=70)
        .encode(
            alt.X("ratio:Q", scale=alt.Scale(type="log", zero=False), title=x_title),
            y,
            _verdict_colour(),
            _verdict_shape(),
            tooltip=[alt.Tooltip("cell:N"), alt.Tooltip("ratio:Q", format=".3f"), alt.Tooltip("verdict:N")],
        ),
        alt.Chart(alt.Data(values=[{"one": 1}]))
        .mark_rule(strokeDash=[4, 3], color="#57606a")
        .encode(alt.X("one:Q", scale=alt.Scale(type="log", zero=False), title=x_title)),
    ]
    if any(d["low"] is not None for d in data):
        layers.insert(
            0,
            alt.Chart(alt.Data(values=[d for d in data if d["low"] is not None]))
            .mark_errorbar(ticks=True, color="#57606a")
            .encode(alt.X("low:Q", scale=alt.Scale(type="log", zero=False), title=x_title), alt.X2("high:Q"), y),
        )
    title = f"study run {newer} against study run {older}, cell by cell"
    caption = (
        "Ratio of geometric means, newer ÷ older, with the interval its verdict is read from (Welch's, adjusted over "
        "every cell); colour and marker: the verdict, ▲ faster, ▼ slower, ◆ equivalent, ● undecided (for latency, "
        "below 1 is faster)."
    )
    spec = spec_of(layers, width=WIDTH, height=max(120, 40 * len(data)), title=title, config={})  # 40 px: 3 lines
    return Chart(f"compare-{older}-{newer}", "", title, caption, spec)


@unchecked
def forest_chart(f: Forest, name: str = "forest") -> Chart | None:
    """The main comparisons at a glance (forest.py) as a forest plot: a row per comparison decided
    faster or slower, the largest effects (Forest.plotted), its label naming it and then its
    verdict word and ratio; the ratio a point shaped by its verdict (colour only repeats it), its
    interval a line, the ±threshold band shaded, 1 a dashed rule; log scale. None when none is
    decided faster or slower."""
    if not f.decided:
        return None
    labels = [f"{row_name(r)}\n{row_verdict(r)}" for r in f.plotted]
    data = [
        {"row": label, "verdict": r.comparison.verdict, "ratio": r.comparison.ratio, **_interval(r.comparison),
         "phrase": explained_phrase(r.comparison, r.explanation)}
        for label, r in zip(labels, f.plotted)
    ]  # fmt: skip
    x_title = "ratio to the baseline (log scale; for latency, below 1 is faster)"
    scale = alt.Scale(type="log", zero=False, nice=False, padding=12)
    # a label's two lines: what is compared, then the verdict in words
    y = alt.Y("row:N", sort=labels, title=None, axis=alt.Axis(labelLimit=360, labelExpr="split(datum.label, '\\n')"))
    low, high = f.band
    verdicts = [FASTER, SLOWER]
    layers = [
        alt.Chart(alt.Data(values=[{"low": low, "high": high}]))
        .mark_rect(color="#8c959f", opacity=0.22)
        .encode(alt.X("low:Q", scale=scale, title=x_title), alt.X2("high:Q")),
        alt.Chart(alt.Data(values=[{"one": 1}]))
        .mark_rule(strokeDash=[4, 3], color="#57606a")
        .encode(alt.X("one:Q", scale=scale, title=x_title)),
        alt.Chart(alt.Data(values=[d for d in data if d["low"] is not None]))
        .mark_rule(strokeWidth=2, color="#24292f")
        .encode(alt.X("low:Q", scale=scale, title=x_title), alt.X2("high:Q"), y),
        alt.Chart(alt.Data(values=data))
        .mark_point(filled=True, size=110, opacity=1)
        .encode(
            alt.X("ratio:Q", scale=scale, title=x_title),
            y,
            alt.Shape("verdict:N", scale=alt.Scale(domain=verdicts, range=[VERDICT_SHAPES[v] for v in verdicts])),
            alt.Color("verdict:N", scale=alt.Scale(domain=verdicts, range=[VERDICT_COLOURS[v] for v in verdicts])),
            tooltip=[alt.Tooltip("row:N", title="comparison"), alt.Tooltip("phrase:N", title="verdict")],
        ),
    ]
    title = "The main comparisons decided faster or slower"
    caption = (
        "Each target against its baseline on the primary metrics, largest effect first: the ratio "
        "(a triangle up: faster, down: slower), its interval as printed in the tables (a line), "
        f"the ±{f.threshold * 100:g} % band ({interval_text(f.band)}) shaded, where a ratio is equivalent."
    )
    spec = spec_of(layers, width=WIDTH, height=FOREST_ROW_PX * len(data), title=title, config={})
    return Chart(name, "", title, caption, spec)


# --- shared -----------------------------------------------------------------------------------

FOREST_ROW_PX = 34  # a row of the forest plot: its label's two lines
LABEL_LIMIT = 300  # px: a longer label is cut short with an ellipsis (its tooltip names it whole); ~45 characters fit
LABEL_FONT = 10  # px: Vega-Lite's axis labels
CHAR_PX = 6.5  # px: a character of a label, about, at LABEL_FONT


def _band_axis(labels: list[str]) -> alt.Axis:
    """The axis under a chart's bars, its labels each in their own place however wide the chart
    is drawn (the page fits charts to their container, so the choice is made as it is drawn, from
    its `width`): level while the longest fits the width of a bar's band, else upright, and
    smaller where bands are narrower than an upright label is tall."""
    longest = min(max((len(label) for label in labels), default=0) * CHAR_PX, LABEL_LIMIT) + 6
    band = f"(width / {max(len(labels), 1)})"
    return alt.Axis(
        labelLimit=LABEL_LIMIT,
        labelAngle={"expr": f"{band} >= {longest:g} ? 0 : -90"},
        labelFontSize={"expr": f"min({LABEL_FONT}, {band} / 1.4)"},
    )


def _colours(s: StudySummary) -> alt.Scale:
    """The same colour for a target in every chart of a page."""
    measured = {c.target for c in s.cells}
    return alt.Scale(domain=[t for t in _drawn_targets(s) if t in measured], scheme="tableau10")


def _drawn_targets(s: StudySummary) -> list[str]:
    """The targets as the charts name them, in the study's order: each on each host, where the
    summary is per host."""
    return list(dict.fromkeys(c.target for c in s.cells)) if s.hosts.per_host else [t["name"] for t in s.targets]


def _interval(figure: Summary | Comparison) -> dict:
    """The interval a chart draws of a cell's mean or a comparison's ratio: the one the tables
    print (stats.printed_interval), or none."""
    low, high = figure.interval or (None, None)
    return {"low": low, "high": high}


def _measured(cell: CellSummary, offered: list[Percentiles]) -> list[tuple[str, Percentiles]]:
    """(phase, percentiles) of each direction a cell's runs measured whose percentiles its kind
    offers: its own ("", …) or a scenario phase's."""
    return [
        (key.rpartition(PHASE_SEPARATOR)[0], p)
        for key in cell.metrics
        for p in offered
        if unqualified(key) == p.measured_by
    ]


def _monitored_phases(cell: CellSummary) -> list[str]:
    return list(dict.fromkeys(key.rpartition(PHASE_SEPARATOR)[0] for key in cell.metrics if is_monitored(key)))


def _cell_phase(cell: CellSummary, phase: str) -> str:
    return f"{cell.target} · {phase}" if phase else cell.target


def _verdict_colour() -> alt.Color:
    return alt.Color(
        "verdict:N",
        scale=alt.Scale(domain=list(VERDICT_COLOURS), range=list(VERDICT_COLOURS.values())),
        title="verdict",
    )


def _verdict_shape() -> alt.Shape:
    """The verdict as a marker's shape, with its colour (one legend: the same field, domain and title)."""
    return alt.Shape(
        "verdict:N",
        scale=alt.Scale(domain=list(VERDICT_SHAPES), range=list(VERDICT_SHAPES.values())),
        title="verdict",
    )
