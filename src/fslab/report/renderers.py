"""What a process that draws figures runs (figures.py starts them and sends each a chart's spec):
vl-convert's Vega, in the one JavaScript thread vl-convert has a process. It imports vl-convert
and nothing of fslab's: it is all such a process loads."""

from __future__ import annotations

import signal

import vl_convert

# What a renderer draws as it starts, while the charts are still being built: the first drawing
# loads vl-convert's JavaScript (half a second of CPU) and the first few of a kind run slower
# until V8 has compiled them (a second, over a page's first twenty charts): a small chart of the
# parts the report's are made of (bars, whiskers, points, lines, a log axis, a legend).
ROWS = [{"target": t, "value": v, "low": v * 0.9, "high": v * 1.1} for t, v in (("a", 1.0), ("b", 2.0), ("c", 30.0))]
FIRST = {
    "data": {"values": ROWS},
    "layer": [
        {
            "mark": "bar",
            "encoding": {
                "x": {"field": "target", "type": "nominal"},
                "y": {"field": "value", "type": "quantitative"},
                "color": {"field": "target", "type": "nominal"},
            },
        },
        {
            "mark": {"type": "errorbar", "ticks": True},
            "encoding": {
                "x": {"field": "target", "type": "nominal"},
                "y": {"field": "low", "type": "quantitative"},
                "y2": {"field": "high"},
            },
        },
        {
            "mark": {"type": "line", "point": True},
            "encoding": {
                "x": {"field": "target", "type": "nominal"},
                "y": {"field": "high", "type": "quantitative", "scale": {"type": "log"}},
            },
        },
    ],
    "resolve": {"scale": {"y": "independent"}},
    "config": {"legend": {"orient": "bottom"}},
}


def drawn(spec: dict, vega_lite: str, png_scale: int | None) -> tuple[str, bytes | None]:
    """A chart's SVG and, unless `png_scale` is None, its PNG drawn from that SVG at `png_scale`
    pixels per CSS pixel: byte for byte what vegalite_to_png draws, without running Vega twice (40 %
    less CPU). No data is fetched: every spec carries its own."""
    svg = vl_convert.vegalite_to_svg(spec, vl_version=vega_lite, allowed_base_urls=[])
    return svg, None if png_scale is None else vl_convert.svg_to_png(svg, scale=png_scale)


def ready(vega_lite: str) -> None:
    """A renderer made ready to draw (its process's initializer). A Ctrl-C, which the terminal
    sends every process of fslab's, is left to the process that started it, which stops it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    drawn(FIRST, vega_lite, 1)


def started() -> None:
    """Nothing: submitted once a renderer, to start them all at once (a pool starts its
    processes as work comes)."""
