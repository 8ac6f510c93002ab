"""`fslab report`: one study run, or several of one study, read from the database, and the page
(html.py) written: report.html in its folder; on request (--figures) every chart of it also as
figure files (figures.py) in figures/ beside it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fslab.core.errors import FslabError
from fslab.core.names import file_name
from fslab.core.units import Bandwidth
from fslab.report.bundle import vega_bundle_meanwhile
from fslab.report.console import environment_differences
from fslab.report.details import run_details
from fslab.report.figures import figures_meanwhile
from fslab.report.html import Page, comparison_section, render_page, run_section
from fslab.report.output import own_folder, write_own
from fslab.report.summary import compare_runs, summarize_study_run
from fslab.results import ResultsDB
from fslab.statistics.analysis import regressions

PAGE = "report.html"
FIGURES = "figures"


class ReportRefused(FslabError):
    pass


@dataclass(frozen=True)
class ReportFiles:
    page: Path
    figures: list[Path]  # NAME.svg (and NAME.png) of every chart, in FIGURES beside the page; none unless asked for
    over_time_left_out: int = 0  # charts of a run's course over time drawn on the page, not as figures


def write_report(
    db: ResultsDB,
    study_runs: list[dict],
    folder: Path,
    *,
    baseline: str | None = None,
    threshold: float = 0.03,
    units: Bandwidth | None = None,
    regression: float = 0.05,
    figures: bool = False,
    png_scale: int | None = None,
    time_figures: bool = False,
    rendered: Callable[[int, int], None] | None = None,
    pool_hosts: bool = False,
) -> ReportFiles:
    """The page of `study_runs` (the database's records, in the order given) in `folder`, and
    with `figures` every chart of it as SVG, and as PNG of `png_scale` pixels a CSS pixel unless
    None (`rendered(done, total)` is told of each) — but the charts of a run's course over time
    (Chart.over_time: more than half of the drawing's CPU), unless `time_figures`.
    Several study runs must be of one study: each later one is compared with the first, cell by
    cell, as `fslab compare` does, and each is shown whole after the comparisons. `pool_hosts`:
    the runs of several hosts pooled per cell (summary.Hosts)."""
    studies = {sr["study"] for sr in study_runs}
    if len(studies) > 1:
        raise ReportRefused(
            f"study runs {', '.join(str(sr['id']) for sr in study_runs)} are of different "
            f"studies ({', '.join(sorted(studies))}): a page compares runs of one study"
        )
    with vega_bundle_meanwhile() as vega_bundle, figures_meanwhile(figures, png_scale) as renderers:
        summaries = [
            summarize_study_run(
                db, sr["id"], baseline=baseline, threshold=threshold, units=units, pool_hosts=pool_hosts
            )
            for sr in study_runs
        ]
        several = len(study_runs) > 1
        runs = [
            run_section(s, run_details(db, s), chart_prefix=f"{s.study_run['id']}-" if several else "")
            for s in summaries
        ]
        first = study_runs[0]
        comparisons = []
        for later in study_runs[1:]:
            compared = compare_runs(db, first["id"], later["id"], threshold=threshold, pool_hosts=pool_hosts)
            comparisons.append(
                comparison_section(
                    first,
                    later,
                    compared.rows,
                    regressions(compared.rows, regression),
                    environment_differences(first["environment"], later["environment"]),
                    compared.left_out,
                    threshold=threshold,
                )
            )
        ids = ", ".join(str(sr["id"]) for sr in study_runs)
        title = f"{first['study']} — study run{'s' if len(study_runs) > 1 else ''} {ids}"
        page = Page(title, runs, comparisons)
        own_folder(folder)
        drawn = [c for c in page.charts if time_figures or not c.over_time]
        drawing = renderers.draw(drawn) if renderers else None  # drawn while the page is made
        written = write_own(folder / PAGE, render_page(page, vega_bundle))
        return ReportFiles(
            written,
            drawing.write(folder / FIGURES, rendered) if drawing else [],
            len(page.charts) - len(drawn) if renderers else 0,
        )


def default_folder(reports: Path, study_runs: list[dict]) -> Path:
    """Where a report goes unless told: the study run's folder of the reports directory, the
    one `fslab summary` writes into (`STUDY-ID`; several: `STUDY-ID1-ID2`)."""
    own_folder(reports)
    return reports / file_name(f"{study_runs[0]['study']}-" + "-".join(str(sr["id"]) for sr in study_runs))
