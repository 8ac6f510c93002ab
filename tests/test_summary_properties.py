"""What a summary says of every stored fixture database, checked against the database itself
(sqlite3, not fslab's queries) and across its formats, whatever the study holds: every cell appears,
every flagged figure is marked and no other, and the numbers round-trip (the stored values' medians
in summary.json, summary.json's numbers in summary.csv whole and in summary.md and the console at
their precision, the comparisons' ratios and verdicts in their tables). Properties, not a golden
file: a filesystem, workload kind or metric added leaves these tests as they are (the layout of each
format: test_report_goldens.py). Each fixture is a database an older fslab wrote, migrated here by
`fslab summary` as a user's would be: a migration that lost or moved a value fails here."""

from __future__ import annotations

import csv
import io
import json
import re
import sqlite3
import statistics
from pathlib import Path

import pytest

from baseline import RENDERS, fixture_databases, rendered_once

FIXTURES = fixture_databases()
pytestmark = pytest.mark.xdist_group(RENDERS)
FLAG = "⚠"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, tuple[Path, dict[str, str]]]:
    """Each fixture's copy (migrated by `fslab summary`) and what was rendered of it."""
    return {fixture: rendered_once(fixture, lambda: tmp_path_factory.mktemp("rendered")) for fixture in FIXTURES}


def measured(db: Path) -> dict[tuple[str, str], dict[str, list[float]]]:
    """(target, workload) → metric → its values over the measured runs that succeeded, read with
    sqlite3 from the migrated database; a cell of failed runs only, with no metric."""
    cells: dict[tuple[str, str], dict[str, list[float]]] = {}
    with sqlite3.connect(db) as conn:
        for target, workload in conn.execute("SELECT DISTINCT target, workload FROM runs WHERE NOT warmup"):
            cells[(target, workload)] = {}
        query = """SELECT runs.target, runs.workload, metrics.phase, metrics.name, metrics.value
                   FROM runs JOIN metrics ON metrics.run_id = runs.id
                   WHERE runs.status = 'ok' AND NOT runs.warmup ORDER BY runs.id"""
        for target, workload, phase, name, value in conn.execute(query):
            key = f"{phase}.{name}" if phase else name
            cells[(target, workload)].setdefault(key, []).append(value)
    return cells


def sections(markdown: str) -> dict[str, str]:
    """summary.md's sections by heading (a workload's heading: its name, before its description)."""
    parts = re.split(r"^## (.+)$", markdown, flags=re.M)
    return {heading.split(" (")[0]: body for heading, body in zip(parts[1::2], parts[2::2])}


def tables(body: str) -> list[list[dict[str, str]]]:
    """Every Markdown table of a section, as rows keyed by column."""
    found, lines = [], body.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            columns = [c.strip() for c in line.strip("|").split(" | ")]
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                rows.append(dict(zip(columns, (c.strip() for c in row.strip().strip("|").split(" | ")))))
            found.append(rows)
    return found


def shows(text: str, value: float) -> bool:
    """Whether a printed figure (digits grouped, a ⚠, a latency's unit) is `value` at the precision printed."""
    number, _, unit = text.removeprefix(FLAG).strip().replace(",", "").partition(" ")
    scale = {"": 1, "µs": 1, "ms": 1e3, "s": 1e6}[unit]
    decimals = len(number.partition(".")[2])
    return abs(float(number) * scale - value) <= (0.5 * 10**-decimals + 1e-9) * scale


def console_table(console: str, workload: str, summary: dict) -> list[str]:
    """The lines of the console's table of a workload's figures (before what was measured beside it
    and the comparisons), from its heading to the next workload's."""
    workloads = {c["workload"] for c in summary["cells"]}
    lines = console.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{workload} ("))
    table = []
    for line in lines[start + 1 :]:
        if any(line.startswith(f"{w} (") for w in workloads) or line.startswith(("measured beside", "compared with")):
            break
        table.append(line)
    return table


def left_out(what: str, console: str) -> bool:
    """Whether the console says it leaves `what` out (to fit its width: summary.md has it)."""
    return any(line.startswith("To fit ") and what in line for line in console.splitlines())


def cells_of(summary: dict) -> dict[tuple[str, str], dict]:
    return {(c["target"], c["workload"]): c for c in summary["cells"]}


# --- every cell appears -----------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_cell_appears_in_every_format(rendered, fixture):
    every_cell_appears(*rendered[fixture])


def every_cell_appears(db: Path, files: dict[str, str]) -> None:
    cells = measured(db)
    summary = json.loads(files["summary.json"])
    assert set(cells_of(summary)) == set(cells), "summary.json: a cell for each target and workload run"
    with_figures = {cell for cell, metrics in cells.items() if metrics}
    assert {(r["target"], r["workload"]) for r in csv.DictReader(io.StringIO(files["summary.csv"]))} == with_figures
    by_workload = sections(files["summary.md"])
    console = files["console.txt"]
    for target, workload in cells:
        rows = [row for table in tables(by_workload[workload]) for row in table if row.get("target") == target]
        assert rows, f"summary.md: {target} in {workload}'s tables"
        assert any(line.startswith(f"{target} ") for line in console_table(console, workload, summary)), (
            f"console: {target} under {workload}"
        )
        page_section = files["page.txt"].split(f"section#run1-{workload}\n", 1)[1]
        assert f"tr: td {target} ¦" in page_section, f"the page: {target} in {workload}'s section"


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_target_shows_the_mount_options_its_runs_read_back(rendered, fixture):
    every_target_shows_its_read_back(*rendered[fixture])


def every_target_shows_its_read_back(db: Path, files: dict[str, str]) -> None:
    """Judged from what the runs stored, in a database of any schema (options_applied is stored
    from schema 9 on; before, the summary judges the read-back itself)."""
    with sqlite3.connect(db) as conn:
        read_back = dict(conn.execute("SELECT target, max(mount_options_effective) FROM runs GROUP BY target"))
    targets = {row["target"]: row for row in tables(sections(files["summary.md"])["Targets"])[0]}
    assert targets.keys() == read_back.keys()
    for target, effective in read_back.items():
        row = targets[target]
        assert row["mount options (effective)"] == (effective or "–"), target
        if row["requested"] == "defaults":
            assert row["NOT in effect"] == "–", f"{target}: defaults are in effect"


# --- every flagged figure is marked -----------------------------------------------------------------


def test_some_fixture_has_a_flagged_cell_and_a_failed_one(rendered):
    cells = [c for _, files in rendered.values() for c in json.loads(files["summary.json"])["cells"]]
    assert any(c.get("implausible") for c in cells) and any(c["failed_runs"] for c in cells), (
        "else the below cannot fail"
    )


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_flagged_figure_is_marked_and_no_other(rendered, fixture):
    every_flagged_figure_is_marked(*rendered[fixture])


def every_flagged_figure_is_marked(db: Path, files: dict[str, str]) -> None:
    summary = json.loads(files["summary.json"])
    by_workload = sections(files["summary.md"])
    for (target, workload), cell in cells_of(summary).items():
        flagged = bool(cell.get("implausible"))
        rows = [row for row in tables(by_workload[workload])[0] if row["target"] == target]
        medians = [value for row in rows for column, value in row.items() if column.endswith("median")]
        if cell["metrics"]:
            assert medians and all(m.startswith(FLAG) == flagged for m in medians), (target, workload, medians)
        lines = [
            line for line in console_table(files["console.txt"], workload, summary) if line.startswith(f"{target} ")
        ]
        assert lines and all((FLAG in line) == flagged for line in lines), (target, workload, lines)
        if flagged:
            assert not [
                c
                for c in summary["comparisons"]
                if c["workload"] == workload and target in (c["target"], c["baseline"])
            ], "a flagged cell is compared with nothing"
            reasons = [note for note in cell["notes"] if note.startswith("IMPLAUSIBLE")]
            assert reasons and all(any(r in row["notes"] for row in rows) for r in reasons), "why, beside its figures"


# --- numbers round-trip -------------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", FIXTURES)
def test_summary_json_holds_the_stored_values_medians(rendered, fixture):
    summary_json_holds_the_stored_medians(*rendered[fixture])


def summary_json_holds_the_stored_medians(db: Path, files: dict[str, str]) -> None:
    cells, compared = measured(db), 0
    for cell, summarized in cells_of(json.loads(files["summary.json"])).items():
        for metric, values in cells[cell].items():
            if metric in summarized["metrics"]:
                figures = summarized["metrics"][metric]
                assert figures["n"] == len(values) and figures["median"] == pytest.approx(
                    statistics.median(values), rel=1e-12
                ), (cell, metric)
                compared += 1
        assert not cells[cell] or summarized["metrics"].keys() & cells[cell].keys(), (
            f"{cell}: its stored metrics summarized"
        )
    assert compared


@pytest.mark.parametrize("fixture", FIXTURES)
def test_summary_csv_holds_summary_jsons_numbers_whole(rendered, fixture):
    summary_csv_holds_its_numbers_whole(*rendered[fixture])


def summary_csv_holds_its_numbers_whole(db: Path, files: dict[str, str]) -> None:
    cells = cells_of(json.loads(files["summary.json"]))
    rows = list(csv.DictReader(io.StringIO(files["summary.csv"])))
    assert len(rows) == sum(len(c["metrics"]) for c in cells.values()), "a row for each figure, no more"
    for row in rows:
        figures = cells[(row["target"], row["workload"])]["metrics"][row["metric"]]
        assert int(row["n"]) == figures["n"] and row["unit"] == figures["unit"]
        for column in ("mean", "median", "stdev", "minimum", "maximum", "ci_low", "ci_high"):
            assert (float(row[column]) if row[column] else None) == figures[column], (row, column)


def fio_column(column: str, direction: str, metrics: dict) -> str | None:
    """The metric a fio table's column shows (its median), where the column is one."""
    if column == "IOPS median":
        return f"{direction}_iops"
    if column in ("MB/s median", "MiB/s median"):
        return f"{direction}_{column.split()[0].lower().replace('/', '_')}"
    if match := re.fullmatch(r"lat p([\d.]+)", column):
        return f"{direction}_lat_p{match.group(1).replace('.', '_')}_us"
    return None


@pytest.mark.parametrize("fixture", FIXTURES)
def test_the_markdown_and_the_console_show_summary_jsons_numbers_at_their_precision(rendered, fixture):
    its_numbers_are_shown_at_their_precision(*rendered[fixture])


def its_numbers_are_shown_at_their_precision(db: Path, files: dict[str, str]) -> None:
    summary = json.loads(files["summary.json"])
    by_workload, shown = sections(files["summary.md"]), 0
    for (target, workload), cell in cells_of(summary).items():
        if not cell["metrics"]:
            continue
        console = console_table(files["console.txt"], workload, summary)
        for row in (r for r in tables(by_workload[workload])[0] if r["target"] == target):
            pairs = (
                [(row["median"], row["metric"])]
                if "metric" in row
                else [(text, fio_column(column, row["dir"], cell["metrics"])) for column, text in row.items()]
            )
            for text, metric in pairs:
                if metric is None or text == "–":
                    continue
                figures = cell["metrics"][metric]
                assert shows(text, figures["median"]), (
                    f"{target} · {workload} · {metric}: {text} for {figures['median']}"
                )
                if metric.endswith("_p99_9_us") and left_out("p99.9 latency", files["console.txt"]):
                    continue
                line = next(
                    line
                    for line in console
                    if line.startswith(f"{target} ") and (" " + row.get("metric", "") + " ") in line + " "
                )
                assert text.removeprefix(FLAG).strip() in line, f"the console shows {text} as summary.md does: {line}"
                shown += 1
        assert str(cell["metrics"][next(iter(cell["metrics"]))]["n"]) in row["n"]
    assert shown


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_comparison_is_in_its_workloads_table_with_its_ratio_and_verdict(rendered, fixture):
    every_comparison_is_shown(*rendered[fixture])


def every_comparison_is_shown(db: Path, files: dict[str, str]) -> None:
    summary = json.loads(files["summary.json"])
    by_workload = sections(files["summary.md"])
    for workload in {c["workload"] for c in summary["comparisons"]}:
        compared = [c for c in summary["comparisons"] if c["workload"] == workload]
        rows = [row for table in tables(by_workload[workload]) for row in table if "verdict" in row]
        assert sorted((r["target"], r["ratio"], r["verdict"]) for r in rows) == sorted(
            (c["target"], f"{c['ratio']:.3f}", c["verdict"]) for c in compared
        ), workload


# --- each property, shown to fail -------------------------------------------------------------------


def without_cell(files: dict[str, str]) -> dict[str, str]:
    summary = json.loads(files["summary.json"])
    summary["cells"] = summary["cells"][1:]
    return files | {"summary.json": json.dumps(summary)}


def with_median(files: dict[str, str], factor: float) -> dict[str, str]:
    """summary.json with the first cell's read IOPS median multiplied by `factor`."""
    summary = json.loads(files["summary.json"])
    figures = next(c["metrics"]["read_iops"] for c in summary["cells"] if "read_iops" in c["metrics"])
    figures["median"] *= factor
    return files | {"summary.json": json.dumps(summary)}


def replaced(files: dict[str, str], name: str, old: str, new: str) -> dict[str, str]:
    assert old in files[name], old
    return files | {name: files[name].replace(old, new, 1)}


@pytest.mark.parametrize(
    ("check", "change"),
    [
        (every_cell_appears, without_cell),
        (
            every_cell_appears,
            lambda f: replaced(f, "console.txt", "\nxfs                3  21,243", "\n                   3  21,243"),
        ),
        (every_target_shows_its_read_back, lambda f: replaced(f, "summary.md", "| defaults | rw,", "| defaults | ro,")),
        (every_flagged_figure_is_marked, lambda f: replaced(f, "summary.md", "| ⚠ ", "| ")),
        (every_flagged_figure_is_marked, lambda f: replaced(f, "console.txt", "  3  ⚠ ", "  3    ")),
        (every_flagged_figure_is_marked, lambda f: replaced(f, "summary.md", " | 3 | 31,", " | 3 | ⚠ 31,")),
        (every_flagged_figure_is_marked, lambda f: replaced(f, "summary.md", "; IMPLAUSIBLE: dd took", "; dd took")),
        (summary_json_holds_the_stored_medians, lambda f: with_median(f, 1.000001)),
        (summary_csv_holds_its_numbers_whole, lambda f: with_median(f, 1.000001)),
        (summary_csv_holds_its_numbers_whole, lambda f: replaced(f, "summary.csv", ",3,", ",2,")),
        (its_numbers_are_shown_at_their_precision, lambda f: with_median(f, 1.01)),
        (
            its_numbers_are_shown_at_their_precision,
            lambda f: replaced(f, "console.txt", "events_per_s  3  30,207", "events_per_s  3  30,208"),
        ),
        (every_comparison_is_shown, lambda f: replaced(f, "summary.md", "| undecided |", "| faster |")),
    ],
)
def test_each_property_fails_on_a_summary_changed_on_purpose(rendered, check, change):
    db, files = rendered["kinds"]
    check(db, files)
    changed = change(files)  # outside: a change that finds nothing to change fails, never passes as caught
    with pytest.raises(AssertionError):
        check(db, changed)
