"""The report's charts as figure files for papers and slides: each chart's very spec (charts.py),
rendered without a browser by vl-convert (the Vega-Lite the page draws with), as SVG and PNG."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import vl_convert

from fslab.errors import FslabError
from fslab.guard.names import file_name
from fslab.report.chart_parts import VEGA_LITE, Chart
from fslab.report.output import write_all

PNG_SCALE = 2  # pixels per CSS pixel: sharp on slides and high-density screens


class FigureError(FslabError):
    pass


def vega_lite() -> str:
    """The Vega-Lite version the specs are written for, when vl-convert bundles it (the page
    inlines that one, and the figures are rendered with it)."""
    if VEGA_LITE not in vl_convert.get_vegalite_versions():
        raise FigureError(
            f"altair writes Vega-Lite {VEGA_LITE}, which vl-convert-python {vl_convert.__version__} does not bundle "
            f"(it has {', '.join(vl_convert.get_vegalite_versions())}): install matching versions (pip install -U altair vl-convert-python)"
        )
    return VEGA_LITE


def write_figures(charts: list[Chart], folder: Path, rendered: Callable[[int, int], None] | None = None) -> list[Path]:
    """NAME.svg and NAME.png of every chart in `folder` (made if missing); the files written.
    No data is fetched while rendering: every spec carries its data inline. `rendered(done,
    total)` is told of each chart rendered (a tenth of a second each: a page has a hundred)."""
    version = vega_lite()
    files: dict[str, str | bytes] = {}
    for done, chart in enumerate(charts, 1):
        name = file_name(chart.name)
        try:
            svg = vl_convert.vegalite_to_svg(chart.spec, vl_version=version, allowed_base_urls=[])
            # the PNG drawn from that SVG: byte for byte what vegalite_to_png draws, without
            # running Vega twice (40 % less CPU)
            files[f"{name}.svg"], files[f"{name}.png"] = svg, vl_convert.svg_to_png(svg, scale=PNG_SCALE)
        except ValueError as exc:
            raise FigureError(f"chart '{chart.title}' could not be rendered: {exc}") from None
        if rendered is not None:
            rendered(done, len(charts))
    return write_all(folder, files)
