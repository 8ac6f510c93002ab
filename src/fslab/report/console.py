"""The summary as rich tables in the terminal."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table

from fslab.report.summary import COLUMNS, StudySummary, header_lines, table_rows


def print_summary(console: Console, s: StudySummary) -> None:
    for line in header_lines(s):
        console.print(Markdown(line))
    for workload in s.workloads:
        io_mode = "buffered I/O" if workload in s.buffered else "direct I/O"
        table = Table(title=f"{workload} ({io_mode})", title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, padding=(0, 1))
        for i, column in enumerate(COLUMNS):
            table.add_column(column, justify="left" if i < 2 else "right", no_wrap=i == 0)
        for cell in s.cells_of(workload):
            for row in table_rows(cell):
                table.add_row(*row)
        console.print(table)
    if s.failures:
        console.print(f"[red]{len(s.failures)} run(s) failed:[/red]")
        for f in s.failures:
            console.print(f"  {f['target']} · {f['workload']} · run {f['repetition']}: {f['error']}", markup=False)
