"""The four verdicts in every output (issue 35, item 1): faster, slower, equivalent and undecided,
each with its reason and the very interval it is read from, in the console, summary.md,
summary.json, comparisons.csv, the page, `fslab compare` and `fslab history` — and never the
words they replace. Every built-in study is rendered from synthetic samples at 2 runs per cell
(tests/synthetic.py: real tool output, seeded noise), the run a quick look makes; then each word
is driven into the outputs from samples made for it: a 0 against a count (never equivalent), a
1,000× ratio at 2 runs (faster or slower when its interval excludes 1, else undecided)."""

from __future__ import annotations

import csv
import io
import json
import math
import random
import re
from dataclasses import replace
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from conftest import apart, fslab_in_process
from fslab.model import Roles
from fslab.model.records import SampleGroups
from fslab.report.console import CONSOLE_WIDTH, print_comparison
from fslab.report.formatting import explanation_tail, verdict_phrase
from fslab.report.html import Page, comparison_section, render_page
from fslab.report.sections import comparison_columns, comparison_rows
from fslab.report.tables import comparison_record
from fslab.report.view import VERDICT_COLUMN
from fslab.results import ResultsDB
from fslab.statistics.analysis import Row, compare_study_runs
from fslab.statistics.stats import EQUIVALENT, FASTER, SLOWER, UNDECIDED, VERDICTS
from fslab.study import builtin_studies, load_study
from synthetic import store_study_run

GONE = ("no detectable difference", "cannot be told apart")
ENV = {
    "distribution": "Debian GNU/Linux 12", "kernel": "6.1.0-test", "cpu_model": "Test CPU", "cpu_count": 2,
    "memory_bytes": 2**33, "tools": {"fio": "fio-3.33"}, "image_directory": {},
}  # fmt: skip


class _Tables(HTMLParser):
    """Each table of a page as its header cells and its rows' cells, as text."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def page_verdicts(html: str) -> list[str]:
    """The verdict column's cells of every table of a page that has one."""
    parser = _Tables()
    parser.feed(html)
    found = []
    for table in parser.tables:
        if table and VERDICT_COLUMN in table[0]:
            at = table[0].index(VERDICT_COLUMN)
            found += [row[at] for row in table[1:] if len(row) > at]
    return found


def markdown_verdicts(markdown: str) -> list[str]:
    """The verdict column's cells of every Markdown table that has one."""
    found, at = [], None
    for line in markdown.splitlines():
        if not line.startswith("|"):
            at = None
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if at is None:
            at = cells.index(VERDICT_COLUMN) if VERDICT_COLUMN in cells else -1
        elif at >= 0 and not line.startswith("|---"):
            found.append(cells[at])
    return found


def said_nowhere(text: str, where: str) -> None:
    for words in GONE:
        assert words not in text.lower(), f"{where} says {words!r}"


def stored_twice(folder: Path, name: str) -> str:
    """A built-in study stored twice in `folder` (two study runs of it, a quick look each), at 2
    runs per cell without warm-up, its first target 1.5× the rest in the second: some verdicts
    decided. The database's path."""
    db = ResultsDB(str(folder / "fslab.db"))
    study = replace(load_study(name), repetitions=2, warmup=0)
    for seed, fast in ((3, 1.0), (4, 1.5)):
        scale = {study.targets[0].name: fast}
        store_study_run(db, study, seed=seed, rng=random.Random(seed), env=ENV, scale=scale)
    return str(folder / "fslab.db")


@pytest.mark.slow  # ~80 s for the seven (make test runs it; make check does not)
@pytest.mark.parametrize("name", apart("verdict-outputs", builtin_studies()))
def test_no_output_of_a_built_in_study_at_two_runs_says_the_old_words(tmp_path, name):
    """Console, every report file, the page, `fslab compare` and `fslab history` (text and page) of
    each built-in study at `--runs 2`: neither "no detectable difference" nor "cannot be told apart",
    and every verdict one of the four words — the JSON's, the CSV's, the tables' alike."""
    folder = tmp_path
    db = stored_twice(folder, name)
    summary = fslab_in_process("summary", "2", "--db", db, cwd=folder)
    assert summary.returncode == 0, summary.stdout + summary.stderr
    said_nowhere(summary.stdout, "the console")
    (reports,) = [p for p in (folder / "reports").iterdir() if p.name.endswith("-2")]
    files = {p.name: p.read_text() for p in reports.iterdir() if p.suffix in (".md", ".json", ".csv")}
    assert {"summary.md", "summary.json", "summary.csv", "comparisons.csv"} <= set(files)
    for file, text in files.items():
        said_nowhere(text, file)

    document = json.loads(files["summary.json"])
    comparisons = document["comparisons"] + document.get("workload_comparisons", [])
    assert comparisons and {c["verdict"] for c in comparisons} <= set(VERDICTS)
    for c in comparisons:
        assert c["reason"] and (c["interval"] is None or len(c["interval"]) == 2) and 0.95 <= c["level"] < 1
        assert c["interval"] is None or c["interval"] == [c["ci_low"], c["ci_high"]]
    rows = list(csv.DictReader(io.StringIO(files["comparisons.csv"])))
    assert sorted(r["verdict"] for r in rows) == sorted(c["verdict"] for c in comparisons)
    assert sorted(markdown_verdicts(files["summary.md"])) == sorted(c["verdict"] for c in comparisons)
    for c in document["comparisons"]:  # each in its console row, with its verdict
        assert any(line.startswith(c["target"]) and c["verdict"] in line for line in summary.stdout.splitlines()), c

    page = fslab_in_process("report", "1", "2", "--db", db, "--output", str(folder / "page"), cwd=folder)
    assert page.returncode == 0, page.stdout + page.stderr
    html = (folder / "page" / "report.html").read_text()
    said_nowhere(html, "the page")
    shown = page_verdicts(html)
    assert shown and set(shown) <= set(VERDICTS), set(shown) - set(VERDICTS)

    compared = fslab_in_process("compare", "1", "2", "--db", db)
    assert compared.returncode in (0, 1), compared.stdout + compared.stderr
    said_nowhere(compared.stdout, "fslab compare")
    assert "undecided" in compared.stdout or "faster" in compared.stdout or "equivalent" in compared.stdout

    study = document["study_run"]["study"]
    history = fslab_in_process("history", study, "--db", db)
    assert history.returncode == 0, history.stdout + history.stderr
    said_nowhere(history.stdout, "fslab history")
    trend = fslab_in_process("report", "--history", study, "--db", db, "--output", str(folder / "trend"))
    assert trend.returncode == 0, trend.stdout + trend.stderr
    trend_html = (folder / "trend" / "history.html").read_text()
    said_nowhere(trend_html, "the trend page")
    assert set(page_verdicts(trend_html)) <= {*VERDICTS, "–"}


# --- each word, from samples made for it ---------------------------------------------------------


def groups(values: dict[tuple[str, str], dict[str, list[float]]]) -> SampleGroups:
    roles = Roles.flagged((w, "read_iops", True, True) for w, _ in values)
    return SampleGroups(values, {"read_iops": "IOPS"}, {"read_iops": True}, roles)


def compared(older: dict[str, list[float]], newer: dict[str, list[float]]) -> list[Row]:
    """Each target's read IOPS, newer against older, as `fslab compare` judges them: one family."""
    return compare_study_runs(
        groups({("w", t): {"read_iops": v} for t, v in older.items()}),
        groups({("w", t): {"read_iops": v} for t, v in newer.items()}),
    )


def every_output(rows: list[Row]) -> dict[str, str]:
    """What each output says of `rows`: the console's comparison, the page's, the JSON records,
    and the conclusions' wording."""
    runs: list[dict[str, Any]] = [
        {"id": i, "study": "s", "started_at": datetime(2026, 11, 29, 12, i), "environment": {}} for i in (1, 2)
    ]
    console = Console(file=io.StringIO(), width=CONSOLE_WIDTH, color_system=None)
    print_comparison(console, runs[0], runs[1], rows, [], 0.03, 0.05)
    section = comparison_section(runs[0], runs[1], rows, [], [], threshold=0.03)
    html = render_page(Page("t", [], [section]), lambda: "")
    return {
        "console": console.file.getvalue(),  # type: ignore[attr-defined]
        "page": html,
        "json": json.dumps([comparison_record(r.comparison) for r in rows], allow_nan=False),
        "phrases": "\n".join(verdict_phrase(r.comparison) for r in rows),
    }


def verdicts_in(rows: list[Row], outputs: dict[str, str]) -> dict[str, str]:
    """Each target's verdict as every output gives it, asserted the same in all."""
    table = comparison_rows(rows)
    at = comparison_columns(rows).index(VERDICT_COLUMN)
    records = json.loads(outputs["json"])
    page = page_verdicts(outputs["page"])
    phrases = outputs["phrases"].splitlines()
    found = {}
    assert rows
    for r, cells, record, on_page, phrase in zip(rows, table, records, page, phrases, strict=True):
        word = r.comparison.verdict
        assert cells[at] == record["verdict"] == on_page == word and phrase.startswith(f"{word} ")
        assert record["reason"] == r.comparison.reason and phrase == verdict_phrase(r.comparison)
        # the table's why: the reason, and beside a decided verdict its explanation (fslab.statistics.explain)
        assert cells[at + 1] == r.comparison.reason + explanation_tail(r.explanation)
        assert (r.explanation is not None) == r.comparison.differs
        interval = r.comparison.interval
        assert record["interval"] == (None if interval is None else list(interval))
        row = re.compile(rf"^w\s+{re.escape(r.target)}\s.*\b{word}\b")
        assert any(row.match(line) for line in outputs["console"].splitlines()), (word, outputs["console"])
        found[r.target] = word
    for text in outputs.values():
        said_nowhere(text, "an output")
    return found


def test_each_of_the_four_words_reaches_every_output():
    """Samples made for each verdict: 20 % faster and slower, 0.5 % apart (equivalent), and a
    spread too wide to tell (undecided), at 10 runs a side."""
    rng = random.Random(35)

    def runs(level: float, spread: float) -> list[float]:
        return [level * math.exp(rng.gauss(0, spread)) for _ in range(10)]

    older = {t: runs(1000, 0.01) for t in ("up", "down", "same")} | {"wide": runs(1000, 0.3)}
    newer = {"up": runs(1200, 0.01), "down": runs(800, 0.01), "same": runs(1005, 0.002), "wide": runs(1050, 0.3)}
    rows = compared(older, newer)
    found = verdicts_in(rows, every_output(rows))
    assert found == {"up": FASTER, "down": SLOWER, "same": EQUIVALENT, "wide": UNDECIDED}
    assert "within ±3 %" in rows[2].comparison.reason and "beyond ±3 %" in rows[0].comparison.reason


def test_a_zero_against_a_count_is_never_equivalent():
    """0 against 2 (or 2 against 0; or 0 against 0): no ratio of geometric means, no interval —
    undecided, its reason naming the 0; every output says so, and the JSON has no infinity."""
    rows = compared(
        {"a": [0.0, 0.0], "b": [2.0, 2.0], "c": [0.0, 0.0]}, {"a": [2.0, 2.0], "b": [0.0, 0.0], "c": [0.0, 0.0]}
    )
    outputs = every_output(rows)
    assert set(verdicts_in(rows, outputs).values()) == {UNDECIDED}
    assert all("a value of 0" in r.comparison.reason for r in rows)
    assert all(record["interval"] is None for record in json.loads(outputs["json"]))


@pytest.mark.parametrize("factor", [1000.0, 1 / 1000])
def test_a_thousandfold_ratio_at_two_runs_is_decided_from_its_interval_or_undecided(factor):
    """1,000× at 2 runs a side: faster (or slower) where the interval printed excludes 1, else
    undecided — never equivalent, whatever the spread."""
    for spread in (0.01, 0.5, 3.0):
        older = {"t": [1000.0, 1000.0 * math.exp(spread)]}
        newer = {"t": [1000.0 * factor, 1000.0 * factor * math.exp(spread * 1.1)]}
        rows = compared(older, newer)
        [word] = verdicts_in(rows, every_output(rows)).values()
        c = rows[0].comparison
        assert c.interval is not None
        excludes_one = c.interval[0] > 1 or c.interval[1] < 1
        assert word == ((FASTER if factor > 1 else SLOWER) if excludes_one else UNDECIDED), (spread, c)
        assert word != EQUIVALENT


def test_the_old_words_are_found_where_they_are_said():
    """The checks can fail: an output with either old phrase is caught, a table with a fifth word too."""
    for words in GONE:
        with pytest.raises(AssertionError):
            said_nowhere(f"raw and ext4: {words.capitalize()} here", "a made-up output")
    table = "| target | verdict |\n|---|---|\n| a | no detectable difference |\n"
    assert not set(markdown_verdicts(table)) <= set(VERDICTS)
    page = "<table><tr><th>target</th><th>verdict</th></tr><tr><td>a</td><td>faster</td></tr></table>"
    assert page_verdicts(page) == ["faster"]


def test_a_verdict_word_in_a_console_line_is_the_tables():
    """The console's row of a comparison holds its verdict word whole (not wrapped away)."""
    rows = compared({"t": [1000.0] * 3}, {"t": [1000.0] * 3})
    text = every_output(rows)["console"]
    assert re.search(r"^w\s+t\s.*\bequivalent\b", text, re.M), text
