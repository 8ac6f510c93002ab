"""The docs' tables of what fslab has — the monitors' values, the report files, the tool kinds,
the built-in scenarios — list exactly what the registries hold: a table is read from the page
and held to the registry, so that an entry added (or renamed) without its line is caught."""

import re
from pathlib import Path

from fslab import monitors, workloads
from fslab.report.formats import report_files
from fslab.scenarios.phases import BUILTIN_SCENARIOS

DOCS = Path(__file__).parent.parent / "docs"


def first_column(document: str, header: str) -> list[str]:
    """The names in the first column of the table under `header` (its first line, as written):
    each `name` in backticks, several to a cell where a row is of several."""
    text = (DOCS / document).read_text()
    at = text.index(header + "\n")
    rows = []
    for line in text[at:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1])
    return [name for cell in rows for name in re.findall(r"`([^`]+)`", cell)]


MONITORS_TABLE = "| metric | unit | better | timing | what it is |"


def test_the_monitors_table_lists_every_value_a_monitor_reports():
    listed = first_column("monitors.md", MONITORS_TABLE)
    assert listed == [figure.name for figure in monitors.figures()]


def test_the_monitors_table_says_each_values_timing_class_as_its_monitor_declares_it():
    text = (DOCS / "monitors.md").read_text()
    rows = text[text.index(MONITORS_TABLE + "\n") :].splitlines()[2:]
    said = {}
    for row in rows:
        if not row.startswith("|"):
            break
        cells = row.split("|")
        said |= {name: cells[4].strip() for name in re.findall(r"`([^`]+)`", cells[1])}
    assert said == {figure.name: figure.timing for figure in monitors.figures()}


def test_the_report_files_table_lists_every_file_fslab_summary_writes():
    assert first_column("reports.md", "| file | what |") == [f.name for f in report_files()]


def test_the_scenarios_table_lists_every_built_in_scenario():
    assert first_column("study-format.md", "| `scenario` | phases |") == list(BUILTIN_SCENARIOS)


def test_the_tool_kinds_table_lists_every_kind_but_those_with_sections_of_their_own():
    listed = first_column("study-format.md", "| kind | measured | metrics (primary first) | data |")
    assert listed == [name for name in workloads.SHIPPED if name not in ("fio", "scenario")]
