"""The bench scripts (bench/, `make bench`) run: each one's `--smoke` mode — the same code at tiny
sizes, in seconds — in a process of its own, as `make bench` runs it, must end well and print
its figures, judging none against its target (a smoke run proves the script runs; this
machine's speed is the bench's to measure, not the tests'). The pure ones run in `make check`,
those that need root (loop devices, network namespaces, a PostgreSQL cluster) in `make test`,
zfs-fuse's in zfs-fuse's group (conftest: never beside another zfs-fuse test). What each takes
is in the commit that brought them (36 s of CPU for all but zfs-fuse's, one after another)."""

import importlib.util
import inspect
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from conftest import BPFTRACE, LAB_BOOTS, ZFS_FUSE
from fslab.results import ResultsDB
from fslab.running.runner import RunObserver

BENCH = Path(__file__).parents[1] / "bench"
VERDICTS = re.compile(r"\b(met|NOT met|MISSED|OVER|OUTSIDE|within)\b")  # a full run's word on a figure
N = r"-?\d+\.\d+"  # a figure

# Each script's figures (lines it must print, at least): pure, then root's, then zfs-fuse's.
FIGURES = {
    "startup.py": [rf"^  fslab run --help +{N} s"],
    "adaptive.py": [
        rf"^false verdicts under no difference: {N} \(95% upper {N}, n=40\)$",
        rf"^runtime ratio: median {N}, worst {N}$",
        rf"^agreement: adaptive {N}, fixed-vs-fixed {N}$",
        rf"^false equivalent at exactly ±threshold: {N} \(95% upper {N}, n=\d+\)$",
        r"verdicts agreeing: median \d+%",
        rf"total runtime adaptive/fixed: median {N}",
    ],
    "paired.py": [
        rf"^drift 10%: median width paired {N}, Welch {N}, ratio {N}$",
        rf"^drift 0%: median width paired {N}, Welch {N}, ratio {N}$",
        rf"^  coverage of the true ratio: paired {N} \(95% CI {N}–{N}\), Welch {N} \(95% CI {N}–{N}\), n=64$",
    ],
    "study_validation.py": [rf"^valid +{N} s +{N} s .* accepted, 200 cells", rf"^1,000,000 targets +{N} s .*refused"],
    "parse_only.py": [rf"^ +2 +4 +{N} s +{N} s$"],
    "report_scale.py": [
        r"^database: 1 study runs .* 4 runs",
        rf"^room per run \(every raw output, log and bin kept\): {N} KB$",
        rf"^fslab report \d+ +1×: median +{N} s",
        r"^fslab report \d+ --figures +left out: a smoke run draws no figures",
        r"^a team's database: 12 runs, \d+ MB, copied in \d+ s",
        rf"^  fslab summary 3 \(12 runs\) +1×: median +{N} s, min +{N} s, CPU +{N} s, peak RSS +\d+ MB, load {N}→{N}$",
    ],
    "overhead.py": [rf"^ext4 +{N} +{N} +image", rf"^worst median overhead beyond fio: {N} s"],
    "fidelity.py": [rf"^ +1 +[\d,]+ +[\d,]+ +{N}$", rf"^median ratio fslab/hand over 1 pair\(s\): {N}"],
    # a line per level (issue 36), a trace's until its monitor is registered
    "monitors.py": [
        rf"^always-on: fslab CPU {N} % of one core, IOPS ratio {N} \(95% {N}–{N}\)$",
        *(
            rf"^{level}: (fslab CPU {N} % of one core, IOPS ratio|not registered yet|not measurable here)"
            for level in ("trace-block", "trace-cpu")
        ),
        rf"^always-on traffic +{N} +{N} +{N} +{N}$",
    ],  # fmt: skip
    # the study's own runs only, no ceiling beside them: 2 of its one target, spread over the workers
    "fleet_scale.py": [
        rf"^1 worker\(s\): +{N} s wall .* runs per host: h0:2$",
        rf"^2 worker\(s\): +{N} s wall .* runs per host: h0:1 h1:1$",
        rf"^claim to start, per block \(\d+\): median {N} s",
    ],
    # a real TCG boot as root (skipped, said, without root or QEMU)
    "lab_boot.py": [rf"^(boot to the command: ({N}|unknown) s wall \(median\)|skipped: .+)$"],
    "pg_scale.py": [rf"^summary, among 40 runs +1×: median +{N} s", rf"then, in-process: reading the database {N} s"],
    # its two runs on one daemon kept, then (--compare) one on a daemon of its own, as before
    "zfs_overhead.py": [
        r"^one daemon per study run: 2 runs, 1 zfs-fuse daemon",
        r"^a daemon per run \(before\): 1 runs, 1 zfs-fuse daemon",
        rf"^fslab's overhead per ZFS run beyond the workload: {N} s",
    ],
}
# devices, namespaces, PostgreSQL
AS_ROOT = {"overhead.py", "fidelity.py", "monitors.py", "fleet_scale.py", "pg_scale.py"}
ARGS = {
    "fleet_scale.py": ["--skip-scale"],
    "zfs_overhead.py": ["--compare"],
}  # besides --smoke (and pg_scale.py's --db, below)


def marks(script: str) -> list[pytest.MarkDecorator]:
    if script == "zfs_overhead.py":
        return [pytest.mark.root, ZFS_FUSE]
    if script == "monitors.py":
        return [pytest.mark.root, BPFTRACE]
    if script == "lab_boot.py":  # a QEMU guest: beside the lab's other boots, one at a time
        return [pytest.mark.root, pytest.mark.guest, LAB_BOOTS]
    return [pytest.mark.root] if script in AS_ROOT else []


SMOKES = [
    pytest.param(script, ARGS.get(script, []), figures, marks=marks(script), id=script.removesuffix(".py"))
    for script, figures in FIGURES.items()
]


@pytest.fixture(scope="module")
def smoked() -> Callable[[list[str], dict[str, str]], subprocess.CompletedProcess[str]]:
    """A bench script's run in a process of its own, once a module for one command line: its
    smoke test reads it, and so does a test that holds it to the same run in this process."""
    done: dict[tuple[str, ...], subprocess.CompletedProcess[str]] = {}

    def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        if tuple(argv) not in done:
            done[tuple(argv)] = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
        return done[tuple(argv)]

    return run


@pytest.mark.parametrize(("script", "args", "figures"), SMOKES)
def test_a_bench_scripts_smoke_mode_runs_and_prints_its_figures_judging_none(script, args, figures, request, smoked):
    argv, env = [sys.executable, str(BENCH / script), "--smoke", *args], dict(os.environ)
    if (
        script == "pg_scale.py"
    ):  # a database of the tests' cluster (one per worker, the other PostgreSQL tests' too), not a cluster of its own
        import postgres

        cluster = request.getfixturevalue("pg_cluster")
        cluster.new_database("bench_pg_scale")
        argv += ["--db", cluster.url("bench_pg_scale", password=False)]
        env["PGPASSWORD"] = postgres.PASSWORD  # never on a command line
    done = smoked(argv, env)
    assert done.returncode == 0, done.stdout + done.stderr
    for figure in figures:
        assert re.search(figure, done.stdout, re.MULTILINE), f"{script} --smoke printed no {figure!r}:\n{done.stdout}"
    assert not VERDICTS.search(done.stdout), f"{script} --smoke judged a figure:\n{done.stdout}"


def test_every_bench_script_has_its_smoke_test():
    assert sorted(FIGURES) == sorted(p.name for p in BENCH.glob("*.py") if p.name != "stopwatch.py")


def bench_module(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A script of bench/ imported as it runs (bench/ first on its path), under a name of its own:
    bench/fleet_scale.py imports the tests' fleet.py, which must stay itself."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # where its dataclasses look themselves up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("script", ["overhead", "zfs_overhead"])
def test_the_overhead_benches_stopwatch_answers_every_call_of_the_runners_observer(script, monkeypatch):
    """`make bench` failed at its third script: overhead.py's Stopwatch had no `announce`, which
    run_study calls first (zfs_overhead.py's had none either)."""
    watch = bench_module(script, monkeypatch).Stopwatch
    calls = [name for name, member in vars(RunObserver).items() if inspect.isfunction(member) and name[0] != "_"]
    assert calls and "announce" in calls
    for call in calls:
        assert callable(getattr(watch, call, None)), f"bench/{script}.py's Stopwatch has no {call}"
        wanted = inspect.signature(getattr(RunObserver, call)).parameters
        assert list(inspect.signature(getattr(watch, call)).parameters) == list(wanted), call


@pytest.mark.root
def test_fidelitys_fslab_side_is_the_one_ext4_run_it_compares_with_fio_by_hand(tmp_path, monkeypatch):
    """bench/fidelity.py read "the last run stored" as fslab's figure; since studies without a raw
    target got a ceiling (issue 32), its one-cell study ran three raw runs beside the ext4 one,
    shuffled, and the last stored was most often the bare device's (pairs of 2.68 and 0.37 in make
    bench). Its study is the one run it holds against one fio by hand: no ceiling, and ext4's figure."""
    fidelity = bench_module("fidelity", monkeypatch)
    iops = fidelity.through_fslab(tmp_path, fidelity.Size(128, 16, 0.5), pair=1)
    db = ResultsDB(str(tmp_path / "fidelity.db"))
    runs = db.stored_runs(db.study_run()["id"])
    assert [(r.target, r.ok) for r in runs] == [("ext4", True)]
    assert iops == runs[0].metrics["read_iops"]


def test_the_error_rate_harness_prints_its_frozen_parameters_and_the_same_figures_for_the_same_seed(
    monkeypatch, capsys, smoked
):
    """bench/adaptive.py measures the verdict rule's error rates (issue 35): what it simulated is
    printed with them, and a seed gives one output, in its own process (as its smoke test runs
    it, that run read again: 2 s of CPU each) and in this one alike."""
    adaptive = bench_module("adaptive", monkeypatch)
    done = smoked([sys.executable, str(BENCH / "adaptive.py"), "--smoke"], dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout
    adaptive.main(["--smoke"])
    assert capsys.readouterr().out == first
    for frozen in [
        "CV 1%, 2%, 3%, 5%, 7%, 10% per cell; AR(1) in run order, rho = 0.5",
        "drift: linear, 10% slower by the end of a fixed 10-run study",
        "outliers: 2% of runs at ×0.5",
        "(±threshold: 1/1.03 and 1.03); null: 1.0000",
        "threshold 3%; seed 35",
    ]:
        assert frozen in first
    rate, upper = map(
        float, re.search(rf"false verdicts under no difference: ({N}) \(95% upper ({N}), n=40\)", first).groups()
    )
    assert 0 <= rate <= upper <= 1


def test_the_sequential_plan_holds_its_false_verdict_rate_on_null_families(monkeypatch):
    """fslab run --decide, as bench/adaptive.py runs it (2 runs, then a look after every block up
    to 10, each comparison stopped once decided or futile, then judged by the summary's analysis):
    on 250 families whose every true ratio is 1.00 (a fixed seed), at most 5 % of families hold
    any faster or slower verdict, the exact upper bound included — its peeking costs no error."""
    adaptive = bench_module("adaptive", monkeypatch)
    with_any, false, judged, runtime = adaptive.adaptive_false_verdicts(adaptive.Parameters(), 250)
    assert judged == 250 * 40 and false >= with_any
    assert with_any / 250 <= adaptive.upper_bound(with_any, 250) <= 0.05
    assert runtime < 0.5  # it stopped early: the looks were taken


def test_the_harness_upper_bound_is_clopper_pearsons(monkeypatch):
    """None of 1,000: 1 − 0.025^(1/1000) (the exact interval's closed form at 0); 50 of 1,000: the
    beta quantile."""
    from scipy.stats import beta

    upper_bound = bench_module("adaptive", monkeypatch).upper_bound
    assert upper_bound(0, 1000) == pytest.approx(1 - 0.025 ** (1 / 1000), rel=1e-9)
    assert upper_bound(50, 1000) == pytest.approx(beta.ppf(0.975, 51, 950), rel=1e-9)
    assert upper_bound(1000, 1000) == 1.0


def test_the_harness_null_families_are_null_and_its_machine_is_the_one_it_prints(monkeypatch):
    adaptive = bench_module("adaptive", monkeypatch)
    p = adaptive.Parameters()
    means, sigmas = adaptive.truths(np.random.default_rng(1), p, 50, null=True)
    by_workload = means.reshape(50, len(adaptive.WORKLOADS), len(adaptive.TARGETS))
    assert np.all(by_workload == by_workload[:, :, :1])  # every target at exactly the baseline's mean
    studies = adaptive.fixed_studies(np.random.default_rng(2), p, means, sigmas)
    assert len(studies) == 50 and all(
        len(s) == 20 and all(len(c["read_iops"]) == 10 for c in s.values()) for s in studies
    )
    noise, shift = adaptive.machine_noise(np.random.default_rng(3), p, 400, 200)
    lag_one = np.corrcoef(noise[:, 1:].ravel(), noise[:, :-1].ravel())[0, 1]
    assert lag_one == pytest.approx(p.rho, abs=0.02) and noise.std() == pytest.approx(1, abs=0.02)
    drift = np.log1p(-p.drift * np.arange(200) / 199)
    outlying = ~np.isclose(shift, drift)
    assert outlying.mean() == pytest.approx(p.outlier_rate, abs=0.003)
    assert np.allclose(shift[outlying] - np.broadcast_to(drift, shift.shape)[outlying], np.log(p.outlier_factor))
