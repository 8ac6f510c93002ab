"""A workload compared with another on each target both ran on (issue 32, item 3): `compare_with`
in a study file, checked and settled (a sweep's too); the comparisons, in the one family with
the same statistics as the targets'; shown in the console, Markdown, JSON and the page, and
worded in the conclusions. Stored or synthetic samples only: never this machine's speed."""

import json
import random
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from fslab.report.conclusions import conclusions
from fslab.report.console import print_summary
from fslab.report.details import RunDetails
from fslab.report.formats.markdown import to_markdown
from fslab.report.formats.summary_json import to_json
from fslab.report.html import Page, render_page, run_section
from fslab.report.sections import BETWEEN_TITLE
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB
from fslab.statistics.analysis import analyse
from fslab.statistics.stats import SamplePair, adjust_family, compare_pairs
from fslab.study import StudyError, parse_study
from synthetic import stored_study

STUDY = """\
[study]
name = "paired"
repetitions = 3
image_size = "1GiB"
[fio]
size = "64MiB"
runtime = "2s"
[[target]]
filesystem = ["ext4", "xfs"]
[[workload]]
name = "plain"
rw = "randwrite"
[[workload]]
name = "deep"
rw = "randwrite"
iodepth = [1, 8]
compare_with = "plain"
[[workload]]
name = "deeper"
rw = "randwrite"
iodepth = [1, 8]
compare_with = "deep"
"""


def study(text: str = STUDY):
    return parse_study(text, "s.toml", base_dir=Path("."))


def test_compare_with_names_a_workload_and_a_sweep_pairs_value_with_value():
    """A swept workload's each compared with the workload named, or, that one swept too, with
    its workload of the same values. Refused on the old code (an unknown field)."""
    paired = {w.name: w.compare_with for w in study().workloads}
    assert paired == {
        "plain": None, "deep[iodepth=1]": "plain", "deep[iodepth=8]": "plain",
        "deeper[iodepth=1]": "deep[iodepth=1]", "deeper[iodepth=8]": "deep[iodepth=8]",
    }  # fmt: skip
    one = study(STUDY.replace('compare_with = "plain"', 'compare_with = "deeper[iodepth=8]"'))
    named = {w.name: w.compare_with for w in one.workloads}
    assert named["deep[iodepth=1]"] == "deeper[iodepth=8]", "one workload of a sweep, by its name"
    specs = [w.spec() for w in study().workloads]
    assert specs[1]["compare_with"] == "plain" and "compare_with" not in specs[0], "stored with it; absent as before"


ASKED = 'compare_with = "plain"'
PLAIN = 'name = "plain"\nrw = "randwrite"'
DEEPER = 'iodepth = [1, 8]\ncompare_with = "deep"'


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ((ASKED, 'compare_with = "plian"'), r"s\.toml:\d+: workload\[1\]\.compare_with: unknown workload 'plian'"),
        ((ASKED, 'compare_with = "deep"'), r"workload\[1\]\.compare_with: 'deep' is this workload itself"),
        ((ASKED, 'compare_with = "deep[iodepth=8]"'), r"\.compare_with: 'deep\[iodepth=8\]' is this workload itself"),
        (
            (PLAIN, PLAIN + '\ncompare_with = "deeper"'),
            r"workload\[0\]\.compare_with: 'deeper' is swept \(deeper\[iodepth=1\], deeper\[iodepth=8\]\) and",
        ),
        ((DEEPER, DEEPER.replace("1, 8", "2, 8")), r"'deep' is swept .* and 'deeper\[iodepth=2\]' has no workload of"),
    ],
)
def test_compare_with_is_refused_naming_the_field_and_why(change, said):
    with pytest.raises(StudyError, match=said):
        study(STUDY.replace(*change))


SCENARIO = ("after.read_iops", "overwrite.write_iops")


def test_paired_workloads_are_compared_per_target_in_the_targets_family():
    """Seed 001's table: each ZFS dataset with snapshots against itself without. The comparisons
    are those of two cells (stats), corrected in one family with the targets' pairs."""
    rng = random.Random(5)
    level = {
        ("in-place-writes", "zfs-128k"): 90.0, ("snapshots", "zfs-128k"): 72.0,  # 20 % slower with snapshots
        ("in-place-writes", "zfs-4k"): 10.0, ("snapshots", "zfs-4k"): 10.0,
    }  # fmt: skip
    samples = {
        cell: {m: [mean * rng.gauss(1, 0.02) for _ in range(5)] for m in SCENARIO} for cell, mean in level.items()
    }
    higher = dict.fromkeys(SCENARIO, True)
    workloads, targets = ["in-place-writes", "snapshots"], ["zfs-128k", "zfs-4k"]
    kinds = dict.fromkeys(workloads, "scenario")
    alone = analyse(samples, higher, targets, workloads, kinds=kinds)
    paired = analyse(samples, higher, targets, workloads, kinds=kinds, compare_with={"snapshots": "in-place-writes"})
    assert not alone.between and alone.family_size == 4, "without compare_with: the targets' pairs alone"
    assert paired.family_size == 4 + 4 and paired.between_of("in-place-writes") == []
    verdicts = {(r.target, r.metric): r.comparison.verdict for r in paired.between_of("snapshots")}
    assert verdicts == {
        ("zfs-128k", "after.read_iops"): "slower", ("zfs-128k", "overwrite.write_iops"): "slower",
        ("zfs-4k", "after.read_iops"): "undecided",
        ("zfs-4k", "overwrite.write_iops"): "undecided",
    }  # fmt: skip
    assert {r.baseline_workload for r in paired.between} == {"in-place-writes"}
    assert all(r.target == r.baseline for r in paired.between), "each on its own target"
    # the same statistics: the pairs of stats.compare_pairs, adjusted with every pair of targets
    a, b = targets
    pairs = [SamplePair(samples[(w, a)][m], samples[(w, b)][m]) for w in workloads for m in SCENARIO]
    pairs += [
        SamplePair(samples[("in-place-writes", t)][m], samples[("snapshots", t)][m]) for t in targets for m in SCENARIO
    ]
    family = adjust_family(compare_pairs(pairs), 0.03)
    assert [r.comparison for r in paired.between] == family[4:]
    assert paired.between_of("snapshots")[0].comparison.ratio == pytest.approx(0.8, rel=0.05)


def test_a_flagged_cell_is_in_no_workload_comparison(tmp_path):
    db = ResultsDB(str(tmp_path / "r.db"))
    s = summarize_study_run(db, stored_study(tmp_path, STUDY, db, flagged={"plain"}, env={}))
    assert {r.workload for r in s.analysis.between} == {"deeper[iodepth=1]", "deeper[iodepth=8]"}, "plain: nowhere"


def test_every_output_shows_the_workload_comparisons(tmp_path):
    db = ResultsDB(str(tmp_path / "r.db"))
    s = summarize_study_run(db, stored_study(tmp_path, STUDY, db, env={}, scale={"ext4": 1.0}))
    rows = s.analysis.between
    pairs = [("deep[iodepth=1]", "plain"), ("deep[iodepth=8]", "plain")]
    pairs += [("deeper[iodepth=1]", "deep[iodepth=1]"), ("deeper[iodepth=8]", "deep[iodepth=8]")]
    expected = {(w, against, t) for w, against in pairs for t in ("ext4", "xfs")}
    assert {(r.workload, r.baseline_workload, r.target) for r in rows} == expected
    assert s.analysis.family_size == sum(c.p_value is not None for c in s.analysis.pairs.values()) + len(rows)
    out = StringIO()
    print_summary(Console(file=out, width=120, color_system=None), s)
    console, markdown = out.getvalue(), to_markdown(s)
    assert console.count("compared on each target with workload plain") == 2
    assert "compared on each target with workload deep[iodepth=8]" in console
    assert markdown.count("Compared on each target with workload **plain**:") == 2
    assert "compared with it on each target both ran on, in the same family" in markdown
    document = json.loads(to_json(s))
    assert len(document["workload_comparisons"]) == len(rows) and "compare_with" in document["family"]["of"]
    listed = {(c["workload"], c["baseline_workload"], c["target"]) for c in document["workload_comparisons"]}
    assert listed == {(r.workload, r.baseline_workload, r.target) for r in rows}
    page = run_section(s, RunDetails())
    headings = {w.title.split(" (")[0]: [h for h, _ in w.comparisons] for w in page.workloads}
    assert headings["deeper[iodepth=8]"] == ["Compared with ext4", f"{BETWEEN_TITLE} deep[iodepth=8]"]
    html = render_page(Page("paired", [page]), vega_bundle=lambda: "")
    assert "<h3>Compared on each target with workload deep[iodepth=8]</h3>" in html
    said = [c.text for c in conclusions(s)["deep[iodepth=8]"]]
    worded = sum(text.startswith(("On ext4, deep[iodepth=8] ", "On xfs, deep[iodepth=8] ")) for text in said)
    assert worded == 2 * len({r.metric for r in rows}), "each target, each metric"


def test_a_pair_compared_on_no_target_says_why(tmp_path):
    """Random writes paired with random reads share no compared metric: said beside the rankings,
    not left silent; and with the workload it names flagged, that no target has figures of both."""
    db = ResultsDB(str(tmp_path / "r.db"))
    reads = STUDY.replace('name = "plain"\nrw = "randwrite"', 'name = "plain"\nrw = "randread"')
    s = summarize_study_run(db, stored_study(tmp_path, reads, db, env={}))
    assert {r.workload for r in s.analysis.between} == {"deeper[iodepth=1]", "deeper[iodepth=8]"}
    markdown = to_markdown(s)
    unpaired = "Compared with workload plain (compare_with) on no target: "
    assert markdown.count(unpaired + "no metric compared in both has figures on ext4, xfs.") == 2, "deep's two"
    flagged = summarize_study_run(db, stored_study(tmp_path, STUDY, db, flagged={"plain"}, env={}, name="f.toml"))
    assert unpaired + "no target has unflagged figures of both." in to_markdown(flagged)
