"""The exit status of a CI gate (analysis.gate, cli._exit_by): `fslab compare` and `fslab history
--fail-on-regression` exit 1 on a decided regression only — never on an undecided comparison, one
decided faster or equivalent, or one decided slower within the regression threshold — and with
`--strict` on an undecided one too; an error ends with 2, never 1. On study runs stored with fixed
samples, so each verdict is the one the numbers give wherever the test runs."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from conftest import fslab_in_process
from fslab.cli import ERROR_EXIT, GATE_FAILED
from fslab.fio.output import metric as fio_metric
from fslab.results import ResultsDB, RunRecord
from fslab.results.owner import Owner
from fslab.statistics.analysis import gate
from fslab.statistics.stats import EQUIVALENT, FASTER, SLOWER, UNDECIDED, compare
from fslab.study import parse_study

STUDY = """\
[study]
name = "gate"
repetitions = 5
workloads = ["rand_read"]

[[target]]
filesystem = ["xfs"]
"""
# Each run's factor around a cell's IOPS, in run order: tight (±0.4 %) and loose (±30 %).
TIGHT = (1.0, 1.004, 0.997, 1.002, 0.999)
OTHER_TIGHT = (1.001, 0.998, 1.003, 0.999, 1.0)
LOOSE = (1.3, 0.75, 1.1, 0.8, 1.2)
BEFORE = [1000 * f for f in TIGHT]
# What the newer study run measured → its verdict against BEFORE (5 % regression threshold, 3 % threshold).
REGRESSED = [800 * f for f in OTHER_TIGHT]  # slower by 20 %: a regression
SLIGHTLY_SLOWER = [960 * f for f in OTHER_TIGHT]  # decided slower, by 4 %: within the regression threshold
UNSURE = [1000 * f for f in LOOSE]  # an interval far wider than ±3 %: undecided
SAME = [1000 * f for f in OTHER_TIGHT]  # within ±3 %: equivalent
BETTER = [1200 * f for f in OTHER_TIGHT]  # faster


def store(db: ResultsDB, values: list[float], owner: Owner, start: datetime) -> int:
    """One study run of STUDY: xfs's read IOPS `values`, a run per block, as `fslab run` stores them."""
    study = parse_study(STUDY, "gate.toml", base_dir=Path("."))
    study_run = db.begin_study_run(study, 1, {"kernel": "6.1.0"}, {"fio": "fio-3.33"}, {"runs": len(values)}, owner)
    for block, value in enumerate(values, start=1):
        at = start + timedelta(minutes=block)
        db.record_run(study_run, RunRecord(
            target="xfs", workload="rand_read", repetition=block, warmup=False, block=block, position=1,
            started_at=at, finished_at=at + timedelta(seconds=2), status="ok", buffered=False,
            metrics=[fio_metric("read_iops", value)],
        ))  # fmt: skip
    db.finish_study_run(study_run, "finished", {})
    return study_run


def stored(tmp_path: Path, *series: list[float]) -> Path:
    """A database of one study run per `series`, a day apart, oldest first."""
    path = tmp_path / "gate.db"
    db, owner = ResultsDB(str(path)), Owner.current(tmp_path)
    for day, values in enumerate(series):
        store(db, values, owner, datetime(2026, 1, 1) + timedelta(days=day))
    return path


def test_the_samples_give_the_verdicts_the_cases_are_named_for():
    for newer, verdict in (
        (REGRESSED, SLOWER), (SLIGHTLY_SLOWER, SLOWER), (UNSURE, UNDECIDED), (SAME, EQUIVALENT), (BETTER, FASTER),
    ):  # fmt: skip
        assert compare(BEFORE, newer).verdict == verdict, newer


def test_the_gate_fails_on_a_decided_regression_and_strictly_on_an_undecided_comparison():
    regressed, slightly, unsure, same, better = (
        compare(BEFORE, v) for v in (REGRESSED, SLIGHTLY_SLOWER, UNSURE, SAME, BETTER)
    )
    assert gate([regressed, same], 0.05).failed
    assert not gate([slightly, same, better], 0.05).failed, "slower by 4 %: within the regression threshold of 5 %"
    assert gate([slightly], 0.03).failed, "… and beyond one of 3 %"
    assert not gate([unsure, better], 0.05).failed, "an undecided comparison is no regression"
    assert gate([unsure, better], 0.05, strict=True).failed
    assert not gate([same, better, slightly], 0.05, strict=True).failed, "strict: every comparison decided"
    assert not gate([], 0.05, strict=True).failed, "nothing compared: nothing failed"


# (the newer study run's samples, the exit status without and with --strict)
CASES = {
    "decided regression": (REGRESSED, GATE_FAILED, GATE_FAILED),
    "slower within the regression threshold": (SLIGHTLY_SLOWER, 0, 0),
    "undecided": (UNSURE, 0, GATE_FAILED),
    "equivalent": (SAME, 0, 0),
    "faster": (BETTER, 0, 0),
}


@pytest.mark.parametrize("case", CASES)
def test_compare_exits_1_on_a_decided_regression_only_and_with_strict_on_an_undecided_cell(tmp_path, case):
    newer, status, strict_status = CASES[case]
    db = str(stored(tmp_path, BEFORE, newer))
    plain = fslab_in_process("compare", "1", "2", "--db", db)
    assert plain.returncode == status, plain.stdout + plain.stderr
    strict = fslab_in_process("compare", "1", "2", "--db", db, "--strict")
    assert strict.returncode == strict_status, strict.stdout + strict.stderr
    if strict_status == GATE_FAILED and status == 0:
        assert "1 undecided comparison(s) among the 1 comparison(s) (--strict)" in strict.stderr
        assert "undecided" not in plain.stderr, "without --strict an undecided cell is shown, not judged"
    if status == GATE_FAILED:
        assert "1 regression(s) among the 1 comparison(s)" in plain.stderr


@pytest.mark.parametrize("case", CASES)
def test_history_judges_the_steps_into_the_newest_study_run_by_the_same_rule(tmp_path, case):
    """The history's threshold (3 %) is its regression threshold: a step decided slower by 4 % is one."""
    newer, status, strict_status = CASES[case]
    status, strict_status = (GATE_FAILED, GATE_FAILED) if newer is SLIGHTLY_SLOWER else (status, strict_status)
    db = str(stored(tmp_path, BEFORE, BEFORE, newer))
    gated = fslab_in_process("history", "gate", "--db", db, "--fail-on-regression")
    assert gated.returncode == status, gated.stdout + gated.stderr
    strict = fslab_in_process("history", "gate", "--db", db, "--strict")
    assert strict.returncode == strict_status, strict.stdout + strict.stderr
    shown = fslab_in_process("history", "gate", "--db", db)
    assert shown.returncode == 0, "without --fail-on-regression or --strict the history is shown, not judged"
    if status == GATE_FAILED:
        assert "1 regression(s) among the 1 step(s) into study run 3, the newest shown" in gated.stderr


def test_history_gates_on_the_newest_study_run_alone(tmp_path):
    """An undecided step before the newest study run, and a regression before it, fail no gate."""
    db = str(stored(tmp_path, BEFORE, UNSURE, REGRESSED, REGRESSED))
    result = fslab_in_process("history", "gate", "--db", db, "--strict")
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_error_is_not_a_failed_gate():
    assert ERROR_EXIT != GATE_FAILED


@pytest.mark.parametrize(
    "args",
    [("compare", "1", "9"), ("compare", "1"), ("history", "nope", "--strict"), ("history", "--strict")],
)
def test_a_refused_command_line_exits_2(tmp_path, args):
    db = str(stored(tmp_path, BEFORE, REGRESSED))
    result = fslab_in_process(*args, "--db", db)
    assert result.returncode == ERROR_EXIT and "error:" in result.stderr, result.stdout + result.stderr
