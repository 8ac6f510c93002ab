"""The report's charts as figure files for papers and slides: each chart's very spec (charts.py),
rendered without a browser by vl-convert (the Vega-Lite the page draws with), as SVG, and as PNG
when asked for.

vl-convert runs Vega in one JavaScript thread a process, so the figures are drawn in processes
of their own (renderers.py), one a CPU. They are started
(not forked: a process that has drawn before has vl-convert's thread, on which a forked child
would wait for ever) and readied while the caller still builds its charts (figures_meanwhile).

The SVG is the figure for print and slides, at any size. A PNG (--png) costs half as much CPU
again as its SVG (a page of 188 charts: 11 s of CPU for the SVGs, 5 s more for the PNGs), so it
is drawn only when asked for: at the page's CSS pixels (PNG_SCALE), as the page shows the chart,
or sharper with --png-scale N (N² the pixels to rasterise)."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import vl_convert

from fslab.core.errors import FslabError
from fslab.core.names import file_name
from fslab.report import renderers
from fslab.report.chart_parts import VEGA_LITE, Chart
from fslab.report.output import own_folder, write_own

RENDERERS = 4  # processes drawing figures, at most (one a CPU): each holds its own Vega, ~150 MB
PNG_SCALE = 1  # a PNG's pixels per CSS pixel with --png, unless asked for more
PNG_SCALES = range(1, 5)  # --png-scale: at 4, a PNG has 16 times the pixels of the page's


class FigureError(FslabError):
    pass


# vl-convert's version as it says it (its type stubs leave __version__ out).
VL_CONVERT: str = vars(vl_convert)["__version__"]


def vega_lite() -> str:
    """The Vega-Lite version the specs are written for, when vl-convert bundles it (the page
    inlines that one, and the figures are rendered with it)."""
    if VEGA_LITE not in vl_convert.get_vegalite_versions():
        raise FigureError(
            f"altair writes Vega-Lite {VEGA_LITE}, which vl-convert-python {VL_CONVERT} does not bundle "
            f"(it has {', '.join(vl_convert.get_vegalite_versions())}): install "
            "matching versions (pip install -U altair vl-convert-python)"
        )
    return VEGA_LITE


@dataclass(frozen=True)
class Drawing:
    """Charts being drawn (Renderers.draw), their figures written as they come (write)."""

    charts: list[Chart]
    futures: list[Future]

    def write(self, folder: Path, rendered: Callable[[int, int], None] | None = None) -> list[Path]:
        """NAME.svg (and NAME.png when PNGs were asked for) of every chart in `folder` (made if
        missing), each written as it is drawn; the files, in the charts' order.
        `rendered(done, total)` is told of each chart drawn (a tenth of a second of CPU each: a page
        has a hundred)."""
        own_folder(folder)
        chart_of = dict(zip(self.futures, self.charts))
        written: dict[str, list[Path]] = {}
        for done, future in enumerate(as_completed(self.futures), 1):
            chart = chart_of[future]
            try:
                svg, png = future.result()
            except ValueError as exc:  # what Vega said, without its JavaScript stack
                said = " ".join(line.strip() for line in str(exc).splitlines() if not line.lstrip().startswith("at "))
                raise FigureError(f"chart '{chart.title}' could not be rendered: {said}") from None
            except BrokenProcessPool:
                raise _ended(f"before chart '{chart.title}' was drawn") from None
            name = file_name(chart.name)
            written[chart.name] = [write_own(folder / f"{name}.svg", svg)]
            if png is not None:
                written[chart.name].append(write_own(folder / f"{name}.png", png))
            if rendered is not None:
                rendered(done, len(self.charts))
        return [path for chart in self.charts for path in written[chart.name]]


@dataclass(frozen=True)
class Renderers:
    pool: ProcessPoolExecutor
    vega_lite: str
    png_scale: int | None  # None: no PNG

    def draw(self, charts: list[Chart]) -> Drawing:
        """Every chart sent to be drawn, as SVG (and PNG); `write` waits for them."""
        try:
            return Drawing(
                charts,
                [self.pool.submit(renderers.drawn, chart.spec, self.vega_lite, self.png_scale) for chart in charts],
            )
        except BrokenProcessPool:
            raise _ended("as it started") from None


@contextmanager
def figures_meanwhile(wanted: bool = True, png_scale: int | None = None) -> Iterator[Renderers | None]:
    """Renderers started, and readied, while the caller builds its charts; None unless `wanted`.
    They are stopped as the block ends; on an error or an interruption, with nothing more drawn.
    They draw SVGs, and PNGs of `png_scale` pixels per CSS pixel (one of PNG_SCALES) unless it is
    None."""
    if not wanted:
        yield None
        return
    if png_scale is not None and png_scale not in PNG_SCALES:
        raise FigureError(
            f"--png-scale {png_scale}: a PNG has 1 to 4 pixels per CSS pixel of the "
            "page (1, the default, as the page shows it); give one of 1, 2, 3, 4"
        )
    version = vega_lite()
    count = max(1, min(RENDERERS, len(os.sched_getaffinity(0))))
    pool = ProcessPoolExecutor(
        count, mp_context=multiprocessing.get_context("spawn"), initializer=renderers.ready, initargs=(version,)
    )
    try:
        for _ in range(count):
            pool.submit(renderers.started)
        yield Renderers(pool, version, png_scale)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _ended(when: str) -> FigureError:
    return FigureError(
        f"a process drawing the figures ended {when} (its error is above; killed, or out of memory?). "
        "A Python script that makes figures through fslab must do its "
        "work under `if __name__ == '__main__':` (multiprocessing's rule)"
    )


def write_figures(
    charts: list[Chart],
    folder: Path,
    rendered: Callable[[int, int], None] | None = None,
    png_scale: int | None = PNG_SCALE,
) -> list[Path]:
    """NAME.svg and, unless `png_scale` is None, NAME.png of every chart in `folder` (made if
    missing): Drawing.write."""
    with figures_meanwhile(png_scale=png_scale) as drawing:
        assert drawing is not None
        return drawing.draw(charts).write(folder, rendered)
