"""The bench scripts (bench/, `make bench`) run: each one's `--smoke` mode — the same code at tiny
sizes, in seconds — in a process of its own, as `make bench` runs it, must end well and print
its figures, judging none against its target (a smoke run proves the script runs; this
machine's speed is the bench's to measure, not the tests'). The pure ones run in `make check`,
those that need root (loop devices, network namespaces, a PostgreSQL cluster) in `make test`,
zfs-fuse's in zfs-fuse's group (conftest: never beside another zfs-fuse test). What each takes
is in the commit that brought them (36 s of CPU for all but zfs-fuse's, one after another)."""

import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from conftest import ZFS_FUSE

from fslab.runner import RunObserver

BENCH = Path(__file__).parents[1] / "bench"
VERDICTS = re.compile(r"\b(met|NOT met|MISSED|OVER|OUTSIDE|within)\b")  # what a full run says of a figure against its target
ROOT = pytest.mark.root

SMOKES = [
    pytest.param("startup.py", [], [r"^  fslab run --help +\d+\.\d{3} s"], id="startup"),
    pytest.param("adaptive.py", [], [r"verdicts agreeing: median \d+%", r"total runtime adaptive/fixed: median \d+\.\d\d"], id="adaptive"),
    pytest.param("study_validation.py", [], [r"^valid +\d+\.\d{3} s +\d+\.\d{3} s .* accepted, 200 cells", r"^1,000,000 targets +\d+\.\d{3} s .*refused"], id="study_validation"),
    pytest.param("parse_only.py", [], [r"^ +2 +4 +\d+\.\d\d s +\d+\.\d\d s$"], id="parse_only"),
    pytest.param("report_scale.py", [], [r"^database: 1 study runs .* 4 runs", r"^fslab report \d+ +1×: median +\d+\.\d\d s", r"^fslab report \d+ --figures +1×: median"], id="report_scale"),
    pytest.param("overhead.py", [], [r"^ext4 +-?\d+\.\d{3} +-?\d+\.\d{3} +image", r"^worst median overhead beyond fio: -?\d+\.\d{3} s"], marks=ROOT, id="overhead"),
    pytest.param("fidelity.py", [], [r"^ +1 +[\d,]+ +[\d,]+ +\d+\.\d{3}$", r"^median ratio fslab/hand over 1 pair\(s\): \d+\.\d{3}"], marks=ROOT, id="fidelity"),
    pytest.param("monitors.py", [], [r"^median IOPS ratio: \d+\.\d{4}", r"^traffic +\d+\.\d{3} +\d+\.\d{3} +\d+\.\d{3}$"], marks=ROOT, id="monitors"),
    pytest.param("fleet.py", ["--skip-scale"], [r"^2 worker\(s\): +\d+\.\d s wall", r"^claim to start, per block \(\d+\): median \d+\.\d{3} s"], marks=ROOT, id="fleet"),
    pytest.param("pg_scale.py", [], [r"^summary, among 40 runs +1×: median +\d+\.\d\d s", r"then, in-process: reading the database \d+\.\d\d s"], marks=ROOT, id="pg_scale"),
    pytest.param("zfs_overhead.py", ["--compare"], [r"^fslab's overhead per ZFS run beyond the workload: -?\d+\.\d\d s"], marks=[ROOT, ZFS_FUSE], id="zfs_overhead"),
]


@pytest.mark.parametrize(("script", "args", "figures"), SMOKES)
def test_a_bench_scripts_smoke_mode_runs_and_prints_its_figures_judging_none(script, args, figures):
    done = subprocess.run([sys.executable, str(BENCH / script), "--smoke", *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    for figure in figures:
        assert re.search(figure, done.stdout, re.MULTILINE), f"{script} --smoke printed no {figure!r}:\n{done.stdout}"
    assert not VERDICTS.search(done.stdout), f"{script} --smoke judged a figure:\n{done.stdout}"


def test_every_bench_script_has_its_smoke_test():
    assert sorted(p.values[0] for p in SMOKES) == sorted(p.name for p in BENCH.glob("*.py") if p.name != "stopwatch.py")


def bench_module(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A script of bench/ imported as it runs (bench/ first on its path), under a name of its own:
    bench/fleet.py is not the tests' fleet.py."""
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
    calls = [name for name, member in vars(RunObserver).items() if inspect.isfunction(member) and not name.startswith("_")]
    assert calls and "announce" in calls
    for call in calls:
        assert callable(getattr(watch, call, None)), f"bench/{script}.py's Stopwatch has no {call}"
        assert list(inspect.signature(getattr(watch, call)).parameters) == list(inspect.signature(getattr(RunObserver, call)).parameters), call
