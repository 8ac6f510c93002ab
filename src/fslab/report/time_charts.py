"""The charts of a run's course over time (pure), as a workload's kind offers it (its report
hook: workloads/offered.py): per workload, phase and direction, each target's run drawn (the
kind's median run, offered.median_runs) — its throughput, and its latency: where the kind offers
bins per window (fio's histogram logs), a heatmap (time × latency, colour: the share of each
window's completions) and percentiles over time from the window's bins added up, never a mean of
percentiles; where it offers the tool's own percentile of each window (sysbench's), that.
Called by charts.study_charts.
"""

from __future__ import annotations

import functools
from typing import Any

import altair as alt

from fslab.core.units import Bandwidth
from fslab.report.chart_parts import BUCKETS_PER_DECADE, WIDTH, Chart, latency_bucket, named, sized, spaced, where
from fslab.workloads.offered import (
    BinLayout,
    LatencyOverTime,
    LatencyTrace,
    PercentilesOverTime,
    SeriesTrace,
    ThroughputTrace,
)

WINDOWS_DRAWN = 200  # throughput over time: a run's windows, at most (fio's log windows, merged)
# Latency over time: a run's windows, at most (their bins added up): fslab stores 50 (fio.HIST_WINDOWS);
# a page of many cells stays small.
LATENCY_WINDOWS = 50
HEATMAP_ROW = 100  # px: each target's heatmap
# A heatmap's cells at most: each is a rect Vega lays out and a figure draws (15,000 of them, 50
# windows × 30 buckets × 10 targets, took 0.75 s of CPU a figure). Where there would be more,
# consecutive windows and adjacent latency buckets are merged, their completions added up (nothing
# is dropped: a tail's one slow I/O still colours its cell): the finest of HEATMAP_RESOLUTIONS,
# (windows at most, buckets a factor of ten: a divisor of BUCKETS_PER_DECADE), that fits.
HEATMAP_CELLS = 2000
HEATMAP_RESOLUTIONS = ((LATENCY_WINDOWS, 10), (25, 10), (25, 5), (10, 5), (10, 2), (5, 2), (5, 1), (2, 1), (1, 1))
DRAWN_PERCENTILES = {"P50": 50.0, "P99": 99.0}  # of a kind's bins per window
# A heatmap cell in words: "ext4, 1.20–2.40 s, 100.0–125.9 µs: 605 of 28,170 completions"
CELL = (
    "datum.target + ', ' + format(datum.from_s, '.2f') + '–' + "
    "format(datum.to_s, '.2f') + ' s, ' + format(datum.from_us, ',.1f') + '–' "
    "+ format(datum.to_us, ',.1f') + ' µs: ' + format(datum.n, ',') + ' of ' + format(datum.ios, ',') + ' completions'"
)


def throughput_chart(traces: list[ThroughputTrace], targets: list[str], units: Bandwidth) -> Chart:
    """Each target's throughput over time in one workload, phase and direction, as its kind offers
    it (fio's bandwidth log, every job added up, window by window) of the cell's median run, to
    see ramp-up and steady state."""
    first = traces[0]
    workload, phase, direction = first.workload, first.phase, first.throughput.direction
    drawn = {t.target: t.throughput.coarsened(WINDOWS_DRAWN) for t in traces}
    iops = all(d.iops is not None for d in drawn.values())  # a kind's whose tool counts I/Os per window
    rows = [
        {"target": t.target, "seconds": second, "bandwidth": units.of(bytes_s)}
        | ({"iops": each} if iops else {})
        | {"run": t.repetition}
        for t in traces
        for second, bytes_s, each in zip(
            drawn[t.target].seconds, drawn[t.target].bytes_s, drawn[t.target].iops or drawn[t.target].seconds
        )
    ]
    axis = f"{direction} {units.value}"
    chart = (
        alt.Chart(alt.Data(values=rows))
        .mark_line(interpolate="step-before", strokeWidth=1.5)
        .encode(
            alt.X("seconds:Q", title="seconds into the measured run"),
            alt.Y("bandwidth:Q", title=axis),
            alt.Color("target:N", scale=alt.Scale(domain=targets, scheme="tableau10"), title="target"),
            tooltip=[
                alt.Tooltip("target:N"),
                alt.Tooltip("run:Q"),
                alt.Tooltip("seconds:Q", format=".1f"),
                alt.Tooltip("bandwidth:Q", title=units.value, format=",.1f"),
                *([alt.Tooltip("iops:Q", title="IOPS", format=",.0f")] if iops else []),
            ],
        )
    )
    title = f"{where(workload, phase)}: {direction} throughput over time"
    windows = sorted({d.window_ms for d in drawn.values()})
    caption = (
        f"{' and '.join(dict.fromkeys(t.source for t in traces))}, averaged over windows of {_windows(windows)} "
        "(each step is one window): what the run did before its steady state, and whether it held. "
        "Per target one run, the one whose mean is the median of its runs: " + _runs_drawn(traces) + "."
    )
    return Chart(
        named(workload, phase, direction, "throughput"), workload, title, caption, sized(title, chart), over_time=True
    )


def heatmap_rows(target: str, latency: LatencyOverTime, per_decade: int = BUCKETS_PER_DECADE) -> dict:
    """A run's windows (`latency`, as drawn: drawn_heatmap) as the heatmap draws them, in one row
    (the chart flattens it: a page holds hundreds of heatmaps): the window's length `w` (s), the
    latency buckets a factor of ten `d` (a divisor of BUCKETS_PER_DECADE: each of its buckets
    whole in one of these), and per window with completions its start, its lowest latency bucket
    (latency_bucket of each bin's value) and its completions per bucket from that one up, empty
    buckets included."""
    import numpy as np

    buckets, starts = _buckets(latency.bins, per_decade)
    lowest = buckets[0]
    per_bucket = np.zeros(
        (len(latency.counts), buckets[-1] - lowest + 1), dtype=np.int64
    )  # every bucket, those no bin falls in too (below 1 µs)
    per_bucket[:, [b - lowest for b in buckets]] = np.add.reduceat(
        latency.counts, starts, axis=1
    )  # a bin's bucket never falls: bins are in order of latency
    row: dict = {"target": target, "w": latency.window_ms / 1000, "d": per_decade, "from_s": [], "b0": [], "n": []}
    for start, counts in zip(latency.starts_s, per_bucket):
        filled = np.flatnonzero(counts)
        if len(filled):
            row["from_s"].append(round(start, 3))
            row["b0"].append(int(filled[0]) + lowest)
            row["n"].append(counts[filled[0] : filled[-1] + 1].tolist())
    return row


def drawn_heatmap(traces: list[LatencyTrace]) -> tuple[list[dict], tuple[int, int]]:
    """The heatmap's rows, a target's each (heatmap_rows), at the finest of HEATMAP_RESOLUTIONS
    whose cells number HEATMAP_CELLS at most (else the coarsest), and that resolution."""
    latency = {t.target: _binned(t) for t in traces}
    fits = next(
        (r for r in HEATMAP_RESOLUTIONS if sum(_cells(each, *r) for each in latency.values()) <= HEATMAP_CELLS),
        HEATMAP_RESOLUTIONS[-1],
    )
    windows, per_decade = fits
    return [heatmap_rows(t.target, latency[t.target].coarsened(windows), per_decade) for t in traces], fits


def _binned(trace: LatencyTrace) -> LatencyOverTime:
    """A trace's bins per window: of a heatmap's traces (latency_heatmap_chart draws no other)."""
    assert isinstance(trace.latency, LatencyOverTime), "only bins per window are drawn as a heatmap"
    return trace.latency


def _cells(latency: LatencyOverTime, windows: int, per_decade: int) -> int:
    """The cells heatmap_rows would give of `latency` in at most `windows` windows and `per_decade`
    buckets a factor of ten."""
    import numpy as np

    _, starts = _buckets(latency.bins, per_decade)
    return int(np.count_nonzero(np.add.reduceat(latency.coarsened(windows).counts, starts, axis=1)))


def percentile_rows(target: str, latency: LatencyOverTime | PercentilesOverTime) -> dict:
    """A run's windows (`latency`, as drawn: drawn_latency) as percentiles over time draws them, in
    one row (flattened by the chart): each window's end, completions, and P50 and P99 in µs (to 4
    digits: a bin is wider) from its bins merged over the jobs; None where nothing completed. Of
    a kind that offers the tool's own percentiles per window, each window's end and those."""
    if isinstance(latency, PercentilesOverTime):
        return {"target": target, "w": latency.window_ms / 1000, "to_s": list(latency.ends_s)} | latency.percentiles_us
    row: dict = {
        "target": target,
        "w": latency.window_ms / 1000,
        "to_s": [round(end, 3) for end in latency.ends_s],
        "ios": latency.counts.sum(axis=1).tolist(),
    }
    for name, percent in DRAWN_PERCENTILES.items():
        row[name] = [None if v is None else float(f"{v / 1e3:.4g}") for v in latency.percentiles(percent)]
    return row


def drawn_latency(traces: list[LatencyTrace]) -> dict[str, LatencyOverTime | PercentilesOverTime]:
    """Each target's run as drawn: of bins per window, at most LATENCY_WINDOWS windows
    (consecutive ones' bins added up); a tool's own percentiles per window, as they are."""
    return {
        t.target: t.latency.coarsened(LATENCY_WINDOWS) if isinstance(t.latency, LatencyOverTime) else t.latency
        for t in traces
    }


def _drawn_percentiles(latency: LatencyOverTime | PercentilesOverTime) -> list[str]:
    return list(DRAWN_PERCENTILES) if isinstance(latency, LatencyOverTime) else list(latency.percentiles_us)


@functools.cache
def _buckets(bins: BinLayout, per_decade: int) -> tuple[list[int], list[int]]:
    """The latency buckets, `per_decade` a factor of ten, a log's bins fall in (each bin by its
    value), and each one's first bin."""
    merged = BUCKETS_PER_DECADE // per_decade  # latency_bucket's buckets in one of these
    each = [latency_bucket(v) // merged for v in bins.values_ns()]
    firsts = [i for i, b in enumerate(each) if i == 0 or b != each[i - 1]]
    return [each[i] for i in firsts], firsts


def latency_heatmap_chart(traces: list[LatencyTrace], targets: list[str]) -> Chart | None:
    """Each target's latency over time in one workload, phase and direction, as a heatmap a row of
    which is a target: time across, latency up (log), the colour of a cell the share of that
    window's completions in that latency bucket (log scale: the tail shows). Of bins per window
    alone (fio's histogram logs): None where the kind offers none."""
    if not all(isinstance(t.latency, LatencyOverTime) for t in traces):
        return None
    first = traces[0]
    workload, phase, direction = first.workload, first.phase, first.latency.direction
    drawn = [t for target in targets for t in traces if t.target == target]
    rows, resolution = drawn_heatmap(drawn)
    per_decade, windows = resolution[1], _windows(sorted({round(row["w"] * 1000) for row in rows}))
    axis = f"{direction} latency (µs, log scale; {per_decade} buckets per factor of ten)"
    cells = (
        alt.Chart(alt.NamedData(name="rows"))
        .transform_flatten(["from_s", "b0", "n"])  # a row per window
        .transform_calculate(i="sequence(length(datum.n))")
        .transform_flatten(["n", "i"])  # a row per bucket, i its place from the window's lowest
        .transform_filter("datum.n > 0")
        .transform_joinaggregate(ios="sum(n)", groupby=["target", "from_s"])
        .transform_calculate(
            to_s="datum.from_s + datum.w",
            from_us="pow(10, (datum.b0 + datum.i) / datum.d)",
            to_us="pow(10, (datum.b0 + datum.i + 1) / datum.d)",
            share_pct="100 * datum.n / datum.ios",
        )  # fmt: skip
        .transform_calculate(cell=CELL)
        .mark_rect()
        .encode(
            alt.X(
                "from_s:Q",
                scale=alt.Scale(round=True),
                title=f"seconds into the measured run (windows of {windows})",
                axis=alt.Axis(grid=False),
            ),
            alt.X2("to_s:Q"),
            alt.Y(
                "from_us:Q", scale=alt.Scale(type="log", round=True), title=None, axis=alt.Axis(grid=False, tickCount=4)
            ),
            alt.Y2("to_us:Q"),  # whole pixels: no seam between cells a pixel or two high
            alt.Color("share_pct:Q", scale=alt.Scale(type="log", scheme="viridis"), title="% of the window's I/Os"),
            # what a cell says to a screen reader, and in a figure's SVG (the tooltip's every field would
            # be 300 bytes a cell)
            alt.Description("cell:N"),
            tooltip=[
                alt.Tooltip("target:N"),
                alt.Tooltip("from_s:Q", title="from s", format=".2f"),
                alt.Tooltip("to_s:Q", title="to s", format=".2f"),
                alt.Tooltip("from_us:Q", title="from µs", format=",.1f"),
                alt.Tooltip("to_us:Q", title="to µs", format=",.1f"),
                alt.Tooltip("n:Q", title="completions"),
                alt.Tooltip("share_pct:Q", title="% of the window's", format=".2f"),
            ],
        )  # fmt: skip
        .properties(width=WIDTH, height=HEATMAP_ROW)
    )
    faceted = cells.facet(
        row=alt.Row(
            "target:N",
            sort=[t.target for t in drawn],
            title=axis,
            header=alt.Header(labelAngle=0, labelAlign="left", titleFontWeight="bold"),
        )
    )
    spec = faceted.to_dict(validate=False)
    title = f"{where(workload, phase)}: {direction} latency heatmap"
    spec |= {
        "title": title,
        "datasets": {"rows": rows},
        "config": spec.get("config", {}) | {"legend": {"orient": "bottom"}},
    }
    caption = (
        f"{' and '.join(dict.fromkeys(t.bins_are for t in drawn))}, in windows of {windows}; "
        f"latency in {per_decade} buckets per factor of ten. {_merged(resolution)}"
        "Colour: the share of the window's completions in the bucket, on a log scale, so the slowest 1 % shows; "
        "blank: none. Per target the run of the throughput chart, the one whose bandwidth is the median of its runs: "
        + _runs_drawn(drawn)
        + "."
    )
    return Chart(named(workload, phase, direction, "latency-heatmap"), workload, title, caption, spec, over_time=True)


def latency_over_time_chart(traces: list[LatencyTrace], targets: list[str]) -> Chart:
    """Each target's latency percentiles over time in one workload, phase and direction: each
    window's P50 and P99 from its bins merged over the jobs (of the runs the heatmap draws), or
    the tool's own percentile of each window, as the kind offers them."""
    first = traces[0]
    workload, phase, direction = first.workload, first.phase, first.latency.direction
    latency = drawn_latency(traces)
    rows = [percentile_rows(t.target, latency[t.target]) for t in traces]
    names: list[Any] = list(dict.fromkeys(n for each in latency.values() for n in _drawn_percentiles(each)))
    binned = all(isinstance(each, LatencyOverTime) for each in latency.values())  # its completions are counted
    counted = ["ios"] if binned else []
    axis = f"{spaced(direction, 'latency')} (µs, log scale)"
    chart = (
        alt.Chart(alt.Data(values=rows))
        .transform_flatten(["to_s", *counted, *names])  # a row per window
        .transform_calculate(from_s="datum.to_s - datum.w")
        .transform_fold(names, as_=["percentile", "latency_us"])
        .mark_line(interpolate="step-before", strokeWidth=1.5)
        .encode(
            alt.X("to_s:Q", title="seconds into the measured run"),
            alt.Y("latency_us:Q", scale=alt.Scale(type="log"), title=axis),
            alt.Color("target:N", scale=alt.Scale(domain=targets, scheme="tableau10"), title="target"),
            alt.StrokeDash(
                "percentile:N",
                sort=names,
                scale=alt.Scale(domain=names, range=[*[[4, 3]] * (len(names) - 1), [1, 0]]),
                title="percentile",
            ),
            tooltip=[
                alt.Tooltip("target:N"),
                alt.Tooltip("percentile:N"),
                alt.Tooltip("from_s:Q", title="from s", format=".2f"),
                alt.Tooltip("to_s:Q", title="to s", format=".2f"),
                alt.Tooltip("latency_us:Q", title="µs", format=",.1f"),
                *([alt.Tooltip("ios:Q", title="completions")] if binned else []),
            ],
        )  # fmt: skip
    )
    title = f"{where(workload, phase)}: {spaced(direction, 'latency over time')}"
    windows = sorted({w.window_ms for w in latency.values()})
    dashes = " and ".join(f"{n} ({'solid' if i == len(names) - 1 else 'dashed'})" for i, n in enumerate(names))
    latency_is = " and ".join(dict.fromkeys(t.latency_is for t in traces))
    caption = (
        f"{dashes} of the {latency_is} of each window of {_windows(windows)} (each step is one window), "
        f"{' and '.join(dict.fromkeys(t.percentiles_from for t in traces))}; "
        "a break is a window in which nothing completed. "
        + ("The runs of the heatmap: " if binned else "The runs drawn: ")
        + _runs_drawn(traces)
        + "."
    )
    return Chart(
        named(workload, phase, direction, "latency-over-time"),
        workload,
        title,
        caption,
        sized(title, chart),
        over_time=True,
    )


def series_chart(traces: list[SeriesTrace], targets: list[str]) -> Chart:
    """Each target's values of one quantity over time in one workload, phase and direction (a
    kind's Series: what else its tool reports of a run's course), of the cell's run drawn."""
    first = traces[0]
    workload, phase, direction, quantity = first.workload, first.phase, first.series.direction, first.series.quantity
    unit = first.series.unit
    rows = [
        {"target": t.target, "seconds": second, "value": value, "run": t.repetition}
        for t in traces
        for second, value in zip(t.series.ends_s, t.series.values)
    ]
    axis = spaced(direction, quantity) + (f" ({unit})" if unit else "")
    chart = (
        alt.Chart(alt.Data(values=rows))
        .mark_line(point=alt.OverlayMarkDef(size=12), strokeWidth=1.5)
        .encode(
            alt.X("seconds:Q", title="seconds into the measured run"),
            alt.Y("value:Q", title=axis),
            alt.Color("target:N", scale=alt.Scale(domain=targets, scheme="tableau10"), title="target"),
            tooltip=[
                alt.Tooltip("target:N"),
                alt.Tooltip("run:Q"),
                alt.Tooltip("seconds:Q", format=".2f"),
                alt.Tooltip("value:Q", title=unit or quantity, format=",.4~g"),
            ],
        )
    )
    title = f"{where(workload, phase)}: {spaced(direction, quantity)} over time"
    caption = (
        f"{' and '.join(dict.fromkeys(t.source for t in traces))}; a break is a moment with nothing to tell. "
        "Per target one run, the median of its runs: " + _runs_drawn(traces) + "."
    )
    name = named(workload, phase, direction, *quantity.split(), "over-time")
    return Chart(name, workload, title, caption, sized(title, chart), over_time=True)


def _merged(resolution: tuple[int, int]) -> str:
    """What a heatmap merged to stay within HEATMAP_CELLS, said: nothing is hidden, every
    completion is in a cell, but a cell is coarser than the logs."""
    windows, per_decade = resolution
    merged = ([f"a run's consecutive windows into {windows} at most"] if windows < LATENCY_WINDOWS else []) + (
        [f"adjacent buckets into {per_decade} per factor of ten (from {BUCKETS_PER_DECADE})"]
        if per_decade < BUCKETS_PER_DECADE
        else []
    )
    if not merged:
        return ""
    finer = f"; the latency over time chart draws up to {LATENCY_WINDOWS} windows" if windows < LATENCY_WINDOWS else ""
    return (
        f"To draw at most {HEATMAP_CELLS:,} cells, {' and '.join(merged)} "
        f"are merged, their completions added up{finer}. "
    )


def _windows(window_ms: list[int]) -> str:
    return " or ".join(f"{w} ms" for w in window_ms)


def _runs_drawn(traces: list[ThroughputTrace] | list[LatencyTrace] | list[SeriesTrace]) -> str:
    """Each target's run drawn, by its number in its cell, and how many it is the median of: never
    "run 2 of 1", the numbers counting different things (a cell's run 1 may have failed)."""
    among = {t.target: "its one run with logs" if t.runs == 1 else f"the median of {t.runs}" for t in traces}
    return ", ".join(f"{t.target} run {t.repetition} ({among[t.target]})" for t in traces)
