"""The console's tables, laid out by console.py: the layout itself (pure), and its output against
what rich's Table printed for the same table (as console.py printed them before), byte for byte,
colours included, where the table fits the terminal; what it does where one does not."""

import io
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from conftest import FIXTURES
from fslab.report import console as console_module
from fslab.report.console import (
    CONSOLE_WIDTH,
    lay_out,
    print_comparison,
    print_summary,
    print_table,
)
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB

# cli/__init__.py's console when its output is piped; a terminal's, which wraps instead; and a terminal's
# told to soft-wrap: the title is wrapped and padded to the table's width by the second only.
MODES: dict[str, dict[str, Any]] = {
    "piped": {"soft_wrap": True},
    "terminal": {"force_terminal": True, "color_system": "256", "no_color": False},
    "terminal, soft wrap": {"force_terminal": True, "color_system": "256", "no_color": False, "soft_wrap": True},
}


def printed(show: Callable[[Console], None], width: int, mode: str) -> str:
    out = io.StringIO()
    console = Console(width=width, file=out, **MODES[mode])
    show(console)
    return out.getvalue()


def rich_printed(
    console: Console,
    title: str,
    columns: list[str],
    rows: list[list[str]],
    right: list[bool],
    *,
    styles: list[str] | None = None,
    title_style: str = "bold",
) -> None:
    """The table as console.py had rich's Table print it."""
    table = Table(
        title=escape(title),
        title_justify="left",
        title_style=title_style,
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        collapse_padding=True,
        pad_edge=False,
        show_edge=False,
    )
    for i, column in enumerate(columns):
        table.add_column(column, justify="right" if right[i] else "left", no_wrap=i == 0)
    for row, style in zip(rows, styles or [""] * len(rows)):
        table.add_row(*map(escape, row), style=style)
    console.print(table)


# --- the layout (pure) -----------------------------------------------------------------------


def test_columns_are_as_wide_as_their_widest_line_text_left_figures_right():
    laid = lay_out(
        ["target", "IOPS\nmedian", "notes"],
        [["ext4", "1,234", "(1)"], ["raw-reference", "56", ""]],
        [False, True, False],
        120,
    )
    assert laid.widths == [13, 6, 5]
    assert laid.lines() == [
        "                 IOPS       ",
        "target         median  notes",
        "────────────────────────────",
        "ext4            1,234  (1)  ",
        "raw-reference      56       ",
    ], "a one-line title at the bottom of the titles; two spaces between columns; every line as wide as the rule"


def test_a_taller_cell_leaves_blank_lines_below_the_others_and_text_is_measured_as_printed():
    laid = lay_out(
        ["target", "mkfs\noptions", "n"],
        [["ext4", "-O ^has_journal\n-E lazy_itable_init=0", "3"], ["ファイル", "a\tb", "10"]],
        [False, False, True],
        120,
    )
    assert laid.lines() == [
        "          mkfs                     ",
        "target    options                 n",
        "───────────────────────────────────",
        "ext4      -O ^has_journal         3",
        "          -E lazy_itable_init=0    ",
        "ファイル  a       b              10",
    ], "a wide character takes two columns; a tab its tab stop"
    assert laid.rows[0][1] == [None, "-E lazy_itable_init=0", None], (
        "the blanks beside a taller cell are marked: rich prints each as one"
    )


def test_a_table_too_wide_wraps_its_widest_text_column_at_words():
    columns, right = ["target", "mount options", "IOPS\nmedian"], [False, False, True]
    rows = [["ext4-writeback", "noatime data=writeback commit=60", "74,146"], ["raw", "defaults", "76,952"]]
    assert lay_out(columns, rows, right, 56).lines()[3] == "ext4-writeback  noatime data=writeback commit=60  74,146", (
        "56 columns: it fits"
    )
    assert lay_out(columns, rows, right, 40).lines() == [
        "                                    IOPS",
        "target          mount options     median",
        "────────────────────────────────────────",
        "ext4-writeback  noatime           74,146",
        "                data=writeback          ",
        "                commit=60               ",
        "raw             defaults          76,952",
    ]


def test_figures_keep_their_line_and_their_column_titles_wrap_at_words():
    laid = lay_out(["target", "CPU\nbusy %"], [["raw", "27.9"], ["ext4", "123.4"]], [False, True], 13)
    assert laid.lines() == [
        "          CPU",
        "         busy",
        "target      %",
        "─────────────",
        "raw      27.9",
        "ext4    123.4",
    ]


def test_a_figure_is_never_cut_a_table_that_cannot_fit_without_is_left_whole():
    """rich narrowed every column but the first alike and cut figures: at 45 columns
    "0.888–0.…" and "detectab…"."""
    columns, right = ["target", "metric", "95% CI", "detectable"], [False, False, True, True]
    rows = [["ext4-noatime", "read IOPS", "0.888–0.942", "±4.2%"]]
    assert lay_out(columns, rows, right, 45).lines() == [
        "target        metric       95% CI  detectable",
        "─────────────────────────────────────────────",
        "ext4-noatime  read    0.888–0.942       ±4.2%",
        "              IOPS                           ",
    ]
    whole = lay_out(columns, rows, right, 400)
    assert lay_out(columns, rows, right, 44) == whole, "44 columns: wrapping the metric is not enough"
    assert whole.lines()[-1] == "ext4-noatime  read IOPS  0.888–0.942       ±4.2%"
    out = printed(lambda console: print_table(console, "compared with raw", columns, rows, right), 44, "terminal")
    assert "\next4-noatime  read IOPS  0.888–0.942       ±4.2%\n" in out, (
        "printed whole, not cropped at the terminal's width: it wraps the line"
    )


# --- printed: as rich's Table printed it -----------------------------------------------------

TITLES = ["target", "filesystem", "requested", "IOPS\nmedian", "verdict"]
RIGHT = [False, False, False, True, False]
ROWS = [
    ["ext4-writeback", "ext4", "noatime", "74,146", "faster"],
    ["ファイル", "xfs", "[red]x[/red]", "1,234", "no detectable difference \\x1b[2J"],
    ["raw", "raw", "", "56", "slower"],
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("width", [CONSOLE_WIDTH, 72])
def test_a_table_prints_byte_for_byte_as_richs_table(mode, width):
    """At 72 columns the verdicts wrap, as rich wraps them."""

    def show(table: Callable[..., None]) -> Callable[[Console], None]:
        return lambda console: table(
            console, "rand_read (direct I/O; data: random)", TITLES, ROWS, RIGHT, styles=["green", "", "red"]
        )

    ours = printed(show(print_table), width, mode)
    assert ours == printed(show(rich_printed), width, mode)
    assert ("\x1b[32mext4-writeback" in ours) == (mode != "piped")
    assert ("no detectable difference" in ours) == (width == CONSOLE_WIDTH)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """schema-v4.db: a real study run, xfs and raw, a random read and a sequential write."""
    path = tmp_path_factory.mktemp("console") / "v4.db"
    shutil.copy(FIXTURES / "schema-v4.db", path)
    db = ResultsDB(str(path))
    return summarize_study_run(db, db.study_run()["id"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("width", [CONSOLE_WIDTH, 400])
def test_a_stored_study_runs_summary_prints_as_rich_printed_it(stored, mode, width, monkeypatch):
    def show(console: Console) -> None:
        print_summary(console, stored, report=Path("reports/v4-1/summary.md"))

    ours = printed(show, width, mode)
    monkeypatch.setattr(console_module, "print_table", rich_printed)
    assert ours == printed(show, width, mode)
    assert sum(set(line) == {"─"} for line in ours.splitlines()) == 5, (
        "the targets, and per workload its table and its comparison with xfs"
    )


def test_text_is_printed_as_it_is_never_read_as_markup():
    def show(console: Console) -> None:
        print_table(
            console,
            "[bold]title[/bold] :smile:",
            ["target", "notes"],
            [["[red]x[/red]", ":thumbs_up: [/]"]],
            [False, False],
            title_style="",
        )

    out = printed(show, CONSOLE_WIDTH, "terminal")
    assert "[bold]title[/bold] :smile:" in out and "[red]x[/red]  :thumbs_up: [/]" in out
    assert "\x1b[31m" not in out and "😄" not in out and "\x1b[1m[bold]" not in out


def test_the_comparisons_environment_table_goes_through_the_same_printer_its_values_made_visible():
    older = {
        "id": 1,
        "study": "reps",
        "started_at": datetime(2026, 1, 1, 9, 0),
        "environment": {"kernel": "6.1.0", "tools": {"fio": "fio-3.33"}},
        "settings": {},
    }
    newer = older | {"id": 2, "environment": {"kernel": "6.1.0\x1b[2J", "tools": {"fio": "fio-3.35"}}}
    out = printed(lambda console: print_comparison(console, older, newer, [], [], 0.03, 0.05), CONSOLE_WIDTH, "piped")
    assert out.splitlines()[1:6] == [
        "what differs",
        "environment  study run 1  study run 2 ",
        "──────────────────────────────────────",
        "kernel       6.1.0        6.1.0\\x1b[2J",
        "tools.fio    fio-3.33     fio-3.35    ",
    ]
