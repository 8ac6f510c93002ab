"""Repetitions through `fslab run` on real targets: exact runs, warm-ups, adaptive runs; and
`fslab compare` gating on a regression between two stored study runs."""

from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from conftest import fslab, fslab_in_process, write_study
from fslab.fio.output import metric as fio_metric
from fslab.report.console import CONSOLE_WIDTH
from fslab.results import ResultsDB, RunRecord
from fslab.results.owner import Owner
from fslab.study import parse_study

STUDY = """\
[study]
name = "reps"
repetitions = 2
workloads = ["rand_read"]
image_size = "512MiB"
image_fill = "sparse"  # what is counted here needs no filled image (test_end_to_end fills)

[fio]
size = "32MiB"
runtime = "1s"

[[target]]
filesystem = ["xfs", "raw"]
"""


def run(tmp_path, workdir, *args):
    path = write_study(tmp_path, STUDY)
    db = tmp_path / "r.db"
    result = fslab("run", str(path), "--db", str(db), "--workdir", str(workdir.root), *args)
    assert result.returncode == 0, result.stdout + result.stderr
    results = ResultsDB(str(db))
    return result, results, results.study_run()


@pytest.mark.root
def test_runs_is_exact_and_warmups_are_stored_marked_and_left_out(tmp_path, workdir):
    result, db, study_run = run(tmp_path, workdir, "--runs", "1", "--warmup", "1")  # the study says 2
    runs = db.runs(study_run["id"])
    assert Counter((r["target"], r["warmup"]) for r in runs) == {
        ("xfs", True): 1,
        ("raw", True): 1,
        ("xfs", False): 1,
        ("raw", False): 1,
    }
    assert all(r["block"] == 1 for r in runs if r["warmup"]), "warm-ups run first"
    assert Counter(m.target for m in db.run_metrics(study_run["id"]) if m.metric == "read_iops" and not m.warmup) == {
        "xfs": 1,
        "raw": 1,
    }
    assert study_run["settings"] == {"runs": 1, "warmup": 1, "max_runs": 30, "threshold": 0.03}
    report = (tmp_path / "reports" / f"reps-{study_run['id']}" / "summary.md").read_text()
    assert "1 runs per cell, after 2 warm-up run(s) left out of the statistics" in report


@pytest.mark.root
def test_target_ci_adds_runs_until_narrow_or_the_limit(tmp_path, workdir):
    result, db, study_run = run(tmp_path, workdir, "--runs", "2", "--target-ci", "0.5", "--max-runs", "3")
    outcome = study_run["outcome"]
    assert set(outcome) == {"xfs · rand_read", "raw · rand_read"}
    for cell in outcome.values():
        assert 2 <= cell["runs"] <= 3
        assert cell["status"] in ("converged", "decided", "equivalent", "futile", "max runs")
        assert (cell["status"] == "converged") == (cell["half_width"] <= 0.005)
        assert cell["status"] != "max runs" or cell["runs"] == 3
    counts = Counter(r["target"] for r in db.runs(study_run["id"]))
    assert counts == {"xfs": outcome["xfs · rand_read"]["runs"], "raw": outcome["raw · rand_read"]["runs"]}
    report = (tmp_path / "reports" / f"reps-{study_run['id']}" / "summary.md").read_text()
    assert (
        "Adaptive: runs added block by block until each cell's 95 % interval was within ±0.5% "
        "or its comparisons decided" in report
    )


# Two stored study runs of fixed samples: QD16 reads uncapped (thousands of IOPS, long queues at
# p99) and capped at 100 IOPS (short queues). The verdict is judged from these numbers, never from
# how fast this machine is today.
UNCAPPED = {"read_iops": 5000.0, "read_lat_p99_us": 4000.0}
CAPPED = {"read_iops": 100.0, "read_lat_p99_us": 300.0}


def stored_study_run(db: ResultsDB, medians: dict[str, float], owner: Owner, study_text: str = STUDY) -> int:
    study = parse_study(study_text, "study.toml", base_dir=Path("."))
    study_run = db.begin_study_run(study, 1, {"kernel": "6.1.0"}, {"fio": "fio-3.33"}, {"runs": 5}, owner)
    start = datetime(2026, 1, 1)
    for repetition, noise in enumerate((0.0, 0.004, -0.003, 0.002, -0.001), start=1):
        for position, target in enumerate(("xfs", "raw"), start=1):
            metrics = [fio_metric(name, value * (1 + noise)) for name, value in medians.items()]
            db.record_run(study_run, RunRecord(
                target=target, workload="rand_read", repetition=repetition, warmup=False, block=repetition,
                position=position, started_at=start, finished_at=start + timedelta(seconds=2), status="ok",
                buffered=False, metrics=metrics,
            ))  # fmt: skip
    db.finish_study_run(study_run, "finished", {})
    return study_run


@pytest.mark.slow
def test_compare_gates_on_a_regression(tmp_path):
    path = tmp_path / "r.db"
    db = ResultsDB(str(path))
    owner = Owner.current(tmp_path)
    fast, slow = stored_study_run(db, UNCAPPED, owner), stored_study_run(db, CAPPED, owner)
    regressed = fslab_in_process("compare", str(fast), str(slow), "--db", str(path))
    assert regressed.returncode == 1, regressed.stdout + regressed.stderr
    listed = regressed.stdout.split("regression(s):")[1]
    assert "xfs · rand_read · read IOPS" in listed and "raw · rand_read · read IOPS" in listed, regressed.stdout
    assert "Same environment" in regressed.stdout
    table = regressed.stdout.split("Ratios of geometric means")[0]
    assert max(len(line) for line in table.splitlines()) <= CONSOLE_WIDTH, "as a 120-column terminal shows it"
    [said] = [line for line in regressed.stdout.splitlines() if line.startswith("Ratios of geometric means")]
    assert len(said) > CONSOLE_WIDTH and said.endswith("by more than 5%."), (
        "a message stays one line: the terminal wraps it"
    )
    same = fslab_in_process("compare", str(fast), str(fast), "--db", str(path))
    assert same.returncode == 0 and "no regression" in same.stdout, same.stdout + same.stderr
    # uncapped QD16 reads are faster, and their queues make the p99 latency longer: both are said
    reversed_ = fslab_in_process("compare", str(slow), str(fast), "--db", str(path))
    assert "faster" in reversed_.stdout and "by more than 5%" in reversed_.stdout, reversed_.stdout
    assert reversed_.returncode == 1, "exit 1 for the latency that regressed"
    assert "IOPS" not in reversed_.stdout.split("regression(s):")[1], "never for the IOPS that improved"


def test_compare_refuses_runs_of_different_studies(tmp_path):
    path = tmp_path / "r.db"
    db, owner = ResultsDB(str(path)), Owner.current(tmp_path)
    first = stored_study_run(db, UNCAPPED, owner)
    other = stored_study_run(db, UNCAPPED, owner, STUDY.replace('name = "reps"', 'name = "other"'))
    result = fslab_in_process("compare", str(first), str(other), "--db", str(path))
    assert result.returncode == 2 and "compare runs of one study" in result.stderr
    same = fslab_in_process(
        "compare", str(first), str(first), "--db", str(path)
    )  # the same samples: no verdict of speed
    assert same.returncode == 0 and "no regression" in same.stdout, same.stdout + same.stderr
