"""What every chart of a report is made of (pure): the Chart record, its Vega-Lite spec put
together at a figure's size, its name and title, and the buckets latency is drawn in — shared by
charts.py (the charts of a study run) and time_charts.py (those of a run's course over time).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

import altair as alt
from altair.utils.schemapi import debug_mode

# The Vega-Lite the specs are written for (altair's), and so the one the page inlines and the
# figures are rendered with (vl-convert-python bundles several).
VEGA_LITE = alt.SCHEMA_VERSION.lstrip("v").rsplit(".", 1)[0]
WIDTH = 560  # a figure's plot area, in pixels (the page fits each chart to its container instead)
HEIGHT = 260
P = ParamSpec("P")
R = TypeVar("R")
BUCKETS_PER_DECADE = 10  # latency is drawn in buckets of a tenth of a factor of ten


@dataclass(frozen=True)
class Chart:
    """One chart: its Vega-Lite spec, sized for a figure file, and what the page says of it."""

    name: str  # unique in a report; its figure files are named after it (guard.names.file_name)
    workload: str  # the workload it belongs to; "" for a chart of the whole page
    title: str
    caption: str  # how to read it, shown under it on the page
    spec: dict
    # A chart of one run's course over time (time_charts.py): a figure file only with --time-figures
    over_time: bool = False


def unchecked(build: Callable[P, R]) -> Callable[P, R]:
    """Charts built without altair checking each object as it is made (its debug mode): that took
    most of a large report's time. The tests validate every kind of chart (test_report_html.py)."""

    @functools.wraps(build)
    def built(*args: P.args, **kwargs: P.kwargs) -> R:
        with debug_mode(False):
            return build(*args, **kwargs)

    return built


def sized(title: str, *layers: alt.Chart) -> dict:
    """The spec of a chart — several layers are drawn over one another — at the page's size."""
    return spec_of(list(layers), width=WIDTH, height=HEIGHT, title=title, config={"scale": {"bandPaddingInner": 0.35}})


def spec_of(layers: list[alt.Chart], *, config: dict, **top: object) -> dict:
    """The Vega-Lite spec of one chart or of its layers, with `top` (size, title) and `config` set
    on it, each layer's rows set in as they are: its inline data becomes a named dataset of the
    spec, which altair would otherwise convert value by value. Put together here, not by altair's
    layer(), properties() and configure_*(): each of those copies every layer whole, object by
    object (most of a large report's time), and nor is the spec validated as it is built (see
    unchecked)."""
    datasets, specs = {}, []
    for i, part in enumerate(layers):
        if isinstance(part.data, alt.Data) and isinstance(part.data.values, list):
            datasets[f"rows-{i}"], part.data = part.data.values, alt.NamedData(name=f"rows-{i}")
        specs.append(part.to_dict(validate=False))
    schema, theme = specs[0]["$schema"], specs[0].get("config", {})
    own = [{k: v for k, v in spec.items() if k not in ("$schema", "config")} for spec in specs]
    body = own[0] if len(own) == 1 else {"layer": own}
    config = {"legend": legend_layout(legend_labels(own))} | config
    return {"$schema": schema, "config": theme | config, **body, **top} | ({"datasets": datasets} if datasets else {})


LEGEND_CHANNELS = ("color", "fill", "stroke", "strokeDash", "shape", "opacity", "size")
LEGEND_CHAR_PX = 7  # px: a character of a legend's label, erring wide (10 px sans-serif: 5.3 to 6.4 a name's)
LEGEND_ENTRY_PX = 30  # px: a legend entry's symbol and the room between it, its label and the next column
# The room a legend has under the plot, as wide as the plot: a figure's own width; on the page,
# its container's less the axis on the left of the plot (LEFT_AXIS_PX at most). Not the page's
# `width`, which fitting the plot to its container changes after the legends are laid out: the
# view would keep the height of legends in another number of columns, cutting the last off.
LEFT_AXIS_PX = 120
LEGEND_ROOM = f"(containerSize()[0] > 0 ? containerSize()[0] - {LEFT_AXIS_PX} : width)"
# Legends one under another (Vega's legend layout, which Vega-Lite takes as an expression only)
STACKED = "{bottom: {anchor: 'start', direction: 'vertical'}}"


def legend_labels(specs: list[dict]) -> list[str]:
    """What the legends of a chart's layers list: the domain each of their channels with a legend
    names (every chart names it: a target's colour is the same in every chart of a page)."""
    labels: list[str] = []
    for spec in specs:
        for name in LEGEND_CHANNELS:
            channel = spec.get("encoding", {}).get(name)
            if not isinstance(channel, dict) or channel.get("legend", {}) is None:
                continue
            if isinstance(domain := channel.get("scale", {}).get("domain"), list):
                labels += map(str, domain)
    return labels


def legend_layout(labels: list[str]) -> dict:
    """Legends under the plot, one under another, each entry shown (symbolLimit 0: no limit) and
    none cut short: in as many columns as entries of the longest label fit across the room they
    have, one on a phone; a label as long as that room is wide, whole."""
    entry = max(map(len, labels), default=0) * LEGEND_CHAR_PX + LEGEND_ENTRY_PX
    return {
        "orient": "bottom",
        "layout": {"expr": STACKED},
        "columns": {"expr": f"max(1, floor({LEGEND_ROOM} / {entry}))"},
        "symbolLimit": 0,
        "labelLimit": {"expr": f"max({entry - LEGEND_ENTRY_PX}, {LEGEND_ROOM} - {LEGEND_ENTRY_PX})"},
    }


def where(workload: str, phase: str) -> str:
    """A workload, or one phase of a scenario, as a chart's title names it."""
    return f"{workload} · {phase}" if phase else workload


def spaced(*words: str) -> str:
    """Words joined by spaces, an empty one left out (a kind's latency of no direction: sysbench's)."""
    return " ".join(w for w in words if w)


def named(workload: str, phase: str, *what: str) -> str:
    """A chart's name: of its workload, and phase when it has one."""
    return "-".join(part for part in (workload, phase, *what) if part)


@functools.cache  # a page buckets ~70,000 bins, of a few thousand values (fio's buckets)
def latency_bucket(ns: float) -> int:
    """The bucket a latency (ns) is drawn in: b holds 10^(b/BUCKETS_PER_DECADE) µs up to the next."""
    return math.floor(math.log10(max(ns, 1) / 1e3) * BUCKETS_PER_DECADE)
