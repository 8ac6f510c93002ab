from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from fslab.core.errors import FslabError
from fslab.model import MetricKind, Roles
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB, RunRecord
from fslab.results.owner import Owner
from fslab.running.plan import Planner, Repetitions
from fslab.study import parse_study
from fslab.workloads import declared_metrics

STUDY = """\
[study]
name = "plan"
workloads = ["baseline"]
[[target]]
filesystem = ["ext4", "xfs", "btrfs"]
"""


def cells():
    return parse_study(STUDY, "s.toml", base_dir=Path(".")).cells


def fixed_plan(runs: int, seed: int, warmup: int = 0) -> list:
    planner = Planner(cells(), Repetitions(runs=runs, warmup=warmup), seed)
    plan = []
    while block := planner.next_block({}):
        plan += block
    return plan


def test_every_block_holds_every_cell_once_and_runs_are_exact():
    plan = fixed_plan(5, seed=7)
    assert len(plan) == 5 * 12
    for block in range(1, 6):
        keys = [p.cell.key for p in plan if p.block == block]
        assert Counter(keys) == Counter(c.key for c in cells())
        assert [p.position for p in plan if p.block == block] == list(range(1, 13))
    assert Counter(p.cell.key for p in plan) == {c.key: 5 for c in cells()}
    assert {p.repetition for p in plan if p.block == 3} == {3}


def test_blocks_are_shuffled_differently_and_reproducibly():
    plan = fixed_plan(5, seed=7)
    orders = {tuple(p.cell.key for p in plan if p.block == b) for b in range(1, 6)}
    assert len(orders) > 1, "every block in the same order is not interleaving"
    assert [p.cell.key for p in fixed_plan(5, seed=7)] == [p.cell.key for p in plan]
    assert [p.cell.key for p in fixed_plan(5, seed=8)] != [p.cell.key for p in plan]


def test_warmup_blocks_come_first_and_are_counted_apart():
    plan = fixed_plan(3, seed=1, warmup=2)
    assert [p.warmup for p in plan] == [True] * 24 + [False] * 36
    assert {p.repetition for p in plan[:12]} == {1} and {p.repetition for p in plan[24:36]} == {1}


ONE_TARGET = """\
[study]
name = "adaptive"
repetitions = 3
workloads = ["rand_read", "rand_write"]
[[target]]
filesystem = "ext4"
"""

TWO_TARGETS = """\
[study]
name = "adaptive"
repetitions = 3
workloads = ["rand_read"]
[[target]]
filesystem = ["ext4", "xfs"]
"""


def simulate(
    study: str,
    repetitions: Repetitions,
    cells: dict[tuple[str, str], tuple[float, float]],
    seconds_per_run: float = 0.0,
):
    """Feeds the planner samples drawn for each cell from (mean, log-normal sigma); returns the
    planner and its plan."""
    import numpy as np

    rng = np.random.default_rng(12)
    planner = Planner(parse_study(study, "s.toml", base_dir=Path(".")).cells, repetitions, seed=3)
    samples: dict[tuple[str, str], dict[str, list[float]]] = {}
    plan, elapsed = [], 0.0
    while block := planner.next_block(samples, elapsed, seconds_per_run):
        for run in block:
            plan.append(run)
            elapsed += seconds_per_run
            mean, sigma = cells[run.cell.key]
            samples.setdefault(run.cell.key, {}).setdefault("read_iops", []).append(
                float(rng.lognormal(np.log(mean), sigma))
            )
    return planner, plan


def test_target_ci_stops_a_low_noise_cell_before_a_high_noise_one():
    cells = {("rand_read", "ext4"): (50000, 0.01), ("rand_write", "ext4"): (40000, 0.08)}
    planner, plan = simulate(ONE_TARGET, Repetitions(runs=3, target_ci=0.03, max_runs=40), cells)
    quiet, noisy = planner.outcome()["ext4 · rand_read"], planner.outcome()["ext4 · rand_write"]
    assert quiet["status"] == "converged" and quiet["runs"] == 3, "±1 % noise is within ±3 % after the first runs"
    assert noisy["status"] == "converged" and noisy["runs"] > quiet["runs"] and noisy["half_width"] <= 0.03
    assert [p.cell.workload.name for p in plan[6:]] == ["rand_write"] * (noisy["runs"] - 3), (
        "only the wide cell runs on"
    )


def test_target_ci_gives_up_at_max_runs_and_says_so():
    cells = {("rand_read", "ext4"): (50000, 0.01), ("rand_write", "ext4"): (40000, 0.30)}
    planner, plan = simulate(ONE_TARGET, Repetitions(runs=3, target_ci=0.01, max_runs=6), cells)
    noisy = planner.outcome()["ext4 · rand_write"]
    assert noisy == {"runs": 6, "half_width": noisy["half_width"], "status": "max runs"} and noisy["half_width"] > 0.01
    assert sum(p.cell.workload.name == "rand_write" for p in plan) == 6


def test_a_comparison_beyond_doubt_needs_no_more_runs():
    clear = {("rand_read", "ext4"): (50000, 0.02), ("rand_read", "xfs"): (35000, 0.02)}  # 30 % apart
    planner, plan = simulate(TWO_TARGETS, Repetitions(runs=3, target_ci=0.001, max_runs=30), clear)
    assert {o["status"] for o in planner.outcome().values()} == {"decided"} and len(plan) == 6
    hopeless = {("rand_read", "ext4"): (50000, 0.15), ("rand_read", "xfs"): (50000, 0.15)}  # no difference, much noise
    planner, plan = simulate(TWO_TARGETS, Repetitions(runs=3, target_ci=0.01, max_runs=10), hopeless)
    assert {o["status"] for o in planner.outcome().values()} == {"futile"} and len(plan) < 20


def test_time_budget_stops_adding_blocks():
    cells = {("rand_read", "ext4"): (50000, 0.2), ("rand_write", "ext4"): (40000, 0.2)}
    planner, plan = simulate(
        ONE_TARGET, Repetitions(runs=3, target_ci=0.01, max_runs=100, time_budget=100), cells, seconds_per_run=10
    )
    assert len(plan) * 10 <= 100
    assert {o["status"] for o in planner.outcome().values()} == {"time budget"}


def test_fixed_runs_are_never_extended():
    cells = {("rand_read", "ext4"): (50000, 0.3), ("rand_write", "ext4"): (40000, 0.3)}
    planner, plan = simulate(ONE_TARGET, Repetitions(runs=4), cells)
    assert len(plan) == 8 and {o["status"] for o in planner.outcome().values()} == {"fixed"}


def test_no_comparison_with_a_substitute_when_the_baseline_was_skipped():
    """ext4, the study's baseline, skipped: xfs and btrfs are compared with none, so neither is
    stopped as "decided" against the other (the first target left) as if it were the baseline."""
    import numpy as np

    study = parse_study(
        STUDY.replace('name = "plan"', 'name = "plan"\nbaseline = "ext4"'), "s.toml", base_dir=Path(".")
    ).without({"ext4"})
    assert [t.name for t in study.targets] == ["xfs", "btrfs"]
    rng = np.random.default_rng(5)
    planner = Planner(
        [c for c in study.cells if c.workload.name == "rand_read"],
        Repetitions(runs=3, target_ci=0.001, max_runs=8),
        seed=3,
    )
    samples: dict = {}
    while block := planner.next_block(samples):
        for run in block:
            level = (
                50000 if run.cell.target.name == "xfs" else 25000
            )  # far apart: beyond doubt at once, were they compared
            samples.setdefault(run.cell.key, {}).setdefault("read_iops", []).append(
                float(rng.lognormal(np.log(level), 0.05))
            )
    assert {o["status"] for o in planner.outcome().values()} == {"max runs"}


BASES = """\
[study]
name = "bases"
repetitions = 3
workloads = ["rand_read", "rand_write"]
baseline = "ext4"

[[target]]
filesystem = "ext4"

[[target]]
name = "xfs"
filesystem = "xfs"
mount_options = ["defaults", "noatime"]

[[target]]
name = "gone"
filesystem = "btrfs"

[[target]]
name = "after-gone"
filesystem = "btrfs"
mount_options = "noatime"
baseline = "gone"
"""


def _summary_bases(tmp_path: Path, study, override: str | None) -> dict[tuple[str, str], str | None]:
    """Each cell's base as the summary of a study run of `study` (its runs synthetic) has it."""
    kind = MetricKind("s", higher_is_better=False, primary=True, compared=True)
    db = ResultsDB(str(tmp_path / f"{override}.db"))
    study_run = db.begin_study_run(study, 1, {}, {}, {}, Owner.current(tmp_path))
    for position, cell in enumerate(study.cells, start=1):
        for repetition in (1, 2, 3):
            db.record_run(study_run, RunRecord(
                target=cell.target.name, workload=cell.workload.name, repetition=repetition, warmup=False,
                block=repetition, position=position, started_at=datetime(2026, 1, 1), finished_at=datetime(2026, 1, 1),
                status="ok", buffered=False, metrics=[kind.of("elapsed_s", 10.0 + position + repetition / 10)],
            ))  # fmt: skip
    db.finish_study_run(study_run, "finished", {})
    rows = {
        (r.workload, r.target): r.baseline for r in summarize_study_run(db, study_run, baseline=override).analysis.rows
    }
    return {cell.key: rows.get(cell.key) for cell in study.cells}


def test_the_plan_and_the_summary_compare_each_cell_with_the_same_base(tmp_path):
    """One rule (analysis.compared_with) for both: the override, else the target's own (its table's,
    the study's for its filesystem, its sweep's first), and none for a target whose baseline was skipped."""
    study = parse_study(BASES, "s.toml", base_dir=Path(".")).without({"gone"})
    own = {"ext4": None, "xfs[defaults]": "ext4", "xfs[noatime]": "xfs[defaults]", "after-gone": None}
    overridden = {
        "ext4": "xfs[noatime]",
        "xfs[defaults]": "xfs[noatime]",
        "xfs[noatime]": None,
        "after-gone": "xfs[noatime]",
    }
    samples = {
        cell.key: {"elapsed_s": [10.0 + position + repetition / 10 for repetition in (1, 2, 3)]}
        for position, cell in enumerate(study.cells, start=1)
    }
    judged = frozenset((cell.workload.name, "elapsed_s") for cell in study.cells)
    for override, expected in [(None, own), ("xfs[noatime]", overridden)]:
        planner = Planner(study.cells, Repetitions(runs=3), seed=1, baseline=override)
        rows = {(r.workload, r.target): r.baseline for r in planner.analysis(samples, Roles(judged, judged)).rows}
        planned = {cell.key: rows.get(cell.key) for cell in study.cells}
        assert planned == {(w, t): base for w in ("rand_read", "rand_write") for t, base in expected.items()}, override
        assert _summary_bases(tmp_path, study, override) == planned, override


def test_a_baseline_override_no_target_answers_is_refused_before_any_run():
    """--baseline naming a skipped target (or none at all) was ignored by the plan, then refused by
    the summary after the whole study had run."""
    study = parse_study(BASES, "s.toml", base_dir=Path(".")).without({"gone"})
    for override in ("gone", "ext5"):
        with pytest.raises(
            FslabError,
            match=f"no target '{override}' in this study run; its targets: "
            "ext4, xfs\\[defaults\\], xfs\\[noatime\\], after-gone",
        ):
            Planner(study.cells, Repetitions(runs=3), seed=1, baseline=override)


THREE_TARGETS = """\
[study]
name = "decide"
repetitions = 3
workloads = ["rand_read"]
[[target]]
filesystem = ["ext4", "xfs", "btrfs"]
"""


def test_decide_stops_each_comparison_once_decided_equivalent_or_futile():
    clear = {("rand_read", "ext4"): (50000, 0.01), ("rand_read", "xfs"): (35000, 0.01)}  # 30 % apart
    planner, plan = simulate(TWO_TARGETS, Repetitions(runs=3, decide=True, max_runs=10), clear)
    assert {o["status"] for o in planner.outcome().values()} == {"decided"} and len(plan) == 6
    same = {("rand_read", "ext4"): (50000, 0.002), ("rand_read", "xfs"): (50000, 0.002)}  # equal, within ±0.2 %
    planner, plan = simulate(TWO_TARGETS, Repetitions(runs=3, decide=True, max_runs=10), same)
    assert {o["status"] for o in planner.outcome().values()} == {"equivalent"}
    hopeless = {("rand_read", "ext4"): (50000, 0.15), ("rand_read", "xfs"): (51500, 0.15)}  # 3 % apart, much noise
    planner, plan = simulate(TWO_TARGETS, Repetitions(runs=3, decide=True, max_runs=10), hopeless)
    assert {o["status"] for o in planner.outcome().values()} == {"futile"} and len(plan) < 20
    needed = {o["would_decide"] for o in planner.outcome().values()}
    assert len(needed) == 1 and (needed == {None} or min(needed) > 10), needed  # beyond the budget: why it stopped


def test_an_adaptive_study_runs_line_says_how_each_cell_ended():
    from types import SimpleNamespace

    from fslab.report.sections import repetitions_line

    settings = {"runs": 3, "max_runs": 10, "decide": True, "threshold": 0.03}
    outcome = {
        "xfs · rand_read": {"runs": 3, "half_width": 0.01, "status": "decided"},
        "ext4 · rand_read": {"runs": 5, "half_width": 0.02, "status": "futile", "would_decide": 24},
        "btrfs · rand_read": {"runs": 5, "half_width": 0.02, "status": "futile", "would_decide": 24},
    }
    line = repetitions_line(
        SimpleNamespace(study_run={"settings": settings, "outcome": outcome}, warmups=0, disturbed=0, redone=0)
    )
    assert "until every main comparison (each target against its baseline on the primary metrics) was" in line
    assert "judged at up to 8 looks, every interval widened to hold its error across them" in line
    assert "3 cells: 2 futile, 1 decided." in line
    assert "ext4 · rand_read (±2.0% after 5 runs, undecided: ~24 runs would decide, over the budget of 10)" in line


def test_decide_runs_a_baseline_on_while_a_comparison_with_it_is_open():
    """xfs, 30 % off, is decided at the first look and runs no more; btrfs, 8 % off in 3 % noise,
    takes more runs, and ext4 (their baseline) runs with it."""
    cells = {
        ("rand_read", "ext4"): (50000, 0.03),
        ("rand_read", "xfs"): (35000, 0.01),
        ("rand_read", "btrfs"): (46000, 0.03),
    }
    planner, plan = simulate(THREE_TARGETS, Repetitions(runs=3, decide=True, max_runs=12), cells)
    runs = Counter(p.cell.target.name for p in plan)
    outcome = planner.outcome()
    assert runs["xfs"] == 3 and outcome["xfs · rand_read"]["status"] == "decided"
    assert runs["btrfs"] > 3 and runs["ext4"] == runs["btrfs"], runs
    assert outcome["btrfs · rand_read"]["status"] in ("decided", "futile", "max runs")


def test_an_adaptive_plan_fixes_its_looks_and_judges_at_that_level():
    """The looks (every block from --runs to --max-runs) are the plan's, read back from its stored
    settings alike; the planner's intervals are drawn at the family's level over those looks."""
    import numpy as np

    from fslab.statistics.analysis import looks_of
    from fslab.statistics.stats import FALSE_RATE

    repetitions = Repetitions(runs=3, decide=True, max_runs=10)
    assert repetitions.looks == looks_of(repetitions.describe()) == 8
    assert Repetitions(runs=3, max_runs=10).looks == 1 and "decide" not in Repetitions(runs=3).describe()
    assert Repetitions(runs=3, target_ci=0.02, max_runs=10).looks == 8
    planner = Planner(parse_study(THREE_TARGETS, "s.toml", base_dir=Path(".")).cells, repetitions, seed=3)
    rng = np.random.default_rng(1)
    samples = {cell.key: {"read_iops": list(rng.lognormal(np.log(5e4), 0.05, 3))} for cell in planner.cells}
    found = planner.analysis(samples, Roles.declared([(w, "read_iops") for w, _ in samples], declared_metrics()))
    assert {c.level for c in found.pairs.values()} == {1 - FALSE_RATE / 3 / 8}  # 3 pairs, none rejected, 8 looks


def test_the_summary_of_an_adaptive_study_run_judges_at_its_plans_looks(tmp_path):
    """A study run that added runs as they came is summarised with its intervals widened over the
    looks its stored settings allowed (5, from 2 runs to 6), as its planner judged it."""
    import random

    from fslab.statistics.stats import family_level
    from synthetic import store_study_run

    study = parse_study(THREE_TARGETS, str(tmp_path / "s.toml"), base_dir=tmp_path)
    db = ResultsDB(str(tmp_path / "r.db"))
    repetitions = Repetitions(runs=2, decide=True, max_runs=6)
    study_run = store_study_run(db, study, seed=1, rng=random.Random(2), env={}, repetitions=repetitions)
    analysis = summarize_study_run(db, study_run).analysis
    p_values = [c.p_value for c in analysis.pairs.values() if c.p_value is not None]
    assert p_values and {c.level for c in analysis.pairs.values() if c.p_value is not None} == {
        family_level(p_values, looks=5)
    }
    assert family_level(p_values, looks=5) > family_level(p_values, looks=1)  # wider than one look's


def test_decide_is_refused_where_a_plan_cannot_look_at_its_runs(tmp_path):
    """--decide adds blocks from the runs before them: not on a fleet's workers (each its own
    plan), not spread (a fixed plan handed out by block), not changed on a resume."""
    from conftest import fslab_in_process
    from fslab.fleet.spread import CannotSpread, check

    db = str(tmp_path / "r.db")
    on = fslab_in_process("run", "quick", "--decide", "--on", "all", "--db", db)
    assert on.returncode == 2 and "--decide cannot go with --on" in " ".join(on.stderr.split())
    resumed = fslab_in_process("run", "--resume", "--decide", "--db", db)
    assert resumed.returncode == 2 and "--decide cannot change a resumed study run" in " ".join(resumed.stderr.split())
    with pytest.raises(CannotSpread, match="--decide"):
        check(Repetitions(runs=3, decide=True))
    plan = fslab_in_process(
        "run", "quick", "--decide", "--max-runs", "6", "--plan", "--db", db, "--workdir", str(tmp_path / "w")
    )
    said = " ".join(plan.stdout.split())
    assert (
        plan.returncode == 0 and "runs (adaptive, until every main comparison is decided or cannot be; 4 looks)" in said
    )
