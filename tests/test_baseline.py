"""Every stored fixture renders as it did before the second storey's redesign (issue 34), except for
chart sections added to the page, which the DOM diff lists by name; and the diff is shown to fail on
each kind of change it is there to catch (a cell, a number, a word, a section removed, a paragraph
added, a chart's data). The baseline: tests/fixtures/baseline (tests/baseline.py)."""

from __future__ import annotations

import difflib
import json
import shutil
import warnings

import pytest

from baseline import RENDERED, RENDERS, charts_text, diff_pages, fixture_databases, page_outline, rendered_once, stored
from conftest import fslab_in_process, same_document

FIXTURES = fixture_databases()
pytestmark = pytest.mark.xdist_group(RENDERS)


def test_every_stored_fixture_database_has_its_baseline():
    assert len(FIXTURES) == 10 and all(path.is_file() for path in FIXTURES.values())
    assert all(stored(fixture) for fixture in FIXTURES), "each of the files rendered kept, for each fixture"


@pytest.mark.parametrize("fixture", FIXTURES)
def test_a_stored_fixture_renders_as_before_but_for_chart_sections_added(fixture, tmp_path_factory):
    now, before = rendered_once(fixture, lambda: tmp_path_factory.mktemp("rendered"))[1], stored(fixture)
    assert set(now) == set(RENDERED)
    for name in ("console.txt", "summary.md", "summary.csv", "comparisons.csv", "runs.csv"):
        changed = difflib.unified_diff(
            before[name].splitlines(), now[name].splitlines(), "baseline", "now", lineterm=""
        )
        assert now[name] == before[name], f"{fixture}/{name} differs from its baseline:\n" + "\n".join(
            list(changed)[:40]
        )
    for name in ("summary.json", "runs.json"):
        same_document(json.loads(now[name]), json.loads(before[name]), where=f"{fixture}/{name}")
    diff = diff_pages(
        before["page.txt"], now["page.txt"], json.loads(before["charts.json"]), json.loads(now["charts.json"])
    )
    print(f"{fixture}: chart sections added: {diff.added or 'none'}")
    if diff.added:  # said in every run's summary of warnings, not only under -s
        warnings.warn(f"{fixture}: chart sections added to the page: {'; '.join(diff.added)}", stacklevel=1)
    assert not diff.changes, f"{fixture}: the page changed beyond chart sections added:\n" + "\n".join(diff.changes)


# --- the diff, shown to fail -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    """The page of schema-v13.db (fio's charts: a chart grid in its workload's section) as HTML."""
    folder = tmp_path_factory.mktemp("page")
    shutil.copy(FIXTURES["schema-v13"], folder / "fslab.db")  # a copy: fslab migrates what it opens
    result = fslab_in_process("report", "--db", str(folder / "fslab.db"), "--output", str(folder))
    assert result.returncode == 0, result.stderr
    return (folder / "report.html").read_text()


def diffed(page: str, changed: str) -> tuple[list[str], list[str]]:
    before, charts_before = page_outline(page)
    after, charts_after = page_outline(changed)
    # the charts as stored: through the baseline's own text, as the test above reads them
    diff = diff_pages(before, after, json.loads(charts_text(charts_before)), json.loads(charts_text(charts_after)))
    return diff.added, diff.changes


def once(page: str, old: str, new: str) -> str:
    assert page.count(old) >= 1, old
    return page.replace(old, new, 1)


FIGURE = (
    '<figure>\n<p class="chart-title">{title}</p>\n<div class="chart" id="chart-{key}" data-chart="{key}" '
    'role="img" aria-label="{title}"></div>\n<figcaption>A chart a kind now offers.</figcaption>\n</figure>\n'
)


def with_chart(page: str, key: str, spec: dict) -> str:
    """The page with a chart's specification added beside the others."""
    start = page.index('<script type="application/json" id="fslab-charts">') + len(
        '<script type="application/json" id="fslab-charts">'
    )
    return page[:start] + '{"' + key + '":' + json.dumps(spec) + "," + page[start + 1 :]


def test_the_same_page_differs_in_nothing(page):
    assert diffed(page, page) == ([], [])


def test_a_chart_added_to_a_workloads_grid_is_listed_by_name_and_passes(page):
    figure = FIGURE.format(title="rand_read: read IOPS over time", key="rand_read-iops-over-time")
    changed = with_chart(
        once(page, '<div class="charts">\n', '<div class="charts">\n' + figure),
        "rand_read-iops-over-time",
        {"mark": "line"},
    )
    assert diffed(page, changed) == (["rand_read: read IOPS over time"], [])


def test_a_chart_section_added_with_its_heading_and_its_link_is_listed_by_name_and_passes(page):
    figure = FIGURE.format(title="sysbench: events over time", key="mail-events-over-time")
    section = (
        '<section id="run1-mail">\n<h2>mail</h2>\n<p class="muted">What sysbench offers.</p>\n'
        f'<div class="charts">\n{figure}</div>\n</section>\n'
    )
    changed = once(page, "\n<h2>Method</h2>", "\n" + section + "<h2>Method</h2>")
    changed = once(
        changed,
        '<a href="#run1-rand_read">rand_read</a>',
        '<a href="#run1-rand_read">rand_read</a>\n<a href="#run1-mail">mail</a>',
    )
    changed = with_chart(changed, "mail-events-over-time", {"mark": "line"})
    assert diffed(page, changed) == (["mail: sysbench: events over time"], [])


@pytest.mark.parametrize(
    ("what", "old", "new"),
    [
        ("a table cell's number", "<td>19,152</td>", "<td>19,153</td>"),
        ("a verdict", '<td class="text">undecided</td>', '<td class="text">faster</td>'),
        (
            "a row's class (its highlight)",
            '<tr><td>raw</td><td class="text">read IOPS</td>',
            '<tr class="faster"><td>raw</td><td class="text">read IOPS</td>',
        ),
        ("a word of a paragraph", "No target leads in read IOPS", "No target leads in IOPS"),
        ("a heading", "<h3>Per target</h3>", "<h3>By target</h3>"),
        (
            "a chart hidden",
            '<figure>\n<p class="chart-title">rand_read: CPU while measured</p>',
            '<figure hidden>\n<p class="chart-title">rand_read: CPU while measured</p>',
        ),
        ("a paragraph added", "<h2>Method</h2>", '<p class="muted">A paragraph no one asked for.</p>\n<h2>Method</h2>'),
        (
            "a link added to no section",
            '<a href="#run1-rand_read">rand_read</a>',
            '<a href="#run1-rand_read">rand_read</a>\n<a href="#run1-mail">mail</a>',
        ),
        ("the title", "<title>v13 — study run 1</title>", "<title>v13 — study run 2</title>"),
        ("a job file's line", "iodepth=16\n", "iodepth=32\n"),
    ],
)
def test_a_change_beyond_an_added_chart_section_fails(page, what, old, new):
    added, changes = diffed(page, once(page, old, new))
    assert changes, f"{what}: not caught"
    assert not added or what == "a chart hidden", "a hidden chart is one removed (and one added)"


def test_a_chart_removed_fails_whether_its_specification_stays_or_goes(page):
    start = page.index('<figure>\n<p class="chart-title">rand_read: CPU while measured</p>')
    without_figure = page[:start] + page[page.index("</figure>\n", start) + len("</figure>\n") :]
    added, changes = diffed(page, without_figure)
    assert not added and any("removed" in c and "CPU while measured" in c for c in changes)
    assert "chart rand_read-cpu: specified, on no figure" in changes
    before, charts = page_outline(page)
    after, charts_after = page_outline(without_figure)
    del charts_after["rand_read-cpu"]
    diff = diff_pages(before, after, charts, charts_after)
    assert not diff.added and "chart rand_read-cpu: gone" in diff.changes, "its specification gone too"


def test_a_section_removed_fails(page):
    start = page.index("<h3>Ranking</h3>")
    added, changes = diffed(page, page[:start] + page[page.index("</ul>", start) + len("</ul>") :])
    assert not added and changes == [
        "page > body > main > section#run1 > section#run1-rand_read: removed: 'h3: Ranking'",
        "page > body > main > section#run1 > section#run1-rand_read: removed: 'ul' and 3 within",
    ]


def test_a_chart_whose_data_changed_fails(page):
    spec = page_outline(page)[1]["rand_read-read_iops"]
    dataset = next(iter(spec["datasets"].values()))
    number = next(key for key, value in dataset[0].items() if isinstance(value, float))
    old = json.dumps(dataset[0][number])
    changed = page.replace(old, json.dumps(dataset[0][number] * 1.01), 1)
    added, changes = diffed(page, changed)
    assert (
        not added
        and changes
        and all(change.startswith("chart rand_read-read_iops: its specification changed") for change in changes)
    )


def test_a_chart_added_with_a_section_that_also_changed_a_table_fails(page):
    figure = FIGURE.format(title="rand_read: read IOPS over time", key="rand_read-iops-over-time")
    changed = with_chart(
        once(page, '<div class="charts">\n', '<div class="charts">\n' + figure), "rand_read-iops-over-time", {}
    )
    added, changes = diffed(page, once(changed, "<td>22,975</td>", "<td>22,976</td>"))
    assert added == ["rand_read: read IOPS over time"] and len(changes) == 1 and "22,976" in changes[0]
