"""The summary as rich tables in the terminal."""

from __future__ import annotations

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
    target_rows,
    workload_table,
    workload_title,
)

VERDICT_STYLE = {"faster": "green", "slower": "red"}


def print_summary(console: Console, s: StudySummary) -> None:
    for line in [*header_lines(s), method_line(s)]:
        console.print(Markdown(line))
    targets = Table(*TARGET_COLUMNS, title="targets", title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, padding=(0, 1))
    for row in target_rows(s):
        targets.add_row(*map(escape, row), style="yellow" if row[6] != "–" else "")
    console.print(targets)
    for i, line in enumerate(skipped_lines(s)):
        console.print(("" if i == 0 else "  ") + visible(line), style="yellow", markup=False, highlight=False)
    for workload in s.workloads:
        table = Table(title=escape(workload_title(s, workload)), title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, padding=(0, 1))
        columns, rows = workload_table(s, workload)
        for i, column in enumerate(columns):
            table.add_column(column, justify="left" if i < 2 else "right", no_wrap=i == 0)
        for row in rows:
            table.add_row(*map(escape, row))
        console.print(table)
        monitored = monitor_table(s, workload)
        if monitored:
            costs = Table(title="measured beside it (monitors, medians)", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
            for i, column in enumerate(monitored[0]):
                costs.add_column(column, justify="left" if i < 2 else "right", no_wrap=i == 0)
            for row in monitored[1]:
                costs.add_row(*map(escape, row))
            console.print(costs)
        for baseline, rows in comparison_groups(s.analysis.rows_of(workload)):
            versus = Table(title=f"compared with {escape(baseline)}", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1))
            for i, column in enumerate(COMPARISON_COLUMNS):
                versus.add_column(column, justify="left" if i in (0, 1, 6) else "right")
            for row in comparison_rows(rows):
                versus.add_row(*map(escape, row), style=VERDICT_STYLE.get(row[6], ""))
            console.print(versus)
        for line in ranking_lines(s, workload):
            console.print(escape(line), highlight=False)
    if s.failures:
        console.print(f"[red]{len(s.failures)} run(s) failed:[/red]")
        for f in s.failures:
            console.print(f"  {f.target} · {f.workload} · run {f.repetition}" + (f" (in {f.phase})" if f.phase else "") + f": {visible(f.error or '')}", markup=False)


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
    table = Table("workload", *COMPARISON_COLUMNS, box=box.SIMPLE_HEAD, padding=(0, 1), title=f"study run {newer['id']} / study run {older['id']}", title_justify="left")
    for row, cells in zip(rows, comparison_rows(rows)):
        table.add_row(escape(row.workload), *map(escape, cells), style=VERDICT_STYLE.get(cells[6], ""))
    console.print(table)
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
