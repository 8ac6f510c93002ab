"""The summary as rich tables in the terminal."""

from __future__ import annotations

from pathlib import Path

from rich import box
from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table

from fslab.analysis import Row
from fslab.guard.names import visible
from fslab.importer import imported_from
from fslab.report.summary import (
    COMPARISON_COLUMNS,
    TARGET_COLUMNS,
    StudySummary,
    comparison_groups,
    comparison_rows,
    header_lines,
    method_line,
    metric_label,
    monitor_table,
    ranking_lines,
    skipped_lines,
    table_columns,
    target_rows,
    workload_table,
    workload_title,
)
from fslab.units import Bandwidth

VERDICT_STYLE = {"faster": "green", "slower": "red"}

# The terminal the summary is made to fit. What does not fit is left out here, never from the
# report files (files.py), which the summary names.
CONSOLE_WIDTH = 120
LEFT_OUT = ("MB/s mean ± 95% CI", "MB/s CV", "lat p99.9", "mount options (effective)", "tool / engine")
LEFT_OUT_SAID = "the bandwidth's mean, interval and CV, p99.9 latency, the effective mount options and tool versions"
# A column with nothing in it is left out too, but for this one: its "–" says all is in effect.
SAID_WHEN_EMPTY = "NOT in effect"
# Columns of text, left-aligned; the rest are figures.
TEXT_COLUMNS = {"workload", "target", "dir", "metric", "phase", "verdict", "notes", "unit", "filesystem", "devices → layers", "mkfs options", "requested", "NOT in effect"}


def print_summary(console: Console, s: StudySummary, report: Path | None = None) -> None:
    """The summary within CONSOLE_WIDTH columns; `report`: the file holding what it leaves out."""
    for line in [*header_lines(s), method_line(s)]:
        console.print(Markdown(line))
    rows = target_rows(s)
    _print_table(console, "targets", TARGET_COLUMNS, rows, s.units, styles=["yellow" if row[TARGET_COLUMNS.index("NOT in effect")] != "–" else "" for row in rows])
    for i, line in enumerate(skipped_lines(s)):
        console.print(("" if i == 0 else "  ") + visible(line), style="yellow", markup=False, highlight=False)
    for workload in s.workloads:
        _print_table(console, workload_title(s, workload), *workload_table(s, workload), s.units)
        monitored = monitor_table(s, workload)
        if monitored:
            _print_table(console, "measured beside it (monitors, medians)", *monitored, s.units, title_style="")
        for baseline, compared in comparison_groups(s.analysis.rows_of(workload)):
            rows = comparison_rows(compared)
            _print_table(console, f"compared with {baseline}", COMPARISON_COLUMNS, rows, s.units, styles=[VERDICT_STYLE.get(row[6], "") for row in rows], title_style="")
        for line in ranking_lines(s, workload):
            console.print(escape(line), highlight=False)
    if s.failures:
        console.print(f"[red]{len(s.failures)} run(s) failed:[/red]")
        for f in s.failures:
            console.print(f"  {f.target} · {f.workload} · run {f.repetition}" + (f" (in {f.phase})" if f.phase else "") + f": {visible(f.error or '')}", markup=False)
    if report is not None:
        console.print(f"To fit {CONSOLE_WIDTH} columns the console leaves out {LEFT_OUT_SAID}: they are in {report}.", markup=False, highlight=False)


def _print_table(console: Console, title: str, columns: list[str], rows: list[list[str]], units: Bandwidth, *, styles: list[str] | None = None, title_style: str = "bold") -> None:
    """A table as the console shows it: without the columns it leaves out and those with nothing
    in them; a direction common to every row said in the title; column titles on two lines; each
    row's notes as a marker, the notes printed beneath, each once."""
    left_out = set(table_columns(units, list(LEFT_OUT)))
    shown = [i for i, c in enumerate(columns) if i == 0 or c == SAID_WHEN_EMPTY or (c not in left_out and any(row[i] not in ("–", "") for row in rows))]
    directions = {row[columns.index("dir")] for row in rows} - {"–"} if "dir" in columns else set()
    if len(directions) == 1:
        title += f": {directions.pop()}"
        shown.remove(columns.index("dir"))
    notes: list[str] = []
    if "notes" in columns and columns.index("notes") in shown:
        at = columns.index("notes")
        notes = list(dict.fromkeys(row[at] for row in rows if row[at] not in ("–", "")))
        rows = [[*row[:at], f"({notes.index(row[at]) + 1})" if row[at] in notes else "", *row[at + 1:]] for row in rows]
    table = Table(title=escape(title), title_justify="left", title_style=title_style, box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True, pad_edge=False, show_edge=False)
    for i in shown:
        table.add_column(_two_lines(columns[i]), justify="left" if columns[i] in TEXT_COLUMNS else "right", no_wrap=i == 0)
    for row, style in zip(rows, styles or [""] * len(rows)):
        table.add_row(*[escape(row[i]) for i in shown], style=style)
    console.print(table)
    for number, note in enumerate(notes, 1):
        console.print(f"  ({number}) {visible(note)}", markup=False, highlight=False)


def _two_lines(title: str) -> str:
    """A column title broken at its space nearest the middle: the figures beneath, not the
    title, set the column's width."""
    spaces = [i for i, c in enumerate(title) if c == " "]
    if len(title) <= 6 or not spaces:
        return title
    at = min(spaces, key=lambda i: abs(i - len(title) / 2))
    return title[:at] + "\n" + title[at + 1:]


def print_comparison(console: Console, older: dict, newer: dict, rows: list[Row], regressed: list[Row], threshold: float, regression: float) -> None:
    """Two study runs of one study: environments side by side, then every cell newer/older."""
    console.print(f"Study [bold]{escape(older['study'])}[/bold]: study run {newer['id']} ({newer['started_at']:%Y-%m-%d %H:%M}) against {older['id']} ({older['started_at']:%Y-%m-%d %H:%M})", highlight=False)
    imported = [sr for sr in (older, newer) if imported_from(sr)]
    changed = environment_differences(older["environment"], newer["environment"])
    if imported:  # its machine is not known: every fact of the other would show as differing
        fio = [sr["environment"].get("tools", {}).get("fio") for sr in (older, newer)]
        console.print(
            f"Study run {' and '.join(str(sr['id']) for sr in imported)} imported from fio's JSON (fslab import): the machine that measured "
            f"{'them' if len(imported) > 1 else 'it'} is not known. fio: {escape(str(fio[0]))} (study run {older['id']}), {escape(str(fio[1]))} (study run {newer['id']}).",
            highlight=False,
        )
    elif changed:
        env = Table("environment", f"study run {older['id']}", f"study run {newer['id']}", box=box.SIMPLE_HEAD, title="what differs", title_justify="left")
        for key, a, b in changed:
            env.add_row(escape(key), escape(str(a)), escape(str(b)))
        console.print(env)
    else:
        console.print("Same environment (kernel, distribution, CPU, memory, tool versions).")
    cells = [[row.workload, *compared] for row, compared in zip(rows, comparison_rows(rows))]
    _print_table(console, f"study run {newer['id']} / study run {older['id']}", ["workload", *COMPARISON_COLUMNS], cells, Bandwidth.MB, styles=[VERDICT_STYLE.get(c[7], "") for c in cells], title_style="")
    console.print(
        f"Ratios of geometric means with 95 % Welch intervals on log values; verdicts need Benjamini–Hochberg-adjusted p < 0.05 over "
        f"{len(rows)} comparisons and a change above {threshold:.0%}. A regression is a 'slower' verdict by more than {regression:.0%}.",
        highlight=False,
    )
    if regressed:
        console.print(f"[red]{len(regressed)} regression(s):[/red] " + escape("; ".join(f"{r.target} · {r.workload} · {metric_label(r.metric)} ×{r.comparison.ratio:.3f}" for r in regressed)), highlight=False)
    else:
        console.print("[green]no regression[/green]")


def environment_differences(a: dict, b: dict) -> list[tuple[str, object, object]]:
    """(key, a, b) for every environment fact that differs, nested facts as "tools.fio"."""
    flat_a, flat_b = _flatten(a), _flatten(b)
    return [(k, flat_a.get(k, "–"), flat_b.get(k, "–")) for k in sorted(flat_a.keys() | flat_b.keys()) if flat_a.get(k) != flat_b.get(k) and not k.endswith("free_bytes")]


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out |= _flatten(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out
