"""Monitors are a registry: each monitor is a module that registers itself with the values it
reports, and the runner's windows, the stored metrics and the summary's monitors table follow
what is registered — a toy monitor added in one file (toys/monitor.py) included."""

from dataclasses import replace

import pytest

from conftest import FIXTURES
from fslab import monitors
from fslab.filesystems import Provisioned
from fslab.fio.workload import FIO
from fslab.model import RawOutput
from fslab.report.sections import is_monitored, monitor_columns, monitor_rows, shown
from fslab.report.summary import CellSummary
from fslab.running import doctor
from fslab.running.doctor import Need
from fslab.running.runner import Windows
from fslab.statistics.stats import summarize
from fslab.study import load_study


@pytest.fixture
def toy_registered(toys) -> None:  # noqa: ANN001
    """The toy registered for one test (conftest.toys)."""
    toys("monitor")


def test_the_built_in_monitors_join_the_registry_from_their_own_modules():
    for kind in monitors.kinds():
        assert kind.make.__module__ == f"fslab.monitors.{kind.name}", f"{kind.name} joins from its own module"
    assert {"cpu", "traffic", "space"} <= {k.name for k in monitors.kinds()}
    assert monitor_columns() == ["target", "phase", *(f.column for f in monitors.figures() if f.column)]
    assert {"CPU busy %", "device read", "write ampl.", "space used"} <= set(monitor_columns())
    assert "toy_edges" not in monitors.metric_names() and "device_read_ratio" in monitors.metric_names(), (
        "a value with no column is a monitor's all the same"
    )
    on_raw = [m.name for m in monitors.for_run([], None)]
    assert "space" not in on_raw and {"cpu", "traffic"} <= set(on_raw), "no space monitor on a raw device"


def test_a_toy_monitor_watches_a_runs_window_and_its_column_reaches_the_summary(toy_registered):
    """A window opened and closed as a kind's run does (runner.Windows), on no device: the toy
    is built for it beside the others, started and stopped once, and what it reports is stored
    as the run's metrics and shown in the monitors' table, in its own column."""
    windows = Windows(Provisioned(top="loop0", directory=None, bottom=()), None, lambda: None)
    with windows.measured(""):
        pass
    watched = [m.name for m in windows.watched[""]]
    assert watched == [m.name for m in monitors.for_run([], None)] and watched[-1] == "toy", "beside the others, last"
    metrics, _ = windows.found(FIO, [RawOutput("", "fio", (FIXTURES / "fio" / "randread-qd16.json").read_text())])
    got = {m.key: m for m in metrics}
    assert got["toy_edges"].value == 2 and got["toy_devices"].value == 0
    assert not got["toy_edges"].primary and not got["toy_edges"].compared, (
        "what a run cost is neither primary nor compared"
    )

    cell = CellSummary("randread", "raw", 0, {m.key: summarize([m.value], m.higher_is_better) for m in metrics})
    assert is_monitored("toy_edges") and not shown("toy_edges"), "the monitors' table shows it, not the workload's"
    assert monitor_columns()[-1] == "toy edges" and "toy_devices" not in " ".join(monitor_columns())
    assert monitor_rows(cell)[0][-1] == "2.0"


def test_an_opt_in_monitor_watches_only_the_runs_that_ask_for_it_by_its_trace_name(toys, tmp_path):
    """A monitor kind with a `trace` name is off unless `--trace` names it; known_traces refuses a
    name no monitor answers, naming those there are, and takes a comma-separated list once each.
    Fails on a registry that built every monitor for every window (the opt-in's cost on all runs)."""
    from fslab.core.checks import Check
    from fslab.core.errors import Refused
    from fslab.core.registry import scoped
    from fslab.monitors.base import MONITORS, MonitorKind

    toys("monitor")
    with scoped():
        toy = MONITORS["toy"]
        lacking = Check("toy tool", False, "not installed", "apt-get install toy")
        MONITORS.add(
            MonitorKind("toy_traced", 98, (), toy.make, trace="toy-trace", help="a toy", checks=lambda: [lacking])
        )
        plain = [kind.name for kind in monitors.kinds() if not kind.trace]
        assert len(monitors.for_run([], None)) == len([n for n in plain if n not in ("space", "page_cache")]), (
            "the always-on alone"
        )
        asked = monitors.for_run([], None, traces=frozenset({"toy-trace"}))
        assert len(asked) == len(monitors.for_run([], None)) + 1, "and the one asked for"
        assert monitors.known_traces(["toy-trace,toy-trace", " toy-trace"]) == ("toy-trace",)
        with pytest.raises(Refused, match=r"--trace 'nope': no such trace; there are .*toy-trace"):
            monitors.known_traces(["toy-trace,nope"])
        assert Need(lacking, "--trace toy-trace") in doctor.machine_checks(tmp_path), "`fslab doctor` lists its checks"
        study = load_study("quick")
        assert not any("toy tool" in n for n in doctor.machine_needs(study, tmp_path)), "not asked for: not needed"
        needs = doctor.machine_needs(replace(study, traces=("toy-trace",)), tmp_path)
        assert "toy tool (for --trace toy-trace): not installed — apt-get install toy" in needs, needs
