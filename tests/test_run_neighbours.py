"""A real neighbour beside a real run (monitors/pressure.py through `fslab run`): busy processes,
one pinned to each CPU, make a tiny fio run on a loop image wait for a CPU — flagged disturbed,
counted by the summary, and with --redo-disturbed run again, at most twice, the disturbed runs
stored set aside. A quiet run is judged against it: this machine may be busy with other work, so
it must show less CPU pressure than the hogged one, and be flagged only by its own figure."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import fresh_workdir, ran_study
from fslab.model.findings import DISTURBED
from fslab.monitors.pressure import CPU_PRESSURE_FROM

STUDY = """
[study]
name = "neighbours"
repetitions = 1
image_size = "128MiB"
image_fill = "sparse"

[[workload]]
name = "w"
rw = "randwrite"
bs = "4k"
size = "16MiB"
runtime = "1s"  # PSI counters are cumulative: a second shows the hogs; they hold the machine no longer
ioengine = "psync"

[[target]]
filesystem = "ext4"
"""

# Spins on one CPU once it says so: the byte it writes is the event the test waits for.
HOG = "import os, sys\nos.sched_setaffinity(0, {%d})\nsys.stdout.write('r')\nsys.stdout.flush()\nwhile True: pass\n"


@contextmanager
def hogs() -> Iterator[None]:
    """A busy process pinned to each CPU this test may use, each started and running (it said so)
    before the block, and ended (killed, reaped by its Popen: this test's own children) after it."""
    started: list[subprocess.Popen] = []
    try:
        for cpu in sorted(os.sched_getaffinity(0)):
            hog = subprocess.Popen([sys.executable, "-c", HOG % cpu], stdout=subprocess.PIPE)
            started.append(hog)
            assert hog.stdout is not None and hog.stdout.read(1) == b"r", "the hog did not start"
        yield
    finally:
        for hog in started:
            hog.kill()
            hog.wait()


def _runs(results, study_run):  # noqa: ANN001, ANN202
    stored = results.runs(study_run, ["id", "redone", "notes", "status"])
    cpu = {
        run_id: value for (run_id, phase, name), value in results.metric_values(study_run, ["psi_cpu_some_pct"]).items()
    }
    return [(r["redone"], [n for n in r["notes"] or [] if n["kind"] == DISTURBED], cpu.get(r["id"])) for r in stored]


def busy_now() -> float:
    """The kernel's own 10-second average of system-wide CPU pressure (%), as it stands."""
    line = Path("/proc/pressure/cpu").read_text().splitlines()[0]
    return float(dict(pair.split("=") for pair in line.split()[1:])["avg10"])


@pytest.fixture(scope="module")
def quiet_and_hogged(tmp_path_factory, needs_root):  # noqa: ANN001, ANN201
    with fresh_workdir() as workdir:
        before = busy_now()
        quiet = ran_study(tmp_path_factory.mktemp("quiet"), STUDY, workdir, "--no-ceiling")
        with hogs():
            hogged = ran_study(tmp_path_factory.mktemp("hogged"), STUDY, workdir, "--no-ceiling")
    return before, quiet, hogged


def test_a_run_beside_busy_neighbours_is_flagged_disturbed_and_counted(quiet_and_hogged):
    """A defect: CPU pressure not measured over the run, the rule not applied, the finding not
    stored or not counted by the summary."""
    _, _, (printed, results, study_run) = quiet_and_hogged
    ((redone, disturbed, cpu),) = _runs(results, study_run)
    assert not redone and cpu is not None and cpu >= CPU_PRESSURE_FROM, cpu
    assert disturbed and disturbed[0]["says"].startswith("disturbed: CPU pressure"), disturbed
    assert "1 run(s) disturbed" in printed.stdout


def test_a_quiet_run_is_flagged_only_by_its_own_figure_and_not_on_a_quiet_machine(quiet_and_hogged):
    """A defect: a run flagged with no pressure of its own (or not flagged with it), or a run on a
    quiet machine called disturbed. The machine running the tests may be busy with other work —
    then its run is disturbed, rightly: judged only where the kernel's own average said, before
    the run began, that the machine was quiet (under the threshold)."""
    before, (_, results, study_run), _ = quiet_and_hogged
    ((_, flags, cpu),) = _runs(results, study_run)
    assert cpu is not None and bool(flags) == (cpu >= CPU_PRESSURE_FROM), (cpu, flags)
    if before >= CPU_PRESSURE_FROM:
        pytest.skip(f"this machine was busy before the run (CPU pressure {before:.0f} % over 10 s): no quiet run here")
    assert not flags, f"a quiet machine (CPU pressure {before:.0f} % before) and a run disturbed: {cpu:.0f} %"


def test_redo_disturbed_runs_a_disturbed_run_again_at_most_twice(tmp_path, workdir):
    """A defect: a disturbed run counted under --redo-disturbed, redone without end, or not stored
    (set aside, redone) at all: neighbours that stay make three runs, two set aside, the third
    counted and flagged."""
    with hogs():
        printed, results, study_run = ran_study(tmp_path, STUDY, workdir, "--no-ceiling", "--redo-disturbed")
    stored = _runs(results, study_run)
    assert [redone for redone, _, _ in stored] == [True, True, False], stored
    assert all(disturbed for _, disturbed, _ in stored), "each disturbed: the neighbours stayed"
    assert printed.stdout.count("set aside, run again") == 2
    assert "1 run(s) disturbed" in printed.stdout and "2 disturbed run(s) run again" in printed.stdout
    groups = results.sample_groups(study_run)
    assert len(groups.values[("w", "ext4")]["write_iops"]) == 1, "the redone runs left out of the statistics"
    assert (results.study_run(study_run)["settings"] or {}).get("redo_disturbed") is True, "a resume redoes alike"
