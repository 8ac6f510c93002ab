"""Two cells compared within the interleaved blocks both ran in (stats.block_pairs, log_paired,
compare_pairs; docs/statistics.md#paired-within-blocks): which runs pair, from how many blocks a
comparison is paired rather than Welch's, a drift that Welch's interval cannot see through and
pairing can, and a stored study run's summary pairing its cells by the blocks its runs were stored
with (ResultsDB.sample_groups)."""

from __future__ import annotations

import math
from collections.abc import Collection
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from fslab.fio.output import metric as fio_metric
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB, RunRecord
from fslab.results.owner import Owner
from fslab.statistics.stats import (
    FASTER,
    PAIRED_MIN_BLOCKS,
    UNDECIDED,
    SamplePair,
    block_pairs,
    compare_pairs,
    log_paired,
    log_welch,
)
from fslab.study import parse_study
from synthetic import stored_study


def test_block_pairs_are_of_the_blocks_both_sides_ran_in_once():
    pair = SamplePair(
        [10.0, 20.0, 30.0, 31.0, 40.0, 60.0],
        [11.0, 21.0, 33.0, 34.0, 55.0],
        blocks=([1, 2, 3, 3, 4, 6], [4, 2, 3, 1, 5]),
    )
    # block 3: twice in the baseline (which of its runs?); 5 and 6: one side's alone
    assert block_pairs(pair) == [(10.0, 34.0), (20.0, 21.0), (40.0, 11.0)], "in block order, each side's run there"
    assert block_pairs(SamplePair([1.0, 2.0], [1.0, 2.0])) == [], "blocks not known: nothing pairs"


def blocked(n: int, ratio: float = 1.1) -> SamplePair:
    """Two cells of n runs, one a block, the other `ratio` times the baseline with a little noise."""
    baseline = [100.0 + 7 * (i % 3) for i in range(n)]
    other = [v * ratio * (1 + 0.01 * (-1) ** i) for i, v in enumerate(baseline)]
    return SamplePair(baseline, other, blocks=(list(range(n)), list(range(n))))


def test_a_comparison_is_paired_from_five_common_blocks_and_welchs_below():
    assert PAIRED_MIN_BLOCKS == 5
    paired, welch = compare_pairs([blocked(PAIRED_MIN_BLOCKS), blocked(PAIRED_MIN_BLOCKS - 1)])
    assert paired.paired_blocks == 5 and paired.df == 4
    diff, se, _ = log_paired(block_pairs(blocked(5)))
    assert paired.ratio == pytest.approx(math.exp(diff)) and paired.log_se == pytest.approx(se)
    assert welch.paired_blocks == 0
    four = blocked(4)
    diff, se, df = log_welch(four.baseline, four.other)
    assert welch.ratio == pytest.approx(math.exp(diff)) and welch.log_se == pytest.approx(se) and welch.df == df
    unblocked = compare_pairs([SamplePair(blocked(5).baseline, blocked(5).other)])[0]
    assert unblocked.paired_blocks == 0, "without blocks: Welch's, however many runs"
    # ten runs a side, but only four blocks where both ran once: Welch's
    ten = blocked(10)
    sparse = SamplePair(ten.baseline, ten.other, blocks=(list(range(10)), [0, 1, 2, 3, 20, 21, 22, 23, 24, 25]))
    assert compare_pairs([sparse])[0].paired_blocks == 0


def drifting(blocks: int = 10, ratio: float = 1.08, drift: float = 0.04) -> SamplePair:
    """A machine `drift` slower each block, both targets alike; the other `ratio` times faster
    than the baseline, each run within ±0.5 % of that."""
    level = [1000 * (1 - drift) ** b for b in range(blocks)]
    wobble = [1 + 0.005 * math.sin(3 * b) for b in range(blocks)]
    baseline = [x * w for x, w in zip(level, wobble)]
    other = [x * ratio / w for x, w in zip(level, wobble)]
    return SamplePair(baseline, other, blocks=(list(range(blocks)), list(range(blocks))))


def test_a_drift_welchs_interval_cannot_see_through_pairing_does():
    """30 % slower over ten blocks: Welch's interval, from each cell's spread over the study,
    spans the threshold; within each block the other is 8 % faster, and the paired interval says so."""
    pair = drifting()
    paired = compare_pairs([pair])[0]
    welch = compare_pairs([SamplePair(pair.baseline, pair.other)])[0]
    assert welch.verdict == UNDECIDED and welch.interval is not None and welch.interval[0] < 1 < welch.interval[1]
    assert paired.verdict == FASTER and paired.paired_blocks == 10
    assert paired.interval is not None and 1.05 < paired.interval[0] < 1.08 < paired.interval[1] < 1.11
    assert (paired.interval[1] / paired.interval[0]) < (welch.interval[1] / welch.interval[0]) ** 0.1


STUDY = """\
[study]
name = "pairs"
repetitions = 5
workloads = ["rand_read"]

[[target]]
filesystem = ["xfs", "raw"]
"""


def store_drifting(tmp_path: Path, missing: Collection[tuple[str, int]] = ()) -> tuple[ResultsDB, int]:
    """drifting()'s samples stored as `fslab run` stores a study run: each block's two runs in an
    order of its own, raw the other, xfs the baseline; `missing`: the (target, block)s whose run
    was not stored."""
    tmp_path.mkdir(exist_ok=True)
    db = ResultsDB(str(tmp_path / "pairs.db"))
    study = parse_study(STUDY, "pairs.toml", base_dir=Path("."))
    study_run = db.begin_study_run(
        study, 1, {"kernel": "6.1.0"}, {"fio": "fio-3.33"}, {"runs": 10}, Owner.current(tmp_path)
    )
    pair, start = drifting(), datetime(2026, 1, 1)
    for block in range(10):
        order = [("xfs", pair.baseline[block]), ("raw", pair.other[block])][:: (-1) ** block]
        for position, (target, value) in enumerate(order, start=1):
            if (target, block) in missing:
                continue
            at = start + timedelta(minutes=2 * block + position)
            db.record_run(study_run, RunRecord(
                target=target, workload="rand_read", repetition=block + 1, warmup=False, block=block + 1,
                position=position, started_at=at, finished_at=at + timedelta(seconds=2), status="ok",
                buffered=False, metrics=[fio_metric("read_iops", value)],
            ))  # fmt: skip
    db.finish_study_run(study_run, "finished", {})
    return db, study_run


def test_a_stored_study_runs_summary_pairs_its_cells_by_the_blocks_they_ran_in(tmp_path):
    db, study_run = store_drifting(tmp_path)
    groups = db.sample_groups(study_run)
    assert groups.blocks[("rand_read", "xfs")]["read_iops"] == list(range(1, 11))
    assert groups.blocks[("rand_read", "raw")]["read_iops"] == list(range(1, 11))
    [row] = [r for r in summarize_study_run(db, study_run).analysis.rows if r.metric == "read_iops"]
    assert (row.target, row.baseline) == ("raw", "xfs")
    assert row.comparison.paired_blocks == 10 and row.comparison.verdict == FASTER
    assert row.comparison.ratio == pytest.approx(1.08, rel=1e-3)


def test_a_run_not_stored_leaves_its_block_out_and_four_common_blocks_are_welchs(tmp_path):
    db, study_run = store_drifting(tmp_path, missing={("raw", 3)})
    [row] = [r for r in summarize_study_run(db, study_run).analysis.rows if r.metric == "read_iops"]
    assert row.comparison.paired_blocks == 9 and row.comparison.verdict == FASTER
    db, study_run = store_drifting(tmp_path / "sparse", missing={("raw", b) for b in range(6)})
    [row] = [r for r in summarize_study_run(db, study_run).analysis.rows if r.metric == "read_iops"]
    assert (row.comparison.n_baseline, row.comparison.n_other) == (10, 4)
    assert row.comparison.paired_blocks == 0 and row.comparison.verdict == UNDECIDED, (
        "Welch's: the drift widens it (and, raw having run late, moves it)"
    )


@pytest.mark.parametrize(("runs", "paired"), [(5, 5), (4, 0)])
def test_a_study_run_the_planner_ordered_pairs_from_five_repetitions(tmp_path, runs, paired):
    """tests/synthetic's study runs, ordered by fslab's Planner with its warm-ups: the measured
    blocks pair; warm-up runs are in none of them."""
    db = ResultsDB(str(tmp_path / "planned.db"))
    text = STUDY.replace("repetitions = 5", f"repetitions = {runs}\nwarmup = 1")
    study_run = stored_study(tmp_path, text, db)
    s = summarize_study_run(db, study_run)
    blocks = db.sample_groups(study_run).blocks[("rand_read", "xfs")]["read_iops"]
    assert len(blocks) == runs and len(set(blocks)) == runs
    compared = [c for c in s.analysis.pairs.values() if c.p_value is not None]
    assert compared and {c.paired_blocks for c in compared} == {paired}
