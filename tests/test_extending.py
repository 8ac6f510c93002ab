"""Issue 34's done-when: a toy filesystem, a toy workload kind, a toy monitor and a toy report
format, each one module — the very code docs/extending.md shows, taken from the page — registered,
and `fslab list`, `fslab doctor`, a study run, the summary, the export and the page pick them up
with no other file touched."""

import json
import re
import runpy
from pathlib import Path

import pytest

from conftest import fslab_in_process, write_study
from fslab.core import registry
from fslab.results import ResultsDB
from test_extending_doc import doc_modules

STUDY = """\
[study]
name = "toys"
repetitions = 2
image_size = "64MiB"
image_fill = "sparse"

[[target]]
filesystem = "ext2"
reserved = 1

[[workload]]
name = "truth"
kind = "true"
times = 3
"""


@pytest.fixture
def doc_toys(tmp_path: Path):
    """The four modules of docs/extending.md, each written out as a file and run as an import runs
    it (each joins its registry itself), for this test alone."""
    modules = doc_modules()
    assert sorted(modules) == ["filesystem", "monitor", "report_format", "workload_kind"]
    with registry.scoped():
        for name, code in modules.items():
            path = tmp_path / "doc" / f"toy_{name}.py"
            path.parent.mkdir(exist_ok=True)
            path.write_text(code)
            runpy.run_path(str(path))
        yield


@pytest.mark.root
def test_four_toys_from_the_extending_doc_are_picked_up_everywhere(doc_toys, workdir, tmp_path):
    listed = fslab_in_process("list", "--json")
    assert listed.returncode == 0, listed.stderr
    names = {section: [entry["name"] for entry in entries] for section, entries in json.loads(listed.stdout).items()}
    assert names["filesystems"][-1] == "ext2" and names["kinds"][-1] == "true" and names["monitors"][-1] == "toy"
    assert {"toy.txt", "toy"} <= set(names["formats"])

    doctor = fslab_in_process("doctor", "--workdir", str(workdir.root))
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert re.search(r"^ext2 tools +ok +ext2 targets", doctor.stdout, re.M)
    assert re.search(r"^true +ok +true workloads", doctor.stdout, re.M)
    assert (
        "extended here with: filesystem ext2, workload kind true, monitor toy, report file toy.txt, export form toy"
        in doctor.stdout
    )

    db = tmp_path / "r.db"
    ran = fslab_in_process(
        "run", str(write_study(tmp_path, STUDY)), "--no-ceiling", "--db", str(db), "--workdir", str(workdir.root)
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    results = ResultsDB(str(db))
    study_run = results.study_run()["id"]
    runs = results.runs(study_run)
    assert [(r["workload"], r["target"]) for r in runs] == [("truth", "ext2")] * 2
    assert all(r["mkfs_command"][:3] == ["mkfs.ext2", "-F", "-q"] for r in runs), "the toy filesystem made them"
    values = results.sample_groups(study_run).values[("truth", "ext2")]
    assert len(values["true_ms"]) == 2 and all(v > 0 for v in values["true_ms"]), "the toy kind measured"
    assert values["toy_edges"] == [2, 2], "the toy monitor watched each run's window"

    summary = fslab_in_process("summary", "--db", str(db))
    assert summary.returncode == 0, summary.stdout + summary.stderr
    assert "reserved=1%" in summary.stdout and "true_ms" in summary.stdout
    assert re.search(r"toy\n.*edges\n.*\n^ext2 .* 2\.0 *$", summary.stdout, re.M | re.S), "the toy monitor's column"
    [toy_txt] = db.parent.rglob("toy.txt")
    assert "toy edges" in (toy_txt.parent / "summary.md").read_text()
    assert re.fullmatch(r"ext2 · truth: \d+ metrics\n", toy_txt.read_text()), "the toy report file, beside the others"
    exported = fslab_in_process("export", "--db", str(db), "-o", str(tmp_path / "out"), "--format", "toy")
    assert exported.returncode == 0 and sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "comparisons.toy",
        "runs.toy",
        "summary.toy",
    ]

    page = fslab_in_process("report", "--db", str(db))
    assert page.returncode == 0, page.stdout + page.stderr
    [html] = db.parent.rglob("report.html")
    text = html.read_text()
    assert "ext2" in text and "true_ms" in text and "toy edges" in text
    # The toy kind's time series: when the workload-kind protocol's report hook lands (issue 34,
    # "every kind reports through one hook"), docs/extending.md's toy kind declares a series and
    # this page is asserted to draw its chart here.


def test_fslabs_own_entries_are_its_own_and_any_other_extends_it():
    """What `fslab doctor` names as "extended here with": every entry fslab's own modules add
    (own=True) is not, whichever module imported theirs first; a toy's is, and so is a release
    function a plugin registers through the journal's `releaser` (the decorator's frame is
    fslab's: read from the caller's frame, it counted as fslab's own)."""
    from fslab.cli.catalogue import from_outside
    from fslab.core.journal import MAKERS, RELEASERS, releaser
    from fslab.filesystems.base import FILESYSTEMS, Filesystem

    with registry.scoped():
        assert from_outside() == [] and RELEASERS.added() == []
        assert set(MAKERS) <= set(RELEASERS.own()), "every release function of fslab's is its own"

        class Toy(Filesystem):  # a toy (a plugin's filesystem), as docs/extending.md shows one
            kind = "toyfs"

        FILESYSTEMS.add(Toy())
        releaser("toy-thing")(lambda entry, home: None)
        assert from_outside() == ["filesystem toyfs"] and RELEASERS.added() == ["toy-thing"]
    assert from_outside() == [] and "toy-thing" not in RELEASERS
