"""An explanation beside every decided verdict (fslab.statistics.explain): each rule fires only where its
own metric's difference between the two cells is decided by the comparison machinery (never a bare
point difference), the most telling first; where nothing measured differs, one phrase says so; every
output shows it beside a decided verdict and beside no other. On samples built by hand."""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from conftest import fslab_in_process
from fslab.core.registry import scoped
from fslab.fio.output import metric as fio_metric
from fslab.model import Metric, Roles
from fslab.model.records import SampleGroups
from fslab.results import ResultsDB, RunRecord
from fslab.results.owner import Owner
from fslab.statistics.analysis import analyse, compare_study_runs, explained
from fslab.statistics.explain import (
    DIFFERENCE,
    NOTHING_DIFFERS,
    NOTHING_MEASURED,
    RULES,
    Asked,
    Rule,
    Side,
    explain,
    rules,
)
from fslab.statistics.stats import SLOWER
from fslab.study import parse_study

JITTER = (0.996, 1.0, 1.004, 0.998, 1.002)  # each run's factor: tight, so a difference of a few % is decided
LOOSE = (0.3, 1.9, 0.6, 1.5, 0.7)  # far too spread for 5 runs to decide anything


def level(rule: Rule, strength: float, baseline: float) -> float:
    """The target's value `strength` thresholds away from `baseline` on the rule's own scale."""
    if rule.scale == DIFFERENCE:
        return baseline + strength * rule.threshold * rule.unit
    return baseline * (1 + rule.threshold) ** strength


def base_of(rule: Rule) -> float:
    """A baseline value in the rule's metric's range (a share's in [0, 1], a percentage's in [0, 100])."""
    if rule.name == "device_written_bytes":
        return 2.0**27  # 128 MiB: below 64 MiB on both sides it does not apply
    return 0.02 * rule.unit if rule.scale == DIFFERENCE else 100.0


def runs(value: float, factors: tuple[float, ...] = JITTER, additive: float | None = None) -> list[float]:
    """A cell's runs around `value`: multiplied by `factors`, or (`additive`) shifted by that much × (factor − 1)."""
    return [value + additive * (f - 1) if additive is not None else value * f for f in factors]


def cell(rule: Rule, value: float, factors: tuple[float, ...] = JITTER) -> list[float]:
    return runs(value, factors, rule.unit * 0.5 if rule.scale == DIFFERENCE else None)


def asked(baseline: dict[str, list[float]], other: dict[str, list[float]], **notes: int) -> Asked:
    """A decided verdict on write IOPS to explain (its own values play no part in it)."""
    return Asked(Side(baseline), Side(other, notes=notes), "write_iops", "ext4")


RULE_NAMES = [r.name for r in rules()]


@pytest.mark.parametrize("name", RULE_NAMES)
def test_each_rule_ranks_first_where_its_difference_is_the_largest(name):
    """A study run's samples built by hand (SampleGroups): btrfs decided slower than ext4 in write
    IOPS, the rule's metric 8 of its thresholds apart and another rule's 2 — the rule ranks first
    in the row's explanation. A ranking that ignored the size of the effect, or a rule that never
    fires, fails."""
    rule = RULES[name]
    second = RULES["extents" if name != "extents" else "cpu_us_per_io"]
    ext4 = {rule.metric: cell(rule, base_of(rule)), second.metric: cell(second, base_of(second))}
    btrfs = {
        rule.metric: cell(rule, level(rule, 8, base_of(rule))),
        second.metric: cell(second, level(second, 2, base_of(second))),
    }
    roles = Roles.flagged([("w", "write_iops", True, True)])
    groups = SampleGroups(
        {("w", "ext4"): ext4 | {"write_iops": runs(1000.0)}, ("w", "btrfs"): btrfs | {"write_iops": runs(500.0)}},
        {},
        {"write_iops": True},
        roles,
    )
    a = analyse(groups.values, groups.higher_is_better, ["ext4", "btrfs"], ["w"], roles=groups.roles)
    [row] = explained(a, groups.values).rows
    assert row.comparison.verdict == SLOWER and row.explanation is not None
    found = row.explanation
    assert [c.rule for c in found.clauses] == [name, second.name], found.sentence
    assert found.sentence.startswith("with ") and " and " in found.sentence and "(ext4: " in found.sentence
    assert found.clauses[0].strength > found.clauses[1].strength > 1


@pytest.mark.parametrize("name", RULE_NAMES)
def test_a_rule_whose_difference_is_undecided_does_not_fire(name):
    """A difference of means of 4 thresholds, its runs spread too widely to decide: no clause — a
    rule reading a point difference would fire. The phrase counts it undecided, never "no difference"."""
    rule = RULES[name]
    additive = 1.5 * rule.unit if rule.scale == DIFFERENCE else None
    centre = base_of(rule) + (additive or 0)
    baseline = {rule.metric: runs(centre, LOOSE, additive)}
    other = {rule.metric: runs(level(rule, 4, centre), LOOSE[::-1], additive)}
    assert abs(math.fsum(other[rule.metric]) / 5 - level(rule, 4, centre)) < 1e-6 * rule.unit * 100
    [found] = explain([asked(baseline, other)])
    assert found.clauses == () and found.measured == 1 and found.undecided == 1
    assert found.sentence == "with no decided difference in what the kernel did (1 of 1 measures undecided)"


@pytest.mark.parametrize("name", RULE_NAMES)
def test_a_certain_difference_within_the_rules_threshold_does_not_fire(name):
    """Half a threshold apart, tightly: decided that it differs from 0 perhaps, but not beyond the
    threshold — no clause (a rule firing on any significant difference fails)."""
    rule = RULES[name]
    baseline = {rule.metric: cell(rule, base_of(rule))}
    other = {rule.metric: cell(rule, level(rule, 0.5, base_of(rule)))}
    [found] = explain([asked(baseline, other)])
    assert found.clauses == ()


def test_the_issues_example_reads_as_it_says():
    """Btrfs's direct writes through the page cache and twice the CPU per I/O: both named, the
    buffered share first (19 thresholds beyond, against 7), with "with", never "because"."""
    baseline = {"write_buffered_share": runs(0.0, additive=0.01), "cpu_us_per_io": runs(10.0)}
    other = {"write_buffered_share": runs(0.99, additive=0.01), "cpu_us_per_io": runs(21.0)}
    [found] = explain([asked(baseline, other)])
    assert found.sentence == (
        "with 99 % of its direct writes through the page cache (ext4: 0 %) "
        "and 2.1× the CPU per I/O (21.0 µs; ext4: 10.0 µs)"
    )
    assert "because" not in found.sentence


def test_nothing_measured_and_nothing_differing_are_each_said_once():
    """No monitor metric in either cell: "nothing measured"; every measure decided equivalent:
    "no measured difference" — one phrase each, never a list of rules that did not fire."""
    [none] = explain([asked({"write_iops": [1.0, 2.0]}, {"write_iops": [3.0, 4.0]})])
    assert none.sentence == NOTHING_MEASURED
    same = {"cpu_us_per_io": runs(10.0), "host_cpu_busy_pct": runs(30.0), "extents": runs(4.0)}
    [alike] = explain([asked(same, {k: v[::-1] for k, v in same.items()})])
    assert alike.sentence == NOTHING_DIFFERS and alike.measured == 3 and alike.undecided == 0


def test_the_notes_a_rule_counts_are_named_and_more_clauses_are_counted():
    """served_by_cache counted in the cache rule's clause; beyond three clauses the rest counted."""
    metrics = ["device_read_ratio", "cpu_us_per_io", "extents", "host_cpu_busy_pct", "block_request_bytes_read"]
    baseline = {m: cell(RULES[m], base_of(RULES[m]) * (50 if m == "device_read_ratio" else 1)) for m in metrics}
    other = {m: cell(RULES[m], level(RULES[m], 3 + i, baseline[m][1])) for i, m in enumerate(metrics)}
    other["device_read_ratio"] = runs(0.02, additive=0.01)  # the devices read 2 % of it: a cache answered
    [found] = explain([asked(baseline, other, served_by_cache=5)])
    assert found.clauses[0].rule == "device_read_ratio"
    assert "served by a cache in 5 of 5 runs" in found.clauses[0].says
    assert found.sentence.endswith(" and 2 more measured differences")


def test_a_write_amplification_its_commits_made_counts_the_runs_flagged_so():
    """64 MiB of random 4k writes on zfs-fuse: 26.9× with 128K records, its runs flagged
    rewritten_by_commits, against 1.15× with 4K records — the clause says how many were."""
    baseline = {"write_amplification": runs(1.15), "device_written_bytes": runs(1.15 * 64 * 2**20)}
    other = {"write_amplification": runs(26.9), "device_written_bytes": runs(26.9 * 64 * 2**20)}
    [found] = explain([asked(baseline, other, rewritten_by_commits=5)])
    assert found.clauses[0].rule == "write_amplification"
    assert found.clauses[0].says.endswith("(ext4: 1.15×; rewritten by its commits in 5 of 5 runs)")
    [unflagged] = explain([asked(baseline, other)])
    assert unflagged.clauses[0].says.endswith("(ext4: 1.15×)"), "no run flagged: nothing counted"


def test_nothing_on_either_side_and_a_few_kib_are_no_measure():
    """A read workload's device writes: 0 on both sides is no measure (not "undecided"); a few KiB
    of journal against none is below what device_written_bytes compares (64 MiB)."""
    [zero] = explain([asked({"device_written_bytes": [0.0] * 5}, {"device_written_bytes": [0.0] * 5})])
    assert zero.sentence == NOTHING_MEASURED
    [few] = explain([asked({"device_written_bytes": runs(4096.0)}, {"device_written_bytes": runs(40960.0)})])
    assert few.clauses == () and few.measured == 0


def test_a_figure_withheld_and_a_rule_that_yields_do_not_fire():
    """Write amplification of a workload that wrote under 64 MiB is not given (traffic.py), so it
    explains nothing; the device's bytes written yield where write amplification is measured."""
    small = {"device_written_bytes": runs(2**20), "write_amplification": runs(1.0)}
    large = {"device_written_bytes": runs(2**21), "write_amplification": runs(2.0)}
    [found] = explain([asked(small, large)])
    assert found.clauses == () and found.measured == 0


def test_a_rule_is_one_module_joining_the_registry():
    """A rule added from outside (a plugin's, here a test's) fires like fslab's own, and is gone after."""
    with scoped():
        RULES.add(Rule("toy", "toy_metric", "toy differs by 10 %", lambda d: f"{d.mean:.0f} toys", priority=1))
        [found] = explain([asked({"toy_metric": runs(10.0)}, {"toy_metric": runs(20.0)})])
        assert found.sentence == "with 20 toys" and "toy" in RULES.added()
    assert "toy" not in RULES


def test_a_rule_reads_its_metric_in_the_verdicts_phase():
    """A scenario's "after.read_iops" verdict is explained by "after.extents", never "before.extents"."""
    baseline = {"before.extents": runs(2.0), "after.extents": runs(2.0)}
    other = {"before.extents": runs(2.0), "after.extents": runs(11432.0)}
    [after] = explain([Asked(Side(baseline), Side(other), "after.read_iops", "ext4")])
    [before] = explain([Asked(Side(baseline), Side(other), "before.read_iops", "ext4")])
    assert [c.key for c in after.clauses] == ["after.extents"] and "11,432 extents" in after.sentence
    assert before.clauses == ()


def samples() -> dict[tuple[str, str], dict[str, list[float]]]:
    """ext4 and btrfs, a direct write: btrfs 0.06× the IOPS, its writes through the page cache."""
    return {
        ("w", "ext4"): {"write_iops": runs(1000.0), "write_buffered_share": runs(0.0, additive=0.01)},
        ("w", "btrfs"): {"write_iops": runs(60.0), "write_buffered_share": runs(0.99, additive=0.01)},
    }


def test_analysis_explains_its_decided_rows_and_no_other():
    """analyse then explained: the decided row carries its explanation, an undecided one none."""
    values = samples()
    values[("w", "xfs")] = {"write_iops": runs(1000.0, LOOSE), "write_buffered_share": runs(0.5, LOOSE)}
    roles = Roles.flagged([("w", "write_iops", True, True)])
    a = explained(analyse(values, {"write_iops": True}, ["ext4", "btrfs", "xfs"], ["w"], roles=roles), values)
    by_target = {r.target: r for r in a.rows}
    assert by_target["btrfs"].comparison.verdict == SLOWER
    assert "99 % of its direct writes through the page cache (ext4: 0 %)" in by_target["btrfs"].explanation.sentence
    assert not by_target["xfs"].comparison.differs and by_target["xfs"].explanation is None


def test_compare_explains_newer_against_older():
    """`fslab compare`'s rows: the older study run named as the baseline in each clause."""
    older, newer = samples()[("w", "ext4")], samples()[("w", "btrfs")]
    roles = Roles.flagged([("w", "write_iops", True, True)])
    groups = [SampleGroups({("w", "t"): v}, {}, {"write_iops": True, "write_buffered_share": False}, roles)
              for v in (older, newer)]  # fmt: skip
    [row] = compare_study_runs(*groups, against="study run 1")
    assert row.explanation is not None and "(study run 1: 0 %)" in row.explanation.sentence


STUDY = """\
[study]
name = "explained"
repetitions = 5
workloads = ["seq_write"]

[[target]]
filesystem = ["ext4", "btrfs"]
"""


def store(db: ResultsDB, iops: dict[str, float], share: dict[str, float], day: int) -> int:
    """One study run: each target's write IOPS and buffered share, a run per block; btrfs's runs noted disturbed."""
    study = parse_study(STUDY, "explained.toml", base_dir=Path("."))
    owner, start = Owner.current(Path(".")), datetime(2026, 1, 1) + timedelta(days=day)
    study_run = db.begin_study_run(study, 1, {"kernel": "6.18"}, {"fio": "fio-3.39"}, {"runs": 5}, owner)
    for block, f in enumerate(JITTER, start=1):
        for position, target in enumerate(("ext4", "btrfs"), start=1):
            at = start + timedelta(minutes=2 * block + position)
            db.record_run(study_run, RunRecord(
                target=target, workload="seq_write", repetition=block, warmup=False, block=block,
                position=position, started_at=at, finished_at=at + timedelta(seconds=2), status="ok",
                buffered=False,
                metrics=[fio_metric("write_iops", iops[target] * f), fio_metric("write_mb_s", iops[target] * f),
                         Metric("write_buffered_share", share[target] + (f - 1), "", False)],
            ))  # fmt: skip
    db.finish_study_run(study_run, "finished", {})
    return study_run


def test_every_output_shows_the_explanation_beside_a_decided_verdict(tmp_path):
    """summary.json (an `explanation` per comparison: clauses and sentence; null beside an
    undecided one), summary.md, the console, the page and `fslab compare`."""
    path = tmp_path / "explained.db"
    db = ResultsDB(str(path))
    store(db, {"ext4": 1000.0, "btrfs": 60.0}, {"ext4": 0.0, "btrfs": 0.99}, 0)
    store(db, {"ext4": 1000.0, "btrfs": 1000.0}, {"ext4": 0.0, "btrfs": 0.0}, 1)
    said = "with 99 % of its direct writes through the page cache (ext4: 0 %)"
    done = fslab_in_process("summary", "1", "--db", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert said in " ".join(done.stdout.split()), done.stdout
    out = tmp_path / "reports" / "explained-1"
    document = json.loads((out / "summary.json").read_text())
    [row] = [c for c in document["comparisons"] if c["metric"] == "write_iops"]
    assert row["verdict"] == SLOWER and row["explanation"]["sentence"] == said
    [clause] = row["explanation"]["clauses"]
    assert clause["rule"] == "write_buffered_share" and math.isclose(clause["value"], 0.99)
    assert clause["interval"][0] > 0.9 and clause["says"] in said
    assert said in (out / "summary.md").read_text()
    page = fslab_in_process("report", "1", "--db", str(path), "--output", str(tmp_path / "page"))
    assert page.returncode == 0, page.stderr
    html = next((tmp_path / "page").glob("*.html")).read_text()
    assert said in html
    compared = fslab_in_process("compare", "1", "2", "--db", str(path))
    # btrfs faster in study run 2, with none of its writes through the page cache (study run 1: 99 %)
    assert "with 0 % of its direct writes through the page cache (study run 1: 99 %)" in " ".join(
        compared.stdout.split()
    ), compared.stdout


DOC = Path(__file__).parent.parent / "docs" / "statistics.md"


def explanations_section() -> str:
    text = DOC.read_text()
    return text[text.index("## Explanations") : text.index("## Figures that cannot be real")]


def test_the_docs_list_every_rule_with_its_priority_and_trigger():
    """docs/statistics.md's table of rules is the registry's: a rule added, renamed or reworded
    without its row fails."""
    rows = {
        cells[0].strip("` "): cells
        for line in explanations_section().splitlines()
        if line.startswith("| `") and len(cells := line.strip("|").split(" | ")) == 5
    }
    assert sorted(rows) == sorted(RULE_NAMES)
    for rule in rules():
        _, priority, scale, trigger, _ = rows[rule.name]
        assert int(priority) == rule.priority and scale.startswith(rule.scale) and trigger == rule.trigger


def test_the_docs_example_of_a_new_rule_runs_as_written():
    """The example that adds a rule in docs/statistics.md runs, and its assertion holds."""
    [code] = re.findall(r"```python\n(.*?)```", explanations_section(), re.S)
    with scoped():
        exec(compile(code, str(DOC), "exec"), {})
    assert "dirty_pages" not in RULES
