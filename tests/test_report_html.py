"""`fslab report`: the self-contained HTML page and its figures, made from a stored study run (ext4
and raw, real fio output, stored as `fslab run` stores it: tests/synthetic.py) and opened in Debian's
headless Chromium with the network cut off; the README's picture of the page (docs/images/), taken
again when what it shows changes; and the charts and conclusions behind the page, on synthetic
summaries (pure)."""

from __future__ import annotations

import hashlib
import html
import json
import math
import multiprocessing
import os
import re
import shlex
import shutil
from dataclasses import replace
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
import vl_convert
from altair.vegalite.v6.schema.core import TopLevelSpec

from conftest import FIXTURES, fslab_in_process
from fslab.core.checks import Unsupported
from fslab.core.names import file_name
from fslab.fio.output import bin_columns, latency_bins
from fslab.fio.report import LATENCY_NAMES, PERCENTILE_METRICS, cell_histograms
from fslab.model import Roles
from fslab.model.records import SampleGroups
from fslab.report import chart_parts
from fslab.report.charts import (
    Chart,
    cpu_chart,
    distribution_rows,
    efficiency_chart,
    extents_chart,
    latency_percentiles_chart,
    primary_chart,
    study_charts,
    write_amplification_chart,
)
from fslab.report.conclusions import conclusions, ranking_conclusion, row_conclusions
from fslab.report.details import RunDetails
from fslab.report.figures import PNG_SCALE, RENDERERS, FigureError, vega_lite, write_figures
from fslab.report.html import Page, RunSection, Table, WorkloadSection, _script_json, emphasis, render_page, run_section
from fslab.report.sections import sections, workload_table
from fslab.report.summary import (
    CellSummary,
    FailedRun,
    StudySummary,
    summarize_study_run,
)
from fslab.report.view import Section, SectionKind
from fslab.results import ResultsDB
from fslab.statistics.analysis import Row, analyse
from fslab.statistics.stats import VERDICTS, adjust_family, compare, rank, summarize
from fslab.workloads.offered import LatencyHistogram
from synthetic import stored_study

ROOT = Path(__file__).parent.parent

STUDY = """\
[study]
name = "page"
repetitions = 2
workloads = ["rand_read", "seq_write"]
image_size = "256MiB"
image_fill = "sparse"

[fio]
size = "64MiB"
runtime = "1s"

[[target]]
filesystem = ["ext4", "raw"]
"""
# A second study run of the same study (as on another kernel or machine), of one workload: the
# page compares the cells both have.
AGAIN = STUDY.replace('workloads = ["rand_read", "seq_write"]', 'workloads = ["rand_read"]')


DOCUMENTED = ROOT / "docs" / "report.md"


def documented_commands() -> list[str]:
    """The `fslab report` commands of docs/report.md, as written (comments dropped)."""
    blocks = [block.split("```", 1)[0] for block in DOCUMENTED.read_text().split("```sh\n")[1:]]
    return [
        line.split("#", 1)[0].strip()
        for block in blocks
        for line in block.splitlines()
        if line.startswith("fslab report")
    ]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """Two study runs of one study stored as `fslab run --seed 3` stores them, then every `fslab
    report` command of docs/report.md run as written there (the database named by FSLAB_DB), in
    that folder."""
    root = tmp_path_factory.mktemp("report")
    db = root / "results.db"
    for i, text in enumerate((STUDY, AGAIN)):
        stored_study(root, text, ResultsDB(str(db)), name=f"study{i}.toml", seed=3, scale={"raw": 1.0, "ext4": 0.93})
    reports = {
        command: fslab_in_process(
            *shlex.split(command)[1:], cwd=root, env={"FSLAB_DB": str(db)}
        )  # as written, in this process: each a second's start saved
        for command in documented_commands()
    }
    return root, db, reports


def test_the_documented_commands_run_as_written(stored):
    root, _, reports = stored
    assert list(reports) == ["fslab report", "fslab report 1 -o paper-figures --png --time-figures", "fslab report 1 2"]
    for command, result in reports.items():
        assert result.returncode == 0, command + "\n" + result.stdout + result.stderr
    assert f"Report: {root / 'reports' / 'page-2' / 'report.html'}" in reports["fslab report"].stdout, (
        "the newest, where `fslab summary` writes its files"
    )
    assert "Figures" not in reports["fslab report"].stdout and not (root / "reports" / "page-2" / "figures").exists(), (
        "figures only when asked for"
    )
    assert (
        f"Report: {root / 'paper-figures' / 'report.html'}"
        in reports["fslab report 1 -o paper-figures --png --time-figures"].stdout
    )
    assert (
        f"SVG and PNG): {root / 'paper-figures' / 'figures'}"
        in reports["fslab report 1 -o paper-figures --png --time-figures"].stdout
    )
    assert f"Report: {root / 'reports' / 'page-1-2' / 'report.html'}" in reports["fslab report 1 2"].stdout


def open_page(browser, page_file: Path, screenshot: Path, width: int = 1280) -> dict:
    """The page as Chromium shows it with every request but the page's own aborted: each chart's
    drawing, console errors, requests made, and whether anything is wider than the screen."""
    url = page_file.as_uri()
    requests, errors = [], []
    page = browser.new_page(viewport={"width": width, "height": 900})
    try:
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))

        def route(routed):
            requests.append(routed.request.url)
            routed.continue_() if routed.request.url == url else routed.abort()

        page.route("**/*", route)
        page.goto(url)
        page.wait_for_selector("body[data-charts=done]", timeout=60_000)
        charts = page.eval_on_selector_all(
            ".chart[data-chart]",
            """elements => elements.map(e => ({
                name: e.dataset.chart,
                svg: e.querySelector('svg')
                    ? e.querySelector('svg').querySelectorAll('path, text, line, rect').length : 0,
                canvas: e.querySelector('canvas') ? e.querySelector('canvas').width : 0,
                width: e.querySelector('svg') ? e.querySelector('svg').getBoundingClientRect().width : 0,
                container: e.clientWidth,
                cells: Array.from(e.querySelectorAll('g.mark-rect.role-mark path[aria-label]'))
                    .map(p => p.getAttribute('aria-label')),
            }))""",
        )
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        page.screenshot(path=str(screenshot), full_page=True)
    finally:
        page.close()
    return {"charts": charts, "errors": errors, "requests": requests, "overflow": overflow, "url": url}


# --- a stored study run, through the command line ----------------------------------------------


def page_specs(page: Path) -> dict:
    """A page's charts, as it embeds them: name → Vega-Lite spec."""
    embedded = re.search(
        r'<script type="application/json" id="fslab-charts">(.*?)</script>', page.read_text(), re.DOTALL
    )
    assert embedded, "the page embeds its charts"
    return json.loads(embedded.group(1))


def test_report_figures_writes_every_chart_of_the_page_as_svg_and_png(stored):
    folder = page_of(stored).parent
    names = page_specs(folder / "report.html")
    assert {
        "rand_read-read_iops",
        "seq_write-write_iops",
        "rand_read-read-latency-percentiles",
        "rand_read-read-latency-distribution",
        "rand_read-efficiency",
        "rand_read-cpu",
    } <= set(names)
    assert {"rand_read-read-throughput", "seq_write-write-throughput"} <= set(names), (
        "fio's logs, stored with every run"
    )
    for spec in names.values():  # charts.py builds them unvalidated (the cost of most of a report): here they are
        TopLevelSpec.validate(spec)
    figures = sorted((folder / "figures").iterdir())
    assert sorted(p.name for p in figures) == sorted(
        f"{file_name(n)}.{ext}" for n in names for ext in ("svg", "png")
    ), "the page's charts, each as a figure"
    for svg in (p for p in figures if p.suffix == ".svg"):
        text = svg.read_text()
        assert (
            text.startswith("<svg")
            and text.rstrip().endswith("</svg>")
            and text.count("<path") + text.count("<text") > 10
        ), svg
    for png in (p for p in figures if p.suffix == ".png"):
        width, height = png_size(png)
        assert (width, height) == svg_size(png.with_suffix(".svg")) and width >= 500 and height >= 250, (
            "the page's CSS pixels, as it shows the chart"
        )


def test_figures_alone_are_svgs_and_png_scale_gives_a_png_that_many_pixels_per_css_pixel(stored):
    """--figures: SVGs only (a PNG costs half as much CPU again), of the statistics' charts, not of
    a run's course over time (--time-figures adds them); --png-scale N: sharper PNGs, 1 to 4,
    implying --png and --figures, refused otherwise, naming the option."""
    root, db, _ = stored
    svgs = fslab_in_process("report", "2", "-o", "svgs", "--figures", cwd=root, env={"FSLAB_DB": str(db)})
    assert svgs.returncode == 0 and "SVG):" in svgs.stdout, svgs.stdout + svgs.stderr
    drawn = sorted((root / "svgs" / "figures").iterdir())
    assert drawn and {p.suffix for p in drawn} == {".svg"}, "no PNG unless asked for"
    on_page = page_specs(root / "svgs" / "report.html")
    over_time = {n for n in on_page if n.endswith(("-throughput", "-latency-heatmap", "-latency-over-time"))}
    assert over_time, "fio's logs and histogram logs, stored with every run: the page draws them"
    assert sorted(p.stem for p in drawn) == sorted(file_name(n) for n in on_page if n not in over_time), (
        "--figures: every chart of the statistics, none of a run's course over time"
    )
    assert f"; {len(over_time)} charts of a run's course over time are on the page only (--time-figures)" in (
        svgs.stdout
    )
    timed = fslab_in_process("report", "2", "-o", "timed", "--time-figures", cwd=root, env={"FSLAB_DB": str(db)})
    assert timed.returncode == 0 and "on the page only" not in timed.stdout, timed.stdout + timed.stderr
    assert sorted(p.name for p in (root / "timed" / "figures").iterdir()) == sorted(
        f"{file_name(n)}.svg" for n in on_page
    ), "--time-figures: every chart of the page, as SVG (it implies --figures, not --png)"
    said = fslab_in_process("report", "2", "-o", "sharper", "--png-scale", "3", cwd=root, env={"FSLAB_DB": str(db)})
    assert said.returncode == 0, said.stdout + said.stderr
    pngs = sorted((root / "sharper" / "figures").glob("*.png"))
    assert pngs
    for png in pngs:
        width, height = svg_size(png.with_suffix(".svg"))
        assert png_size(png) == (3 * width, 3 * height), png.name
    for wrong in ("0", "5", "-1"):
        refused = fslab_in_process(
            "report", "2", "-o", "wrong", "--figures", "--png-scale", wrong, cwd=root, env={"FSLAB_DB": str(db)}
        )
        assert (
            refused.returncode == 2 and f"--png-scale {wrong}: a PNG has 1 to 4 pixels per CSS pixel" in refused.stderr
        ), refused.stderr
    assert not (root / "wrong").exists(), "refused before anything is written"
    assert sorted(p.stem for p in pngs) == sorted(p.stem for p in drawn), "--png-scale: every figure as SVG and PNG"


def png_size(path: Path) -> tuple[int, int]:
    """A PNG's width and height in pixels, from its header (IHDR)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def svg_size(path: Path) -> tuple[int, int]:
    """An SVG's width and height in CSS pixels, as vl-convert writes them on its root element."""
    found = re.match(r'<svg [^>]*\bwidth="(\d+)" height="(\d+)"', path.read_text())
    assert found, path
    return int(found[1]), int(found[2])


def test_a_figures_png_is_the_one_vega_draws_though_drawn_from_its_svg(tmp_path, stored):
    """write_figures draws each PNG from the chart's SVG (Vega runs once): byte for byte
    vl-convert's PNG of the spec."""
    names = page_specs(page_of(stored).parent / "report.html")
    heatmap = next(n for n in names if n.endswith("latency-heatmap"))  # the busiest chart
    chart = Chart(heatmap, "rand_read", "a heatmap", "", names[heatmap])
    written = write_figures([chart], tmp_path)
    png = next(p for p in written if p.suffix == ".png")
    assert png.read_bytes() == vl_convert.vegalite_to_png(
        chart.spec, vl_version=vega_lite(), scale=PNG_SCALE, allowed_base_urls=[]
    )


def page_of(stored) -> Path:
    """The page of study run 1 (ext4 and raw, rand_read and seq_write)."""
    root, _, _ = stored
    return root / "paper-figures" / "report.html"


class _References(HTMLParser):
    """Every src and href of the page's elements, and its <script> elements' own src."""

    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        self.found += [
            (tag, name, value or "") for name, value in attrs if name in ("src", "href", "srcset", "action", "data")
        ]


def test_page_is_self_contained(stored):
    page = page_of(stored).read_text()
    references = _References()
    references.feed(page)
    assert references.found, "the page's table of contents links within it"
    assert all(value.startswith("#") for _, _, value in references.found), [
        r for r in references.found if not r[2].startswith("#")
    ]
    assert not re.search(
        r"<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=\s*[\"']?\s*(https?:)?//", page, re.IGNORECASE
    )
    assert "Content-Security-Policy" in page and "default-src 'none'" in page and "connect-src 'none'" in page
    assert page.count("vegaEmbed") >= 2 and page.count("<script") == 3, "the bundle once, the specs, the drawing"


def test_page_renders_offline_in_chromium(stored, browser, tmp_path):
    page_file = page_of(stored)
    for width, name in ((1280, "desktop"), (390, "phone")):
        seen = open_page(browser, page_file, tmp_path / f"report-{name}.png", width)
        print(f"screenshot: {tmp_path / f'report-{name}.png'}")
        assert seen["requests"] == [seen["url"]], "no request but the page itself"
        assert seen["errors"] == []
        assert len(seen["charts"]) == len(list((page_file.parent / "figures").glob("*.svg")))
        specs = page_specs(page_file)
        faceted = {n for n, spec in specs.items() if "facet" in spec}  # the latency heatmaps: a row of the page each
        assert {c["name"] for c in seen["charts"] if c["name"].endswith("-latency-heatmap")} == faceted != set(), (
            "fio's histogram logs, stored with every run"
        )
        for chart in seen["charts"]:
            assert chart["svg"] > 5 or chart["canvas"] > 0, chart
            if chart["name"] in faceted:
                [per_decade] = {row["d"] for row in specs[chart["name"]]["datasets"]["rows"]}
                drawn = sorted(drawn_cell(label, per_decade) for label in chart["cells"])
                assert drawn == heatmap_cells(specs[chart["name"]]), (
                    f"{chart['name']}: a cell for each window and latency bucket with completions"
                )
            if chart["name"] not in faceted or width == 1280:  # on a phone a faceted chart scrolls in its own place
                assert chart["width"] <= chart["container"] + 1, f"{chart['name']} wider than its place on a {name}"
        assert seen["overflow"] <= 0, (
            f"the page is wider than a {name}'s screen: tables and faceted charts scroll inside their own box"
        )
        assert (tmp_path / f"report-{name}.png").stat().st_size > 10_000


def heatmap_cells(spec: dict) -> list[tuple[str, float, int, int]]:
    """The cells a heatmap's spec holds (time_charts.heatmap_rows): (target, from s, bucket,
    completions), its bucket of the chart's own (`d` a factor of ten)."""
    return sorted(
        (row["target"], start, b0 + i, n)
        for row in spec["datasets"]["rows"]
        for start, b0, counts in zip(row["from_s"], row["b0"], row["n"])
        for i, n in enumerate(counts)
        if n
    )


def drawn_cell(label: str, per_decade: int) -> tuple[str, float, int, int]:
    """The cell a heatmap's mark draws, read from what Vega says of it (its aria-label:
    time_charts.CELL), its bucket `per_decade` a factor of ten."""
    found = re.fullmatch(r"(\S+), ([\d.]+)–[\d.]+ s, ([\d,.]+)–[\d,.]+ µs: ([\d,]+) of [\d,]+ completions", label)
    assert found, label
    target, start, low, n = found.groups()
    return target, float(start), round(math.log10(float(low.replace(",", ""))) * per_decade), int(n.replace(",", ""))


def test_page_shows_the_summarys_own_figures(stored):
    """The same rows the console and the Markdown show, from the same functions."""
    _, db, _ = stored
    page = page_of(stored).read_text().replace('<td class="text">', "<td>")  # a cell of text wraps (html.wrapped)
    s = summarize_study_run(ResultsDB(str(db)), 1)
    for workload in s.workloads:
        _, rows = workload_table(s, workload)
        for row in rows:
            assert "".join(f"<td>{html.escape(cell, quote=True)}</td>" for cell in row) in page, row
    assert "Study <strong>page</strong>, study run 1" in page
    results = ResultsDB(str(db))
    run = next(r for r in results.runs(1) if r["target"] == "ext4" and r["workload"] == "rand_read")
    assert html.escape(run["job_file"]) in page, "the exact job file, escaped, inside a collapsible block"
    env = results.study_run(1)["environment"]
    assert html.escape(env["kernel"]) in page and html.escape(env["tools"]["fio"]) in page
    assert "order seed</dt><dd>3</dd>" in page and "/dev/loop" in page


def test_report_of_two_study_runs_compares_them_cell_by_cell(stored, browser, tmp_path):
    root, _, _ = stored
    out = root / "reports" / "page-1-2"
    page = (out / "report.html").read_text()
    assert (
        "Study run 2 against study run 1" in page and page.count("<td>rand_read</td>") >= 4
    )  # ext4 and raw, IOPS and p99
    assert "<td>seq_write</td>" not in page.split('id="run1"')[0], "only the cells both study runs have are compared"
    assert not (out / "figures").exists(), "no figures unless asked for"
    seen = open_page(browser, out / "report.html", tmp_path / "report-two-runs.png")
    assert seen["requests"] == [seen["url"]] and seen["errors"] == []
    assert all(c["svg"] > 5 for c in seen["charts"]) and any(c["name"] == "compare-1-2" for c in seen["charts"])


def test_the_pages_first_screen_shows_the_forest_plot(browser, tmp_path):
    """Issue 35: at 1,280 × 800 CSS pixels the page opens with its main comparisons at a glance —
    the forest plot (forest.py) drawn, visible in the first screen, each row naming its verdict;
    the equivalent and the undecided in their own lines beneath. Of the layout's study run
    (tests/fixtures/golden/layout.db: raw faster than ext4 in read IOPS at 3 runs)."""
    db = tmp_path / "layout.db"
    shutil.copyfile(FIXTURES / "golden" / "layout.db", db)  # a report migrates an older database in place
    made = fslab_in_process("report", "1", "--db", str(db), "-o", str(tmp_path / "page"))
    assert made.returncode == 0, made.stdout + made.stderr
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto((tmp_path / "page" / "report.html").as_uri())
        page.wait_for_selector("body[data-charts=done]", timeout=60_000)
        plot = page.locator("#chart-forest")
        assert plot.is_visible()
        box = plot.bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 800 and box["width"] > 600, box
        labels = plot.locator("svg text").all_text_contents()
        rows = [label for label in labels if " vs " in label]
        assert rows == ["raw vs ext4 · rand_read · read IOPSfaster 1.06×"], labels  # a label's two lines, one text
        assert page.locator("#run1-glance").evaluate("e => e.getBoundingClientRect().top") < 800
    finally:
        page.close()


# --- the README's picture of the page --------------------------------------------------------

PICTURE = ROOT / "docs" / "images" / "report.png"
PICTURE_SOURCE = PICTURE.with_suffix(".json")  # what the picture was taken of (picture_source)
PICTURED = FIXTURES / "schema-v13.db"  # a stored study run of ext4 and raw, with fio's logs
RETAKE = "make setup, then as root: .venv/bin/pytest tests/test_report_html.py -k picture; commit docs/images/"


def pictured_page(folder: Path) -> Path:
    """The page the README's picture is taken of: `fslab report` of the stored study run (a copy:
    a report migrates an older database in place)."""
    db = folder / "pictured.db"
    shutil.copyfile(PICTURED, db)
    made = fslab_in_process("report", "1", "--db", str(db), "-o", str(folder / "pictured"))
    assert made.returncode == 0, made.stdout + made.stderr
    return folder / "pictured" / "report.html"


def picture_source(page: Path) -> dict:
    """What the picture shows, read from the page's HTML: its first workload's section, that
    section's charts (their specs) and the page's style. The picture is stale when one of them
    changes, never for a font's or a renderer's pixels."""
    text = page.read_text()
    first = re.search(r'<section id="(run1-[^"]+)">(.*?)</section>', text, re.DOTALL)
    styled = re.search(r"<style>(.*?)</style>", text, re.DOTALL)
    assert first and styled, "a page with a workload's section and its style"
    section, html_ = first.groups()
    specs = page_specs(page)
    shown = {name: specs[name] for name in re.findall(r'data-chart="([^"]+)"', html_)}
    style = styled.group(1)
    digest = hashlib.sha256(json.dumps([style, html_, shown], sort_keys=True).encode()).hexdigest()
    return {"page": f"fslab report of {PICTURED.relative_to(ROOT)}", "section": section, "sha256": digest}


def take_picture(browser, page_file: Path, section: str, picture: Path) -> None:
    """A screen (1280 × 900 CSS pixels) of the page, from just above the section on."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(page_file.as_uri())
        page.wait_for_selector("body[data-charts=done]", timeout=60_000)
        top = page.eval_on_selector(f"#{section}", "e => e.getBoundingClientRect().top + window.scrollY - 24")
        page.screenshot(path=str(picture), clip={"x": 0, "y": top, "width": 1280, "height": 900}, full_page=True)
    finally:
        page.close()


def test_the_readmes_picture_is_of_the_page_as_it_is(tmp_path):
    """docs/images/report.png shows the page today's code makes: the README's picture is stale
    when what it shows of the page has changed since it was taken (the browser test below takes
    it again)."""
    assert PICTURE.exists() and PICTURE_SOURCE.exists(), f"no picture of the page: {RETAKE}"
    recorded = json.loads(PICTURE_SOURCE.read_text())
    assert png_size(PICTURE) == (recorded["width"], recorded["height"]), f"{PICTURE} altered: {RETAKE}"
    source = picture_source(pictured_page(tmp_path))
    assert {k: recorded[k] for k in source} == source, f"the page has changed since its picture was taken: {RETAKE}"


def test_the_readmes_picture_is_taken_again_when_the_page_has_changed(browser, tmp_path):
    """The picture in Chromium, written to docs/images/ (with what it shows) when it is missing or
    what it shows has changed; then this test fails, for the new picture to be committed."""
    page_file = pictured_page(tmp_path)
    source = picture_source(page_file)
    taken = tmp_path / "report.png"
    take_picture(browser, page_file, source["section"], taken)
    width, height = png_size(taken)
    assert (width, height) == (1280, 900) and taken.stat().st_size > 20_000, "a screen of charts, drawn"
    recorded = json.loads(PICTURE_SOURCE.read_text()) if PICTURE_SOURCE.exists() else {}
    if PICTURE.exists() and {k: recorded.get(k) for k in source} == source:
        return
    PICTURE.parent.mkdir(exist_ok=True)
    shutil.copyfile(taken, PICTURE)
    PICTURE_SOURCE.write_text(json.dumps(source | {"width": width, "height": height}, indent=2) + "\n")
    pytest.fail(f"{PICTURE.relative_to(ROOT)} was missing or stale: taken again; commit docs/images/")


def test_report_errors_are_clear(stored, tmp_path):
    _, db, _ = stored
    missing = fslab_in_process("report", "99", "--db", str(db))
    assert missing.returncode == 2 and "no study run 99" in missing.stderr and "Traceback" not in missing.stderr
    trap = tmp_path / "elsewhere"
    trap.mkdir()
    (tmp_path / "link").symlink_to(trap)
    refused = fslab_in_process("report", "1", "-o", str(tmp_path / "link"), "--db", str(db))
    assert refused.returncode == 2 and "symlink" in refused.stderr and "Traceback" not in refused.stderr
    assert not any(trap.iterdir()), "nothing written through the symlink"
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "report.html").symlink_to(trap / "planted.html")
    planted = fslab_in_process("report", "1", "-o", str(folder), "--db", str(db))
    assert planted.returncode == 2 and "never through a symlink" in planted.stderr
    assert not (trap / "planted.html").exists()


# --- the page's escaping (pure) --------------------------------------------------------------


@pytest.mark.slow
def test_every_text_is_escaped_and_no_json_closes_its_script():
    hostile = "</script><script>alert(1)</script><!--"
    page = render_page(Page(title=hostile, runs=[]))
    assert "<script>alert(1)" not in page and html.escape(hostile) in page
    embedded = str(_script_json({hostile: hostile}))
    assert "<" not in embedded and ">" not in embedded and json.loads(embedded) == {hostile: hostile}
    assert str(emphasis("Study **<b>x</b>** & more")) == "Study <strong>&lt;b&gt;x&lt;/b&gt;</strong> &amp; more"


# --- charts (pure, synthetic summaries) -------------------------------------------------------

W = "rand_read"
HIGHER = {"read_iops": True, "read_lat_p99_us": False, **{f"read_lat_{p}_us": False for p in ("p50", "p95", "p99_9")}}


def synthetic(
    cells: dict[str, dict[str, list[float]]], targets: tuple[str, ...] = ("ext4", "xfs", "raw")
) -> StudySummary:
    """A summary built as summarize_study_run builds one, from samples given here."""
    samples = {(W, t): metrics for t, metrics in cells.items()}
    roles = Roles.flagged(
        [(W, m, m == "read_iops", m in ("read_iops", "read_lat_p99_us")) for metrics in cells.values() for m in metrics]
    )
    analysis = analyse(samples, HIGHER, list(targets), [W], baselines={t: targets[0] for t in targets}, roles=roles)
    return StudySummary(
        study_run={"id": 1, "study": "synthetic"},
        targets=[{"name": t, "filesystem": "raw" if t == "raw" else "ext4", "spec": {}} for t in targets],
        workloads=[W],
        cells=[
            CellSummary(
                W,
                t,
                0,
                {m: summarize(v, HIGHER.get(m, False)) for m, v in metrics.items()},
                roles.primary_in(W, metrics),
            )
            for t, metrics in cells.items()
        ],
        analysis=analysis,
        samples=SampleGroups(samples, {m: "IOPS" if m == "read_iops" else "µs" for m in HIGHER}, HIGHER, roles),
    )


def layer(spec: dict, mark: str) -> list[dict]:
    """The data of the chart's layer drawn with `mark`."""
    found = [
        part
        for part in spec.get("layer", [spec])
        if (part["mark"]["type"] if isinstance(part["mark"], dict) else part["mark"]) == mark
    ]
    assert len(found) == 1, f"one {mark} layer"
    data = found[0].get("data", spec.get("data"))  # a layer's own data, else the data all its layers share
    return data["values"] if "values" in data else spec["datasets"][data["name"]]


def test_primary_chart_draws_the_summarys_mean_and_interval_and_every_run():
    s = synthetic(
        {
            "ext4": {"read_iops": [100, 104, 98, 101]},
            "xfs": {"read_iops": [150, 149]},
            "raw": {"read_iops": [200, 210, 190]},
        }
    )
    chart = primary_chart(s, W, "read_iops")
    bars = {b["target"]: b for b in layer(chart.spec, "bar")}
    cells = {c.target: c.metrics["read_iops"] for c in s.cells}
    assert {t: b["mean"] for t, b in bars.items()} == {t: c.mean for t, c in cells.items()}
    whiskers = {w["target"]: (w["low"], w["high"]) for w in layer(chart.spec, "errorbar")}
    assert whiskers == {
        "ext4": (cells["ext4"].ci_low, cells["ext4"].ci_high),
        "raw": (cells["raw"].ci_low, cells["raw"].ci_high),
    }, "no whisker where the summary prints none (2 runs)"
    points = layer(chart.spec, "point")
    assert sorted((p["target"], p["value"]) for p in points) == sorted(
        (t, v) for (_, t), m in s.samples.values.items() for v in m["read_iops"]
    )
    assert chart.spec["layer"][0]["encoding"]["y"]["title"] == "read IOPS"


def test_efficiency_is_the_familys_comparison_with_the_raw_device():
    fast, slow = [100.0, 101.0, 99.0, 100.0], [50.0, 51.0, 49.0, 50.0]
    s = synthetic(
        {"ext4": {"read_iops": slow}, "xfs": {"read_iops": [99.0, 101.0, 100.0, 100.5]}, "raw": {"read_iops": fast}}
    )
    rows = {r["target"]: r for r in layer(efficiency_chart(s, W).spec, "bar")}
    assert set(rows) == {"ext4", "xfs"}, "raw is the reference itself"
    for target in rows:
        c = s.analysis.comparison(W, "read_iops", "raw", target)
        assert rows[target]["ratio"] == pytest.approx(c.ratio) and rows[target]["verdict"] == c.verdict
    assert rows["ext4"]["ratio"] == pytest.approx(0.5, rel=0.02) and rows["ext4"]["verdict"] == "slower"
    assert rows["xfs"]["verdict"] == "equivalent"
    [marker] = [spec for spec in efficiency_chart(s, W).spec["layer"] if spec["mark"]["type"] == "point"]
    assert marker["encoding"]["shape"]["field"] == "verdict", "the verdict as a marker's shape too, not colour alone"
    assert marker["encoding"]["shape"]["scale"]["domain"] == list(VERDICTS)


def test_latency_percentiles_are_the_cells_medians():
    latencies = {
        "read_iops": [100, 100, 100],
        "read_lat_p50_us": [10, 12, 11],
        "read_lat_p95_us": [20, 22, 21],
        "read_lat_p99_us": [40, 41, 60],
        "read_lat_p99_9_us": [90, 80, 100],
    }
    s = synthetic({"ext4": latencies, "raw": latencies}, targets=("ext4", "raw"))
    rows = layer(latency_percentiles_chart(s, W, PERCENTILE_METRICS[0]).spec, "line")
    assert {(r["target"], r["percentile"]): r["latency_us"] for r in rows if r["target"] == "ext4"} == {
        ("ext4", "P50"): 11,
        ("ext4", "P95"): 21,
        ("ext4", "P99"): 41,
        ("ext4", "P99.9"): 90,
    }


def test_what_runs_cost_and_scenario_extents_are_the_cells_medians_per_phase():
    scenario = {
        "after.read_mb_s": [100, 101, 99], "before.extents": [1, 1, 1], "after.extents": [40, 52, 45],
        "after.host_cpu_user_pct": [20, 22, 30], "after.host_cpu_system_pct": [5, 6, 7],
        "after.host_cpu_iowait_pct": [1, 2, 3], "after.write_amplification": [1.1, 1.2, 1.5],
    }  # fmt: skip
    s = synthetic({"btrfs": scenario}, targets=("btrfs",))
    extents = {r["label"]: r["median"] for r in layer(extents_chart(s, W).spec, "bar")}
    assert extents == {"btrfs · before": 1, "btrfs · after": 45}
    cpu = {r["part"]: r["pct"] for r in layer(cpu_chart(s, W).spec, "bar")}
    assert cpu == {"user": 22, "system": 6, "iowait": 2}
    assert [r["median"] for r in layer(write_amplification_chart(s, W).spec, "bar")] == [1.2]
    s = synthetic({"ext4": {"read_iops": [1, 2, 3]}}, targets=("ext4",))
    assert (extents_chart(s, W), cpu_chart(s, W), write_amplification_chart(s, W)) == (None, None, None), (
        "no chart without its figures"
    )


def test_latency_distribution_buckets_fios_bins_as_shares():
    histogram = LatencyHistogram(
        W, "ext4", "read", "total latency", {100_000: 30, 101_000: 20, 1_000_000: 50}, runs=2, source="bins"
    )
    rows = distribution_rows(histogram)
    assert [(r["from_us"], r["share_pct"]) for r in rows] == [(pytest.approx(100), 50), (pytest.approx(1000), 50)]
    assert all(r["to_us"] == pytest.approx(r["from_us"] * 10 ** (1 / chart_parts.BUCKETS_PER_DECADE)) for r in rows)
    assert sum(r["share_pct"] for r in rows) == pytest.approx(100)


def test_fios_latency_bins_are_merged_over_its_jobs_and_its_runs():
    """On output of real fio (tests/fixtures/fio): two jobs reported apart, and a run stored
    without total-latency bins (fslab did not ask for them then)."""
    two_jobs = (FIXTURES / "fio" / "randrw-2jobs.json").read_text()
    jobs = json.loads(two_jobs)["jobs"]
    bins = latency_bins(two_jobs)
    assert set(bins) == {("read", "clat"), ("write", "clat")}
    for direction in ("read", "write"):
        assert sum(bins[(direction, "clat")].values()) == sum(j[direction]["clat_ns"]["N"] for j in jobs)
    total = latency_bins(
        (FIXTURES / "fio" / "buffered-randwrite.json").read_text()
    )  # run with lat_percentiles, as fslab runs fio
    assert {("write", "lat"), ("write", "clat")} <= set(total)
    older = latency_bins((FIXTURES / "fio" / "seqwrite-1m.json").read_text())
    assert ("write", "clat") in older and ("write", "lat") not in older and ("read", "clat") not in older
    [mixed] = cell_histograms(
        W,
        "ext4",
        [
            {("write", "lat"): ([1000], [1]), ("write", "clat"): ([900], [1])},
            {k: bin_columns(b) for k, b in older.items()},
        ],
    )
    assert mixed.latency == LATENCY_NAMES["clat"] and mixed.runs == 2, "one latency per cell: the one every run kept"
    assert sum(mixed.bins.values()) == 1 + sum(older[("write", "clat")].values())
    assert mixed.bins[900] == 1 + older[("write", "clat")].get("900", 0), (
        "bins keyed as fio writes them, in columns, added up"
    )
    assert list(mixed.bins) == sorted(mixed.bins), "in order of latency"
    assert all(isinstance(ns, str) for ns in older[("write", "clat")]), (
        "a run's bins as fio keys them: a report converts each cell's once"
    )
    for bad in ({"1000": 1.5}, {"1000": "1"}, {"1e3": 1}):  # never a count of a latency in ns as fio writes one
        document = json.loads((FIXTURES / "fio" / "buffered-randwrite.json").read_text())
        document["jobs"] = [
            {
                **document["jobs"][0],
                "write": {
                    **document["jobs"][0]["write"],
                    "clat_ns": {**document["jobs"][0]["write"]["clat_ns"], "bins": bad},
                },
            }
        ]  # one job: its bins as they are
        with pytest.raises(ValueError, match="write clat bins"):
            latency_bins(json.dumps(document))


def test_study_charts_are_named_apart_and_valid_vega_lite():
    s = synthetic(
        {"ext4": {"read_iops": [100, 104, 98]}, "raw": {"read_iops": [200, 210, 190]}}, targets=("ext4", "raw")
    )
    details = RunDetails(
        [LatencyHistogram(W, t, "read", "lat", {50_000: 5, 80_000: 5}, 3, source="bins") for t in ("ext4", "raw")],
        percentiles={W: PERCENTILE_METRICS},
    )
    made = study_charts(s, details)
    assert [c.name for c in made] == [
        "rand_read-read_iops",
        "rand_read-read-latency-distribution",
        "rand_read-efficiency",
    ]
    assert all(
        isinstance(c, Chart) and c.spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/v") for c in made
    )
    for c in made:
        TopLevelSpec.validate(c.spec)
    assert all(c.spec["width"] == chart_parts.WIDTH for c in made), (
        "figures are sized; the page fits them to their container"
    )


def test_figures_tell_of_each_chart_as_it_is_rendered(tmp_path):
    """What `fslab report --figures` shows its progress by: a call per chart rendered."""
    s = synthetic(
        {"ext4": {"read_iops": [100, 104, 98]}, "raw": {"read_iops": [200, 210, 190]}}, targets=("ext4", "raw")
    )
    made = [primary_chart(s, W, "read_iops"), efficiency_chart(s, W)]
    told: list[tuple[int, int]] = []
    written = write_figures(made, tmp_path / "figures", lambda done, total: told.append((done, total)))
    assert told == [(1, 2), (2, 2)]
    assert sorted(p.name for p in written) == sorted(
        f"{file_name(c.name)}.{ext}" for c in made for ext in ("svg", "png")
    )


@pytest.mark.slow  # processes started, vl-convert readied in each: seconds
def test_figures_are_drawn_by_processes_of_their_own_one_a_cpu_none_left_after(tmp_path):
    """vl-convert runs Vega in one thread a process: the figures are drawn by processes started
    for them, one a CPU (at most RENDERERS), and stopped once the figures are written."""
    s = synthetic(
        {"ext4": {"read_iops": [100, 104, 98]}, "raw": {"read_iops": [200, 210, 190]}}, targets=("ext4", "raw")
    )
    made = [
        replace(chart, name=f"{chart.name}-{i}")
        for i in range(3)
        for chart in (primary_chart(s, W, "read_iops"), efficiency_chart(s, W))
    ]
    drawing: list[int] = []
    written = write_figures(made, tmp_path, lambda done, total: drawing.append(len(multiprocessing.active_children())))
    assert drawing[0] == min(RENDERERS, len(os.sched_getaffinity(0))), (
        "the processes drawing, as the first figure is written"
    )
    assert multiprocessing.active_children() == [], "none left"
    assert len(written) == 2 * len(made) and all(p.stat().st_size > 1000 for p in written)


@pytest.mark.slow  # processes started, vl-convert readied in each: seconds
def test_a_chart_vega_cannot_draw_is_named_and_an_interruption_stops_the_drawing(tmp_path):
    s = synthetic(
        {"ext4": {"read_iops": [100, 104, 98]}, "raw": {"read_iops": [200, 210, 190]}}, targets=("ext4", "raw")
    )
    good = primary_chart(s, W, "read_iops")
    broken = Chart(
        "broken",
        W,
        "a chart of a broken expression",
        "",
        {"mark": "point", "data": {"values": [{"a": 1}]}, "transform": [{"calculate": "log(", "as": "x"}]},
    )
    with pytest.raises(
        FigureError,
        match=r"^chart 'a chart of a broken expression' could not be rendered: [^\n]*Error: Unexpected end of input$",
    ):
        write_figures([good, broken], tmp_path / "broken")
    assert multiprocessing.active_children() == []

    def interrupted(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_figures([replace(good, name=f"c{i}") for i in range(12)], tmp_path / "interrupted", interrupted)
    assert multiprocessing.active_children() == [], "stopped, with what they had not begun left undrawn"
    assert [p.name for p in (tmp_path / "interrupted").iterdir()] != [], (
        "the first figure, written before the interruption"
    )


# --- conclusions (pure) ------------------------------------------------------------------------


def rows_of(*pairs: tuple[list[float], list[float]], metric: str = "read_iops") -> list[Row]:
    """Rows of synthetic comparisons, corrected together as one family."""
    compared = adjust_family([compare(a, b, metric != "read_lat_p99_us", 0.03) for a, b in pairs], 0.03)
    return [Row(W, f"t{i}", "base", metric, c) for i, c in enumerate(compared)]


BASE = [100.0, 101.0, 99.0, 100.5, 99.5]
WORDS = re.compile(r"\b(faster|slower|leads|better than|worse than)\b")


def test_a_significant_difference_is_claimed():
    [said] = row_conclusions(rows_of((BASE, [130.0, 131.0, 129.0, 130.5, 129.5])), 0.03)
    assert said.claim and said.text == (
        "t0 against base in read IOPS: faster 1.30× (95 % CI 1.29–1.31×; beyond ±3 %; higher is better)."
    )


def test_no_significant_difference_is_never_called_faster():
    noisy = [90.0, 125.0, 100.0, 118.0, 95.0]  # higher on average, but not significantly
    steady = [100.0, 100.1, 99.9, 100.05, 99.95]
    small = [v * 1.01 for v in steady]  # 1 % higher, certain, below the 3 % threshold
    two_runs = [120.0, 160.0]
    said = row_conclusions(rows_of((BASE, noisy), (steady, small), (BASE, two_runs)), 0.03)
    assert not any(s.claim for s in said)
    for s in said:
        assert not WORDS.search(s.text), s.text
    assert ": undecided 1.05× (98.3 % CI 0.82–1.35× spans the threshold: ~" in said[0].text
    assert ": equivalent 1.01× (98.3 % CI 1.01–1.01×; within ±3 %; higher is better)." in said[1].text
    assert ": undecided 1.39× (2 runs: 98.3 % CI 0.0058–329.66× spans" in said[2].text


def test_a_leader_is_named_only_when_it_differs_from_every_other():
    alone = rank({"a": 3.0, "b": 2.0, "c": 1.0}, lambda x, y: "a" in (x, y))
    assert (
        ranking_conclusion(alone, "read_iops").claim
        and "a leads in read IOPS" in ranking_conclusion(alone, "read_iops").text
    )
    tied = rank({"a": 3.0, "b": 2.9, "c": 1.0}, lambda x, y: "c" in (x, y))
    said = ranking_conclusion(tied, "read_iops")
    assert (
        not said.claim and said.text == "No target leads in read IOPS: no verdict sets one of a, b ahead of the others."
    )


def test_conclusions_of_a_study_follow_its_verdicts():
    s = synthetic(
        {
            "ext4": {"read_iops": BASE},
            "xfs": {"read_iops": [v * 1.3 for v in BASE]},
            "raw": {"read_iops": [v * 1.005 for v in BASE]},
        }
    )
    said = conclusions(s)[W]
    claims = [c.text for c in said if c.claim]
    assert claims and all(WORDS.search(c) for c in claims)
    assert any(c.text.startswith("raw against ext4 in read IOPS: equivalent 1.00×") for c in said if not c.claim)
    assert not any("raw is" in c for c in claims)


# --- the page's tables and lines: the summary's sections (pure, a synthetic summary) ---------


def summary_of_every_section() -> StudySummary:
    """A synthetic summary with a section of every kind the page shows: its introduction, targets,
    a skipped one, a workload's table, comparisons and rankings, failed runs (one stored before
    runs recorded their phase)."""

    def cell(iops: list[float], p99: list[float]) -> dict[str, list[float]]:
        return {"read_iops": iops, "read_mb_s": [v / 256 for v in iops], "read_lat_p99_us": p99}

    s = synthetic(
        {
            "ext4": cell([100, 104, 98, 101], [90, 91, 92, 90]),
            "xfs": cell([150, 149, 152, 151], [80, 81, 79, 80]),
            "raw": cell([200, 210, 190, 205], [50, 52, 51, 50]),
        }
    )
    study_run = {
        "id": 1, "study": "synthetic", "status": "finished", "started_at": datetime(2026, 1, 2, 3, 4, 5),
        "finished_at": None, "plan_seed": 7, "repetitions": 4, "scale": 1.0, "study_path": "study.toml",
        "environment": {"kernel": "6.1", "tools": {"fio": "fio-3.33"}},
    }  # fmt: skip
    return replace(
        s, study_run=study_run,
        targets=[{**t, "spec": {"mkfs_options": [], "mount_options": "noatime"}, "tool_version": None}
                 for t in s.targets],
        failures=[FailedRun("xfs", W, 5, "", "mkfs failed"), FailedRun("xfs", W, 6, "provision", "mkfs failed")],
        skipped=[Unsupported("zfs", "no zfs module")],
    )  # fmt: skip


def test_the_page_lays_out_the_summarys_sections_and_follows_them(monkeypatch):
    """What a report shows is decided once (sections.py): the page's tables and lines are the
    sections' own (the failed runs in the page's words), and a section changed there is changed
    on the page, the page's own conclusions kept."""
    s = summary_of_every_section()
    walked = {section.kind: section for section in sections(s)}
    page = run_section(s, RunDetails())
    intro, targets, workload, comparison, failed = (
        walked[k]
        for k in (
            SectionKind.INTRO,
            SectionKind.TARGETS,
            SectionKind.WORKLOAD,
            SectionKind.COMPARISON,
            SectionKind.FAILURES,
        )
    )
    assert [*page.header, page.method] == intro.lines
    assert (page.targets.columns, page.targets.rows, page.skipped) == (
        targets.columns,
        targets.rows,
        walked[SectionKind.SKIPPED].lines,
    )
    [shown] = page.workloads
    assert (shown.title, shown.table.columns, shown.table.rows) == (workload.title, workload.columns, workload.rows)
    heading = f"Compared with {comparison.named}"
    assert [(h, t.columns, t.rows) for h, t in shown.comparisons] == [(heading, comparison.columns, comparison.rows)]
    assert shown.rankings == walked[SectionKind.RANKING].lines and shown.conclusions
    assert page.failures is not None and page.failures.columns == ["target", "workload", "run", "phase", "error"]
    assert (
        page.failures.rows
        == [["xfs", W, "5", "–", "mkfs failed"], ["xfs", W, "6", "provision", "mkfs failed"]]
        == [[*r[:3], r[3] or "–", r[4]] for r in failed.rows]
    )

    def changed(summary: StudySummary) -> list[Section]:
        """sections() with a workload's row fewer and a second comparison after its first."""
        out = []
        for section in sections(summary):
            out.append(replace(section, rows=section.rows[1:]) if section.kind is SectionKind.WORKLOAD else section)
            if section.kind is SectionKind.COMPARISON:
                out.append(replace(section, named="raw", rows=section.rows[::-1]))
        return out

    monkeypatch.setattr("fslab.report.html.sections", changed)
    [followed] = run_section(s, RunDetails()).workloads
    assert followed.table.rows == workload.rows[1:]
    compared = [(heading, comparison.rows), ("Compared with raw", comparison.rows[::-1])]
    assert [(h, t.rows) for h, t in followed.comparisons] == compared
    assert followed.conclusions == shown.conclusions


# --- the page as drawn: bar labels each in their own place -------------------------------------

MANY = tuple(f"{fs}[{options}]" for fs, options in (
    ("ext4", "barrier=0,data=writeback"), ("ext4", "commit=60,noatime"), ("xfs", "logbsize=256k,noatime"),
    ("xfs", "allocsize=64m"), ("btrfs", "compress=zstd:3,noatime"), ("btrfs", "nodatacow,noatime"),
    ("btrfs", "nodatasum,noatime"), ("btrfs", "autodefrag,datacow"), ("zfs", "recordsize=128k,atime=off"),
    ("zfs", "recordsize=4k,atime=off"), ("zfs", "compression=lz4"),
)) + ("raw",)  # fmt: skip


def overlapping(boxes: list[dict]) -> list[tuple[str, str]]:
    """Pairs of drawn labels whose boxes cross (by more than a pixel's rounding)."""
    return [
        (a["text"], b["text"])
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if min(a["right"], b["right"]) - max(a["left"], b["left"]) > 1
        and min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > 1
    ]


@pytest.mark.slow
def test_bar_labels_never_overlap_on_the_page_however_many_and_long(browser, tmp_path):
    """Twelve targets named as studies name them (options and all), every bar chart of a page
    drawn in Chromium on a desktop and a phone: no label of an axis crosses another."""
    phases = {"before.extents": [1, 1, 1], "after.extents": [40, 52, 45], "after.write_amplification": [1.1, 1.2, 1.5],
              "after.host_cpu_user_pct": [20, 22, 30], "after.host_cpu_system_pct": [5, 6, 7],
              "after.host_cpu_iowait_pct": [1, 2, 3]}  # fmt: skip
    s = synthetic(
        {t: {"read_iops": [100.0 + i, 104.0 + i, 98.0 + i], **phases} for i, t in enumerate(MANY)}, targets=MANY
    )
    made = [
        primary_chart(s, W, "read_iops"),
        efficiency_chart(s, W),
        cpu_chart(s, W),
        extents_chart(s, W),
        write_amplification_chart(s, W),
    ]
    section = WorkloadSection("w", W, [c for c in made if c], Table([], []), None, [], [], [], [], [])
    run = RunSection(
        id=1,
        anchor="run1",
        heading="labels",
        header=[],
        method="",
        threshold="3%",
        as_run=[],
        targets=Table([], []),
        skipped=[],
        environment=[],
        hosts=None,
        tools=Table([], []),
        devices=None,
        workloads=[section],
        failures=None,
        unreadable=[],
    )
    page_file = tmp_path / "report.html"
    page_file.write_text(render_page(Page(title="labels", runs=[run])))
    assert len(section.charts) == 5
    for width in (1280, 390):
        page = browser.new_page(viewport={"width": width, "height": 900})
        try:
            page.goto(page_file.as_uri())
            page.wait_for_selector("body[data-charts=done]", timeout=60_000)
            drawn = page.eval_on_selector_all(
                ".chart[data-chart]",
                """elements => elements.map(e => ({
                    name: e.dataset.chart,
                    axes: Array.from(e.querySelectorAll('.role-axis')).map(axis =>
                        Array.from(axis.querySelectorAll('.role-axis-label text')).map(t => {
                        const r = t.getBoundingClientRect();
                        return {text: t.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom};
                    })),
                }))""",
            )
        finally:
            page.close()
        assert len(drawn) == 5
        for chart in drawn:
            labels = max(chart["axes"], key=len)
            assert len(labels) >= len(MANY) - 1, f"{chart['name']}: every bar labelled"
            for axis in chart["axes"]:
                assert overlapping(axis) == [], f"{chart['name']} on a {width} px screen"


@pytest.mark.parametrize("closing", ["</SCRIPT>", "<!--"])
def test_a_bundle_that_would_close_its_script_element_is_refused(monkeypatch, tmp_path, closing):
    """The vega bundle is inlined in a <script> element: one holding a way out of it is never
    written into a page nor kept (made here and in the forked process alike: _made_and_kept)."""
    from fslab.core import cache
    from fslab.report import bundle

    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path)
    monkeypatch.setattr(bundle, "_HELD", [])
    monkeypatch.setattr(bundle.vl_convert, "javascript_bundle", lambda vl_version: f"var a = 1; {closing} alert(1)")
    with pytest.raises(bundle.BundleError, match="cannot be inlined"):
        bundle.vega_bundle()
    assert bundle._HELD == [] and list(tmp_path.iterdir()) == [], "nothing held, nothing kept"


def kept_bundle(cache_dir: Path) -> tuple[Path, dict]:
    """The one bundle kept in `cache_dir`, and its record."""
    [path] = cache_dir.iterdir()
    return path, json.loads(path.read_text())


def test_the_pages_javascript_is_kept_and_the_next_report_reads_it_starting_no_process(stored, tmp_path, monkeypatch):
    """vl-convert's bundle (a second of CPU, the same for one vl-convert and Vega-Lite) is kept in
    fslab's cache directory by the first report, under both versions with its SHA-256, and read
    by the next: no process is started to make it."""
    from fslab.core import cache
    from fslab.report import bundle

    root, db, _ = stored
    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(bundle, "_HELD", [])  # as a new process has it
    first = fslab_in_process("report", "2", "-o", "first", cwd=root, env={"FSLAB_DB": str(db)})
    assert first.returncode == 0, first.stdout + first.stderr
    path, record = kept_bundle(tmp_path / "cache")
    assert path.name == f"vega-bundle-vl-convert-{vl_convert.__version__}-vega-lite-{vega_lite()}.json"
    assert path.stat().st_mode & 0o777 == 0o644 and path.stat().st_uid == os.geteuid()
    assert record["bundle"] == vl_convert.javascript_bundle(vl_version=vega_lite())
    assert record["sha256"] == hashlib.sha256(record["bundle"].encode()).hexdigest()
    assert record["bundle"] in (root / "first" / "report.html").read_text()

    started: list[object] = []

    def no_process(*args, **kwargs):
        started.append(args)
        raise RuntimeError("a process started")

    monkeypatch.setattr(bundle, "_HELD", [])
    monkeypatch.setattr(bundle, "ProcessPoolExecutor", no_process)
    monkeypatch.setattr(bundle.vl_convert, "javascript_bundle", no_process)
    second = fslab_in_process("report", "2", "-o", "second", cwd=root, env={"FSLAB_DB": str(db)})
    assert second.returncode == 0 and started == [], second.stdout + second.stderr
    assert (root / "second" / "report.html").read_text() == (root / "first" / "report.html").read_text()


TAMPERED = "/* TAMPERED */ alert(1);"


@pytest.fixture(scope="module")
def kept_record(tmp_path_factory) -> str:
    """The file a report keeps its bundle in, as it writes it."""
    from fslab.core import cache
    from fslab.report import bundle

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cache, "CACHE_DIR", tmp_path_factory.mktemp("kept"))
        patch.setattr(bundle, "_HELD", [])
        bundle.vega_bundle()
        return kept_bundle(cache.CACHE_DIR)[0].read_text()


@pytest.mark.parametrize(
    "tamper",
    ["altered", "world-writable", "group-writable", "a symlink", "closing its script element", "another vl-convert's"],
)
def test_a_kept_bundle_not_fslabs_own_or_altered_is_never_served_but_made_and_kept_anew(
    stored, kept_record, tmp_path, monkeypatch, tamper
):
    """The bundle is inlined into a page: a kept one whose file is writable by others or is a
    symlink, whose bundle is not the one its SHA-256 was recorded of, that would close its script
    element or is of another version is not read; it is made again and kept anew, whole."""
    from fslab.core import cache
    from fslab.report import bundle

    root, db, _ = stored
    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    path = tmp_path / "cache" / f"vega-bundle-vl-convert-{vl_convert.__version__}-vega-lite-{vega_lite()}.json"
    record = json.loads(kept_record)
    made = record["bundle"]
    planted = made + ("</script><script>" if tamper == "closing its script element" else "") + TAMPERED
    record = record | {"bundle": planted, "sha256": hashlib.sha256(planted.encode()).hexdigest()}
    if tamper == "altered":
        record["sha256"] = hashlib.sha256(made.encode()).hexdigest()  # the bundle's own, as recorded
    if tamper == "another vl-convert's":
        record["vl_convert"] = "0.1.0"
    if tamper == "a symlink":
        elsewhere = tmp_path / "elsewhere.json"
        elsewhere.write_text(json.dumps(record))
        path.symlink_to(elsewhere)
    else:
        path.write_text(json.dumps(record))
        path.chmod({"world-writable": 0o666, "group-writable": 0o664}.get(tamper, 0o644))

    monkeypatch.setattr(bundle, "_HELD", [])
    again = fslab_in_process("report", "2", "-o", "again", cwd=root, env={"FSLAB_DB": str(db)})
    assert again.returncode == 0, again.stdout + again.stderr
    page = (root / "again" / "report.html").read_text()
    assert "TAMPERED" not in page and made in page, "made again, not served"
    path, record = kept_bundle(tmp_path / "cache")
    assert not path.is_symlink() and path.stat().st_mode & 0o777 == 0o644, "kept anew, whole"
    assert (
        record["bundle"] == made
        and record["sha256"] == hashlib.sha256(made.encode()).hexdigest()
        and record["vl_convert"] == vl_convert.__version__
    )
