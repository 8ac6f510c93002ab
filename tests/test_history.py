"""A study's history (statistics/history.py): change detection on synthetic series — a step, a drift, noise
alone over 1,000 series, and what fsperf's mean ± 1.96 sd misses — then `fslab history STUDY` and
the trend page on study runs stored as `fslab run` stores them (tests/synthetic.py), on several
hosts and kernels."""

from __future__ import annotations

import math
import random
import re
import statistics
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from altair.vegalite.v6.schema.core import TopLevelSpec

from conftest import fslab_in_process
from fslab.results import ResultsDB
from fslab.statistics.history import UNRECORDED_HOST, StoredStudyRun, history
from synthetic import SyntheticHost, stored_study
from test_report_html import open_page, page_specs

START = datetime(2026, 1, 1)


def study_runs(
    means: list[float],
    *,
    n: int = 5,
    noise: float = 0.03,
    seed: int = 0,
    host: str | None = "a",
    higher_is_better: bool = True,
    metric: str = "read_iops",
) -> list[StoredStudyRun]:
    """One cell's study runs, a day apart, each of `n` runs around its mean with log-normal noise
    of `noise` (its sd on the log scale), seeded."""
    rng = random.Random(seed)
    return [
        StoredStudyRun(
            id=i + 1, started_at=START + timedelta(days=i), fslab_version="0.1", kernel=f"6.1.{i}", owner_host=None,
            host_kernels={},
            values={(host, "rand_read", "ext4"): {metric: [mean * rng.lognormvariate(0, noise) for _ in range(n)]}},
            higher_is_better={metric: higher_is_better}, kinds={"rand_read": "fio"},
        )
        for i, mean in enumerate(means)
    ]  # fmt: skip


def steps_of(h) -> list[tuple[int, int, str]]:
    return [(s.older.study_run, s.newer.study_run, s.comparison.verdict) for s in h.flagged]


# --- change detection on synthetic series -------------------------------------------------------


def test_a_step_is_found_where_it_is_and_nowhere_else():
    found = history(study_runs([100, 100, 100, 100, 90, 90, 90]))
    assert steps_of(found) == [(4, 5, "slower")]
    step = found.flagged[0]
    assert step.regression and 0.85 < step.comparison.ratio < 0.95 and step.comparison.interval[1] < 1
    assert found.drifts == [], "a step explains the change: no drift besides"
    assert found.latest_regressions == [], "the step is not into the newest study run"
    assert found.family_size == 7, "six steps and the span, corrected together"


def test_a_step_into_the_newest_study_run_is_what_fail_on_regression_reads():
    found = history(study_runs([100, 100, 100, 90]))
    assert [(s.older.study_run, s.newer.study_run) for s in found.latest_regressions] == [(3, 4)]
    better = history(study_runs([100, 100, 100, 110]))
    assert steps_of(better) == [(3, 4, "faster")] and better.latest_regressions == [], (
        "a change the better way is no regression"
    )


def test_a_regression_follows_the_metrics_direction():
    latency = history(study_runs([100, 100, 100, 110], higher_is_better=False, metric="read_lat_p99_us"))
    assert steps_of(latency) == [(3, 4, "slower")] and latency.latest_regressions


def test_a_drift_flags_no_step_and_is_reported_once_as_a_drift():
    """1.5 % a study run — each step within the 3 % threshold — over five steps: 7 % in all."""
    found = history(study_runs([100 * 0.985**i for i in range(6)], noise=0.01))
    assert found.flagged == [], "no step goes beyond the threshold"
    [drift] = found.drifts
    assert (drift.older.study_run, drift.newer.study_run, drift.comparison.verdict) == (1, 6, "slower")
    assert 0.90 < drift.comparison.ratio < 0.95


@pytest.mark.slow
def test_noise_alone_flags_no_more_series_than_the_stated_rate():
    """1,000 series of six study runs with nothing changed (3 % noise, 5 runs each): with a
    threshold of 0 — the test alone deciding — at most 5 % of the series get any flag (step or
    drift), the level of Benjamini–Hochberg over each history; without the correction, far more
    would (each of its six tests at 5 %)."""
    flagged = unadjusted = flagged_at_threshold = 0
    for k in range(1000):
        runs = study_runs([100] * 6, seed=1000 + k)
        found = history(runs, threshold=0.0)
        flagged += bool(found.flagged or any(s.span and s.span.change for s in found.series))
        unadjusted += any(t.comparison.p_value < 0.05 for s in found.series for t in [*s.steps, s.span])
        at_threshold = history(runs)
        flagged_at_threshold += bool(at_threshold.flagged or at_threshold.drifts)
    print(
        f"noise-only series flagged: {flagged} of 1000 at threshold 0, "
        f"{flagged_at_threshold} at 3 %; unadjusted p < 0.05: {unadjusted}"
    )
    assert flagged <= 50
    assert flagged_at_threshold <= flagged
    assert unadjusted > 100, "the correction is what holds the rate"


def test_a_step_fsperfs_band_misses_is_found():
    """fsperf flags a result outside the earlier results' mean ± 1.96 sd — of single runs, whatever
    n. A 7 % step under 5 % noise with 20 runs a study run hides in that band; the means' standard
    errors (sd/√n) show it."""
    runs = study_runs([100, 100, 93], n=20, noise=0.05, seed=7)
    before = [v for sr in runs[:2] for v in sr.values[("a", "rand_read", "ext4")]["read_iops"]]
    after = statistics.mean(runs[2].values[("a", "rand_read", "ext4")]["read_iops"])
    mean, sd = statistics.mean(before), statistics.stdev(before)
    assert mean - 1.96 * sd < after < mean + 1.96 * sd, "within fsperf's band: not flagged there"
    assert steps_of(history(runs)) == [(2, 3, "slower")]


def test_each_host_is_its_own_series_and_a_study_run_of_no_recorded_host_is_one_host():
    """Hosts in one study run are series apart (a step on one is not the other's); runs stored
    before schema 10 (host NULL) are the host of the fslab that ran them, else UNRECORDED_HOST."""
    a, b = study_runs([100, 100, 100], host="a", seed=1), study_runs([100, 100, 80], host="b", seed=2)
    both = [
        sr.__class__(
            **{**sr.__dict__, "values": sr.values | other.values, "host_kernels": {"a": "6.1-a", "b": "6.1-b"}}
        )
        for sr, other in zip(a, b)
    ]
    found = history(both)
    assert [s.key.host for s in found.series] == ["a", "b"]
    assert [(s.key.host, s.newer.study_run) for s in found.flagged] == [("b", 3)]
    assert {p.kernel for s in found.series for p in s.points} == {"6.1-a", "6.1-b"}, "each host's own kernel"
    assert [s.key.host for s in history(both, hosts=["a"]).series] == ["a"]
    legacy = study_runs([100, 100], host=None)
    assert [s.key.host for s in history(legacy).series] == [UNRECORDED_HOST]
    owned = [sr.__class__(**{**sr.__dict__, "owner_host": "lab1"}) for sr in legacy]
    assert [s.key.host for s in history(owned).series] == ["lab1"]
    assert [p.kernel for p in history(owned).series[0].points] == ["6.1.0", "6.1.1"], (
        "the study run's environment's kernel"
    )


def test_a_step_from_too_few_runs_prints_no_interval_and_judges_nothing():
    found = history(study_runs([100, 50], n=1))
    [step] = found.series[0].steps
    assert step.comparison.p_value is None and not step.change and found.family_size == 0
    assert math.isclose(step.comparison.ratio, step.newer.samples[0] / step.older.samples[0])


# --- `fslab history STUDY`, on stored study runs ------------------------------------------------

STUDY = """\
[study]
name = "nightly"
repetitions = 5
workloads = ["rand_read"]
image_size = "256MiB"
image_fill = "sparse"

[fio]
size = "64MiB"
runtime = "1s"

[[target]]
filesystem = ["ext4", "raw"]
"""
# (ext4's scale, host, kernel) of each study run, oldest first: ext4 loses 15 % on host a with
# kernel 6.1.0-3 (study run 5); host b, on the same kernel, does not.
NIGHTS = [
    (0.93, "a", "6.1.0-1"),
    (0.93, "b", "6.1.0-1"),
    (0.94, "a", "6.1.0-2"),
    (0.94, "b", "6.1.0-2"),
    (0.80, "a", "6.1.0-3"),
    (0.93, "b", "6.1.0-3"),
]


@pytest.fixture(scope="module")
def nightly(tmp_path_factory):
    root = tmp_path_factory.mktemp("history")
    db = ResultsDB(str(root / "results.db"))
    for i, (scale, host, kernel) in enumerate(NIGHTS):
        stored_study(
            root,
            STUDY,
            db,
            name=f"night{i}.toml",
            seed=10 + i,
            scale={"raw": 1.0, "ext4": scale},
            hosts={host: SyntheticHost(kernel=kernel)},
        )
    return root, root / "results.db"


def test_history_of_a_study_shows_each_cell_per_host_and_flags_the_step(nightly):
    _, db = nightly
    result = fslab_in_process("history", "nightly", "--db", str(db))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    titles = [line for line in out.splitlines() if " — host " in line]
    assert titles == [f"rand_read · {t} · read IOPS — host {h}" for h in "ab" for t in ("ext4", "raw")], (
        "primary metrics only, host by host"
    )
    assert "1 step(s) flagged, 0 drift(s):" in out
    [step] = [line for line in out.splitlines() if "rand_read · ext4 · read IOPS on a: study run 3 → 5 (kernel" in line]
    assert re.search(
        r": slower 0\.\d+× \([\d.]+ % CI [\d.]+–[\d.]+×; beyond ±3 %; higher is better\), a regression$", step
    )
    ext4_a = out.split("rand_read · ext4 · read IOPS — host a")[1].split(" — host ")[0]
    assert [line.split()[2] for line in ext4_a.splitlines() if line[:4].isdigit()] == ["1", "3", "5"], (
        "host a's study runs, oldest first"
    )
    assert "6.1.0-3" in ext4_a and "×0.8" in ext4_a and "over the 12 tests of this history" in out


def test_fail_on_regression_reads_the_step_into_the_newest_study_run_shown(nightly):
    _, db = nightly
    every = fslab_in_process("history", "nightly", "--db", str(db), "--fail-on-regression")
    assert every.returncode == 0, "the newest study run (6, host b) has no regression"
    on_a = fslab_in_process("history", "nightly", "--db", str(db), "--host", "a", "--fail-on-regression")
    assert on_a.returncode == 1 and "1 regression(s) among the 2 step(s) into study run 5" in on_a.stderr
    plain = fslab_in_process("history", "nightly", "--db", str(db), "--host", "a")
    assert plain.returncode == 0, "without the flag a regression is shown, not an exit status"


def test_history_of_one_metric_and_its_refusals(nightly):
    _, db = nightly
    latency = fslab_in_process("history", "nightly", "--db", str(db), "--metric", "read_lat_p99_us", "--host", "b")
    assert latency.returncode == 0 and [line for line in latency.stdout.splitlines() if " — host " in line] == [
        "rand_read · ext4 · read p99 latency — host b",
        "rand_read · raw · read p99 latency — host b",
    ]
    for args, said in (
        (["nope"], "no study run of study 'nope' in the database; its studies: nightly"),
        (["nightly", "--host", "zz"], "--host zz: no run of study 'nightly' ran there; its hosts: a, b"),
        (["nightly", "--metric", "nope"], "--metric nope: no run of study 'nightly' measured it; its metrics: "),
        (["--host", "a"], "--host go with a STUDY"),
    ):
        result = fslab_in_process("history", *args, "--db", str(db))
        assert result.returncode == 2 and said in " ".join(result.stderr.split()), (args, result.stderr)
    assert "Traceback" not in latency.stderr


def test_history_without_a_study_still_lists_the_study_runs(nightly):
    _, db = nightly
    result = fslab_in_process("history", "--db", str(db))
    assert result.returncode == 0 and result.stdout.splitlines()[0] == "study runs"
    assert sum(" nightly " in line for line in result.stdout.splitlines()) == len(NIGHTS)


# --- the trend page: `fslab report --history STUDY` ---------------------------------------------


@pytest.fixture(scope="module")
def trend(nightly):
    root, db = nightly
    result = fslab_in_process("report", "--history", "nightly", "--db", str(db), "--png")
    assert result.returncode == 0, result.stdout + result.stderr
    page = root / "reports" / "nightly-history" / "history.html"
    assert f"Trend page: {page}" in result.stdout, "beside the study runs' own folders, as `fslab report` writes them"
    return page


def test_trend_page_charts_each_cell_a_facet_per_host_with_the_step_marked(trend):
    specs = page_specs(trend)
    assert sorted(specs) == ["history-rand_read-ext4-read_iops", "history-rand_read-raw-read_iops"]
    for spec in specs.values():
        TopLevelSpec.validate(spec)
        assert spec["facet"]["row"]["field"] == "host"
    rows = specs["history-rand_read-ext4-read_iops"]["data"]["values"]
    assert sorted({(r["host"], r["study_run"]) for r in rows}) == [
        ("a", 1),
        ("a", 3),
        ("a", 5),
        ("b", 2),
        ("b", 4),
        ("b", 6),
    ]
    assert [(r["host"], r["study_run"], r["flag"]) for r in rows if r["flag"]] == [("a", 5, "slower")], (
        "the one flagged step, at the study run it leads into"
    )
    assert {r["run"] for r in rows if r["host"] == "a"} >= {"5 · 6.1.0-3 · " + rows[0]["fslab"]}, (
        "kernel and fslab version on the axis"
    )
    assert all(r["low"] < r["mean"] < r["high"] for r in rows), "every mean's interval, from 5 runs"
    assert not any(r["flag"] for r in page_specs(trend)["history-rand_read-raw-read_iops"]["data"]["values"])
    text = trend.read_text()
    assert "rand_read · ext4 · read IOPS on a: study run 3 → 5" in text and '<li class="regression">' in text
    assert text.count("<h3>Host a</h3>") == 2 and '<tr class="slower">' in text, (
        "the series' tables, the step's row marked"
    )
    assert sorted(p.name for p in (trend.parent / "figures").iterdir()) == sorted(
        f"{n}.{e}" for n in specs for e in ("png", "svg")
    )


def test_trend_page_renders_offline_in_chromium(trend, browser, tmp_path):
    for width, name in ((1280, "desktop"), (390, "phone")):
        seen = open_page(browser, trend, tmp_path / f"history-{name}.png", width)
        print(f"screenshot: {tmp_path / f'history-{name}.png'}")
        assert seen["requests"] == [seen["url"]], "no request but the page itself"
        assert seen["errors"] == []
        assert sorted(c["name"] for c in seen["charts"]) == sorted(page_specs(trend))
        for chart in seen["charts"]:
            assert chart["svg"] > 20, chart
            if width == 1280:
                assert chart["width"] <= chart["container"] + 1, f"{chart['name']} wider than its place"
        assert seen["overflow"] <= 0, (
            f"the page is wider than a {name}'s screen: a faceted chart scrolls in its own place"
        )


def test_trend_page_refusals(nightly, tmp_path):
    _, db = nightly
    for args, said in (
        (["1", "--history", "nightly"], "--history writes a study's trend page from all its study runs"),
        (["--history", "nope"], "no study run of study 'nope'"),
    ):
        result = fslab_in_process("report", *args, "--db", str(db), "-o", str(tmp_path / "out"))
        assert result.returncode == 2 and said in " ".join(result.stderr.split()), result.stderr


def test_the_documented_commands_run_as_written(nightly, monkeypatch):
    """Every command of docs/history.md, as written there, on a database named by FSLAB_DB."""
    root, db = nightly
    doc = (Path(__file__).parent.parent / "docs" / "history.md").read_text()
    commands = [
        line.split("#", 1)[0].split()
        for block in doc.split("```sh\n")[1:]
        for line in block.split("```")[0].splitlines()
        if line.startswith("fslab ")
    ]
    assert [c[:2] for c in commands] == [["fslab", "history"]] * 4 + [["fslab", "report"]]
    monkeypatch.setenv("FSLAB_DB", str(db))
    monkeypatch.chdir(root)
    for command in commands:
        result = fslab_in_process(*command[1:])
        if "--strict" in command:  # the steps into study run 6, 3 % noise and 5 runs: not all decided
            assert result.returncode == 1 and "undecided comparison(s) among the 2 step(s) into study run 6" in (
                result.stderr
            ), result.stdout + result.stderr
        else:
            assert result.returncode == 0, " ".join(command) + "\n" + result.stdout + result.stderr
    assert (root / "reports" / "nightly-history" / "history.html").is_file()
