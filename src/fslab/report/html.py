"""The report page: one self-contained HTML file that works offline. Its tables are the summary's
own rows (sections.py: the same figures the console and the Markdown show), its charts the specs of
charts.py embedded as JSON and drawn by Vega-Lite, whose JavaScript (vega, vega-lite, vega-embed:
vl_convert.javascript_bundle) is inlined once. No script, style, font or image is fetched: the page
also forbids every request itself (Content-Security-Policy).

Every text from a study run (names, options, job files, tool output) is escaped (jinja2 autoescape);
JSON inside a script element has its <, > and & escaped, so no text closes the element.
"""

from __future__ import annotations

import json
import multiprocessing
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

import jinja2
import vl_convert
from markupsafe import Markup, escape

from fslab import __version__
from fslab.analysis import Row
from fslab.errors import FslabError
from fslab.guard.names import file_name
from fslab.report.charts import Chart, comparison_chart, study_charts
from fslab.report.conclusions import Conclusion, conclusions
from fslab.report.details import RunDetails
from fslab.report.figures import vega_lite
from fslab.report.sections import (
    COMPARISON_COLUMNS,
    TARGET_COLUMNS,
    compare_left_out_line,
    comparison_groups,
    comparison_rows,
    header_lines,
    method_line,
    monitor_table,
    ranking_lines,
    repetitions_line,
    scale_text,
    skipped_lines,
    target_rows,
    workload_table,
    workload_title,
)
from fslab.report.summary import StudySummary
from fslab.units import format_size

TEMPLATES = Path(__file__).parent / "templates"
VERDICT_CLASS = {"faster": "faster", "slower": "slower"}  # rows coloured only where a difference is significant
DEVICE_FACTS = ["device", "kind", "size", "model", "serial", "firmware", "rotational", "logical_sector", "physical_sector", "scheduler", "nr_requests", "queue_depth", "discard", "backing_file"]


class ReportError(FslabError):
    pass


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[list[str]]
    row_classes: list[str] = field(default_factory=list)  # a CSS class per row, "" for none


@dataclass(frozen=True)
class WorkloadSection:
    anchor: str
    title: str
    charts: list[Chart]
    table: Table
    monitors: Table | None
    comparisons: list[tuple[str, Table]]  # baseline → each target against it
    rankings: list[str]
    found: list[tuple[str, str]]  # target → what was found of its runs (served by a cache, implausible figures, …)
    conclusions: list[Conclusion]
    job_files: list[tuple[str, str]]  # target → the exact job file its first measured run ran


@dataclass(frozen=True)
class RunSection:
    """One study run as the page shows it."""

    id: int
    anchor: str
    heading: str
    header: list[str]  # the summary's header lines (with **bold**)
    method: str
    threshold: str  # "3%"
    as_run: list[tuple[str, str]]  # repetitions, order seed, scale, …
    targets: Table
    skipped: list[str]
    environment: list[tuple[str, str]]
    tools: Table
    devices: Table | None
    workloads: list[WorkloadSection]
    failures: Table | None
    unreadable: list[str]


@dataclass(frozen=True)
class ComparisonSection:
    """Two study runs of one study, cell by cell (`fslab compare`'s rows)."""

    anchor: str
    heading: str
    environment: Table | None  # what differs; None when nothing does
    chart: Chart | None
    table: Table
    regressions: list[str]
    left_out: str | None = None  # the cells flagged in either study run, which it does not compare


@dataclass(frozen=True)
class Page:
    title: str
    runs: list[RunSection]
    comparisons: list[ComparisonSection] = field(default_factory=list)

    @property
    def charts(self) -> list[Chart]:
        return [c for s in self.comparisons if s.chart for c in [s.chart]] + [c for r in self.runs for w in r.workloads for c in w.charts]


def run_section(s: StudySummary, details: RunDetails, chart_prefix: str = "") -> RunSection:
    """A study run's part of a page: the study as run, its machine, then each workload. A page
    of several study runs tells their charts apart by `chart_prefix`."""
    sr = s.study_run
    charts = [replace(c, name=chart_prefix + c.name) for c in study_charts(s, details)]
    said = conclusions(s)
    workloads = [
        WorkloadSection(
            anchor=f"run{sr['id']}-{file_name(w)}",
            title=workload_title(s, w),
            charts=[c for c in charts if c.workload == w],
            table=Table(*workload_table(s, w)),
            monitors=Table(*monitored) if (monitored := monitor_table(s, w)) else None,
            comparisons=[(baseline, _verdict_table(COMPARISON_COLUMNS, comparison_rows(rows))) for baseline, rows in comparison_groups(s.analysis.rows_of(w))],
            rankings=ranking_lines(s, w),
            found=[(c.target, note) for c in s.cells_of(w) for note in c.notes],
            conclusions=said[w],
            job_files=[(t["name"], details.job_files[(w, t["name"])]) for t in s.targets if (w, t["name"]) in details.job_files],
        )
        for w in s.workloads
    ]
    rows = target_rows(s)
    failures = Table(["target", "workload", "run", "phase", "error"], [[f.target, f.workload, str(f.repetition), f.phase or "–", f.error] for f in s.failures]) if s.failures else None
    return RunSection(
        id=sr["id"],
        anchor=f"run{sr['id']}",
        heading=f"{sr['study']} — study run {sr['id']}",
        header=header_lines(s),
        method=method_line(s),
        threshold=f"{s.analysis.threshold:.0%}",
        as_run=[
            ("status", sr["status"]),
            ("started", f"{sr['started_at']:%Y-%m-%d %H:%M:%S} UTC"),
            ("finished", f"{sr['finished_at']:%Y-%m-%d %H:%M:%S} UTC" if sr.get("finished_at") else "–"),
            ("repetitions", repetitions_line(s)),
            ("order seed", str(sr["plan_seed"])),
            ("scale", scale_text(s)),
            ("bandwidth", s.units.describe()),
            ("threshold", f"{s.analysis.threshold:.0%}: the smallest change called faster or slower"),
            ("study file", sr["study_path"]),
        ],
        targets=Table(TARGET_COLUMNS, rows, ["not-in-effect" if row[TARGET_COLUMNS.index("NOT in effect")] != "–" else "" for row in rows]),
        skipped=skipped_lines(s),
        environment=_environment(sr["environment"]),
        tools=Table(["tool", "version"], [[name, version or "not found"] for name, version in sorted((sr["environment"].get("tools") or {}).items())]),
        devices=_devices(details.devices),
        workloads=workloads,
        failures=failures,
        unreadable=details.unreadable,
    )


def comparison_section(
    older: dict, newer: dict, rows: list[Row], regressed: list[Row], environment: list[tuple[str, object, object]], left_out: Sequence[tuple[str, str]] = ()
) -> ComparisonSection:
    """`fslab compare`'s rows of two study runs as a part of the page, and the cells it left out."""
    return ComparisonSection(
        anchor=f"compare{older['id']}-{newer['id']}",
        heading=f"Study run {newer['id']} against study run {older['id']}",
        environment=Table(["environment", f"study run {older['id']}", f"study run {newer['id']}"], [[k, str(a), str(b)] for k, a, b in environment]) if environment else None,
        chart=comparison_chart(rows, older["id"], newer["id"]),
        table=_verdict_table(["workload", *COMPARISON_COLUMNS], [[r.workload, *cells] for r, cells in zip(rows, comparison_rows(rows))]),
        regressions=[f"{r.target} · {r.workload} · {r.metric}: ×{r.comparison.ratio:.3f}" for r in regressed],
        left_out=compare_left_out_line(left_out),
    )


def render_page(page: Page, vega_bundle: Callable[[], str] | None = None) -> str:
    """The whole page as one HTML document (`vega_bundle`: vega_bundle_meanwhile's, if begun)."""
    specs = {c.name: _fitted(c.spec) for c in page.charts}
    if len(specs) != len(page.charts):
        raise ReportError("two charts of the report share a name: " + ", ".join(sorted({c.name for c in page.charts if [d.name for d in page.charts].count(c.name) > 1})))
    return _environment_of_templates().get_template("report.html.j2").render(
        page=page, specs=_script_json(specs), vega_script=Markup((vega_bundle or _vega_bundle)()), fslab_version=__version__,
    )


def _environment_of_templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["emphasis"] = emphasis
    env.filters["chart_id"] = lambda name: "chart-" + file_name(name)
    return env


def emphasis(text: str) -> Markup:
    """A summary line as HTML: escaped, its **bold** kept as bold."""
    return Markup(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", str(escape(text))))


@contextmanager
def vega_bundle_meanwhile() -> Iterator[Callable[[], str]]:
    """vl-convert's bundle (_vega_bundle) made in a process of its own while the caller builds the
    page, given by the function yielded: it takes a second, holding the interpreter throughout,
    which a second CPU can spend instead. The process is forked before the bundle is asked for:
    it inherits nothing running."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork")) as pool:
        made = pool.submit(_vega_bundle)
        yield made.result


@cache
def _vega_bundle() -> str:
    """vega, vega-lite and vega-embed as one script (vl-convert's own bundle), once per process.
    It goes inside a <script> element, which nothing may close early."""
    bundle = vl_convert.javascript_bundle(vl_version=vega_lite())
    if re.search(r"</script|<!--", bundle, re.IGNORECASE):
        raise ReportError(f"vl-convert-python {vl_convert.__version__}'s JavaScript bundle holds '</script' or '<!--' and cannot be inlined; report this to fslab")
    return bundle


def _script_json(value: object) -> Markup:
    """JSON to place inside a <script> element: <, > and & as JSON escapes, so no string in it
    (a target's name, a title) can end the element or open a comment."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return Markup(text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _fitted(spec: dict) -> dict:
    """A figure's spec as the page draws it: as wide as its container (phones included)."""
    return spec | {"width": "container", "autosize": {"type": "fit-x", "contains": "padding"}}


def _verdict_table(columns: list[str], rows: list[list[str]]) -> Table:
    verdict = columns.index("verdict")
    return Table(columns, rows, [VERDICT_CLASS.get(row[verdict], "") for row in rows])


def _environment(env: dict) -> list[tuple[str, str]]:
    images = env.get("image_directory") or {}
    return [
        ("kernel", f"{env.get('kernel', '–')} ({env.get('kernel_build', '–')})"),
        ("distribution", str(env.get("distribution", "–"))),
        ("CPU", f"{env.get('cpu_model', '–')} × {env.get('cpu_count', '–')}"),
        ("memory", format_size(int(env.get("memory_bytes") or 0))),
        ("loop images on", f"{images.get('fstype', '–')} ({images.get('source', '–')}) at {images.get('path', '–')}"),
        ("fslab", str(env.get("fslab", "–"))),
        ("Python", str(env.get("python", "–"))),
    ]


def _devices(devices: dict[str, list[dict]]) -> Table | None:
    rows = [[target, *(_fact(name, facts.get(name)) for name in DEVICE_FACTS)] for target, each in devices.items() for facts in each]
    return Table(["target", *(name.replace("_", " ") for name in DEVICE_FACTS)], rows) if rows else None


def _fact(name: str, value: object) -> str:
    if value is None:
        return "–"
    if name == "size" and isinstance(value, int):
        return format_size(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
