"""Neighbours and energy, judged on synthetic readings (monitors/pressure.py, monitors/energy.py):
PSI and /proc/stat parsed, the disturbed rule at its thresholds, RAPL's package domains found and
their wraparound summed on sysfs trees built here, and what a summary says of disturbed and redone
runs and of energy not measurable."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from fslab.model.findings import DISTURBED, NOT_MEASURABLE, Finding
from fslab.model.records import RunRecord, now
from fslab.monitors import Found, WorkloadSaid, energy as en, pressure as ps
from fslab.monitors.base import Sample, counted_from
from fslab.report.formats.markdown import to_markdown
from fslab.report.formats.summary_json import to_json
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB
from fslab.results.schema import runs
from fslab.running import runner
from fslab.running.plan import PlannedRun, Tally

# As Linux 6.18 prints them (cpu's full line is 0 at the system level).
CPU = "some avg10=1.07 avg60=38.01 avg300=30.60 total=21106447217\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
IO = (
    "some avg10=0.16 avg60=1.24 avg300=2.67 total=5501141282\nfull avg10=0.12 avg60=0.37 avg300=1.12 total=1046036808\n"
)
STAT = "cpu  4439850 893227 953992 1328521 197431 0 84442 9563 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"


def reading(clock_s: float, cpu: int = 0, io: int = 0, memory: int = 0, steal: int = 0, ticks: int = 0) -> ps.Reading:
    return ps.Reading(round(clock_s * 1e6), cpu, io, io // 2, memory, memory // 2, steal, ticks)


def test_pressure_files_and_proc_stat_are_read_to_the_microsecond():
    """A defect: a field misread (avg10 for total, some for full), or cpu's line without `full` refused."""
    assert ps.parse_pressure(CPU) == ps.Stall(21106447217, 0)
    assert ps.parse_pressure(IO) == ps.Stall(5501141282, 1046036808)
    assert ps.parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n") == ps.Stall(42, 0), "before 5.13"
    with pytest.raises(ValueError, match="some"):
        ps.parse_pressure("")


def test_a_window_read_from_a_synthetic_proc_gives_the_shares_of_its_wall_time(tmp_path):
    """A defect: shares of the wrong base (µs over s), steal over the wrong ticks, PSI read where absent."""
    (tmp_path / "pressure").mkdir()
    stat = tmp_path / "stat"
    for name, text in (("cpu", CPU), ("io", IO), ("memory", IO)):
        (tmp_path / "pressure" / name).write_text(text)
    stat.write_text(STAT)
    before = ps.read(True, 100.0, tmp_path / "pressure", stat)
    (tmp_path / "pressure" / "cpu").write_text(CPU.replace("total=21106447217", "total=21106697217", 1))
    stat.write_text("cpu  4439950 893227 953992 1328821 197431 0 84442 9663 0 0\n")
    after = ps.read(True, 101.0, tmp_path / "pressure", stat)
    stalls = ps.stalls_between(before, after)
    assert stalls == ps.Stalls(25.0, 0.0, 0.0, 0.0, 0.0, 20.0), "250 ms of 1 s; 100 stolen of 500 ticks"
    assert ps.psi_available(tmp_path / "pressure") is None
    assert "CONFIG_PSI" in (ps.psi_available(tmp_path / "none") or "")
    without = ps.stalls_between(before, after, psi=False)
    assert without is not None and without.cpu_some is None and without.steal == 20.0


@pytest.mark.parametrize(
    ("stalls", "limited", "said"),
    [
        (ps.Stalls(9.9, 80, 80, 0, 0, 4.9), False, []),  # just under every threshold; I/O never counts
        (ps.Stalls(23.4, 0, 0, 0, 0, 0), False, ["CPU pressure 23 % of the window (threshold 10 %)"]),
        (ps.Stalls(10.0, 0, 0, 0, 0, 0), False, ["CPU pressure 10 % of the window (threshold 10 %)"]),
        (ps.Stalls(0, 0, 0, 0, 0, 5.0), False, ["steal 5 % of the CPUs' time (threshold 5 %)"]),
        (ps.Stalls(0, 0, 0, 12, 3, 0), False, ["memory pressure 12 % of the window (threshold 10 %)"]),
        (ps.Stalls(0, 0, 0, 60, 30, 0), True, []),  # reclaim within its own memory limit
        (ps.Stalls(None, None, None, None, None, None), False, []),  # nothing measured: nothing said
    ],
)
def test_the_disturbed_rule_at_its_thresholds(stalls, limited, said):
    """A defect: a threshold off by one side, I/O pressure (the workload's own) judged, a memory-limited
    run's own reclaim called a neighbour's."""
    assert ps.disturbed_by(stalls, limited) == said


def test_a_disturbed_window_is_a_finding_and_its_metrics_keep_their_names():
    """A defect: the finding's kind or the metric names others read (explanations) changed, or a
    finding made of an undisturbed window."""
    found = ps.judged(ps.Stalls(23.4, 5.0, 1.0, 0.0, 0.0, 0.2))
    assert [m.name for m in found.values] == [
        "psi_cpu_some_pct", "psi_io_some_pct", "psi_io_full_pct", "psi_memory_some_pct", "psi_memory_full_pct",
        "steal_pct",
    ]  # fmt: skip
    (finding,) = found.flags
    assert finding.kind == DISTURBED == "disturbed" and not finding.implausible
    assert finding.says.startswith("disturbed: CPU pressure 23 % of the window (threshold 10 %)")
    assert ps.judged(ps.Stalls(1.0, 50.0, 40.0, 0.0, 0.0, 0.0)).flags == []


def test_a_window_is_counted_from_the_workloads_own_start():
    """A defect: the ramp's CPU pressure counted (a neighbour that left before the figures began)."""
    samples = [
        Sample(0.0, reading(0.0, cpu=0, ticks=0)),
        Sample(1.0, reading(1.0, cpu=900_000, ticks=200)),  # the ramp: 90 % stalled
        Sample(2.0, reading(2.0, cpu=950_000, ticks=400)),
        Sample(3.0, reading(3.0, cpu=1_000_000, ticks=600)),
    ]
    stalls = ps.window(counted_from(samples, 1.0), psi=True)
    assert stalls is not None and stalls.cpu_some == pytest.approx(5.0)
    whole = ps.window(counted_from(samples, None), psi=True)
    assert whole is not None and whole.cpu_some == pytest.approx(33.3, abs=0.1)


def test_the_monitor_reads_this_machines_counters_at_its_edges():
    """A defect: the monitor fails here (this kernel has PSI), or returns no share."""
    monitor = ps.PressureMonitor()
    monitor.start()
    deadline = time.monotonic() + 5
    while len(monitor.sampler.samples) < 2 and time.monotonic() < deadline:  # a reading of its own thread
        time.sleep(0.05)
    monitor.stop()
    found = Found()
    monitor.values(WorkloadSaid(), found)
    names = {m.name for m in found.values}
    assert "steal_pct" in names and (not monitor.psi or "psi_cpu_some_pct" in names)
    assert all(0 <= m.value <= 100 for m in found.values)


def powercap(root: Path, zones: dict[str, tuple[str, int, int]]) -> Path:
    """A powercap tree: zone → (name, energy_uj, max_energy_range_uj)."""
    for zone, (name, energy, wraps) in zones.items():
        (root / zone).mkdir(parents=True)
        (root / zone / "name").write_text(f"{name}\n")
        (root / zone / "energy_uj").write_text(f"{energy}\n")
        (root / zone / "max_energy_range_uj").write_text(f"{wraps}\n")
    return root


def test_only_package_domains_are_counted(tmp_path):
    """A defect: a subdomain (core, dram: inside or outside a package) or psys counted beside the packages."""
    root = powercap(
        tmp_path / "powercap",
        {
            "intel-rapl:0": ("package-0", 100, 1000),
            "intel-rapl:0:0": ("core", 50, 1000),
            "intel-rapl:0:1": ("dram", 20, 1000),
            "intel-rapl:1": ("package-1", 300, 2000),
            "intel-rapl:2": ("psys", 900, 1000),
            "intel-rapl-mmio:0": ("package-0", 1, 1000),
        },
    )
    domains = en.package_domains(root)
    assert isinstance(domains, list)
    assert [(d.path.parent.name, d.wraps_at) for d in domains] == [("intel-rapl:0", 1000), ("intel-rapl:1", 2000)]
    assert en.package_domains(tmp_path / "none") == "no RAPL"
    assert en.package_domains(powercap(tmp_path / "other", {"intel-rapl:0": ("psys", 1, 10)})) == "no RAPL"


def test_a_counter_that_wraps_is_summed_across_the_wrap(tmp_path):
    """A defect: a wrap read as negative energy, or as a whole range too much."""
    assert en.consumed(900, 100, 1000) == 200 and en.consumed(100, 900, 1000) == 800
    root = powercap(tmp_path / "powercap", {"intel-rapl:0": ("package-0", 999_000_000, 1_000_000_000)})
    counter = en.EnergyCounter(en.package_domains(root))
    assert counter.read() == en.Energy(0)
    (root / "intel-rapl:0" / "energy_uj").write_text("1000000\n")  # wrapped: 1 J to the top, 1 J after
    assert counter.read() == en.Energy(2_000_000)
    (root / "intel-rapl:0" / "energy_uj").write_text("4000000\n")
    assert counter.read() == en.Energy(5_000_000)
    assert en.judged(5.0, WorkloadSaid(read_bytes=2**29, written_bytes=2**29)) == [
        en.Measured("cpu_package_energy_joules", 5.0, "J", False),
        en.Measured("cpu_package_energy_joules_per_gib", 5.0, "J/GiB", False),
    ]
    assert [m.name for m in en.judged(5.0, WorkloadSaid())] == ["cpu_package_energy_joules"], "no GiB, no ratio"


def test_a_monitor_on_a_synthetic_tree_counts_its_window(tmp_path):
    """A defect: energy counted outside the sampler's readings, or a value made without RAPL."""
    root = powercap(tmp_path / "powercap", {"intel-rapl:0": ("package-0", 0, 10**12)})
    monitor = en.EnergyMonitor(root)
    monitor.start()
    (root / "intel-rapl:0" / "energy_uj").write_text("3000000\n")
    monitor.stop()
    found = Found()
    monitor.values(WorkloadSaid(written_bytes=2**30), found)
    assert [(m.name, m.value) for m in found.values] == [
        ("cpu_package_energy_joules", 3.0),
        ("cpu_package_energy_joules_per_gib", 3.0),
    ]
    absent = en.EnergyMonitor(tmp_path / "none")
    absent.start()
    absent.stop()
    found = Found()
    absent.values(WorkloadSaid(written_bytes=2**30), found)
    assert found.values == [] and found.flags == [en.not_measurable("no RAPL")]


def test_this_machine_says_why_it_cannot_measure_energy_never_zero():
    """On this machine (a VM: no /sys/class/powercap) the monitor gives no value, and says so; a
    defect: a 0 J figure, or silence. Where RAPL is present, a value and no such note."""
    monitor = en.EnergyMonitor()
    monitor.start()
    monitor.stop()
    found = Found()
    monitor.values(WorkloadSaid(written_bytes=2**20), found)
    if isinstance(en.package_domains(), str):
        assert found.values == []
        assert [f.says for f in found.flags] == [f"CPU package energy: not measurable here: {en.package_domains()}"]
    else:
        assert found.flags == [] and found.values[0].name == "cpu_package_energy_joules"


def _planned(warmup: bool = False) -> PlannedRun:
    from types import SimpleNamespace

    cell = SimpleNamespace(
        target=SimpleNamespace(name="ext4"), workload=SimpleNamespace(name="w")
    )  # names alone are read
    return PlannedRun(1, 1, cell, 1, warmup)  # type: ignore[arg-type]


def _run(disturbed: bool, status: str = "ok") -> RunRecord:
    notes = [Finding(DISTURBED, "disturbed: CPU pressure 40 % of the window (threshold 10 %)", False)]
    return RunRecord("ext4", "w", 1, False, 1, 1, now(), now(), status, False, notes=notes if disturbed else [])


@pytest.mark.parametrize(
    ("made", "stored_aside", "kept_disturbed"),
    [
        ([False], 0, False),  # undisturbed: stored as it is, nothing run again
        ([True, False], 1, False),  # disturbed once: set aside, the redo counts
        ([True, True, True], 2, True),  # disturbed throughout: two set aside, the third counts, flagged
    ],
)
def test_redo_disturbed_sets_aside_at_most_twice(made, stored_aside, kept_disturbed):
    """A defect: an endless redo, a disturbed run dropped instead of stored set aside, a redo of an
    undisturbed one."""
    records = iter(_run(d) for d in made)
    first = next(records)
    stored: list[RunRecord] = []
    kept = runner.redone(
        _planned(), first, lambda: next(records), lambda r: stored.append(r) or len(stored), Tally(), None
    )
    assert len(stored) == stored_aside and all(r.redone for r in stored)
    assert not kept.redone and (runner.disturbed(kept) is not None) == kept_disturbed
    assert next(records, None) is None, "no run made beyond the bound"
    assert runner.disturbed(_run(True, status="failed")) is None


def test_a_summary_counts_disturbed_runs_leaves_redone_ones_out_and_says_energy_is_not_measurable(tmp_path):
    """A defect: a redone run in the statistics, disturbed runs uncounted, the energy line missing or
    shown as a cell note on every cell."""
    from synthetic import stored_study

    db = ResultsDB(str(tmp_path / "r.db"))
    text = '[study]\nname = "n"\nrepetitions = 3\nworkloads = ["rand_read"]\n\n[[target]]\nfilesystem = "ext4"\n'
    study_run = stored_study(tmp_path, text, db)
    ids = [r["id"] for r in db.runs(study_run, ["id"])]
    disturbed = [{"kind": DISTURBED, "says": "disturbed: CPU pressure 40 % of the window (threshold 10 %)",
                  "implausible": False, "caveat": ""}]  # fmt: skip
    energy = [{"kind": NOT_MEASURABLE, "says": "CPU package energy: not measurable here: no RAPL",
               "implausible": False, "caveat": ""}]  # fmt: skip
    before = summarize_study_run(db, study_run).samples.values[("rand_read", "ext4")]["read_iops"]
    with db.engine.begin() as conn:
        for run_id in ids:
            conn.execute(runs.update().where(runs.c.id == run_id).values(notes=energy))
        conn.execute(runs.update().where(runs.c.id == ids[0]).values(notes=disturbed + energy, redone=True))
        conn.execute(runs.update().where(runs.c.id == ids[1]).values(notes=disturbed + energy))
    s = summarize_study_run(db, study_run)
    assert s.samples.values[("rand_read", "ext4")]["read_iops"] == before[1:], "the redone run left out"
    assert (s.disturbed, s.redone) == (1, 1)
    assert s.not_measurable == ["CPU package energy: not measurable here: no RAPL"]
    (cell,) = s.cells
    assert any("disturbed: CPU pressure 40 %" in n and "(1 of 2 runs)" in n for n in cell.notes)
    assert not any("energy" in n for n in cell.notes), "the machine's, not the cell's"
    page = to_markdown(s)
    assert "1 run(s) disturbed" in page and "1 disturbed run(s) run again (--redo-disturbed)" in page
    assert "CPU package energy: not measurable here: no RAPL." in page
    document = json.loads(to_json(s))
    assert document["disturbed"] == {"runs": 1, "redone": 1}
    assert document["not_measurable"] == ["CPU package energy: not measurable here: no RAPL"]
    assert len(db.stored_runs(study_run)) == 2, "a resume plans the redone run's place again"
    with db.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(runs)).scalar() == 3, "still stored"


def test_doctor_names_the_always_on_monitors_checks_and_refuses_no_study_for_them(tmp_path):
    """A defect: a machine without RAPL or PSI told that a study is refused (these monitors never
    stop a run), or their checks missing from `fslab doctor`."""
    from fslab.running import doctor

    needs = {n.by: n for n in doctor.machine_checks(tmp_path) if n.by in ("the energy monitor", "the pressure monitor")}
    assert set(needs) == {"the energy monitor", "the pressure monitor"}
    assert not any(n.refuses or n.blocking for n in needs.values())


def test_the_workloads_own_cgroup_decides_cpu_pressure_where_it_has_one(tmp_path):
    """Where the workload runs in a cgroup v2 group, its cpu.pressure is judged, not the machine's:
    a defect would flag a run whose own tasks never waited because others waited among themselves
    (system-wide 90 %), or read a v1 group (no cpu.pressure) as one."""
    (tmp_path / "pressure").mkdir()
    group, v1 = tmp_path / "fslab-group", tmp_path / "v1-group"
    group.mkdir()
    v1.mkdir()
    stat = tmp_path / "stat"
    stat.write_text(STAT)
    for name in ("cpu", "io", "memory"):
        (tmp_path / "pressure" / name).write_text("some avg10=0 avg60=0 avg300=0 total=0\nfull total=0\n")
    (group / "cpu.pressure").write_text("some avg10=0 avg60=0 avg300=0 total=0\nfull total=0\n")
    assert ps.workload_group(group) == group and ps.workload_group(v1) is None and ps.workload_group(None) is None
    before = ps.read(True, 10.0, tmp_path / "pressure", stat, group)
    (tmp_path / "pressure" / "cpu").write_text("some avg10=0 avg60=0 avg300=0 total=900000\n")
    (group / "cpu.pressure").write_text("some avg10=0 avg60=0 avg300=0 total=50000\nfull total=0\n")
    after = ps.read(True, 11.0, tmp_path / "pressure", stat, group)
    stalls = ps.stalls_between(before, after, group=True)
    assert stalls is not None and (stalls.cpu_some, stalls.workload_cpu_some) == (90.0, 5.0)
    assert ps.disturbed_by(stalls) == [], "others waited; the workload's own tasks did not"
    assert "psi_workload_cpu_some_pct" in {m.name for m in ps.judged(stalls).values}
    (group / "cpu.pressure").write_text("some avg10=0 avg60=0 avg300=0 total=300000\nfull total=0\n")
    stalls = ps.stalls_between(before, ps.read(True, 11.0, tmp_path / "pressure", stat, group), group=True)
    assert stalls is not None
    assert ps.disturbed_by(stalls) == ["CPU pressure 30 % of the window on the workload's own tasks (threshold 10 %)"]
