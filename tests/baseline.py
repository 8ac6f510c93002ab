"""What every stored fixture database renders to, kept as it rendered before the second storey's
redesign (issue 34), and the page's DOM diff that tells an added chart section from a change.

A fixture is each tests/fixtures/schema-v*.db (written by an older fslab, run for real) and
tests/fixtures/baseline/kinds.db (fio, sysbench, dd and a scenario, a failing target and a flagged
workload: stored by tests/synthetic.py, kept as a file so it cannot move under the tests). What is
kept of each, in tests/fixtures/baseline/<fixture>/, is what the commands write, read through the
commands themselves (nothing here imports a module that may move):

    console.txt                                  `fslab summary`'s console
    summary.md, summary.csv, summary.json,       the report files `fslab summary` writes
    comparisons.csv, runs.csv, runs.json
    page.txt                                     `fslab report`'s page as an outline of its DOM
    charts.json                                  the page's chart specifications, by chart

What legitimately varies is normalised: the folder it was rendered in, fslab's version on the page,
the inlined JavaScript bundle (left out). `python tests/baseline.py` writes the baseline again (with
--databases, kinds.db and layout.db first; with --golden, the layout's golden files of
tests/fixtures/golden instead): only when a change of what fslab shows is meant, said in its commit.
"""

from __future__ import annotations

import difflib
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

TESTS = Path(__file__).parent
FIXTURES = TESTS / "fixtures"
BASELINE = FIXTURES / "baseline"
REPORT_FILES = ("summary.md", "summary.csv", "summary.json", "comparisons.csv", "runs.csv", "runs.json")
RENDERED = ("console.txt", *REPORT_FILES, "page.txt", "charts.json")
GOLDEN = FIXTURES / "golden"  # one file per format, of layout.db: where layout is the subject
GOLDEN_FILES = RENDERED[:-1]  # the charts' specifications are no layout (the baseline keeps them)


def fixture_databases() -> dict[str, Path]:
    """Every stored fixture database, by the name its baseline folder has."""
    found = {path.stem: path for path in sorted(FIXTURES.glob("schema-v*.db"))}
    return found | {"kinds": BASELINE / "kinds.db"}


# Both modules that render every fixture (test_baseline.py holds what it renders to the baseline,
# test_summary_properties.py to the database) share one xdist group, and so its renders: neither
# changes them, and rendering all ten costs a second and a half of CPU.
RENDERS = "fixture renders"
_RENDERS: dict[str, tuple[Path, dict[str, str]]] = {}


def rendered_once(fixture: str, folder: Callable[[], Path]) -> tuple[Path, dict[str, str]]:
    """A fixture's copy, migrated by `fslab summary`, and what was rendered of it (render), in a
    new `folder()`: once a process."""
    if fixture not in _RENDERS:
        where = folder() / fixture
        _RENDERS[fixture] = (where / "fslab.db", render(fixture_databases()[fixture], where))
    return _RENDERS[fixture]


def render(database: Path, folder: Path) -> dict[str, str]:
    """What this fslab renders of a fixture database (a copy of it, in `folder`), normalised."""
    from conftest import fslab_in_process

    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "fslab.db"
    shutil.copy(database, db)
    summary = fslab_in_process("summary", "--db", str(db), cwd=folder)
    assert summary.returncode == 0, summary.stdout + summary.stderr
    page = fslab_in_process("report", "--db", str(db), "--output", str(folder / "page"), cwd=folder)
    assert page.returncode == 0, page.stdout + page.stderr
    (reports,) = (folder / "reports").iterdir()
    rendered = {"console.txt": summary.stdout} | {name: (reports / name).read_text() for name in REPORT_FILES}
    outline, charts = page_outline((folder / "page" / "report.html").read_text())
    rendered |= {"page.txt": outline, "charts.json": charts_text(charts)}
    # the version of the fslab that wrote runs.json (the one a run was stored by is the database's)
    rendered["runs.json"] = re.sub(
        r'^"fslab": ".*",$', '"fslab": "<version>",', rendered["runs.json"], count=1, flags=re.M
    )
    return {name: text.replace(str(folder), "<folder>") for name, text in rendered.items()}


def charts_text(charts: dict) -> str:
    """The charts' specifications as a JSON object, a chart a line (a diff names the chart)."""
    lines = (
        f"{json.dumps(key)}: {json.dumps(spec, sort_keys=True, separators=(',', ':'))}" for key, spec in charts.items()
    )
    return "{\n" + ",\n".join(lines) + "\n}\n"


def stored(fixture: str) -> dict[str, str]:
    return {name: (BASELINE / fixture / name).read_text() for name in RENDERED}


# --- the page as an outline of its DOM -----------------------------------------------------------

INLINE = {"a", "abbr", "b", "br", "code", "em", "i", "kbd", "mark", "small", "span", "strong", "sub", "sup", "time"}
VOID = {"br", "img", "input", "link", "meta", "hr", "wbr"}
KEPT_ATTRIBUTES = ("id", "class", "data-chart", "href", "scope", "open", "hidden")
ONE_LINE = {"tr"}  # a table's row: its cells on one line, as the table reads
BLOCKS = {"nav"}  # inline children, each kept on a line of its own (a link added is told apart)


@dataclass
class Node:
    tag: str
    attributes: dict[str, str | None]
    children: list[Node | str] = field(default_factory=list)

    @property
    def header(self) -> str:
        shown = "".join(
            f"#{value}" if name == "id" else "".join(f".{c}" for c in (value or "").split()) if name == "class"
            else f"[{name}]" if value is None else f"[{name}={value}]"
            for name, value in self.attributes.items()
        )  # fmt: skip
        return self.tag + shown

    def inline(self) -> str:
        """The element written back as HTML with its whitespace collapsed (a paragraph, a cell)."""
        inner = "".join(c if isinstance(c, str) else f"<{c.header}>{c.inline()}</{c.tag}>" for c in self.children)
        return inner if self.tag == "pre" else re.sub(r"\s+", " ", inner)


class _Tree(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("document", {})
        self.open = [self.root]
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.in_script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.in_script = dict(attrs)
            return
        node = Node(tag, {name: value for name, value in attrs if name in KEPT_ATTRIBUTES})
        self.open[-1].children.append(node)
        if tag not in VOID:
            self.open.append(node)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self.in_script = None
            return
        while len(self.open) > 1 and self.open.pop().tag != tag:
            pass

    def handle_data(self, data: str) -> None:
        if self.in_script is not None:
            self.scripts.append((self.in_script, data))
        else:
            self.open[-1].children.append(data)


def _block(node: Node) -> bool:
    return (
        node.tag in BLOCKS
        or node.tag not in INLINE
        and any(isinstance(c, Node) and (c.tag not in INLINE or _block(c)) for c in node.children)
    )


def _lines(node: Node, depth: int) -> list[str]:
    indent = "  " * depth
    if node.tag in ONE_LINE:
        cells = [c for c in node.children if isinstance(c, Node)]
        return [f"{indent}{node.header}: " + " ¦ ".join(f"{c.header} {c.inline().strip()}" for c in cells)]
    if node.tag == "pre":
        return [f"{indent}{node.header}:"] + [f"{indent}  | {line}" for line in node.inline().split("\n")]
    if not _block(node):
        text = node.inline().strip()
        return [f"{indent}{node.header}" + (f": {text}" if text else "")]
    lines = [f"{indent}{node.header}"]
    for child in node.children:
        if isinstance(child, Node):
            lines += _lines(child, depth + 1)
        elif child.strip():
            lines.append(f"{indent}  | " + re.sub(r"\s+", " ", child.strip()))
    return lines


def page_outline(page: str) -> tuple[str, dict]:
    """The page's <body> as an outline (an element a line, indented by depth; a paragraph, a
    cell, a heading with its text; a table row on one line) and its charts' specifications; the
    title kept, the head's style and the inlined scripts left out, fslab's version normalised."""
    from fslab import version

    tree = _Tree()
    tree.feed(page)
    charts = next(json.loads(text) for attrs, text in tree.scripts if attrs.get("id") == "fslab-charts")
    html = next(c for c in tree.root.children if isinstance(c, Node) and c.tag == "html")
    head, body = (next(c for c in html.children if isinstance(c, Node) and c.tag == tag) for tag in ("head", "body"))
    title = next(c for c in head.children if isinstance(c, Node) and c.tag == "title")
    text = "\n".join([f"title: {title.inline()}", *_lines(body, 0)]) + "\n"
    return text.replace(f"fslab {version()}", "fslab <version>"), charts


# --- the DOM diff ----------------------------------------------------------------------------------


@dataclass
class Line:
    """An outline's line read back, with the lines indented under it: an element and what it holds."""

    text: str
    children: list[Line] = field(default_factory=list)

    @property
    def header(self) -> str:
        """The element with its attributes, without its text (a text line is all header)."""
        return self.text if self.text.startswith("| ") else self.text.split(": ", 1)[0]

    def charts(self) -> list[str]:
        """The names of the charts within it: each figure's title, else its chart's key."""
        keys = re.findall(r"\[data-chart=([^\]]+)\]", self.header)
        titles = [c.text.split(": ", 1)[1] for c in self.children if c.header == "p.chart-title"]
        if self.header.startswith("figure") and titles:
            return titles
        return keys + [name for child in self.children for name in child.charts()]

    def ids(self) -> set[str]:
        return set(re.findall(r"#([^.\[]+)", self.header)).union(*(c.ids() for c in self.children))

    def heading(self) -> str | None:
        """The heading it opens with, if any (a section's name)."""
        first = self.children[0] if self.children else None
        return first.text.split(": ", 1)[1] if first and re.match(r"h[1-6]\b", first.header) else None


def read_outline(text: str) -> Line:
    root = Line("document")
    stack = [(-1, root)]
    for raw in text.splitlines():
        depth = (len(raw) - len(raw.lstrip(" "))) // 2
        while stack[-1][0] >= depth:
            stack.pop()
        line = Line(raw.strip())
        stack[-1][1].children.append(line)
        stack.append((depth, line))
    return root


@dataclass
class PageDiff:
    added: list[str] = field(default_factory=list)  # each chart section added: its name and its charts'
    changes: list[str] = field(default_factory=list)  # every other difference: each one a failure


def diff_pages(before: str, after: str, charts_before: dict, charts_after: dict) -> PageDiff:
    """The page `after` against `before` (their outlines and their charts' specifications): the
    chart sections added, by name, and every other difference — an element removed, changed or
    added that holds no chart; a row's cell, a number, a word; a chart's specification changed or
    gone. An added chart section is a run of elements added side by side that holds a chart (a
    figure in a chart grid; a section or heading with its grid), and a link to it in the nav."""
    from conftest import same_document

    diff = PageDiff()
    links: list[tuple[str, str]] = []  # (where, the section it links to)
    added_ids: set[str] = set()

    def compare(old: Line, new: Line, where: str) -> None:
        matcher = difflib.SequenceMatcher(
            None, [c.text for c in old.children], [c.text for c in new.children], autojunk=False
        )
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            olds, news = old.children[i1:i2], new.children[j1:j2]
            if op == "equal":
                for a, b in zip(olds, news):
                    compare(a, b, f"{where} > {a.header}")
                continue
            while olds and news and olds[0].header == news[0].header:  # the same element, its text changed
                diff.changes.append(f"{where}: changed: {olds[0].text!r} → {news[0].text!r}")
                olds, news = olds[1:], news[1:]
            diff.changes += [f"{where}: removed: {_described(a)}" for a in olds]
            if news and old.header == "nav" and all(b.header.startswith("a[href=#") for b in news):
                links.extend((where, b.header.split("#", 1)[1].rstrip("]")) for b in news)
            elif news and any(b.charts() for b in news) and not any("table" in _all_headers(b) for b in news):
                name = next((h for h in (b.heading() for b in news) if h), None) or next(
                    (b.text.split(": ", 1)[1] for b in news if re.match(r"h[1-6]\b", b.header)), None
                )
                charts = [c for b in news for c in b.charts()]
                diff.added.append(f"{name}: {', '.join(charts)}" if name else ", ".join(charts))
                added_ids.update(*(b.ids() for b in news))
            else:
                diff.changes += [f"{where}: added, holding no chart: {b.text!r}" for b in news]

    compare(read_outline(before), read_outline(after), "page")
    diff.changes += [
        f"{where}: a link to no added section: #{target}" for where, target in links if target not in added_ids
    ]
    for key, spec in charts_before.items():
        try:
            same_document(charts_after.get(key), spec)
        except AssertionError as error:
            diff.changes.append(
                f"chart {key}: " + ("gone" if key not in charts_after else f"its specification changed ({error})")
            )
    drawn = set(re.findall(r"\[data-chart=([^\]]+)\]", after))
    diff.changes += [f"chart {key}: specified, on no figure" for key in charts_after.keys() - drawn]
    return diff


def _described(line: Line) -> str:
    """A line, with what names what it holds (its heading, its charts) and how much it holds."""
    named = line.heading() or ", ".join(line.charts())
    return (
        repr(line.text)
        + (f" ({named})" if named else "")
        + (f" and {len(line.children)} within" if line.children else "")
    )


def _all_headers(line: Line) -> list[str]:
    return [line.header.split(".")[0].split("#")[0]] + [h for c in line.children for h in _all_headers(c)]


# The study of kinds.db, stored once by tests/synthetic.py (seed 5) with `write_database`:
# fio, sysbench, dd and a scenario of two tools' phases; a target whose every run fails (the kernel
# refuses its mount option) and a workload every run of which its kind found implausible.
KINDS_STUDY = """\
[study]
name = "kinds"
repetitions = 3
workloads = ["rand_read"]
image_size = "512MiB"
image_fill = "sparse"

[fio]
size = "32MiB"
runtime = "1s"

[[target]]
filesystem = ["ext4", "xfs", "raw"]

[[target]]
name = "bad"
filesystem = "ext4"
mount_options = "journal_async_commit"

[[workload]]
name = "mail"
kind = "sysbench"
options = { "file-num" = 100, "file-total-size" = "400K", time = 1 }
targets = ["ext4", "xfs"]

[[workload]]
name = "sanity"
kind = "dd"
data = "zeros"
options = { bs = "1M", count = 32 }
targets = ["ext4", "xfs", "bad"]

[[workload]]
name = "mix"
kind = "scenario"
size = "32MiB"
data = "zeros"
targets = ["ext4", "xfs"]

[[workload.phase]]
name = "fill"
fio = { rw = "write", bs = "1m", end_fsync = 1 }

[[workload.phase]]
name = "mail"
sysbench = { "file-num" = 8, "file-total-size" = "512K", time = 1 }
"""


# The study of tests/fixtures/golden/layout.db, stored alike: as small as shows every part of each
# format's layout (a fio workload's tables, a tool's, a flagged figure, a failed target).
LAYOUT_STUDY = """\
[study]
name = "layout"
repetitions = 3
workloads = ["rand_read"]
image_size = "512MiB"
image_fill = "sparse"

[fio]
size = "32MiB"
runtime = "1s"

[[target]]
filesystem = ["ext4", "raw"]

[[target]]
name = "bad"
filesystem = "ext4"
mount_options = "journal_async_commit"

[[workload]]
name = "sanity"
kind = "dd"
data = "zeros"
options = { bs = "1M", count = 32 }
targets = ["ext4", "bad"]
"""


def write_database(path: Path, study: str = KINDS_STUDY) -> None:
    """kinds.db (or layout.db) written again: only to change what it holds, as the files rendered
    from it are kept."""
    import sqlite3

    from fslab.model.records import RunFailure
    from fslab.results import ResultsDB
    from synthetic import stored_study

    argv = ["mount", "-o", "journal_async_commit", "/dev/loop0", "/var/tmp/fslab/mnt/bad"]
    refused = RunFailure(
        phase="provision",
        traceback=f"fslab.system.CommandError: {' '.join(argv)}: exit status 32",
        argv=argv,
        exit_status=32,
        stderr_tail="mount: /var/tmp/fslab/mnt/bad: wrong fs type, bad option",
    )
    path.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        db = ResultsDB(str(path))
        stored_study(
            Path(folder),
            study,
            db,
            name=f"{path.stem}.toml",
            seed=5,
            scale={"raw": 1.0, "ext4": 0.93, "xfs": 0.9},
            failing={"bad": (f"{' '.join(argv)}: exit status 32", refused)},
            flagged={"sanity"},
        )
        db.engine.dispose()
    with sqlite3.connect(path) as conn:
        conn.execute("VACUUM")


def write_rendered(database: Path, into: Path, names: tuple[str, ...] = RENDERED) -> None:
    """What this fslab renders of a database, written into a folder (made if missing)."""
    with tempfile.TemporaryDirectory() as scratch:
        rendered = render(database, Path(scratch))
    into.mkdir(parents=True, exist_ok=True)
    for name in names:
        (into / name).write_text(rendered[name])
    print(into, {name: len(rendered[name]) for name in names})


if __name__ == "__main__":
    sys.path.insert(0, str(TESTS))
    if "--databases" in sys.argv:  # what they hold changed: written again first
        write_database(BASELINE / "kinds.db")
        write_database(GOLDEN / "layout.db", LAYOUT_STUDY)
    if "--golden" in sys.argv:  # a format's layout changed, on purpose
        write_rendered(GOLDEN / "layout.db", GOLDEN, GOLDEN_FILES)
    else:
        for fixture, database in fixture_databases().items():
            write_rendered(database, BASELINE / fixture)
