"""The report page: one self-contained HTML file that works offline. It lays out the summary's
sections (sections.py: the tables and lines the console and the Markdown show), each workload's
in their order, adding its own conclusions, job files and devices, and its charts: the specs of
charts.py embedded as JSON and drawn by Vega-Lite, whose JavaScript (vega, vega-lite, vega-embed:
vl-convert's bundle, kept on disk: bundle.py) is inlined once. No script, style, font or image is fetched: the page
also forbids every request itself (Content-Security-Policy).

Every text from a study run (names, options, job files, tool output) is escaped (jinja2 autoescape);
JSON inside a script element has its <, > and & escaped, so no text closes the element.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jinja2
import orjson
from markupsafe import Markup, escape

from fslab import version
from fslab.core.errors import FslabError
from fslab.core.names import file_name
from fslab.core.units import format_size
from fslab.model import Host
from fslab.report import bundle
from fslab.report.chart_parts import Chart
from fslab.report.charts import comparison_chart, forest_chart, study_charts
from fslab.report.conclusions import Conclusion, conclusions
from fslab.report.console import TEXT_COLUMNS
from fslab.report.details import RunDetails
from fslab.report.forest import counted_lines, explained_lines, forest_of, heading
from fslab.report.formatting import explained_phrase, metric_label
from fslab.report.sections import (
    compare_left_out_line,
    compare_method_line,
    comparison_columns,
    comparison_rows,
    repetitions_line,
    scale_text,
    sections,
)
from fslab.report.summary import StudySummary
from fslab.report.view import VERDICT_COLUMN, Section, SectionKind
from fslab.statistics.analysis import Row
from fslab.statistics.timing import EMULATED

TEMPLATES = Path(__file__).parent / "templates"
# rows coloured where a difference is decided, and where the two are decided the same; the word says it in every row
VERDICT_CLASS = {"faster": "faster", "slower": "slower", "equivalent": "equivalent"}
DEVICE_FACTS = [
    "device",
    "kind",
    "size",
    "model",
    "serial",
    "firmware",
    "rotational",
    "logical_sector",
    "physical_sector",
    "scheduler",
    "nr_requests",
    "queue_depth",
    "discard",
    "backing_file",
]


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
    comparisons: list[tuple[str, Table]]  # its heading ("Compared with ext4") → each target against it
    rankings: list[str]
    found: list[tuple[str, str]]  # target → what was found of its runs (served by a cache, implausible figures, …)
    conclusions: list[Conclusion]
    job_files: list[tuple[str, str]]  # target → the exact job file its first measured run ran


@dataclass(frozen=True)
class Glance:
    """The main comparisons at a glance (forest.py): those decided faster or slower drawn as a
    forest plot, the equivalent and the undecided counted, each count opening to its list."""

    heading: str  # "3 of 12 main comparisons faster or slower, largest effect first"
    chart: Chart | None  # the forest plot; None when none is decided faster or slower
    counted: list[tuple[str, list[str]]]  # "12 equivalent within ±3 %" → each one, worded (verdict_phrase)
    explained: list[str] = field(default_factory=list)  # beside each decided one drawn, its explanation


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
    hosts: Table | None  # each host's facts, where the runs span several
    tools: Table
    devices: Table | None
    workloads: list[WorkloadSection]
    failures: Table | None
    unreadable: list[str]
    glance: Glance | None = None  # none: no main comparison


@dataclass(frozen=True)
class ComparisonSection:
    """Two study runs of one study, cell by cell (`fslab compare`'s rows)."""

    anchor: str
    heading: str
    environment: Table | None  # what differs; None when nothing does
    chart: Chart | None
    table: Table
    regressions: list[str]
    method: str  # how its cells were judged (sections.compare_method_line)
    left_out: str | None = None  # the cells flagged in either study run, which it does not compare


@dataclass(frozen=True)
class Page:
    title: str
    runs: list[RunSection]
    comparisons: list[ComparisonSection] = field(default_factory=list)

    @property
    def charts(self) -> list[Chart]:
        return (
            [c for s in self.comparisons if s.chart for c in [s.chart]]
            + [c for r in self.runs if r.glance and r.glance.chart for c in [r.glance.chart]]
            + [c for r in self.runs for w in r.workloads for c in w.charts]
        )


def run_section(s: StudySummary, details: RunDetails, chart_prefix: str = "") -> RunSection:
    """A study run's part of a page: the summary's sections (sections.py: what every format shows,
    in order) laid out as a page — the study as run, its machine, then each workload — with the
    page's own charts, conclusions, job files and devices. A page of several study runs tells
    their charts apart by `chart_prefix`."""
    sr = s.study_run
    header: list[str] = []
    method = ""
    targets = Table([], [])
    skipped: list[str] = []
    failures: Table | None = None
    of_workload: dict[str, list[Section]] = {}
    for section in sections(s):
        match section.kind:
            case SectionKind.INTRO:
                *header, method = section.lines  # the method closes the page, under its own heading
            case SectionKind.TARGETS:
                at = section.columns.index("NOT in effect")
                targets = Table(
                    section.columns, section.rows, ["not-in-effect" if row[at] != "–" else "" for row in section.rows]
                )
            case SectionKind.SKIPPED:
                skipped = section.lines
            case SectionKind.OVERVIEW:
                pass  # its figures are the workloads' tables' own, laid out for a paper
            case SectionKind.FAILURES:
                failures = _failures(section)
            case _:
                of_workload.setdefault(section.workload, []).append(section)
    charts = [replace(c, name=chart_prefix + c.name) for c in study_charts(s, details)]
    said = conclusions(s)
    glance = forest_of(s)
    return RunSection(
        id=sr["id"],
        anchor=f"run{sr['id']}",
        heading=f"{sr['study']} — study run {sr['id']}",
        header=header,
        method=method,
        threshold=f"{s.analysis.threshold:.0%}",
        as_run=[
            ("status", sr["status"]),
            ("started", f"{sr['started_at']:%Y-%m-%d %H:%M:%S} UTC"),
            ("finished", f"{sr['finished_at']:%Y-%m-%d %H:%M:%S} UTC" if sr.get("finished_at") else "–"),
            ("repetitions", repetitions_line(s)),
            ("order seed", str(sr["plan_seed"])),
            ("scale", scale_text(s)),
            ("bandwidth", s.units.describe()),
            (
                "threshold",
                f"{s.analysis.threshold:.0%}: the smallest change called faster or slower, the margin of equivalent",
            ),
            ("study file", sr["study_path"]),
        ],
        targets=targets,
        skipped=skipped,
        environment=_environment(sr["environment"]),
        hosts=_hosts(s),
        tools=Table(
            ["tool", "version"],
            [
                [name, version or "not found"]
                for name, version in sorted((sr["environment"].get("tools") or {}).items())
            ],
        ),
        devices=_devices(details.devices),
        workloads=[_workload_section(s, w, its, charts, said[w], details) for w, its in of_workload.items()],
        failures=failures,
        unreadable=details.unreadable,
        glance=None
        if glance.empty
        else Glance(
            heading(glance),
            forest_chart(glance, chart_prefix + "forest"),
            counted_lines(glance),
            explained_lines(glance),
        ),
    )


def _workload_section(
    s: StudySummary, workload: str, its: list[Section], charts: list[Chart], said: list[Conclusion], details: RunDetails
) -> WorkloadSection:
    """A workload's sections (its table, its monitors', its comparisons, its rankings) with what
    the page adds: its charts (of the study run's), what was found of its runs, its conclusions
    and job files."""
    title, table = "", Table([], [])
    monitors: Table | None = None
    comparisons: list[tuple[str, Table]] = []
    rankings: list[str] = []
    for section in its:
        match section.kind:
            case SectionKind.WORKLOAD:
                title, table = section.title, Table(section.columns, section.rows)
            case SectionKind.MONITORS:
                monitors = Table(section.columns, section.rows)
            case SectionKind.COMPARISON:
                comparisons.append((f"{section.title} {section.named}", _verdict_table(section.columns, section.rows)))
            case SectionKind.RANKING:
                rankings = section.lines
    return WorkloadSection(
        anchor=f"run{s.study_run['id']}-{file_name(workload)}",
        title=title,
        charts=[c for c in charts if c.workload == workload],
        table=table,
        monitors=monitors,
        comparisons=comparisons,
        rankings=rankings,
        found=[(c.target, note) for c in s.cells_of(workload) for note in c.notes],
        conclusions=said,
        job_files=[
            (t["name"], details.job_files[(workload, t["name"])])
            for t in s.targets
            if (workload, t["name"]) in details.job_files
        ],
    )


def comparison_section(
    older: dict,
    newer: dict,
    rows: list[Row],
    regressed: list[Row],
    environment: list[tuple[str, object, object]],
    left_out: Sequence[tuple[str, str]] = (),
    *,
    threshold: float,
) -> ComparisonSection:
    """`fslab compare`'s rows of two study runs as a part of the page, and the cells it left out."""
    return ComparisonSection(
        anchor=f"compare{older['id']}-{newer['id']}",
        heading=f"Study run {newer['id']} against study run {older['id']}",
        environment=Table(
            ["environment", f"study run {older['id']}", f"study run {newer['id']}"],
            [[k, str(a), str(b)] for k, a, b in environment],
        )
        if environment
        else None,
        chart=comparison_chart(rows, older["id"], newer["id"]),
        table=_verdict_table(
            ["workload", *comparison_columns(rows)],
            [[r.workload, *cells] for r, cells in zip(rows, comparison_rows(rows))],
        ),
        regressions=[
            f"{r.target} · {r.workload} · {metric_label(r.metric)}: {explained_phrase(r.comparison, r.explanation)}"
            for r in regressed
        ],
        method=compare_method_line(rows, threshold),
        left_out=compare_left_out_line(left_out),
    )


def render_page(page: Any, vega_bundle: Callable[[], str] | None = None, template: str = "report.html.j2") -> str:
    """The whole page as one HTML document (`vega_bundle`: bundle.vega_bundle_meanwhile's, if begun):
    a Page by report.html.j2, or another page with a title and charts by its own `template`
    (the trend page's: trend_page.py)."""
    specs = {c.name: _fitted(c.spec) for c in page.charts}
    if len(specs) != len(page.charts):
        raise ReportError(
            "two charts of the report share a name: "
            + ", ".join(sorted({c.name for c in page.charts if [d.name for d in page.charts].count(c.name) > 1}))
        )
    return (
        _environment_of_templates()
        .get_template(template)
        .render(
            page=page,
            specs=_script_json(specs),
            vega_script=Markup((vega_bundle or bundle.vega_bundle)()),
            fslab_version=version(),
        )
    )


def _environment_of_templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["emphasis"] = emphasis
    env.filters["wrapped"] = wrapped
    env.filters["chart_id"] = lambda name: "chart-" + file_name(name)
    return env


PAGE_TEXT_COLUMNS = TEXT_COLUMNS | {"error", "version", "tool / engine"}  # the page's own tables' too


def wrapped(column: str, cell: str) -> bool:
    """Whether a table's cell (not its first column's) wraps at its spaces on the page, as the
    console wraps its tables: text does; a figure is kept whole, but for words in brackets after
    it ("21,945 (interval needs 3 runs)"), which would make its column as wide as they are long."""
    return column in PAGE_TEXT_COLUMNS or " (" in cell


def emphasis(text: str) -> Markup:
    """A summary line as HTML: escaped, its **bold** kept as bold."""
    return Markup(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", str(escape(text))))


def _script_json(value: object) -> Markup:
    """JSON to place inside a <script> element: <, > and & as JSON escapes, so no string in it
    (a target's name, a title) can end the element or open a comment. orjson: a page of 188
    charts is 4 MB of JSON, a tenth of a second of json's, a hundredth of orjson's."""
    text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    return Markup(
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _fitted(spec: dict) -> dict:
    """A figure's spec as the page draws it: its title above it, in the page's text; as wide as its
    container (phones included). A faceted chart keeps its plots' own width (Vega-Lite fits no
    facet to its container): it scrolls in its place."""
    spec = {k: v for k, v in spec.items() if k != "title"}  # above it: a chart's own is cut on a phone
    if "facet" in spec:
        return spec
    return spec | {"width": "container", "autosize": {"type": "fit-x", "contains": "padding"}}


def _verdict_table(columns: list[str], rows: list[list[str]]) -> Table:
    verdict = columns.index(VERDICT_COLUMN)
    return Table(columns, rows, [VERDICT_CLASS.get(row[verdict], "") for row in rows])


def _failures(section: Section) -> Table:
    """The failed runs as the page has always titled them: "run" for the repetition, "–" for a
    phase not recorded (a run stored before schema version 3)."""
    phase = section.columns.index("phase")
    return Table(
        ["run" if c == "repetition" else c for c in section.columns],
        [[(cell or "–") if i == phase else cell for i, cell in enumerate(row)] for row in section.rows],
    )


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


def _hosts(s: StudySummary) -> Table | None:
    """The hosts' facts (their devices are in the devices' table, by "target @ host"), how each ran
    its kernel among them: of several hosts, or of one that is a lab VM."""
    if len(s.hosts.names) < 2 and all(h.accelerator == "host" for h in s.host_facts):
        return None
    rows = [
        [
            h.name, h.kernel, _accelerator(h), f"{h.cpu_model} × {h.cpu_count}", format_size(h.memory_bytes),
            h.machine_id or "–",
        ]
        for h in s.host_facts
    ]  # fmt: skip
    return Table(["host", "kernel", "accelerator", "CPU", "memory", "machine id"], rows) if rows else None


def _accelerator(h: Host) -> str:
    """How a host ran its kernel, with its package and QEMU where a lab VM's; said when emulated."""
    said = h.accelerator + (f" ({EMULATED})" if h.emulated else "")
    made = [f"package {h.kernel_package}"] * bool(h.kernel_package) + [f"QEMU {h.qemu_version}"] * bool(h.qemu_version)
    return f"{said}; {', '.join(made)}" if made else said


def _devices(devices: dict[str, list[dict]]) -> Table | None:
    rows = [
        [target, *(_fact(name, facts.get(name)) for name in DEVICE_FACTS)]
        for target, each in devices.items()
        for facts in each
    ]
    return Table(["target", *(name.replace("_", " ") for name in DEVICE_FACTS)], rows) if rows else None


def _fact(name: str, value: object) -> str:
    if value is None:
        return "–"
    if name == "size" and isinstance(value, int):
        return format_size(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
