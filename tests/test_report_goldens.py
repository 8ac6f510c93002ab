"""One golden file per output format, where its layout is the subject: the console's summary,
summary.md, summary.csv, summary.json, comparisons.csv, runs.csv, runs.json and the page (an outline of its DOM), of
tests/fixtures/golden/layout.db — a study run as small as shows every part of each layout: a fio
workload's tables, a tool's, a flagged figure, a target whose every run failed. What the numbers
are, whatever the study holds, is tested by properties (test_summary_properties.py); a change of
layout is meant when this fails: `python tests/baseline.py --golden` writes the goldens again."""

from __future__ import annotations

import json

import pytest

from baseline import GOLDEN, GOLDEN_FILES, diff_pages, render
from conftest import same_document


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, str]:
    return render(GOLDEN / "layout.db", tmp_path_factory.mktemp("layout"))


@pytest.mark.parametrize("name", ["console.txt", "summary.md", "summary.csv", "comparisons.csv", "runs.csv"])
def test_a_text_formats_layout_is_its_golden_files(rendered, name):
    assert rendered[name] == (GOLDEN / name).read_text()


@pytest.mark.parametrize("name", ["summary.json", "runs.json"])
def test_a_json_formats_layout_is_its_golden_files_to_the_last_bits_of_its_floats(rendered, name):
    """Its keys in their order, their types and nesting, every value (floats to the last bits that
    numpy's exp and log vary in between CPUs)."""
    same_document(json.loads(rendered[name]), json.loads((GOLDEN / name).read_text()), where=name)


def test_the_pages_layout_is_its_golden_outline_but_for_chart_sections_added(rendered):
    diff = diff_pages((GOLDEN / "page.txt").read_text(), rendered["page.txt"], {}, {})
    print(f"chart sections added: {diff.added or 'none'}")
    assert not diff.changes, "\n".join(diff.changes)


def test_every_format_has_its_golden_file():
    assert sorted(path.name for path in GOLDEN.iterdir() if path.suffix != ".db") == sorted(GOLDEN_FILES)
