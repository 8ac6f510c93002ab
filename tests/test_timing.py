"""Timing classes (statistics/timing.py): which stored metrics may be compared across hosts of
different accelerators and VMs, looked up across every kind's and monitor's declarations."""

import pytest

from fslab import monitors, workloads
from fslab.core import registry
from fslab.model import MetricKind
from fslab.monitors import Figure, MonitorKind
from fslab.statistics.timing import timing_of, timings


@pytest.mark.parametrize(
    ("key", "timing"),
    [
        ("write_buffered_share", "independent"),
        ("read_buffered_share", "independent"),
        ("write_buffered_bytes", "independent"),
        ("read_buffered_bytes", "independent"),
        ("space_used_bytes", "independent"),
        ("compression_ratio", "independent"),
        ("write_amplification", "dependent"),
        ("extents", "dependent"),
        ("write_iops", "speed"),
        ("read_lat_p99_us", "speed"),
        ("host_cpu_busy_pct", "speed"),
        ("events_per_s", "speed"),
        ("mib_s", "speed"),
        ("sync_seconds", "speed"),
    ],
)
def test_each_metric_has_the_timing_class_its_declaration_gives(key, timing):
    assert timing_of(key) == timing


def test_a_phase_qualified_key_has_its_metrics_class():
    assert timing_of("after.extents") == "dependent"
    assert timing_of("sanity.write.write_buffered_share") == "independent"
    assert timing_of("overwrite.write_iops") == "speed"


def test_a_metric_nothing_declares_is_speed_the_strictest():
    assert timing_of("made_up_metric") == "speed"
    assert timing_of("phase.made_up_metric") == "speed"


def test_the_classes_cover_kinds_and_monitors_alike():
    found = timings()
    assert set(found.values()) == {"speed", "dependent", "independent"}
    assert {f.name for f in monitors.figures()} <= set(found)
    assert set(workloads.metrics_of("fio")) <= set(found)


def test_a_name_declared_in_two_classes_takes_the_stricter_and_a_new_monitor_is_seen():
    with registry.scoped():
        monitors.MONITORS.add(
            MonitorKind(
                "toy_timing",
                order=99,
                figures=(Figure("toy_share", timing="independent"), Figure("write_buffered_share", timing="dependent")),
                make=lambda watched: None,
            )
        )
        assert timing_of("toy_share") == "independent"
        assert timing_of("write_buffered_share") == "dependent"
    assert timing_of("toy_share") == "speed"
    assert timing_of("write_buffered_share") == "independent"


def test_a_timing_class_out_of_the_three_is_refused():
    with registry.scoped():
        monitors.MONITORS.add(
            MonitorKind("toy_bad", order=99, figures=(Figure("toy_bad", timing="fast"),), make=lambda watched: None)
        )
        with pytest.raises(ValueError, match="toy_bad declares timing 'fast'"):
            timings()


def test_metric_kind_defaults_to_speed():
    assert MetricKind("MB/s", True).timing == "speed"
