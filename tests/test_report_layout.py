"""The page as a reader sees it, on a desktop (1,280 px) and a phone (390 px): a study run of eight
targets named as btrfs-options names them (long, hyphenated), and a second compared with it,
stored through fslab's own API (tests/synthetic.py) and drawn in Debian's Chromium. Every legend
lists every target its chart draws, no label or column is cut (a wide table scrolls in its own box),
nothing lies outside the screen but inside a box that scrolls, and the captions count the runs."""

from __future__ import annotations

import re

import pytest

from fslab.report.page import write_report
from fslab.results import ResultsDB
from synthetic import stored_study
from test_report_html import page_specs

TARGETS = [
    "btrfs-default", "ext4-default-journal", "btrfs-nodatasum", "btrfs-nodatacow",
    "btrfs-compress-zstd", "btrfs-meta-single", "btrfs-two-disks-raid0", "raw-device",
]  # fmt: skip
OPTIONS = {
    "btrfs-nodatasum": 'mount_options = "nodatasum"', "btrfs-nodatacow": 'mount_options = "nodatacow"',
    "btrfs-compress-zstd": 'mount_options = "compress=zstd"', "btrfs-meta-single": 'mkfs_options = "-m single"',
    "btrfs-two-disks-raid0": 'devices = 2\nmkfs_options = "-d raid0 -m raid1"',
}  # fmt: skip
STUDY = """\
[study]
name = "btrfs-options-long"
repetitions = 2
workloads = ["rand_read", "seq_write"]
image_size = "256MiB"
image_fill = "sparse"
baseline = "btrfs-default"

[fio]
size = "64MiB"
runtime = "1s"

[[workload]]
name = "rand-rw-qd8-mixed"
kind = "fio"
rw = "randrw"
bs = "4k"
iodepth = 8
""" + "".join(f'\n[[target]]\nname = "{t}"\nfilesystem = "{t.split("-")[0]}"\n{OPTIONS.get(t, "")}\n' for t in TARGETS)
WIDTHS = {"desktop": 1280, "phone": 390}

# What the page shows of itself, read from the DOM of each Vega view and of the page.
SEEN = """() => {
  const box = e => {
    const r = e.getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top, bottom: r.bottom};
  };
  const scrolls = e => e.scrollWidth > e.clientWidth && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX);
  const inScrollingBox = e => {
    for (let a = e.parentElement; a; a = a.parentElement) if (scrolls(a)) return true;
    return false;
  };
  const texts = (e, selector) => Array.from(e.querySelectorAll(selector)).map(t => t.textContent);
  const charts = Array.from(document.querySelectorAll('.chart[data-chart]')).map(e => ({
    name: e.dataset.chart, box: box(e), scrolls: scrolls(e),
    svg: e.querySelector('svg') ? box(e.querySelector('svg')) : null,
    texts: Array.from(e.querySelectorAll('svg text'))
      .filter(t => t.getAttribute('opacity') !== '0' && t.textContent)  /* Vega hides a label that would overlap */
      .map(t => ({text: t.textContent, ...box(t)})),
    legends: Array.from(e.querySelectorAll('g.role-legend')).map(l => ({
      title: texts(l, '.role-legend-title text').join(''),
      entries: Array.from(l.querySelectorAll('.role-legend-label text')).map(t => ({text: t.textContent, ...box(t)})),
    })),
    axes: Array.from(e.querySelectorAll('.role-axis')).map(a => texts(a, '.role-axis-label text')),
    caption: e.closest('figure').querySelector('figcaption').textContent,
  }));
  const outside = Array.from(document.querySelectorAll('body *'))
    .filter(e => {
      const r = e.getBoundingClientRect();
      return r.width > 0 && (r.left < -0.5 || r.right > innerWidth + 0.5) && !inScrollingBox(e);
    })
    .map(e => e.tagName + ' ' + (e.textContent || '').trim().slice(0, 60));
  const tables = Array.from(document.querySelectorAll('div.scroll')).map(e => {
    let heading = e.previousElementSibling;
    while (heading && !/^H[2-4]$/.test(heading.tagName)) heading = heading.previousElementSibling;
    const title = heading ? heading.textContent : '';
    return {heading: title, scroll: e.scrollWidth, client: e.clientWidth, columns: texts(e, 'th'), ...box(e)};
  });
  const nav = Array.from(document.querySelectorAll('nav a')).map(a => ({text: a.textContent, ...box(a)}));
  return {charts, outside, tables, nav, page: document.documentElement.scrollWidth, width: innerWidth};
}"""


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    """The page of two study runs of the study: the first with every workload, the second with one."""
    root = tmp_path_factory.mktemp("layout")
    db = ResultsDB(str(root / "results.db"))
    stored_study(root, STUDY, db, seed=3)
    stored_study(root, STUDY.replace('["rand_read", "seq_write"]', '["rand_read"]'), db, name="again.toml", seed=4)
    return write_report(db, [db.study_run(1), db.study_run(2)], root / "report").page, db


@pytest.fixture(scope="module", params=list(WIDTHS))
def seen(request, browser, page_file):
    page = browser.new_page(viewport={"width": WIDTHS[request.param], "height": 900})
    errors: list[str] = []
    try:
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(page_file[0].as_uri())
        page.wait_for_selector("body[data-charts=done]", timeout=120_000)
        found = page.evaluate(SEEN)
    finally:
        page.close()
    assert errors == [] and not any(c for c in found["charts"] if c["svg"] is None), errors
    return request.param, found, page_specs(page_file[0])


DRAWN = re.compile(r"([\w.+-]+) run (\d+) \((its one run with logs|the median of (\d+))\)")  # time_charts._runs_drawn


def within(inner: dict, outer: dict) -> bool:
    """Whether a box lies inside another (by more than a pixel's rounding)."""
    across = outer["left"] - 1 <= inner["left"] and inner["right"] <= outer["right"] + 1
    return across and outer["top"] - 1 <= inner["top"] and inner["bottom"] <= outer["bottom"] + 1


def overlap(a: dict, b: dict) -> dict:
    """The box two boxes share."""
    return {
        "left": max(a["left"], b["left"]),
        "top": max(a["top"], b["top"]),
        "right": min(a["right"], b["right"]),
        "bottom": min(a["bottom"], b["bottom"]),
    }


def drawn_targets(spec: dict) -> set[str]:
    """The targets a chart's data holds: those it draws."""
    rows = [row for values in spec.get("datasets", {}).values() for row in values]
    rows += [row for part in spec.get("layer", [spec]) for row in part.get("data", {}).get("values", [])]
    return {row["target"] for row in rows if "target" in row}


def legend_domains(spec: dict) -> dict[str, list[str]]:
    """Each legend's title → the entries its scale names (of every layer's channels)."""
    found = {}
    for part in spec.get("layer", [spec]):
        for channel in part.get("encoding", {}).values():
            if not isinstance(channel, dict) or "title" not in channel or channel.get("legend", {}) is None:
                continue
            if isinstance(domain := channel.get("scale", {}).get("domain"), list):
                found[channel["title"]] = domain
    return found


def test_every_legend_lists_every_target_its_chart_draws(seen):
    width, found, specs = seen
    checked = 0
    for chart in found["charts"]:
        spec = specs[chart["name"]]
        domains = legend_domains(spec)
        seen_from = chart["box"] if not chart["scrolls"] else chart["svg"]
        for legend in chart["legends"]:
            if legend["title"] not in domains:
                continue  # a colour gradient (the heatmaps'): no entries
            shown = [e["text"] for e in legend["entries"] if within(e, seen_from)]
            assert shown == domains[legend["title"]], f"{chart['name']} on a {width}: {legend['title']}"
            if legend["title"] == "target":
                checked += 1
                assert drawn_targets(spec) <= set(shown) and len(shown) == len(TARGETS), chart["name"]
    assert checked >= 10, "the charts of targets in colour: percentiles, distributions, throughput, latency over time"


def test_no_label_is_cut_and_none_lies_outside_its_chart(seen):
    width, found, specs = seen
    for chart in found["charts"]:
        faceted = "facet" in specs[chart["name"]]
        assert faceted or not chart["scrolls"], f"{chart['name']} wider than its place on a {width}"
        # what one sees of the drawing (a faceted chart scrolls in its place: all of it)
        visible = chart["svg"] if chart["scrolls"] else overlap(chart["svg"], chart["box"])
        for text in chart["texts"]:
            where = f"{chart['name']} on a {width}: {text['text']!r}"
            assert not text["text"].endswith("…"), "cut short: " + where
            assert within(text, visible), "cut at an edge: " + where
    bars = [c for c in found["charts"] if c["name"].endswith("-read_iops") and not c["name"].startswith("compare")]
    assert bars and all(sorted(TARGETS) in [sorted(axis) for axis in c["axes"]] for c in bars), "every bar named whole"


def test_nothing_lies_outside_the_screen_but_in_a_box_that_scrolls(seen):
    width, found, _ = seen
    assert found["outside"] == [], f"on a {width}"
    assert found["page"] <= found["width"], f"the page is wider than a {width}'s screen"
    screen = {"left": 0, "right": found["width"], "top": -1e9, "bottom": 1e9}
    assert len(found["nav"]) >= 10 and all(within(a, screen) for a in found["nav"]), "every link of the navigation seen"


def test_a_workloads_tables_show_every_column_on_a_desktop(seen):
    width, found, _ = seen
    mine = [t for t in found["tables"] if t["heading"] in ("Per target", "Measured beside it (monitors, medians)")]
    assert len(mine) >= 8 and {"lat p99", "space used"} <= {c for t in mine for c in t["columns"]}
    if width == "desktop":
        cut = [t["heading"] for t in mine if t["scroll"] > t["client"]]
        assert cut == [], "their last columns (p99 latency, space used) cut"
    else:  # wider than a phone: each scrolls in its own box, as wide as the screen at most
        assert all(t["scroll"] > t["client"] and 0 <= t["left"] and t["right"] <= found["width"] for t in mine)


def test_captions_count_the_runs_they_draw(seen, page_file):
    width, found, _ = seen
    db = page_file[1]
    runs = {}  # (study run, workload, target) → the repetitions of its measured runs
    for study_run in (1, 2):
        for r in db.runs(study_run):
            if r["status"] == "ok" and not r["warmup"]:
                runs.setdefault((study_run, r["workload"], r["target"]), []).append(r["repetition"])
    said = 0
    for chart in found["charts"]:
        caption = chart["caption"]
        assert not re.search(r"\brun \d+ of \d+", caption), f"{chart['name']}: {caption}"
        if chart["name"].startswith("compare-"):
            continue
        study_run = int(chart["name"].split("-", 1)[0])
        workload = next(w for (_, w, _) in runs if chart["name"].startswith(f"{study_run}-{w}-"))
        for target, repetition, _, median_of in DRAWN.findall(caption):
            said += 1
            repetitions = runs[(study_run, workload, target)]
            assert int(repetition) in repetitions, f"{chart['name']}: {target} has no run {repetition}"
            assert (int(median_of) if median_of else 1) == len(repetitions), f"{chart['name']}: {target}'s runs"
    assert said >= 8 * 6, "each target of each chart over time"


# --- what the layout is made of (pure) ---------------------------------------------------------


def test_a_charts_legends_are_laid_out_for_the_labels_they_list():
    """Every chart's legends: all entries (no symbol limit), under the plot, one under another, in
    columns as wide as its longest label (those its channels' scales name, not a hidden one's)."""
    from fslab.report.chart_parts import LEGEND_CHAR_PX, LEGEND_ENTRY_PX, legend_labels, legend_layout

    layers = [
        {"encoding": {"color": {"scale": {"domain": TARGETS}}, "x": {"scale": {"domain": ["a" * 90]}}}},
        {"encoding": {"strokeDash": {"scale": {"domain": ["P50", "P99"]}}}},
        {"encoding": {"fill": {"legend": None, "scale": {"domain": ["b" * 90]}}}},
    ]
    assert legend_labels(layers) == [*TARGETS, "P50", "P99"]
    layout = legend_layout(legend_labels(layers))
    entry = len("btrfs-two-disks-raid0") * LEGEND_CHAR_PX + LEGEND_ENTRY_PX
    assert layout["symbolLimit"] == 0 and layout["orient"] == "bottom" and "vertical" in layout["layout"]["expr"]
    assert layout["columns"]["expr"].endswith(f"/ {entry}))") and "containerSize()" in layout["columns"]["expr"]


def test_a_tables_text_wraps_and_its_figures_stay_whole():
    from fslab.report.html import wrapped

    assert wrapped("notes", "only 2 runs") and wrapped("verdict", "no detectable difference")
    assert wrapped("error", "mkfs failed")
    assert not wrapped("lat p99", "12.14 ms") and not wrapped("IOPS mean ± 95% CI", "21,945 ± 1.2%")
    assert wrapped("IOPS mean ± 95% CI", "21,945 (interval needs 3 runs)"), "its words in brackets, not the figure"
