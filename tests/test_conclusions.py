"""A study run's conclusions say what its tables show (issue 32, item 5): every conclusion speaks
of cells its workload's table shows with figures, unflagged; each comparison it words is a row
of the tables, with the verdict and ratio printed there, and each row is worded; a ranking's is
the ranking line's; "nothing to compare" counts the targets the table shows. Held for every
built-in study, on runs stored through fslab's own API (tests/synthetic.py) from real tool
output: never this machine's speed."""

import random
import re
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from conftest import apart
from fslab.fio import METRICS as FIO_METRICS
from fslab.model import with_primary
from fslab.report.conclusions import Conclusion, conclusions
from fslab.report.formatting import metric_label
from fslab.report.sections import BETWEEN_TITLE, sections
from fslab.report.summary import StudySummary, summarize_study_run
from fslab.report.view import SectionKind
from fslab.results import ResultsDB, RunRecord
from fslab.results.owner import Owner
from fslab.study import builtin_studies, load_study, parse_study
from synthetic import store_study_run, stored_study

RATIO = re.compile(r"(\d+\.\d+)×")
VERDICT_AT = 4  # a comparison row's verdict (sections.comparison_columns)
ENV = {
    "distribution": "Debian GNU/Linux 12", "kernel": "6.1.0-test", "cpu_model": "Test CPU", "cpu_count": 2,
    "memory_bytes": 2**33, "tools": {}, "image_directory": {},
}  # fmt: skip


def agree(s: StudySummary) -> int:
    """Assert that each workload's conclusions say what its tables show; how many were checked."""
    walked = sections(s)
    checked = 0
    for workload, said in conclusions(s).items():
        its = [x for x in walked if x.workload == workload]
        [table] = [x for x in its if x.kind is SectionKind.WORKLOAD]
        measured = list(dict.fromkeys(row[0] for row in table.rows if not row[2].startswith("0 (")))  # with a figure
        flagged = {row[0] for row in table.rows if row[3].startswith("⚠")}
        shown = {
            (x.title, x.named, row[0], row[1]): row for x in its if x.kind is SectionKind.COMPARISON for row in x.rows
        }
        ranked = [
            line for x in its if x.kind is SectionKind.RANKING for line in x.lines if line.startswith("Ranking by")
        ]
        worded = set()
        for c in said:
            assert set(c.targets) <= set(measured) - flagged, (workload, c.text, measured, flagged)
            if c.row is not None:
                worded.add(_as_shown(c, shown))
            elif c.text.startswith("Nothing to compare"):
                _counted(c, measured, flagged)
                assert not shown and not ranked, (workload, c.text)
            elif c.ranked_by is not None:  # a ranking's: the targets of its line, the leader first and alone
                [line] = [line for line in ranked if line.startswith(f"Ranking by {metric_label(c.ranked_by)}: ")]
                names = _names(line, c.ranked_by)
                assert set(c.targets) == set(names), (c.text, line)
                if c.claim:
                    assert c.text.startswith(f"{names[0]} leads in ") and f": {names[0]} > " in line, (c.text, line)
            else:
                assert c.text.startswith("Left out of the comparisons") and not c.claim, c.text
            checked += 1
        assert worded == set(shown), f"{workload}: every comparison row is worded once, as the tables show it"
    return checked


def _as_shown(c: Conclusion, shown: dict[tuple[str, str, str, str], list[str]]) -> tuple[str, str, str, str]:
    """The table row a conclusion words: its verdict and ratio (said to 0.01, the table's to 0.001) the row's."""
    r = c.row
    assert r is not None
    if r.baseline_workload:
        key = (BETWEEN_TITLE, r.baseline_workload, r.target, metric_label(r.metric))
    else:
        key = ("Compared with", r.baseline, r.target, metric_label(r.metric))
    row = shown[key]
    verdict = row[VERDICT_AT]
    assert verdict == r.comparison.verdict and c.claim == (verdict in ("faster", "slower")), (c.text, row)
    said = RATIO.search(c.text)
    assert said is not None and abs(float(said.group(1)) - float(row[2])) <= 0.0051, (c.text, row)
    return key


def _counted(c: Conclusion, measured: list[str], flagged: set[str]) -> None:
    """ "Nothing to compare" counts the targets the table shows with figures, and those flagged."""
    judged = [t for t in measured if t not in flagged]
    if len(measured) < 2:
        assert c.text == f"Nothing to compare: {f'only {measured[0]}' if measured else 'no target'} measured it."
    else:
        assert c.text.startswith(f"Nothing to compare: {len(measured)} targets measured it"), (c.text, measured)
        assert len(judged) >= 2 or f"which leaves {len(judged)}" in c.text, (c.text, judged)


def _names(line: str, metric: str) -> list[str]:
    """The targets of a ranking line by `metric`, in its order ("a > b = c", or "a (a) · b (ab) — …")."""
    body = line.removeprefix(f"Ranking by {metric_label(metric)}: ").split(" — ")[0]
    parts = [part for chunk in body.split(" · ") for part in chunk.replace(" > ", " = ").split(" = ")]
    return [part.strip().rsplit(" (", 1)[0] for part in parts]


DD = """\
[study]
name = "dd-probe"
repetitions = 3
workloads = ["rand_read"]
image_size = "2GiB"
[fio]
size = "64MiB"
runtime = "2s"
[[target]]
filesystem = ["ext4", "xfs", "btrfs"]
[[workload]]
name = "dd"
kind = "dd"
options = { bs = "1M", count = 64 }
"""


def test_a_probe_whose_cells_are_all_flagged_says_how_many_targets_measured_it(tmp_path):
    """The dd probe said "fewer than two targets measured it" when three had, their figures
    flagged (too short to time): its words are now the table's cells. Fails on the old code."""
    db = ResultsDB(str(tmp_path / "r.db"))
    s = summarize_study_run(db, stored_study(tmp_path, DD, db, flagged={"dd"}, env=ENV, scale={"ext4": 1.0}))
    said = [c.text for c in conclusions(s)["dd"]]
    assert said[0] == (
        "Nothing to compare: 3 targets measured it, and the figures of 3 of them cannot be real (left out), "
        "which leaves 0."
    )
    assert said[1].startswith("Left out of the comparisons, rankings, conclusions and charts: ext4, xfs, btrfs")
    assert agree(s) >= 4


def test_one_target_left_is_named_and_none_is_said_as_none(tmp_path):
    db = ResultsDB(str(tmp_path / "r.db"))
    alone = DD.replace('["ext4", "xfs", "btrfs"]', '"ext4"')
    one = summarize_study_run(db, stored_study(tmp_path, alone, db, env=ENV))
    assert [c.text for c in conclusions(one)["dd"]] == ["Nothing to compare: only ext4 measured it."]
    assert agree(one) == 2, "rand_read and dd: a ranking-less, row-less workload each says why, once"


@pytest.mark.slow
@pytest.mark.parametrize("name", apart("conclusions", builtin_studies()))
def test_every_builtin_studys_conclusions_agree_with_its_tables(tmp_path, name):
    """Every built-in study, stored as its runs would be: its first target far faster than the rest
    (so verdicts are decided), the last workload's cells all flagged (so one workload has nothing
    to compare; one the study pairs with another excepted)."""
    study = load_study(name)
    paired = {w.name for w in study.workloads if w.compare_with} | {w.compare_with for w in study.workloads}
    last = [w.name for w in study.workloads if w.name not in paired][-1]  # wu-guo-2026's dd; not btrfs-vs-zfs's pair
    db = ResultsDB(str(tmp_path / "r.db"))
    fast = {study.targets[0].name: 1.5}
    stored = store_study_run(db, study, seed=3, rng=random.Random(3), env=ENV, scale=fast, flagged={last})
    s = summarize_study_run(db, stored)
    assert agree(s) >= len(study.workloads)
    said = [c for w in s.workloads for c in conclusions(s)[w]]
    assert any(c.claim for c in said), "some verdict is decided, and worded as a claim"
    nothing = [c.text for c in conclusions(s)[last] if c.text.startswith("Nothing to compare: ")]
    assert nothing and "targets measured it" in nothing[0]
    if name == "btrfs-vs-zfs":  # the seed's snapshot table: each ZFS dataset with snapshots and without
        between = [c.row for c in conclusions(s)["snapshots"] if c.row is not None and c.row.baseline_workload]
        assert {(r.target, r.baseline_workload) for r in between} == {
            ("zfs[recordsize=128k]", "in-place-writes"), ("zfs[recordsize=4k]", "in-place-writes"),
        }  # fmt: skip


LATENCY_APART = """\
[study]
name = "tails"
repetitions = 6
workloads = ["rand_read"]
[[target]]
filesystem = ["ext4", "xfs"]
"""


def tails(tmp_path: Path, text: str) -> StudySummary:
    """Stored runs of ext4 and xfs alike in IOPS (within 0.5 %) and CPU, xfs's p99 latency twice
    ext4's: each metric flagged as the runner stores it (with_primary), summarised."""
    study = parse_study(text, "s.toml", base_dir=tmp_path)
    db = ResultsDB(str(tmp_path / "r.db"))
    study_run = db.begin_study_run(study, 1, ENV, {}, {}, Owner.current(tmp_path))
    start, rng = datetime(2026, 1, 1), random.Random(5)
    for repetition in range(1, 7):
        for position, target in enumerate(("ext4", "xfs"), start=1):
            iops = 1e4 * rng.uniform(0.995, 1.005)
            values = {"read_iops": iops, "read_mb_s": iops * 4096 / 1e6, "read_mib_s": iops / 256,
                      "cpu_sys_pct": rng.uniform(3, 4),
                      "read_lat_p99_us": (200 if target == "xfs" else 100) * rng.uniform(0.99, 1.01)}  # fmt: skip
            metrics = [FIO_METRICS[name].of(name, value) for name, value in values.items()]
            db.record_run(study_run, RunRecord(
                target=target, workload="rand_read", repetition=repetition, warmup=False, block=repetition,
                position=position, started_at=start, finished_at=start + timedelta(seconds=12), status="ok",
                buffered=False, metrics=with_primary(metrics, study.workloads[0].primary),
            ))  # fmt: skip
    db.finish_study_run(study_run, "finished", {})
    return summarize_study_run(db, study_run)


@pytest.mark.parametrize("primary", ["read_iops", "read_lat_p99_us"])
def test_the_main_comparisons_lead_the_conclusions_and_tables_whatever_the_other_metrics_claim(tmp_path, primary):
    """Conclusions lead with the main comparisons (every target against its baseline on the primary
    metrics: Analysis.main_rows) and the rankings on them; a claim on another metric comes after
    them, however certain: here xfs's doubled p99 latency, where IOPS is equal. Sorted by claims
    alone, the p99 led. With the study's primary the p99 (`[study] primary`), it leads, and it
    leads the comparison table too."""
    text = LATENCY_APART.replace("repetitions = 6", f'repetitions = 6\nprimary = ["{primary}"]')
    s = tails(tmp_path, text)
    assert [r.metric for r in s.analysis.main_rows()] == [primary]
    said = conclusions(s)["rand_read"]
    assert [(c.ranked_by, c.row.metric if c.row else None) for c in said] == [
        (primary, None), (None, primary), (None, ({"read_iops", "read_lat_p99_us"} - {primary}).pop()),
    ]  # fmt: skip
    latency = next(c for c in said if c.row and c.row.metric == "read_lat_p99_us")
    assert latency.claim and latency.row is not None and latency.row.comparison.verdict == "slower"
    assert [c.claim for c in said] == ([False, False, True] if primary == "read_iops" else [True, True, False])
    [table] = [x for x in sections(s) if x.kind is SectionKind.COMPARISON]
    assert [row[1] for row in table.rows] == [metric_label(primary), *(r[1] for r in table.rows[1:])]
    assert agree(s) == 3


def test_a_conclusion_that_disagrees_with_its_table_is_caught(tmp_path, monkeypatch):
    """The check itself can fail: a conclusion whose ratio is not the table's is refused."""
    db = ResultsDB(str(tmp_path / "r.db"))
    s = summarize_study_run(db, stored_study(tmp_path, DD, db, env=ENV, scale={"ext4": 1.0}))
    agree(s)
    real = conclusions

    def doubled(text: str) -> str:
        return RATIO.sub(lambda m: f"{2 * float(m.group(1)):.2f}×", text, count=1)

    def wrong(summary: StudySummary) -> dict[str, list[Conclusion]]:
        said = real(summary)
        return {w: [replace(c, text=doubled(c.text)) for c in its] for w, its in said.items()}

    monkeypatch.setattr(f"{__name__}.conclusions", wrong)
    with pytest.raises(AssertionError):
        agree(s)
