"""Monitors: the parsers and arithmetic on real and synthetic text, and each monitor for real —
the CPU sampler, device traffic on a loop device fslab attached, space and compression on Btrfs,
extents on ext4."""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import FIXTURES, wait_for
from fslab.devices.layers import Stack
from fslab.devices.loop import attached, image_file, on_loops
from fslab.filesystems import FILESYSTEMS, Provisioned
from fslab.model import Target
from fslab.monitors import cpu
from fslab.monitors.base import (
    CLOCK,
    EARLIEST,
    Found,
    Records,
    Sample,
    Sampler,
    Synced,
    WorkloadSaid,
    collect,
    counted_from,
    measuring,
    next_interval,
)
from fslab.monitors.cpu import CpuMonitor, CpuTimes, parse_proc_stat, summarize, use_between
from fslab.monitors.extents import FUSE_SUPER_MAGIC, Extents, extent_counts, not_a_count, parse_filefrag
from fslab.monitors.space import SpaceMonitor, btrfs_compression_ratio, parse_btrfs_df, parse_zfs_compressratio
from fslab.monitors.traffic import (
    CACHE_SERVED_BELOW,
    REWRITTEN_BY_COMMITS,
    REWRITTEN_FROM,
    TRAFFIC_GROWTH,
    TRAFFIC_LONGEST,
    TRAFFIC_PERIOD,
    Counted,
    TrafficMonitor,
    UnknownDevice,
    block_name,
    judged,
    parse_block_stat,
    rewritten_by_commits,
    served_by_cache,
    write_amplification,
)

MONITORS = FIXTURES / "monitors"
MiB = 2**20


def values(found: Found) -> dict[str, float]:
    return {v.name: v.value for v in found.values}


# --- CPU ---------------------------------------------------------------------------------------


def test_proc_stat_parsed_from_a_real_snapshot():
    times = parse_proc_stat((MONITORS / "proc-stat-a.txt").read_text())
    assert times == CpuTimes(789393, 0, 172407, 1549953, 70056, 0, 14606, 244)
    assert times.busy == 789393 + 172407 + 14606 and times.total == times.busy + 1549953 + 70056 + 244


def test_use_between_two_real_snapshots_half_a_second_apart():
    a, b = (parse_proc_stat((MONITORS / f"proc-stat-{x}.txt").read_text()) for x in "ab")
    use = use_between(a, b)
    elapsed = 20 + 8 + 70 + 1 + 1  # user, system, idle, softirq, steal ticks on 2 CPUs
    assert use.busy == pytest.approx(100 * (20 + 8 + 1) / elapsed)
    assert use.user == pytest.approx(20) and use.system == pytest.approx(9) and use.iowait == 0


def test_user_system_iowait_split_and_peak_on_synthetic_samples():
    def t(user, system, idle, iowait, irq=0, softirq=0, nice=0):
        return CpuTimes(user, nice, system, idle, iowait, irq, softirq, 0)

    samples = [
        t(0, 0, 0, 0),
        t(10, 10, 80, 0),
        t(90, 10, 80, 20, irq=5, softirq=5, nice=10),
    ]  # second interval: busy but for iowait
    summary = summarize(samples)
    # whole window: 220 ticks; user+nice 100, system+irq+softirq 20, iowait 20
    assert summary.average.user == pytest.approx(100 * 100 / 220)
    assert summary.average.system == pytest.approx(100 * 20 / 220)
    assert summary.average.iowait == pytest.approx(100 * 20 / 220)
    assert summary.average.busy == pytest.approx(100 * 120 / 220)
    assert summary.peak_busy == pytest.approx(100 * 100 / 120)  # second interval: 100 busy of 120
    assert summarize(samples[:1]) is None and summarize([samples[0], samples[0]]) is None


def test_an_older_kernels_short_cpu_line_and_a_missing_one():
    assert parse_proc_stat("cpu  1 2 3 4\n").iowait == 0
    with pytest.raises(ValueError):
        parse_proc_stat("intr 1 2 3\n")


class FakeProcStat:
    """/proc/stat as the sampler reads it, each reading 50 ticks on from the last: 20 of user
    time, 10 of system, 5 of iowait, 15 idle (the machine's own load would move the figures)."""

    def __init__(self) -> None:
        self.readings = 0

    def read_text(self) -> str:
        n = self.readings
        self.readings += 1
        return f"cpu  {20 * n} 0 {10 * n} {15 * n} {5 * n} 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n"


def test_the_cpu_sampler_samples_several_times_a_second_and_stops(monkeypatch):
    proc_stat = FakeProcStat()
    monkeypatch.setattr(cpu, "PROC_STAT", proc_stat)
    monitor = CpuMonitor(period=0.05)
    with measuring([monitor]):
        wait_for("six samples", lambda: len(monitor.sampler.samples) >= 6, deadline=30, every=0.01)
    assert not monitor.sampler.running, "it stops with the phase"
    wait_for("the clock's thread to end", lambda: CLOCK._thread is None, deadline=30, every=0.01)
    assert len(monitor.sampler.samples) == proc_stat.readings >= 7, "a sample a reading, the last as it stops"
    got = values(collect([monitor]))
    assert got == {
        "host_cpu_busy_pct": 60,
        "host_cpu_busy_peak_pct": 60,
        "host_cpu_user_pct": 40,
        "host_cpu_system_pct": 20,
        "host_cpu_iowait_pct": 10,
    }


def test_monitors_are_stopped_when_the_phase_fails():
    monitor = CpuMonitor(period=0.05)
    with pytest.raises(RuntimeError), measuring([monitor]):
        raise RuntimeError("the workload failed")
    assert not monitor.sampler.running


# --- counting from the moment the workload's figures begin ---------------------------------------


def test_a_window_counts_from_the_moment_the_workload_began_interpolated_between_samples():
    """Synthetic samples of a device writing 100 bytes a second from t=10 (fio's start-up and
    ramp before that, 50 bytes a second): counted from 10.5, the ramp's bytes are left out."""
    samples = [
        Sample(t, Counted(0, round(50 * min(t, 10) + 100 * max(t - 10, 0)))) for t in (9.0, 9.8, 10.2, 11.0, 12.0)
    ]
    readings = counted_from(samples, 10.5)
    assert readings[0] == Counted(0, 550), "between the samples at 10.2 and 11.0, as the counter stood at 10.5"
    assert readings[-1] - readings[0] == Counted(0, 150)
    assert counted_from(samples, None) == [s.reading for s in samples], "no moment: the whole window"
    assert counted_from(samples, 1.0) == [s.reading for s in samples], "before the window opened: the whole window"
    assert counted_from(samples, 13.0) == [samples[-1].reading], "after it closed: nothing left to count"
    assert counted_from([], 10.5) == []


def traffic_schedule(until: float) -> list[float]:
    """When the traffic monitor samples a window of `until` seconds (its thread never late)."""
    at = [0.0]
    while at[-1] < until:
        at.append(at[-1] + next_interval(at[-1], TRAFFIC_PERIOD, TRAFFIC_GROWTH, TRAFFIC_LONGEST))
    return [*at[:-1], until]  # the last: as it stops


@pytest.mark.parametrize(
    ("epoch", "window"), [(e, w) for w in (0.5, 3.0, 60.0) for e in (0.02, 0.1, 0.3, 1.0) if e < w]
)
def test_the_sparser_traffic_samples_still_count_from_the_epoch_as_closely_as_every_10_ms(epoch, window):
    """The traffic monitor samples densely at the window's start and sparsely after
    (traffic.TRAFFIC_GROWTH): fio's epoch E after a start-up with no I/O — the rate's step, the
    worst case for interpolation — is still counted to within the I/O of max(2.5 ms, growth/4·E)
    (every 10 ms: 2.5 ms), and after a ramp at half the rate alike. Fails on a schedule sparse
    where an epoch falls (a fixed 0.2 s misses 50 ms of I/O at a 0.1 s epoch), or on samples
    not far fewer than every 10 ms over a long window."""
    rate = 1e9  # bytes a second after the epoch
    for before in (0.0, rate / 2):  # start-up with no I/O; a ramp_time at half the rate
        samples = [
            Sample(t, Counted(round(before * min(t, epoch) + rate * max(t - epoch, 0)), 0))
            for t in traffic_schedule(window)
        ]
        readings = counted_from(samples, epoch)
        counted = (readings[-1] - readings[0]).read_bytes
        assert abs(counted - rate * (window - epoch)) <= rate * max(0.0025, TRAFFIC_GROWTH / 4 * epoch) + 1
    at = traffic_schedule(window)
    assert sum(t < 0.05 for t in at) >= 5, "dense where fio's start-up ends"
    assert len(at) <= 50 + 3 * window, "sparse after (every 10 ms: 100 a second): a wake-up is a sample's cost"


def test_samplers_share_one_clock_each_on_its_own_schedule_and_a_failed_read_is_said_at_stop():
    """Every running Sampler is sampled by one thread (base.CLOCK): a growing one waits
    next_interval after each sample (never on a fixed grid, so a late wake adds no burst; taken up
    to a quarter early to share another's wake-up), a fixed one every period (half early at
    most); one whose read fails stops being sampled and says so at its stop, the others go on.
    Fails on a clock that ignores `growth` (every gap 10 ms), samples in a burst, or swallows a
    failed read."""
    growing = Sampler(lambda: Counted(0, 0), "growing", 0.01, growth=0.5, longest=0.08)
    fixed = Sampler(lambda: Counted(0, 0), "fixed", 0.02)
    reads = iter(range(3))
    failing = Sampler(lambda: Counted(next(reads), 0), "failing", 0.01)
    for sampler in (growing, fixed, failing):
        sampler.start()
    try:
        wait_for("nine samples", lambda: len(growing.samples) >= 9 and len(fixed.samples) >= 9, deadline=30, every=0.01)
    finally:
        growing.stop()
        fixed.stop()
    at = [s.at for s in growing.samples[:-1]]  # the last: taken as it stopped
    for earlier, later in zip(at, at[1:]):
        interval = next_interval(earlier - at[0], 0.01, 0.5, 0.08)
        assert later - earlier >= interval - max(EARLIEST, interval / 4), "a quarter early at most (5 ms at least)"
    assert max(b - a for a, b in zip(at, at[1:])) >= 0.04, "the intervals grew"
    fixed_at = [s.at for s in fixed.samples[:-1]]
    assert all(b - a >= 0.02 - max(EARLIEST, 0.02 / 2) for a, b in zip(fixed_at, fixed_at[1:])), (
        "a fixed period, half early at most (5 ms at least)"
    )
    assert len(failing.samples) == 3, "sampled until its read failed"
    with pytest.raises(StopIteration):
        failing.stop()
    wait_for("the clock's thread to end", lambda: CLOCK._thread is None, deadline=30, every=0.01)


def test_traffic_and_cpu_are_counted_from_the_workloads_start():
    traffic, cpu = TrafficMonitor([]), CpuMonitor()
    traffic.sampler.samples = [Sample(0.0, Counted(0, 0)), Sample(1.0, Counted(0, 500)), Sample(3.0, Counted(0, 2500))]
    # 1 s idle (100 ticks), then 2 s half busy (100 system, 100 idle)
    cpu.sampler.samples = [
        Sample(0.0, CpuTimes(0, 0, 0, 0, 0, 0, 0, 0)),
        Sample(1.0, CpuTimes(0, 0, 0, 100, 0, 0, 0, 0)),
        Sample(3.0, CpuTimes(0, 0, 100, 200, 0, 0, 0, 0)),
    ]
    got = values(collect([traffic, cpu], WorkloadSaid(written_bytes=2000, counted_from=1.0)))
    assert got["device_written_bytes"] == 2000 and got["write_amplification"] == 1.0
    assert got["host_cpu_busy_pct"] == 50.0, "the idle start-up left out"
    got = values(collect([traffic, cpu], WorkloadSaid(written_bytes=2000)))
    assert got["write_amplification"] == 1.25 and got["host_cpu_busy_pct"] == pytest.approx(100 / 3), (
        "without it: the whole window"
    )


def test_a_window_counted_until_a_moment_ends_with_the_counters_as_they_stood_then():
    """The same device, a sync beginning at 11.5: counted from 10.5 until it, interpolated at both ends."""
    samples = [
        Sample(t, Counted(0, round(50 * min(t, 10) + 100 * max(t - 10, 0)))) for t in (9.0, 9.8, 10.2, 11.0, 12.0)
    ]
    readings = counted_from(samples, 10.5, until=11.5)
    assert readings == [Counted(0, 550), Counted(0, 600), Counted(0, 650)], (
        "the sample at 11.0 kept, the counter at 11.5 interpolated"
    )
    assert counted_from(samples, None, until=10.6) == [*(s.reading for s in samples[:3]), Counted(0, 560)], (
        "from the window's start"
    )
    assert (
        counted_from(samples, 10.5, until=12.0)
        == counted_from(samples, 10.5)
        == counted_from(samples, 10.5, until=13.0)
    ), "at or after the last sample: to the end"
    assert counted_from(samples, None, until=8.0) == [samples[0].reading], "before the first sample: nothing to count"
    assert counted_from([], None, until=8.0) == []


def test_the_sync_that_ends_a_window_counts_for_the_devices_bytes_and_not_for_cpu():
    """fio from 1 s to 3 s, then a sync of the filesystem to 4 s that writes 1000 more bytes with
    the CPUs idle: the devices' bytes are counted through it, CPU until it began."""
    traffic, cpu = TrafficMonitor([]), CpuMonitor()
    traffic.sampler.samples = [
        Sample(0.0, Counted(0, 0)),
        Sample(1.0, Counted(0, 500)),
        Sample(3.0, Counted(0, 2500)),
        Sample(4.0, Counted(0, 3500)),
    ]
    cpu.sampler.samples = [
        Sample(0.0, CpuTimes(0, 0, 0, 0, 0, 0, 0, 0)),
        Sample(1.0, CpuTimes(0, 0, 0, 100, 0, 0, 0, 0)),
        Sample(3.0, CpuTimes(0, 0, 100, 200, 0, 0, 0, 0)),
        Sample(4.0, CpuTimes(0, 0, 100, 300, 0, 0, 0, 0)),
    ]
    got = values(
        collect(
            [traffic, cpu], WorkloadSaid(written_bytes=2000, counted_from=1.0, synced=Synced(began=3.0, seconds=1.0))
        )
    )
    assert got["device_written_bytes"] == 3000 and got["write_amplification"] == 1.5, (
        "what the sync wrote is the workload's"
    )
    assert got["sync_seconds"] == 1.0
    assert got["host_cpu_busy_pct"] == 50.0, "the sync's idle second left out, as the start-up is"
    assert "sync_seconds" not in values(collect([traffic, cpu], WorkloadSaid(written_bytes=2000, counted_from=1.0))), (
        "no sync: none said"
    )


# --- device traffic -----------------------------------------------------------------------------


def test_block_stat_counts_512_byte_sectors_whatever_the_device():
    line = (
        "31503905      409 360418128  7024456  3578228   176393 2287777074 13776348     "
        "   0  1130192 20808301      174        0 45437606        7    17717     7488\n"
    )
    assert parse_block_stat(line) == Counted(360418128 * 512, 2287777074 * 512, 17717), "and flushes completed (16th)"
    with pytest.raises(ValueError):
        parse_block_stat("1 2 3")


def test_write_amplification_and_the_cache_judgement_on_synthetic_numbers():
    assert write_amplification(3 * MiB, 1 * MiB) == 3.0
    assert write_amplification(3 * MiB, 0) is None and write_amplification(3 * MiB, None) is None
    assert served_by_cache(0, 100 * MiB) and served_by_cache(CACHE_SERVED_BELOW * 100 * MiB - 1, 100 * MiB)
    assert not served_by_cache(CACHE_SERVED_BELOW * 100 * MiB, 100 * MiB) and not served_by_cache(120 * MiB, 100 * MiB)
    assert not served_by_cache(0, 0) and not served_by_cache(0, None)
    found = judged(
        Counted(read_bytes=1 * MiB, written_bytes=150 * MiB),
        WorkloadSaid(read_bytes=100 * MiB, written_bytes=100 * MiB),
    )
    assert values(found) == {
        "device_read_bytes": MiB,
        "device_written_bytes": 150 * MiB,
        "write_amplification": 1.5,
        "device_read_ratio": 0.01,
    }
    assert len(found.flags) == 1 and "served by a cache" in found.flags[0].says
    assert "the devices read 1% of the 100MiB the workload read" in found.flags[0].says, "a size as sizes are written"
    assert found.flags[0].kind == "served_by_cache" and not found.flags[0].implausible
    assert judged(Counted(100 * MiB, 0), WorkloadSaid(read_bytes=100 * MiB)).flags == []


def zfs_fuse_window(which: str) -> tuple[TrafficMonitor, WorkloadSaid]:
    """A traffic monitor holding the samples stored of a real window on zfs-fuse (8 MiB of random
    4k writes, recordsize 128k, beside two CPU hogs), and what fio said of it."""
    stored = json.loads((MONITORS / "traffic-zfs-fuse-randwrite.json").read_text())[which]
    traffic = TrafficMonitor([], RECORDS)
    traffic.flushes = True
    traffic.sampler.samples = [Sample(at, Counted(0, written, flushes)) for at, written, flushes in stored["samples"]]
    said = WorkloadSaid(
        written_bytes=stored["workload_written_bytes"],
        counted_from=stored["counted_from"],
        synced=Synced(*stored["synced"]),
    )
    return traffic, said


RECORDS = Records(128 * 1024, 2)  # ZFS's default recordsize, copies=1 on one device, and its intent log


def test_writes_rewritten_by_the_filesystems_commits_on_synthetic_numbers():
    wrote = 64 * MiB  # AMPLIFICATION_FROM: a ratio of less is not judged
    assert rewritten_by_commits(REWRITTEN_FROM * 2 * wrote, wrote, 2)
    assert not rewritten_by_commits(REWRITTEN_FROM * 2 * wrote - 1, wrote, 2), "journal and metadata beside 2 copies"
    assert not rewritten_by_commits(99 * MiB, 0, 1) and not rewritten_by_commits(99 * MiB, None, 1), "nothing written"
    assert not rewritten_by_commits(18 * (wrote - 1), wrote - 1, 1), "under AMPLIFICATION_FROM, however high"
    # A ZFS mirror of 2 with copies=2, sync writes reaching the intent log first: 8 honest copies.
    assert not rewritten_by_commits(31 * wrote, wrote, 8) and rewritten_by_commits(32 * wrote, wrote, 8)
    running = Counted(0, 1000 * MiB, 190)
    said = WorkloadSaid(written_bytes=100 * MiB)
    found = judged(Counted(0, 1100 * MiB, 200), said, flushes=True, running=running, records=RECORDS)
    [flag] = found.flags
    assert (flag.kind, flag.implausible, flag.caveat) == (REWRITTEN_BY_COMMITS, False, "")
    assert flag.says.startswith(
        "writes rewritten by the filesystem's commits: the devices wrote 1000MiB while the workload ran, in 190 "
        "flushes of their write cache — 10.0× the 100MiB it wrote, before the window's sync (11.0× through it), "
        "over 4 times the 2 copies its devices hold of each byte (with the intent log's)"
    )
    assert "every record (128KiB)" in flag.says and "varies from run to run" in flag.says
    assert values(found)["write_amplification"] == 11.0, "the figure stays: explained, not hidden"
    unflushed = judged(Counted(0, 1100 * MiB), said, running=running, records=RECORDS).flags[0].says
    assert "flushes" not in unflushed, "flushes not counted: none named"
    held = judged(Counted(0, 1100 * MiB), said, running=Counted(0, 100 * MiB), records=RECORDS)
    assert held.flags == [], "most written at the sync: held, then written once, however much"
    assert judged(Counted(0, 1100 * MiB), said, records=RECORDS).flags == [], "no sync: no claim"
    # Not a filesystem of records: ext4 data=journal on a 3-leg md RAID1 writes 6×, Btrfs raid1c4
    # 4× and its metadata, a journal's blocks for fsyncs of a few bytes more: redundancy, not rewriting.
    assert judged(Counted(0, 1100 * MiB), said, running=running).flags == [], "no records: no claim"
    mirrored = Records(128 * 1024, 3 * 2 * 2)  # copies=3 on a mirror of 2, and the intent log
    assert judged(Counted(0, 1100 * MiB), said, running=running, records=mirrored).flags == [], "10× of 12 copies"


def test_the_records_of_a_target_are_read_from_what_zfs_reported_of_it():
    """`zfs get` as a run stores it: recordsize and copies; every device under the pool counted as a
    mirror's leg, the intent log twice; a volume, a filesystem writing the blocks written: none."""
    details = "engine: zfs-fuse\nrecordsize\t128K\tdefault\ncopies\t2\tlocal\ncompression\toff\tdefault\n"
    zfs, ext4 = FILESYSTEMS["zfs"], FILESYSTEMS["ext4"]
    made = Provisioned(top="/dev/loop0", directory=Path("/mnt"), bottom=("/dev/loop0",), details=details)
    assert zfs.records(made) == Records(128 * 1024, 2 * 1 * 2)
    mirror = Provisioned(top="/dev/loop0", directory=Path("/mnt"), bottom=("/dev/loop0", "/dev/loop1"), details=details)
    assert zfs.records(mirror) == Records(128 * 1024, 2 * 2 * 2)
    small = details.replace("128K\tdefault", "4K\tlocal")
    assert zfs.records(Provisioned(top="/dev/loop0", directory=Path("/mnt"), details=small)) == Records(4096, 4)
    assert zfs.records(Provisioned(top="/dev/zd0", directory=None, details=details)) is None, "a volume"
    assert zfs.records(Provisioned(top="/dev/loop0", directory=Path("/mnt"))) is None, "nothing reported"
    odd = details.replace("128K\tdefault", "-\tdefault")
    assert zfs.records(Provisioned(top="/dev/loop0", directory=Path("/mnt"), details=odd)) is None, "not a size"
    assert ext4.records(Provisioned(top="/dev/loop0", directory=Path("/mnt"), details=details)) is None


def test_a_window_on_zfs_fuse_whose_writes_its_transaction_groups_rewrote_is_too_small_to_judge():
    """Samples stored of real windows: 152 MiB written for fio's 8 MiB, 136 MiB of it while fio ran
    (transaction groups of ~7 MiB, each nearly all the file's 64 records of 128 KiB, rewritten
    for a few 4k writes into each); and a window of the same workload committed at its sync. A
    ratio of 8 MiB is not judged (AMPLIFICATION_FROM): the figure is kept, neither is flagged."""
    traffic, said = zfs_fuse_window("rewritten")
    found = Found()
    traffic.values(said, found)
    assert 18.0 < values(found)["write_amplification"] < 19.0, "as measured: 18.6×"
    assert found.flags == [], "17.0× of 8 MiB while fio ran: under AMPLIFICATION_FROM, not flagged"
    traffic, said = zfs_fuse_window("once")
    found = Found()
    traffic.values(said, found)
    assert 1.2 < values(found)["write_amplification"] < 1.4 and found.flags == [], "1.31×: written once, not flagged"


@pytest.mark.parametrize(
    "name", ["../sda", "loop0/../../x", "no-such-device", "", "/dev/../etc/passwd", "a\nb", "/dev/null"]
)
def test_a_device_name_the_kernel_does_not_list_is_refused(name):
    with pytest.raises(UnknownDevice):
        block_name(name)


def test_device_traffic_adds_up_for_a_known_direct_write(workdir):
    size = 64 * MiB
    with (
        image_file(workdir.journal, workdir.images, "traffic", 128 * MiB, fill=None) as image,
        attached(workdir.journal, image) as loop,
    ):
        assert block_name(loop.device) == Path(loop.device).name
        monitor = TrafficMonitor([loop.device])
        with measuring([monitor]):
            subprocess.run(
                [
                    "dd",
                    "if=/dev/zero",
                    f"of={loop.device}",
                    "bs=1M",
                    f"count={size // MiB}",
                    "oflag=direct",
                    "status=none",
                ],
                check=True,
            )
        got = values(collect([monitor], WorkloadSaid(written_bytes=size)))
    assert got["device_written_bytes"] == pytest.approx(size, rel=0.02)
    assert got["write_amplification"] == pytest.approx(1.0, rel=0.02)


# --- space and compression ----------------------------------------------------------------------

BTRFS_DF = """\
Data, single: total=8388608, used=2162688
System, DUP: total=8388608, used=16384
Metadata, DUP: total=268435456, used=196608
GlobalReserve, single: total=3670016, used=0
"""


def test_btrfs_df_and_zfs_compressratio_parsed():
    assert parse_btrfs_df(BTRFS_DF) == {"Data": 2162688, "System": 16384, "Metadata": 196608, "GlobalReserve": 0}
    assert parse_btrfs_df("Data, single: total=1, used=1\nData, RAID1: total=9, used=2\n")["Data"] == 3
    # the form zfs(8) documents, and the scripted one (-H -p)
    assert (
        parse_zfs_compressratio("NAME       PROPERTY       VALUE  SOURCE\ntank/data  compressratio  2.13x  -\n") == 2.13
    )
    assert parse_zfs_compressratio("tank\tcompressratio\t1.00\t-\n") == 1.0
    for bad in ("", "tank  compressratio  -  -"):
        with pytest.raises(ValueError):
            parse_zfs_compressratio(bad)


def write_file(path: Path, data_block, size: int) -> None:
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            f.write(data_block())


@pytest.mark.root
def test_btrfs_with_zstd_compresses_zeros_and_not_random_data(workdir):
    target = Target("zstd", "btrfs", (), "compress=zstd", 512 * MiB, "sparse")
    ratios = {}
    with (
        image_file(workdir.journal, workdir.images, "zstd", target.image_size, fill=None) as image,
        attached(workdir.journal, image) as loop,
    ):
        for pattern, block in (("zeros", lambda: bytes(MiB)), ("random", lambda: os.urandom(MiB))):
            with FILESYSTEMS["btrfs"].provision(
                workdir.journal, Stack.on(on_loops([loop])), workdir.mounts / "zstd", target
            ) as made:
                monitor = SpaceMonitor(made.directory, btrfs_compression_ratio)
                with measuring([monitor]):
                    write_file(made.directory / "data", block, 64 * MiB)
                got = values(collect([monitor]))
                ratios[pattern] = got["compression_ratio"]
                assert (
                    0 < got["space_grown_bytes"] <= 1.1 * 64 * MiB
                    and got["space_used_bytes"] > got["space_grown_bytes"]
                ), "the file's extents, at most its size"
                if pattern == "random":
                    assert got["space_grown_bytes"] == pytest.approx(64 * MiB, rel=0.1), (
                        "random data takes its own size"
                    )
    assert ratios["zeros"] > 10, ratios
    assert ratios["random"] == pytest.approx(1.0, abs=0.05), ratios


def test_a_filesystem_that_does_not_compress_has_no_ratio(tmp_path):
    monitor = SpaceMonitor(tmp_path)
    with measuring([monitor]):
        (tmp_path / "f").write_bytes(b"x")
    got = values(collect([monitor]))
    assert "compression_ratio" not in got and {"space_used_bytes", "space_grown_bytes"} <= set(got)


# --- extents ------------------------------------------------------------------------------------


def test_filefrag_output_parsed_even_with_odd_paths():
    text = (
        "/mnt/a: 1 extent found\n/mnt/b: c: 12 extents found\n/mnt/empty: "
        "0 extents found\n/mnt/z: extents not measurable: on zfs (why)\n"
    )
    assert parse_filefrag(text) == {
        "/mnt/a": Extents(1),
        "/mnt/b: c": Extents(12),
        "/mnt/empty": Extents(0),
        "/mnt/z": Extents(None, "on zfs (why)"),
    }
    assert "".join(e.line(path) for path, e in parse_filefrag(text).items()) == text.replace(
        "1 extent found", "1 extents found"
    )


def test_no_extent_in_a_file_holding_data_is_not_a_count():
    """filefrag's real output for a 31 MiB file of random data on a FUSE filesystem (fuse2fs:
    the kernel's FUSE has no FIEMAP, as under zfs-fuse) and on kernel ext4, the same image."""
    fuse, verbose, ext4 = ((MONITORS / f"filefrag-{name}.txt").read_text() for name in ("fuse", "v-fuse", "ext4"))
    size, held = 31 * MiB, 63488 * 512  # stat's st_size and st_blocks × 512 of that file
    assert parse_filefrag(fuse) == {"file": Extents(0)} and parse_filefrag(ext4) == {"file": Extents(1)}
    assert f"Filesystem type is: {FUSE_SUPER_MAGIC}" in verbose
    unmeasured = not_a_count(0, held, size, FUSE_SUPER_MAGIC, "zfs")
    assert unmeasured == Extents(
        None, "on zfs (FUSE gives no FIEMAP: filefrag found 0 extents in a file of 31MiB holding 31MiB)"
    )
    assert not_a_count(0, held, size, "ef53", "ext4").why.startswith(
        "on ext4 (its filesystem answered filefrag with no extent"
    )
    assert not_a_count(1, held, size, "ef53", "ext4") == Extents(1), "a count is a count"
    assert not_a_count(0, 0, size, FUSE_SUPER_MAGIC, "zfs") == Extents(0), (
        "a sparse file holds no extent: 0 is its measure"
    )


@pytest.mark.root
@pytest.mark.skipif(shutil.which("fuse2fs") is None, reason="fuse2fs is not installed (the Makefile installs it)")
def test_extents_on_a_real_fuse_filesystem_are_not_measurable(tmp_path):
    """ext4 through FUSE (fuse2fs on an image file, no loop device): a file of data is said not
    measurable, a sparse one still counts 0."""
    image, mountpoint = tmp_path / "fuse.img", tmp_path / "mnt"
    mountpoint.mkdir()
    with open(image, "wb") as f:
        f.truncate(64 * MiB)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-b", "4096", str(image)], check=True)
    subprocess.run(["fuse2fs", str(image), str(mountpoint), "-o", "fakeroot"], check=True)
    try:
        data, sparse = mountpoint / "data", mountpoint / "sparse"
        write_file(data, lambda: os.urandom(MiB), 4 * MiB)
        with open(sparse, "wb") as f:
            f.truncate(4 * MiB)
        os.sync()
        found = extent_counts([data, sparse], "ext4-fuse")
        assert found[sparse] == Extents(0)
        assert (
            found[data].count is None
            and found[data].why
            == "on ext4-fuse (FUSE gives no FIEMAP: filefrag found 0 extents in a file of 4MiB holding 4MiB)"
        )
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)


@pytest.mark.root
def test_extents_where_the_filesystem_maps_no_file_are_not_measurable_and_no_failure():
    """tmpfs has neither FIEMAP nor bmap, as OpenZFS's kernel module has neither: filefrag says
    "FIBMAP/FIEMAP unsupported" and exits non-zero; the file is not measurable, with why."""
    with tempfile.TemporaryDirectory(dir="/dev/shm") as directory:
        data = Path(directory) / "data: a file"
        data.write_bytes(os.urandom(MiB))
        assert subprocess.run(["filefrag", str(data)], capture_output=True, check=False).returncode != 0, (
            "as filefrag answers there"
        )
        found = extent_counts([data], "tmpfs")
        assert found == {
            data: Extents(None, "on tmpfs (it answers neither FIEMAP nor FIBMAP: filefrag cannot map a file there)")
        }


@pytest.mark.root
def test_extents_of_a_real_file_on_btrfs_before_and_after_overwrites(workdir):
    target = Target("cow", "btrfs", (), "", 256 * MiB, "sparse")
    with (
        image_file(workdir.journal, workdir.images, "cow", target.image_size, fill=None) as image,
        attached(workdir.journal, image) as loop,
    ):
        with FILESYSTEMS["btrfs"].provision(
            workdir.journal, Stack.on(on_loops([loop])), workdir.mounts / "cow", target
        ) as made:
            path = made.directory / "file"
            write_file(path, lambda: os.urandom(MiB), MiB)
            os.sync()
            assert extent_counts([path], "btrfs") == {path: Extents(1)}
            with open(path, "r+b") as f:
                for k in range(8):  # copy-on-write puts every other 64 KiB elsewhere
                    f.seek((2 * k + 1) * 65536)
                    f.write(os.urandom(65536))
                    f.flush()
                    os.fsync(f.fileno())
            assert 15 <= (extent_counts([path], "btrfs")[path].count or 0) <= 16
