"""--trace cpu (monitors/cpu_trace.py, cpu_counters.py): /proc/<pid>/stat read whatever a
process calls itself, CPU split by who spent it across processes that start, exit and are reaped
inside the window, the idle baseline taken off, and perf's interval output — all on synthetic
readings; and the monitor for real, with perf counting a software event where no PMU is."""

import os
import subprocess
import sys

import pytest

from conftest import fresh_workdir, wait_for
from fslab.monitors import cpu_counters, traces
from fslab.monitors.base import Found, Sample, Synced, WorkloadSaid
from fslab.monitors.cpu_trace import (
    KINDS,
    CpuTraceMonitor,
    Reading,
    Spent,
    Tally,
    Task,
    kind_of,
    measured,
    parse_task_stat,
    spent_between,
    split,
)

OWN = 100  # fslab's pid in the synthetic readings
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def stat_line(pid: int, comm: str, ppid: int, utime: int, stime: int, cutime: int = 0, cstime: int = 0) -> str:
    """A /proc/<pid>/stat line as the kernel writes it (52 fields), start time 4242."""
    middle = [ppid, pid, pid, 0, -1, 4194560, 10, 0, 0, 0, utime, stime, cutime, cstime, 20, 0, 1, 0, 4242]
    return f"{pid} ({comm}) S {' '.join(map(str, middle))} " + " ".join(["0"] * 32) + "\n"


def test_a_stat_line_is_read_whatever_the_process_calls_itself():
    """A name holding spaces, parentheses and ") " must not shift the fields: a parser splitting
    on whitespace or at the first ")" would read the wrong utime, ppid, or fail."""
    for comm in ("fio", "a b", "x) S 1 2 3", "((", ") (", ""):
        task = parse_task_stat(stat_line(4321, comm, 77, 11, 22, 33, 44))
        assert task == Task(4321, comm, 77, 33, 77, 4242), comm


def test_the_machines_own_stat_lines_parse():
    """The kernel's real format (this process's line): a field miscounted reads a start time that
    is not this process's, or a negative time."""
    task = parse_task_stat(open(f"/proc/{os.getpid()}/stat").read())
    assert task.pid == os.getpid() and task.ppid == os.getppid() and task.ticks >= 0 and task.start > 0


@pytest.mark.parametrize(
    ("comm", "kind"),
    [
        ("kworker/u4:1-btrfs-endio-write", "btrfs"),
        ("kworker/u4:1+btrfs-endio-write", "btrfs"),  # running it now: "+"
        ("kworker/u4:0+flush-btrfs-1", "kworker"),  # the writeback flusher's queue, not a Btrfs one
        ("kworker/u4:0-flush-btrfs-1", "kworker"),
        ("kworker/u4:2+loop3", "loop"),
        ("kworker/R-btrfs-worker", "btrfs"),
        ("btrfs-transaction", "btrfs"),
        ("btrfs-cleaner", "btrfs"),
        ("kworker/u4:2-loop0", "loop"),
        ("loop7", "loop"),
        ("kworker/1:1H-kblockd", "kworker"),
        ("kworker/u4:0", "kworker"),
        ("kworker/u4:3-loopback", "kworker"),
        ("zfs-fuse", "zfs_fuse"),
        ("looper", "other"),
        ("systemd", "other"),
        ("btrfs", "other"),
    ],
)
def test_threads_are_told_apart_by_name(comm, kind):
    """A kworker doing Btrfs's or a loop device's work is theirs, by the workqueue its name ends
    with, running it now ("+") or last ("-"); a name merely starting alike (looper, a btrfs
    command) is not. (A reading catching kworkers at Btrfs's work, "+", counted it as kworkers':
    make test once stored no Btrfs CPU for a Btrfs run.)"""
    assert kind_of(comm) == kind


def task(pid: int, comm: str, ppid: int, ticks: int, reaped: int = 0, start: int = 1) -> Task:
    return Task(pid, comm, ppid, ticks, reaped, start)


def reading(busy: int, *tasks: Task) -> Reading:
    return Reading(busy, {t.key: t for t in tasks})


def test_kinds_are_split_from_one_reading_to_the_next():
    """Each process's own ticks since the previous reading go to its kind: a process counted in
    full instead of its difference, or in the wrong kind, reads here."""
    before = reading(
        1000,
        task(OWN, "python3", 1, 50),
        task(200, "fio", OWN, 10),
        task(300, "kworker/u4:1-btrfs-endio-write", 2, 5),
        task(301, "kworker/0:1-events", 2, 7),
        task(302, "kworker/u4:2-loop0", 2, 1),
        task(303, "zfs-fuse", 1, 100),
        task(304, "sshd", 1, 9),
    )
    after = reading(
        1300,
        task(OWN, "python3", 1, 80),
        task(200, "fio", OWN, 60),
        task(300, "kworker/u4:1-btrfs-endio-write", 2, 25),
        task(301, "kworker/0:1-events", 2, 10),
        task(302, "kworker/u4:2-loop0", 2, 5),
        task(303, "zfs-fuse", 1, 101),
        task(304, "sshd", 1, 19),
    )
    assert spent_between(before, after, OWN) == {"workload": 50, "kworker": 3, "btrfs": 20, "loop": 4, "zfs_fuse": 1}


def test_a_workload_that_exits_is_counted_to_its_last_tick_once():
    """fio and its job process both exit between two readings; fio reaped its job (its cutime),
    fslab reaped fio (fslab's cutime). Counting the reaped time without taking off what was counted
    of them before counts them twice (50 more); leaving it out loses their last ticks (30 fewer)."""
    before = reading(
        0, task(OWN, "python3", 1, 0, reaped=7), task(200, "fio", OWN, 20, reaped=5), task(201, "fio", 200, 30)
    )
    # fio ended with 25 ticks of its own and its job with 40: fio's cutime 5 + 40, fslab's 7 + 25 + 45
    after = reading(0, task(OWN, "python3", 1, 0, reaped=7 + 25 + 45))
    assert spent_between(before, after, OWN)["workload"] == (25 - 20) + (40 - 30)


def test_a_workload_born_and_gone_between_two_readings_counts_in_full():
    """A short tool run inside one interval is in no reading but fslab's cutime."""
    before, after = reading(0, task(OWN, "python3", 1, 0)), reading(0, task(OWN, "python3", 1, 0, reaped=12))
    assert spent_between(before, after, OWN)["workload"] == 12


def test_a_reused_pid_is_another_process():
    """A kworker that exited and a new one given its pid: the new one's ticks are its own, not a
    difference from the old one's (which would read 3 − 90 < 0, or nothing)."""
    before = reading(0, task(OWN, "python3", 1, 0), task(300, "kworker/0:1", 2, 90, start=1))
    after = reading(0, task(OWN, "python3", 1, 0), task(300, "kworker/0:2", 2, 3, start=500))
    assert spent_between(before, after, OWN)["kworker"] == 3


def test_the_monitors_own_tools_are_no_workload():
    """perf and bpftrace are fslab's children too: counted as the workload's, a traced run's CPU
    per I/O would grow with its tracing."""
    before = reading(0, task(OWN, "python3", 1, 0), task(400, "perf", OWN, 0), task(200, "fio", OWN, 0))
    after = reading(0, task(OWN, "python3", 1, 0), task(400, "perf", OWN, 70), task(200, "fio", OWN, 5))
    assert spent_between(before, after, OWN)["workload"] == 5


def spent(at_s: float, busy: int, **kinds: int) -> Spent:
    return Spent(round(at_s * 1e6), busy, **{k: kinds.get(k, 0) for k in KINDS})


def test_the_rest_of_the_total_is_other_and_the_kinds_add_up_to_it():
    """Other is what /proc/stat counted that no kind did (exited processes, interrupts, fslab):
    the kinds then add up to the total, never more."""
    window = split(spent(0, 0), spent(2, 300, workload=100, btrfs=50, kworker=20))
    assert window.kinds_ms["other"] == pytest.approx(130 * TICK_MS)
    assert sum(window.kinds_ms.values()) == pytest.approx(window.total_ms) == pytest.approx(300 * TICK_MS)
    skewed = split(spent(0, 0), spent(2, 100, workload=101))
    assert skewed.kinds_ms["other"] == 0.0, "a reading's skew never makes other negative"


def test_the_idle_baseline_is_taken_off_before_dividing_by_the_ios():
    """The machine's background (other: 10 ticks a second here) over the window's 2 s is no I/O's
    cost: dividing the whole total would read 150 ticks / 1000 I/Os instead of 130."""
    tick_rate = 1000 / TICK_MS  # ticks a second: in ms/s, 1000 ms
    window = split(spent(0, 0), spent(2, 150, workload=120), baseline={"other": 10 / tick_rate * 1000})
    assert sum(window.baseline_ms.values()) == pytest.approx(20 * TICK_MS)
    values = {m.name: m.value for m in measured(window, ios=1000)}
    assert values["cpu_us_per_io"] == pytest.approx((150 - 20) * TICK_MS * 1000 / 1000)
    assert values["cpu_ms_total"] == pytest.approx(150 * TICK_MS), "the kinds keep the baseline: they add up"
    assert values["cpu_ms_baseline"] == pytest.approx(20 * TICK_MS)


def test_on_a_busy_machine_the_workloads_cpu_is_not_lost_in_the_total():
    """Every CPU busy before and during the window (other work crowded out by the workload): the
    total minus its baseline reads 0; kind by kind, the workload's and Btrfs's CPU above theirs
    remain (other, below its baseline, counts 0, not a negative that would cancel them)."""
    ms_per_s = 2000.0  # two CPUs, all busy
    ticks = {"busy": round(2000 / TICK_MS), "workload": round(300 / TICK_MS), "btrfs": round(100 / TICK_MS)}
    window = split(spent(0, 0), spent(1, **ticks), baseline={"other": ms_per_s, "btrfs": 0.0})
    assert window.total_ms - sum(window.baseline_ms.values()) == pytest.approx(0, abs=TICK_MS)
    assert window.above_baseline_ms == pytest.approx(400, abs=TICK_MS)


def test_cpu_per_io_needs_ios_and_cpu_above_the_baseline():
    """No I/O count (dd), or a window below its baseline: no figure rather than 0 or a negative."""
    window = split(spent(0, 0), spent(1, 10, workload=10), baseline={"workload": 1e6})
    assert "cpu_us_per_io" not in {m.name for m in measured(window, ios=100)}
    window = split(spent(0, 0), spent(1, 10, workload=10))
    assert "cpu_us_per_io" not in {m.name for m in measured(window, ios=None)}


def test_perfs_intervals_add_up_and_are_counted_over_the_window():
    """perf's -I output (its real format, CSV): the counts of each interval added up, an interval
    with a counter it could not count left out, and the window's share of an interval interpolated."""
    text = (
        "# started on Sun Nov 29\n"
        "     0.250000000,1000,,cycles,250,100.00,,\n     0.250000000,500,,instructions,250,100.00,,\n"
        "     0.500000000,3000,,cycles,250,100.00,,\n     0.500000000,<not counted>,,instructions,0,0.00,,\n"
        "     0.750000000,2000,,cycles,250,100.00,,\n     0.750000000,1000,,instructions,250,100.00,,\n"
    )
    intervals = cpu_counters.parse_intervals(text, ("cycles", "instructions"))
    assert intervals == [(0.25, {"cycles": 1000, "instructions": 500}), (0.75, {"cycles": 2000, "instructions": 1000})]
    samples = cpu_counters.cumulative(intervals, began=10.0)
    assert samples[0] == cpu_counters.Counts(10.0, {"cycles": 0, "instructions": 0})
    assert cpu_counters.between(samples, 10.0, 10.75) == {"cycles": 3000, "instructions": 1500}
    assert cpu_counters.between(samples, 10.125, 10.75)["cycles"] == pytest.approx(2500)
    assert cpu_counters.between(samples, 9.0, 10.75) is None, "an interval perf did not cover"
    unsupported = "     0.25,<not supported>,,cycles,0,100.00,,\n     0.25,<not supported>,,instructions,0,100.00,,\n"
    assert cpu_counters.parse_intervals(unsupported, ("cycles", "instructions")) == []


def test_no_pmu_is_found_among_event_sources_without_a_cpu(tmp_path):
    """This machine's list (no cpu PMU) reads as none; x86's and Arm's as theirs."""
    for name in ("breakpoint", "msr", "power", "software", "tracepoint", "uprobe"):
        (tmp_path / name).mkdir()
    assert cpu_counters.core_pmu(tmp_path) is None
    (tmp_path / "armv8_pmuv3_0").mkdir()
    assert cpu_counters.core_pmu(tmp_path) == "armv8_pmuv3_0"
    (tmp_path / "armv8_pmuv3_0").rmdir()
    (tmp_path / "cpu").mkdir()
    assert cpu_counters.core_pmu(tmp_path) == "cpu"


def test_cpu_is_a_trace_with_its_checks_and_its_cost_said():
    """`--trace cpu` names this monitor; `fslab list` shows its help, `fslab doctor` its checks."""
    kind = traces()["cpu"]
    assert "cost" in kind.help and "PMU" in kind.help
    names = {c.name for c in kind.checks()}
    assert names == {"perf", "PMU"} and not any(c.required for c in kind.checks())


def test_the_monitor_splits_a_real_window_and_says_no_pmu_once(monkeypatch):
    """For real, no root: a child burning CPU inside the window is the workload's (reaped before
    the window ends); the kinds add up to the total; no PMU is a note, no value."""
    monitor = CpuTraceMonitor.__new__(CpuTraceMonitor)
    monitor.baseline, monitor.counting = {}, None
    from fslab.monitors.base import Sampler

    monitor.sampler = Sampler(Tally(), "test-cpu-trace", 0.05)
    monitor.start()
    subprocess.run(
        [sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"]
    )
    monitor.stop()
    found = Found()
    monitor.values(WorkloadSaid(ios=1000), found)
    values = {v.name: v.value for v in found.values}
    assert values["cpu_ms_workload"] >= 250, "the child's 0.3 s of CPU, reaped inside the window"
    kinds = sum(values[f"cpu_ms_{k}"] for k in (*KINDS, "other"))
    assert kinds == pytest.approx(values["cpu_ms_total"], abs=2 * TICK_MS)
    assert values["cpu_us_per_io"] > 0
    assert [f.says for f in found.flags] == ["CPU cycles and instructions not measurable here: no PMU"]
    assert "cpu_cycles" not in values


@pytest.mark.root
def test_perf_counts_a_window_and_is_gone_after(needs_root):
    """The held perf process, for real (a software event: this machine has no PMU): its intervals
    are read, the window's count is positive, and it is neither running nor journalled after."""
    with fresh_workdir() as workdir:
        counting = cpu_counters.Counting(workdir.journal, events=("cpu-clock",))
        counting.start()
        pid = counting._proc.pid
        wait_for("perf's first interval", lambda: "cpu-clock" in counting._out.read_text())
        counting.stop()
        assert counting.samples and len(counting.samples) >= 2
        first, last = counting.samples[0].at, counting.samples[-1].at
        assert cpu_counters.between(counting.samples, first, last)["cpu-clock"] > 0
        assert not os.path.exists(f"/proc/{pid}"), "perf is gone"
        assert not workdir.journal.outstanding(), "nothing left held"


def test_window_counted_from_the_workloads_start_to_the_sync():
    """The window is cut at counted_from and at the sync as cpu.py's is: counting the sync's CPU
    (300 ticks here) as the workload's window would triple its CPU per I/O."""
    monitor = CpuTraceMonitor.__new__(CpuTraceMonitor)
    monitor.baseline, monitor.counting = {}, None
    from fslab.monitors.base import Sampler

    monitor.sampler = Sampler(Tally(), "test", 1.0)
    monitor.sampler.samples = [
        Sample(0.0, spent(0, 0)),
        Sample(1.0, spent(1, 100, workload=100)),
        Sample(2.0, spent(2, 200, workload=200)),
        Sample(3.0, spent(3, 500, workload=200, btrfs=300)),
    ]
    found = Found()
    monitor.values(WorkloadSaid(ios=100, counted_from=1.0, synced=Synced(began=2.0, seconds=1.0)), found)
    values = {v.name: v.value for v in found.values}
    assert values["cpu_ms_total"] == pytest.approx(100 * TICK_MS)
    assert values["cpu_ms_btrfs"] == 0
    assert values["cpu_us_per_io"] == pytest.approx(100 * TICK_MS * 1000 / 100)


@pytest.mark.root
def test_perf_killed_from_outside_is_stopped_without_harm(needs_root):
    """perf gone before the window ends (killed by someone else): stopping signals nothing else,
    finds no counts (none rather than a partial figure), and leaves nothing held."""
    with fresh_workdir() as workdir:
        counting = cpu_counters.Counting(workdir.journal, events=("cpu-clock",))
        counting.start()
        wait_for("perf running", lambda: "perf" in open(f"/proc/{counting._proc.pid}/comm").read())
        os.kill(counting._proc.pid, 9)
        wait_for("perf gone", lambda: open(f"/proc/{counting._proc.pid}/stat").read().split(") ")[1][0] == "Z")
        counting.stop()
        assert counting.samples == [] or len(counting.samples) >= 2
        assert not workdir.journal.outstanding()
