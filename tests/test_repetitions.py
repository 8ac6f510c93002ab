"""Repetitions through `fslab run` on real targets: exact runs, warm-ups, adaptive runs; and
`fslab compare` gating on a regression between two stored study runs."""

from collections import Counter

from conftest import fslab, write_study

from fslab.results import ResultsDB

STUDY = """\
[study]
name = "reps"
repetitions = 2
workloads = ["rand_read"]
image_size = "512MiB"

[fio]
size = "32MiB"
runtime = "1s"

[[target]]
filesystem = ["xfs", "raw"]
"""


def run(tmp_path, workdir, *args, study=STUDY):
    path = write_study(tmp_path, study)
    db = tmp_path / "r.db"
    result = fslab("run", str(path), "--db", str(db), "--workdir", str(workdir.root), *args)
    assert result.returncode == 0, result.stdout + result.stderr
    results = ResultsDB(str(db))
    return result, results, results.study_run()


def test_runs_is_exact_and_warmups_are_stored_marked_and_left_out(tmp_path, workdir):
    result, db, study_run = run(tmp_path, workdir, "--runs", "3", "--warmup", "1")
    runs = db.runs(study_run["id"])
    assert Counter((r["target"], r["warmup"]) for r in runs) == {("xfs", True): 1, ("raw", True): 1, ("xfs", False): 3, ("raw", False): 3}
    assert all(r["block"] == 1 for r in runs if r["warmup"]), "warm-ups run first"
    assert Counter(s["target"] for s in db.samples(study_run["id"]) if s["name"] == "read_iops") == {"xfs": 3, "raw": 3}
    assert study_run["settings"] == {"runs": 3, "warmup": 1, "max_runs": 30, "threshold": 0.03}
    report = (tmp_path / "reports" / f"reps-{study_run['id']}" / "summary.md").read_text()
    assert "3 runs per cell, after 2 warm-up run(s) left out of the statistics" in report


def test_target_ci_adds_runs_until_narrow_or_the_limit(tmp_path, workdir):
    result, db, study_run = run(tmp_path, workdir, "--runs", "2", "--target-ci", "0.5", "--max-runs", "4")
    outcome = study_run["outcome"]
    assert set(outcome) == {"xfs · rand_read", "raw · rand_read"}
    for cell in outcome.values():
        assert 2 <= cell["runs"] <= 4
        assert cell["status"] in ("converged", "decided", "max runs")
        assert (cell["status"] == "converged") == (cell["half_width"] <= 0.005)
        assert cell["status"] != "max runs" or cell["runs"] == 4
    counts = Counter(r["target"] for r in db.runs(study_run["id"]))
    assert counts == {"xfs": outcome["xfs · rand_read"]["runs"], "raw": outcome["raw · rand_read"]["runs"]}
    report = (tmp_path / "reports" / f"reps-{study_run['id']}" / "summary.md").read_text()
    assert "Adaptive: runs added block by block until each cell's 95 % interval was within ±0.5%" in report


def test_compare_gates_on_a_regression(tmp_path, workdir):
    # Capped at 100 IOPS against uncapped QD16 reads (thousands even on a busy machine): a gap far
    # beyond this machine's noise, so the verdict does not depend on how fast it is today.
    _, db, fast = run(tmp_path, workdir, "--runs", "3")
    capped = STUDY.replace('runtime = "1s"', 'runtime = "1s"\noptions = { rate_iops = 100 }')
    _, _, slow = run(tmp_path, workdir, "--runs", "3", study=capped)
    regressed = fslab("compare", str(fast["id"]), str(slow["id"]), "--db", str(tmp_path / "r.db"))
    assert regressed.returncode == 1, regressed.stdout + regressed.stderr
    listed = regressed.stdout.split("regression(s):")[1]
    assert "xfs · rand_read · read IOPS" in listed and "raw · rand_read · read IOPS" in listed, regressed.stdout
    assert "Same environment" in regressed.stdout
    same = fslab("compare", str(fast["id"]), str(fast["id"]), "--db", str(tmp_path / "r.db"))
    assert same.returncode == 0 and "no regression" in same.stdout
    # uncapped QD16 reads are faster, and their queues make the p99 latency longer: both are said
    reversed_ = fslab("compare", str(slow["id"]), str(fast["id"]), "--db", str(tmp_path / "r.db"))
    assert "faster" in reversed_.stdout and "by more than 5%" in reversed_.stdout
    if reversed_.returncode == 1:  # exit 1 only for the latency, never for the IOPS that improved
        assert "IOPS" not in reversed_.stdout.split("regression(s):")[1]


def test_compare_refuses_runs_of_different_studies(tmp_path, workdir):
    _, db, first = run(tmp_path, workdir, "--runs", "1")
    _, _, other = run(tmp_path, workdir, "--runs", "1", study=STUDY.replace('name = "reps"', 'name = "other"'))
    result = fslab("compare", str(first["id"]), str(other["id"]), "--db", str(tmp_path / "r.db"))
    assert result.returncode == 2 and "compare runs of one study" in result.stderr
