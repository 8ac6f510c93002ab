"""The summary in the terminal: tables laid out here (lay_out), printed through rich.

The table printer alone is what most commands need (fslab list, doctor, history): the summary's
sections (statistics, numpy) and rich's Markdown are imported by the functions that print a
summary or a comparison, so that a command printing neither starts without them."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.markup import escape
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from fslab.core.names import visible
from fslab.core.units import Bandwidth
from fslab.report.view import VERDICT_COLUMN, Section, SectionKind, SummaryView, table_columns
from fslab.statistics.timing import EMULATED

if TYPE_CHECKING:
    from fslab.model import Host
    from fslab.report.summary import StudySummary
    from fslab.statistics.analysis import Row

VERDICT_STYLE = {"faster": "green", "slower": "red"}

# The terminal the summary is made to fit. What does not fit is left out here, never from the
# report files (files.py), which the summary names.
CONSOLE_WIDTH = 120
LEFT_OUT = ("MB/s mean ± 95% CI", "MB/s CV", "lat p99.9", "mount options (effective)", "tool / engine")
LEFT_OUT_SAID = "the bandwidth's mean, interval and CV, p99.9 latency, the effective mount options and tool versions"
# Columns of sentences: each row's a marker, "(1)", the sentence printed once beneath the table —
# a comparison's why ("interval 0.89–1.10× spans the threshold: ~27 runs would decide") and a
# row's notes — so that every row stays on one line.
MARKED = ("why", "notes")
# A column with nothing in it is left out too, but for this one: its "–" says all is in effect.
SAID_WHEN_EMPTY = "NOT in effect"
# Columns of text, left-aligned; the rest are figures.
TEXT_COLUMNS = {
    "workload",
    "target",
    "dir",
    "metric",
    "phase",
    "verdict",
    "why",
    "notes",
    "unit",
    "filesystem",
    "devices → layers",
    "mkfs options",
    "requested",
    "NOT in effect",
}


def print_summary(
    console: Console, s: StudySummary, report: Path | None = None, shown: list[Section] | None = None
) -> None:
    """print_view of the summary's view (sections.summary_view); `shown`: sections(s), where the
    caller has them already (summary.md's too: formats.Source)."""
    from fslab.report.sections import summary_view

    print_view(console, summary_view(s, shown), report)


def print_view(console: Console, view: SummaryView, report: Path | None = None) -> None:
    """The summary's sections within CONSOLE_WIDTH columns, but the fio overview (the workloads'
    own tables show its figures), the main comparisons at a glance after its introduction;
    `report`: the file holding what it leaves out."""
    for section in view.sections:
        _print_section(console, section, view.units)
        if section.kind is SectionKind.INTRO:  # the summary opens with its conclusions at a glance
            for line in view.glance:
                console.print(visible(line), markup=False, highlight=False, soft_wrap=True)
    if report is not None:
        console.print(
            f"To fit {CONSOLE_WIDTH} columns the console leaves out {LEFT_OUT_SAID}: they are in {report}.",
            markup=False,
            highlight=False,
        )


def _print_section(console: Console, section: Section, units: Bandwidth) -> None:
    from rich.markdown import Markdown

    # a table's title in lower case, as a caption (a workload's is its name)
    title = (
        section.title
        if section.kind is SectionKind.WORKLOAD
        else section.title[:1].lower() + section.title[1:] + (f" {section.named}" if section.named else "")
    )
    match section.kind:
        case SectionKind.INTRO:
            for line in section.lines:
                console.print(Markdown(line))
        case SectionKind.TARGETS:
            at = section.columns.index("NOT in effect")
            _print_summary_table(
                console,
                title,
                section.columns,
                section.rows,
                units,
                styles=["yellow" if row[at] != "–" else "" for row in section.rows],
            )
        case SectionKind.SKIPPED:
            for i, line in enumerate(section.lines):
                console.print(("" if i == 0 else "  ") + visible(line), style="yellow", markup=False, highlight=False)
        case SectionKind.WORKLOAD:
            _print_summary_table(console, title, section.columns, section.rows, units)
        case SectionKind.MONITORS:
            _print_summary_table(console, title, section.columns, section.rows, units, title_style="")
        case SectionKind.COMPARISON:
            at = section.columns.index(VERDICT_COLUMN)
            _print_summary_table(
                console,
                title,
                section.columns,
                section.rows,
                units,
                styles=[VERDICT_STYLE.get(row[at], "") for row in section.rows],
                title_style="",
            )
        case SectionKind.RANKING:
            for line in section.lines:
                console.print(escape(line), highlight=False)
        case SectionKind.OVERVIEW:
            pass  # its figures are the workloads' tables' own, laid out for a paper
        case SectionKind.FAILURES:
            console.print(f"[red]{len(section.rows)} run(s) failed:[/red]")
            for target, workload, repetition, phase, error in section.rows:
                console.print(
                    f"  {target} · {workload} · run {repetition}"
                    + (f" (in {phase})" if phase else "")
                    + f": {visible(error)}",
                    markup=False,
                )


def _print_summary_table(
    console: Console,
    title: str,
    columns: list[str],
    rows: list[list[str]],
    units: Bandwidth,
    *,
    styles: list[str] | None = None,
    title_style: str = "bold",
) -> None:
    """A table as the console shows it: without the columns it leaves out and those with nothing
    in them; a direction common to every row said in the title; column titles on two lines; each
    row's notes (and a comparison's why) as a marker, the notes printed beneath, each once."""

    left_out = set(table_columns(units, list(LEFT_OUT)))
    shown = [
        i
        for i, c in enumerate(columns)
        if i == 0 or c == SAID_WHEN_EMPTY or (c not in left_out and any(row[i] not in ("–", "") for row in rows))
    ]
    directions = {row[columns.index("dir")] for row in rows} - {"–"} if "dir" in columns else set()
    if len(directions) == 1:
        title += f": {directions.pop()}"
        shown.remove(columns.index("dir"))
    rows, notes = marked(columns, rows, [columns[i] for i in shown])
    cells = [[row[i] for i in shown] for row in rows]
    print_table(
        console,
        title,
        [_two_lines(columns[i]) for i in shown],
        cells,
        [columns[i] not in TEXT_COLUMNS for i in shown],
        styles=styles,
        title_style=title_style,
    )
    for number, note in enumerate(notes, 1):
        console.print(f"  ({number}) {visible(note)}", markup=False, highlight=False)


def marked(
    columns: list[str], rows: list[list[str]], shown: list[str] | None = None
) -> tuple[list[list[str]], list[str]]:
    """The rows with each cell of a MARKED column (of those `shown`) as its marker, "(1)", and
    the sentences the markers stand for, each once, numbered across the columns in order."""
    notes: list[str] = []
    for at in (columns.index(c) for c in MARKED if c in columns and (shown is None or c in shown)):
        notes += [n for n in dict.fromkeys(row[at] for row in rows if row[at] not in ("–", "")) if n not in notes]
        rows = [
            [*row[:at], f"({notes.index(row[at]) + 1})" if row[at] in notes else "", *row[at + 1 :]] for row in rows
        ]
    return rows, notes


def print_marked_table(
    console: Console,
    title: str,
    columns: list[str],
    rows: list[list[str]],
    right: list[bool],
    *,
    styles: list[str] | None = None,
) -> None:
    """print_table's table with the sentences of its MARKED columns as markers, each printed
    once beneath it (a study's history: each step's why)."""
    rows, notes = marked(columns, rows)
    print_table(console, title, columns, rows, right, styles=styles)
    for number, note in enumerate(notes, 1):
        console.print(f"  ({number}) {visible(note)}", markup=False, highlight=False)


def _two_lines(title: str) -> str:
    """A column title broken at its space nearest the middle: the figures beneath, not the
    title, set the column's width."""
    spaces = [i for i, c in enumerate(title) if c == " "]
    if len(title) <= 6 or not spaces:
        return title
    at = min(spaces, key=lambda i: abs(i - len(title) / 2))
    return title[:at] + "\n" + title[at + 1 :]


def print_table(
    console: Console,
    title: str,
    columns: list[str],
    rows: list[list[str]],
    right: list[bool],
    *,
    styles: list[str] | None = None,
    title_style: str = "bold",
) -> None:
    """The one table printer: `columns` their titles (a line each "\\n"), `right` those of
    figures (right-aligned, never wrapped), `styles` a style for each row; title and text printed
    as they are, never read as markup (callers make control characters visible)."""
    # not cropped at the console's width: a table that cannot fit is printed whole
    console.print(table(title, columns, rows, right, styles=styles, title_style=title_style), crop=False)


def table(
    title: str,
    columns: list[str],
    rows: list[list[str]],
    right: list[bool],
    *,
    styles: list[str] | None = None,
    title_style: str = "bold",
) -> RenderableType:
    """print_table's table, for what shows it again and again (a live progress table)."""
    return _Table(Text(title, style=title_style), columns, rows, right, styles or [""] * len(rows))


@dataclass(frozen=True)
class LaidOut:
    """A table laid out: its columns' widths (the spaces between them not counted), and each
    line of the column titles and of each row as its cells' text, justified to its column's
    width; None for a cell's blank line beside a taller cell (rich prints it as one blank)."""

    widths: list[int]
    header: list[list[str | None]]
    rows: list[list[list[str | None]]]

    @property
    def width(self) -> int:
        return sum(self.widths) + 2 * (len(self.widths) - 1)

    def lines(self) -> list[str]:
        """As printed without colours: a rule under the column titles, two spaces between
        columns, every line as wide as the table."""
        return [
            *(_joined(self.widths, line) for line in self.header),
            "─" * self.width,
            *(_joined(self.widths, line) for row in self.rows for line in row),
        ]


def _joined(widths: list[int], line: list[str | None]) -> str:
    """A line of a table as printed without colours: its cells, two spaces between them."""
    return "  ".join(" " * width if cell is None else cell for width, cell in zip(widths, line))


def lay_out(columns: list[str], rows: list[list[str]], right: list[bool], width: int) -> LaidOut:
    """rich's Table as console.py used it (box.SIMPLE_HEAD without edges, padding collapsed to
    one space, none at the edges), laid out here because rich's Table takes milliseconds a table.
    Each column is as wide as its widest line. A table wider than `width` narrows its widest
    column, one column at a time, until it fits, wrapping text at spaces: its cells and every
    column title but the first column's. Figures and the first column are never wrapped, and
    nothing is cut: a table that cannot fit so is left as wide as it is, whole, for the
    terminal to wrap."""
    titles = [_lines(c) for c in columns]
    cells = [[_lines(cell) for cell in row] for row in rows]
    widths = [_widest(title, *(row[i] for row in cells)) for i, title in enumerate(titles)]
    excess = sum(widths) + 2 * (len(widths) - 1) - width
    if excess > 0:
        least = [
            widths[0],
            *(
                max(_widest(titles[i], wrapped=True), *(_widest(row[i], wrapped=not right[i]) for row in cells))
                for i in range(1, len(widths))
            ),
        ]
        if sum(widths) - sum(least) >= excess:
            for _ in range(excess):
                widths[max((i for i in range(len(widths)) if widths[i] > least[i]), key=widths.__getitem__)] -= 1
            titles = [title if i == 0 else _wrap(title, widths[i]) for i, title in enumerate(titles)]
            cells = [
                [cell if i == 0 or right[i] else _wrap(cell, widths[i]) for i, cell in enumerate(row)] for row in cells
            ]
    return LaidOut(
        widths, _aligned(titles, widths, right, top=False), [_aligned(row, widths, right, top=True) for row in cells]
    )


def _lines(text: str) -> list[str]:
    return text.expandtabs().split("\n")


def _widest(*cells: list[str], wrapped: bool = False) -> int:
    """The widest line of `cells`; its widest word if `wrapped`."""
    return max(
        cell_len(part) for lines in cells for line in lines for part in (line.split() if wrapped else [line]) or [""]
    )


WORD = re.compile(r"\s*\S+\s*")


def _wrap(lines: list[str], width: int) -> list[str]:
    """Each line broken at spaces into lines within `width` (rich's divide_line: a word and the
    spaces after it go to a new line when the word does not fit)."""
    out = []
    for line in lines:
        part = ""
        for word in WORD.findall(line):
            if part and cell_len(part) + cell_len(word.rstrip()) > width:
                out.append(part.rstrip())
                part = word
            else:
                part += word
        out.append(part or line)
    return out


def _aligned(cells: list[list[str]], widths: list[int], right: list[bool], *, top: bool) -> list[list[str | None]]:
    """Cells' lines side by side: each justified to its width, a shorter cell's blank lines below
    it in a row (`top`), above it in the column titles."""
    height = max(map(len, cells))
    columns = []
    for lines, width, is_right in zip(cells, widths, right):
        justified: list[str | None] = [
            " " * (width - cell_len(line.rstrip())) + line.rstrip()
            if is_right
            else line + " " * (width - cell_len(line))
            for line in lines
        ]
        blank: list[str | None] = [None] * (height - len(lines))
        columns.append(justified + blank if top else blank + justified)
    return [list(line) for line in zip(*columns)]


@dataclass(frozen=True)
class _Table:
    """A table as rich printed it, segment for segment: the title over the table's width, the
    column titles in the theme's header style, a row's style over its cells and the space after
    each, not over the space between columns."""

    title: Text
    columns: list[str]
    rows: list[list[str]]
    right: list[bool]
    styles: list[str]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        laid = lay_out(self.columns, self.rows, self.right, options.max_width)
        yield from console.render(
            self.title, options.update(width=laid.width, justify="left", highlight=False, height=None)
        )
        yield from _segments(laid.widths, laid.header, console.get_style("table.header"))
        yield Segment(("-" if options.ascii_only else "─") * laid.width)  # where the terminal's encoding has no "─"
        yield Segment.line()
        for lines, style in zip(laid.rows, self.styles):
            yield from _segments(laid.widths, lines, console.get_style(style))


def _segments(widths: list[int], lines: list[list[str | None]], style: Style) -> Iterator[Segment]:
    last = len(widths) - 1
    for line in lines:
        if not style:  # nothing styled: the line is one segment, as printed (rich renders a segment at a time)
            yield Segment(_joined(widths, line))
            yield Segment.line()
            continue
        for i, (width, cell) in enumerate(zip(widths, line)):
            if i == last:
                yield Segment(" " * width if cell is None else cell, style)
            elif cell is None:
                yield Segment(" " * (width + 1), style)
            else:
                yield Segment(cell, style)
                yield Segment(" ", style)
            if i < last:
                yield Segment(" ")
        yield Segment.line()


def print_comparison(
    console: Console,
    older: dict,
    newer: dict,
    rows: list[Row],
    regressed: list[Row],
    threshold: float,
    regression: float,
    left_out: Sequence[tuple[str, str]] = (),
) -> None:
    """Two study runs of one study: environments side by side, then every cell newer/older but
    those `left_out` (workload, target: flagged in either), which are named."""
    from fslab.model.records import imported_from

    console.print(
        f"Study [bold]{escape(older['study'])}[/bold]: study run {newer['id']} "
        f"({newer['started_at']:%Y-%m-%d %H:%M}) against {older['id']} ({older['started_at']:%Y-%m-%d %H:%M})",
        highlight=False,
    )
    imported = [sr for sr in (older, newer) if imported_from(sr)]
    changed = environment_differences(older["environment"], newer["environment"])
    if imported:  # its machine is not known: every fact of the other would show as differing
        fio = [sr["environment"].get("tools", {}).get("fio") for sr in (older, newer)]
        console.print(
            f"Study run {' and '.join(str(sr['id']) for sr in imported)} "
            "imported from fio's JSON (fslab import): the machine that measured "
            f"{'them' if len(imported) > 1 else 'it'} is not known. fio: {escape(str(fio[0]))} "
            f"(study run {older['id']}), {escape(str(fio[1]))} (study run {newer['id']}).",
            highlight=False,
        )
    elif changed:
        differences = [[visible(key), visible(str(a)), visible(str(b))] for key, a, b in changed]
        print_table(
            console,
            "what differs",
            ["environment", f"study run {older['id']}", f"study run {newer['id']}"],
            differences,
            [False] * 3,
            title_style="",
        )
    else:
        console.print("Same environment (kernel, distribution, CPU, memory, tool versions).")
    _print_compared(
        console, f"study run {newer['id']} / study run {older['id']}", rows, regressed, threshold, regression, left_out
    )


def print_host_comparison(
    console: Console,
    study_run: dict,
    older: Host,
    newer: Host,
    rows: list[Row],
    regressed: list[Row],
    threshold: float,
    regression: float,
    left_out: Sequence[tuple[str, str]] = (),
) -> None:
    """Two hosts of one study run (`fslab compare RUN --hosts A B`): their facts where they
    differ, then every cell newer/older (B/A) but those `left_out`, which are named."""
    console.print(
        f"Study [bold]{escape(study_run['study'])}[/bold], study run {study_run['id']}: "
        f"host {escape(newer.name)} against host {escape(older.name)}",
        highlight=False,
    )
    changed = [
        [key, visible(str(a)), visible(str(b))]
        for key, a, b in environment_differences(asdict(older), asdict(newer))
        if key != "name"
    ]
    if changed:
        print_table(
            console,
            "what differs",
            ["host", visible(older.name), visible(newer.name)],
            changed,
            [False] * 3,
            title_style="",
        )
    for host in (h for h in (older, newer) if h.emulated):
        console.print(
            f"{visible(host.name)} ran emulated: {EMULATED}; its figures of speed are compared with no host's",
            markup=False,
            highlight=False,
        )
    _print_compared(
        console, f"{visible(newer.name)} / {visible(older.name)}", rows, regressed, threshold, regression, left_out
    )


def _print_compared(
    console: Console,
    title: str,
    rows: list[Row],
    regressed: list[Row],
    threshold: float,
    regression: float,
    left_out: Sequence[tuple[str, str]],
) -> None:
    from fslab.report.formatting import explained_phrase, metric_label
    from fslab.report.sections import compare_left_out_line, compare_method_line, comparison_columns, comparison_rows

    columns = ["workload", *comparison_columns(rows)]
    cells = [[row.workload, *compared] for row, compared in zip(rows, comparison_rows(rows))]
    at = columns.index(VERDICT_COLUMN)
    _print_summary_table(
        console,
        title,
        columns,
        cells,
        Bandwidth.MB,
        styles=[VERDICT_STYLE.get(c[at], "") for c in cells],
        title_style="",
    )
    console.print(
        f"{compare_method_line(rows, threshold)} A regression is a 'slower' verdict by more than {regression:.0%}.",
        markup=False,
        highlight=False,
    )
    if said := compare_left_out_line(left_out):
        console.print(visible(said), markup=False, highlight=False)
    if regressed:
        console.print(
            f"[red]{len(regressed)} regression(s):[/red] "
            + escape(
                "; ".join(
                    f"{r.target} · {r.workload} · {metric_label(r.metric)}: "
                    + explained_phrase(r.comparison, r.explanation)
                    for r in regressed
                )
            ),
            highlight=False,
        )
    else:
        console.print("[green]no regression[/green]")


def environment_differences(a: dict, b: dict) -> list[tuple[str, object, object]]:
    """(key, a, b) for every environment fact that differs, nested facts as "tools.fio"."""
    flat_a, flat_b = _flatten(a), _flatten(b)
    return [
        (k, flat_a.get(k, "–"), flat_b.get(k, "–"))
        for k in sorted(flat_a.keys() | flat_b.keys())
        if flat_a.get(k) != flat_b.get(k) and not k.endswith(("free_bytes", "pages_shared"))  # counts, not settings
    ]


def _flatten(d: dict, prefix: str = "") -> dict:
    out: dict = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out |= _flatten(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out
