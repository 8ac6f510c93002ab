"""What the devices under a target read and wrote during the measured phase, from the kernel's
own counters (/sys/class/block/<name>/stat, disks and partitions alike), sampled through the
window and counted from the moment the workload's own figures begin (base.counted_from: after
fio's ramp), so that both count the same I/O, to the window's end: through the sync of the
filesystem that ends it (runner.Windows), which writes what the workload's writes still left in
memory — a Btrfs transaction, a ZFS transaction group, dirty pages. How long that sync took is
reported beside them (sync_seconds): a run without it (stored before) counted to the workload's end.

The stat file's 3rd and 7th fields count sectors read and written; the kernel counts them in
512-byte units whatever the device's own sector size, so bytes = sectors × 512. Its 16th counts
the flushes of the device's write cache it completed (kernel 5.5 on): counted where a flush means
something (flushes_counted), as `device_flushes`.

From these and what the workload says it moved:
- write amplification = device bytes written ÷ bytes the workload wrote (a filesystem's
  journal, metadata and copy-on-write show above 1; a RAID1 of two devices writes twice);
- reads served by a cache: the devices read far fewer bytes than the workload read
  (below CACHE_SERVED_BELOW of it), so something above them — the page cache, the ARC —
  answered. A compressing filesystem also reads fewer bytes than it returns (zeros compress
  to almost nothing): such a flag on a compressing target names compression as a cause;
- an fsync that did not reach the device: the workload issued fsyncs (as its tool counts them),
  and the devices completed far fewer flushes (fsync_not_flushed) — a caveat on its figures;
- a ratio of almost nothing: write amplification is not given where the workload wrote less than
  AMPLIFICATION_FROM (amplification_withheld; judged by the summary, old runs alike);
- writes rewritten by the filesystem's commits: on a filesystem writing data in whole records (ZFS:
  base.Records), the devices wrote, while a workload of at least AMPLIFICATION_FROM ran (before the
  sync), REWRITTEN_FROM times what every honest copy of its bytes comes to (rewritten_by_commits) —
  each commit wrote whole again the records the writes had touched since the last, so the ratio
  grows with how many commits the run spanned.

The devices are nodes (Provisioned.bottom); each is known by its device number, its name the
kernel's own (core/block_devices.resolve), so no text a tool printed names a sysfs path.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fslab.core.errors import FslabError, Refused
from fslab.core.units import format_size
from fslab.model import PHASE_SEPARATOR, qualified, unqualified
from fslab.model.findings import Finding
from fslab.monitors.base import (
    MONITORS,
    Figure,
    Found,
    Measured,
    MonitorKind,
    Records,
    Sampler,
    Watched,
    WorkloadSaid,
    counted_from,
)

SYS_CLASS_BLOCK = Path("/sys/class/block")
# The samples of the counters: the window's counting starts (fio's epoch) between two of them,
# where the counters are interpolated, so they are dense where it falls — after fio's start-up,
# tens of ms in — every TRAFFIC_PERIOD, then TRAFFIC_GROWTH of the time since the window opened
# apart, at most TRAFFIC_LONGEST: ~30 samples in a 3 s window, where every 10 ms took 300 (a
# thread's wake-up, 50–300 µs of CPU here, is most of a sample's cost: with the other always-on
# monitors', 0.46–0.56 % of one core at a growth of 0.1). A step from no I/O to the workload's
# rate at an epoch E after the window opened is counted to within the I/O of max(2.5 ms, 0.05·E)
# (a quarter of the interval around it), as every 10 ms did up to E = 0.05 s; an epoch after a
# ramp_time falls where the rate is already steady.
TRAFFIC_PERIOD = 0.01
TRAFFIC_GROWTH = 0.2
TRAFFIC_LONGEST = 0.5
SECTOR = 512  # the unit of /sys/block/*/stat, fixed by the kernel
CACHE_SERVED_BELOW = 0.5  # device reads under half the workload's: a cache answered the rest
SERVED_BY_CACHE = "served_by_cache"  # the finding's kind, as stored with the run (runs.notes)
FLUSH_FIELD = 15  # the stat file's flushes completed (0-based), from kernel 5.5; 17 fields in all
# Fewer flushes than this per fsync: not in step. Concurrent fsyncs share one (jbd2's and Btrfs's
# log commits, the block layer's merging of flushes in flight): measured here on loop devices, 4
# to 16 threads fsyncing on ext4, XFS, Btrfs gave 0.13–0.54 flushes per fsync, ext4 barrier=0 none,
# Btrfs fsyncing files with nothing to write (sysbench's sweep) 0.001–0.002.
FLUSHES_PER_FSYNC_FROM = 0.01
FSYNCS_FROM = 10  # fewer fsyncs: too few to make a workload's speed; no claim either way
FSYNC_NOT_FLUSHED = "fsync_not_flushed"  # the finding's kind
FSYNC_CAVEAT = "fsync did not reach the device"
AMPLIFICATION_FROM = 64 * 2**20  # a workload that wrote less: its write amplification is not given
# The devices wrote this many times every copy of the workload's bytes they honestly hold
# (Records.copies: the copies property × the devices under the pool × 2 for the intent log) while
# it ran, before the window's sync: beyond the journal and metadata of a commit, what a filesystem
# writing data in records does when each commit writes whole again the records the writes touched
# since the last. Judged on record-based filesystems alone (ZFS), as measured: elsewhere a ratio
# so high is honest redundancy (ext4 data=journal on a 3-leg RAID1: 6×; Btrfs raid1c4: 4× and its
# metadata) or a journal's blocks for fsyncs of a few bytes, no rewriting of data. Measured on
# zfs-fuse (recordsize 128k, one device: copies 2), 64 MiB of random 4k buffered writes:
# 26.8–27.0× in 7 of 7 runs, with or without two CPU hogs, 183–192 flushes (the data's bound:
# 128K ÷ 4K = 32×); 33.7× and 34.5× in 2 beside other tests (CPU pressure 92–93 %, 554 and 663
# flushes: metadata rewritten too). recordsize=4k: 1.15×, 14 flushes (groups of the 4K written);
# 1.41× and 1.44× so loaded. 8 MiB of them beside two CPU hogs gave 1.1–18.6× as the pool
# committed them in one group or many (6.6–17× before the sync): a ratio of too little to judge
# (AMPLIFICATION_FROM), not flagged.
REWRITTEN_FROM = 4.0
REWRITTEN_BY_COMMITS = "rewritten_by_commits"  # the finding's kind


class UnknownDevice(FslabError):
    pass


def block_name(device: str) -> str:
    """The kernel's name of the block device at a node (`/dev/loop3`, `/dev/mapper/x` → `dm-2`),
    found by its device number as the guard finds every device (block_devices.resolve);
    UnknownDevice unless the kernel lists it under /sys/class/block."""
    from fslab.core.block_devices import (
        resolve,
    )  # the guard's checks: for a run, not for a summary reading the registry

    try:
        name = Path(resolve(device).node).name
    except Refused as exc:
        raise UnknownDevice(f"{device!r}: {exc}") from None
    if not (SYS_CLASS_BLOCK / name / "stat").is_file():
        raise UnknownDevice(f"{device!r} is not a block device the kernel lists under {SYS_CLASS_BLOCK}")
    return name


@dataclass(frozen=True)
class Counted:
    """Bytes one or several devices read and wrote, and the flushes they completed (since boot, or
    over a window)."""

    read_bytes: int
    written_bytes: int
    flushes: int = 0

    def __add__(self, other: Counted) -> Counted:
        return Counted(
            self.read_bytes + other.read_bytes, self.written_bytes + other.written_bytes, self.flushes + other.flushes
        )

    def __sub__(self, other: Counted) -> Counted:
        return Counted(
            self.read_bytes - other.read_bytes, self.written_bytes - other.written_bytes, self.flushes - other.flushes
        )


def parse_block_stat(text: str) -> Counted:
    """One /sys/class/block/<name>/stat line: sectors read (3rd field) and written (7th), in bytes,
    and flushes completed (16th; 0 from a kernel before 5.5, which has no such field)."""
    fields = text.split()
    if len(fields) < 7:
        raise ValueError(f"a block device's stat has at least 7 fields, not {len(fields)}: {text[:80]!r}")
    flushes = int(fields[FLUSH_FIELD]) if len(fields) > FLUSH_FIELD else 0
    return Counted(int(fields[2]) * SECTOR, int(fields[6]) * SECTOR, flushes)


def counts_flushes(stat: str, write_cache: str | None, partition: bool) -> bool:
    """Whether a device's flush counter says whether fsyncs reached it (pure: its stat line, its
    queue/write_cache, None where it has none): the kernel counts them (kernel 5.5 on), on a whole
    disk (a partition's count on its disk, as every partition's: 0 on the partition), and a flush
    has something to do — a device with no volatile write cache ("write through": zram, many
    disks) is sent none, a write on it being durable once done."""
    return len(stat.split()) > FLUSH_FIELD and not partition and (write_cache or "").strip() == "write back"


def flushes_counted(name: str) -> bool:
    """counts_flushes of the device the kernel names so, read from /sys/class/block."""
    device = SYS_CLASS_BLOCK / name
    cache = device / "queue" / "write_cache"
    write_cache = cache.read_text() if cache.is_file() else None
    return counts_flushes((device / "stat").read_text(), write_cache, (device / "partition").exists())


def fsync_not_flushed(fsyncs: float, flushes: float) -> bool:
    """Whether a window's flushes were not in step with its fsyncs: at least FSYNCS_FROM fsyncs,
    and fewer than FLUSHES_PER_FSYNC_FROM flushes per fsync."""
    return fsyncs >= FSYNCS_FROM and flushes < FLUSHES_PER_FSYNC_FROM * fsyncs


def amplification_withheld(device_written: Sequence[float], ratios: Sequence[float], phase: str = "") -> str | None:
    """Why a cell's write amplification (of one phase: each run's device bytes written and its
    ratio) is not given, or None where it is: the workload wrote under AMPLIFICATION_FROM (the
    median over runs), and a ratio of so few bytes says nothing (the journal and metadata any sync
    writes outweigh them: 5–68× from sysbench writing 0.005 MB/s). What the workload wrote is the
    devices' bytes ÷ the ratio, run by run (the two are stored together), else of their medians."""
    if ratios and len(device_written) == len(ratios) and all(r > 0 for r in ratios):
        wrote = statistics.median(d / r for d, r in zip(device_written, ratios))
    elif ratios and (ratio := statistics.median(ratios)) > 0 and device_written:
        wrote = statistics.median(device_written) / ratio
    else:
        return None
    if round(wrote) >= AMPLIFICATION_FROM:  # to the byte: a quotient of floats falls either side of 64 MiB
        return None
    return (
        f"write amplification{f' of {phase}' if phase else ''} not given: the workload wrote "
        f"{format_size(round(wrote))}, under the {format_size(AMPLIFICATION_FROM)} a ratio needs "
        "(the journal and metadata any sync writes outweigh so little)"
    )


def withheld_amplifications(values: Mapping[str, Sequence[float]]) -> dict[str, str]:
    """Of a cell's samples (metric key → its runs' values), each write amplification not given
    (its key), with why (amplification_withheld)."""
    withheld = {}
    for key in values:
        if unqualified(key) == "write_amplification":
            phase = key.rpartition(PHASE_SEPARATOR)[0]
            written = values.get(qualified(phase, "device_written_bytes"), [])
            if (why := amplification_withheld(written, values[key], phase)) is not None:
                withheld[key] = why
    return withheld


def write_amplification(device_written: float, workload_written: float | None) -> float | None:
    """Device bytes written per byte the workload wrote; None when the workload wrote nothing."""
    return device_written / workload_written if workload_written else None


def served_by_cache(device_read: float, workload_read: float | None) -> bool:
    """Whether the workload read far more than its devices did (see CACHE_SERVED_BELOW)."""
    if not workload_read:
        return False
    return device_read < CACHE_SERVED_BELOW * workload_read


def rewritten_by_commits(running_written: float, workload_written: float | None, copies: int) -> bool:
    """Whether the devices wrote, while the workload ran (before the window's sync), at least
    REWRITTEN_FROM times the `copies` of the bytes it wrote that they honestly hold (Records.copies),
    where it wrote at least AMPLIFICATION_FROM (under it, no ratio is judged)."""
    if not workload_written or round(workload_written) < AMPLIFICATION_FROM:
        return False
    return running_written >= REWRITTEN_FROM * copies * workload_written


def judged(
    moved: Counted,
    workload: WorkloadSaid,
    flushes: bool = False,
    running: Counted | None = None,
    records: Records | None = None,
) -> Found:
    """The traffic's values (with the sync they were counted through), and its flags: reads came
    from a cache; fsyncs did not reach the device (where `flushes` are counted: flushes_counted);
    the writes were rewritten by the commits of a filesystem writing data in `records` while the
    workload ran (`running`: what the devices moved from the workload's first figure to the sync's
    start; None: no sync)."""
    found = Found(
        [
            Measured("device_read_bytes", moved.read_bytes, "B", False),
            Measured("device_written_bytes", moved.written_bytes, "B", False),
        ]
    )
    if flushes:
        found.values.append(Measured("device_flushes", moved.flushes, "", False))
        if workload.fsyncs is not None and fsync_not_flushed(workload.fsyncs, moved.flushes):
            found.flags.append(Finding(
                FSYNC_NOT_FLUSHED,
                f"{FSYNC_CAVEAT}: the workload issued {workload.fsyncs:,.0f} fsyncs, the devices under the target "
                f"completed {moved.flushes:,} flushes of their write cache (fewer than 1 per "
                f"{1 / FLUSHES_PER_FSYNC_FROM:.0f}): its speed may come from writes not made durable — a mount "
                "option such as barrier=0 or nobarrier, ZFS's sync=disabled, or fsyncs of files with nothing to "
                "write, which Btrfs does not pass on",
                implausible=False,  # what the run did, not a broken figure: a caveat wherever its figures are judged
                caveat=FSYNC_CAVEAT,
            ))  # fmt: skip
    if workload.synced is not None:
        found.values.append(Measured("sync_seconds", workload.synced.seconds, "s", False))
    amplification = write_amplification(moved.written_bytes, workload.written_bytes)
    if amplification is not None:
        found.values.append(Measured("write_amplification", amplification, "×", False))
        if (
            running is not None
            and records is not None
            and workload.written_bytes
            and rewritten_by_commits(running.written_bytes, workload.written_bytes, records.copies)
        ):
            in_flushes = f", in {running.flushes:,} flushes of their write cache" if flushes else ""
            found.flags.append(Finding(
                REWRITTEN_BY_COMMITS,
                f"writes rewritten by the filesystem's commits: the devices wrote "
                f"{format_size(running.written_bytes)} while the workload ran{in_flushes} — "
                f"{running.written_bytes / workload.written_bytes:.1f}× the {format_size(workload.written_bytes)} it "
                f"wrote, before the window's sync ({amplification:.1f}× through it), over {REWRITTEN_FROM:g} times "
                f"the {records.copies} copies its devices hold of each byte (with the intent log's). The filesystem "
                f"committed the writes several times as they came, and each commit wrote whole again every record "
                f"({format_size(records.size)}) a write had touched since the last, the whole of it for a 4KiB "
                "write into it. How many commits a run spans follows how much the "
                "filesystem holds in one, the run's speed and the machine's load, so this write amplification "
                "varies from run to run with them (a recordsize matching the workload's writes avoids it)",
                implausible=False,  # what the devices did: a fact of the run, explained, not a broken figure
            ))  # fmt: skip
    if workload.read_bytes:
        found.values.append(Measured("device_read_ratio", moved.read_bytes / workload.read_bytes, "×", False))
        if served_by_cache(moved.read_bytes, workload.read_bytes):
            found.flags.append(Finding(
                SERVED_BY_CACHE,
                f"reads were served by a cache: the devices read {moved.read_bytes / workload.read_bytes:.0%} of the "
                f"{format_size(workload.read_bytes)} the workload read (page cache, ARC — or compression)",
                implausible=False,  # a cache answering is a fact of the run, not a broken figure
            ))  # fmt: skip
    return found


class TrafficMonitor:
    """The devices' counters, added up, sampled from start to stop; what they moved from the
    moment the workload's figures begin to the end (through the window's sync) is the phase's traffic.
    The stat files are held open while it samples, each read again from its start (pread: sysfs
    writes it afresh at offset 0), a system call a sample."""

    name = "traffic"

    def __init__(self, devices: Sequence[str], records: Records | None = None):
        self.records = records  # how the filesystem writes data in records (None: it does not)
        self.names = sorted({block_name(device) for device in devices})
        self.flushes = bool(self.names) and all(flushes_counted(name) for name in self.names)
        self.sampler = Sampler(
            self._read, "fslab-traffic-monitor", TRAFFIC_PERIOD, growth=TRAFFIC_GROWTH, longest=TRAFFIC_LONGEST
        )
        self._files: list[int] = []

    def _read(self) -> Counted:
        return sum((parse_block_stat(os.pread(fd, 512, 0).decode()) for fd in self._files), Counted(0, 0))

    def start(self) -> None:
        self._files = [os.open(SYS_CLASS_BLOCK / name / "stat", os.O_RDONLY | os.O_CLOEXEC) for name in self.names]
        try:
            self.sampler.start()
        except BaseException:
            self._close()
            raise

    def stop(self) -> None:
        try:
            self.sampler.stop()
        finally:
            self._close()

    def _close(self) -> None:
        files, self._files = self._files, []
        for fd in files:
            os.close(fd)

    def moved(self, workload: WorkloadSaid) -> Counted | None:
        """What the devices read and wrote over the workload's own interval; None unless sampled."""
        readings = counted_from(self.sampler.samples, workload.counted_from)
        return readings[-1] - readings[0] if readings else None

    def running(self, workload: WorkloadSaid) -> Counted | None:
        """What the devices read and wrote while the workload ran: from its first figure to the
        sync's start; None without a sync (the window then ended with it) or samples."""
        if workload.synced is None:
            return None
        readings = counted_from(self.sampler.samples, workload.counted_from, workload.counted_until)
        return readings[-1] - readings[0] if readings else None

    def values(self, workload: WorkloadSaid, found: Found) -> None:
        moved = self.moved(workload)
        if moved is not None:
            more = judged(moved, workload, self.flushes, self.running(workload), self.records)
            found.values.extend(more.values)
            found.flags.extend(more.flags)


def traffic_monitor(watched: Watched) -> TrafficMonitor:
    return TrafficMonitor(watched.devices, watched.records)


MONITORS.add(
    MonitorKind(
        "traffic",
        order=20,
        figures=(
            Figure("device_read_bytes", "device read", "size"),
            Figure("device_written_bytes", "device written", "size"),
            Figure("write_amplification", "write ampl.", "ratio", timing="dependent"),
            Figure("device_read_ratio", timing="dependent"),
            Figure("sync_seconds", "synced in", "seconds"),
            Figure("device_flushes"),
        ),
        make=traffic_monitor,
        help="what the devices under the target read, wrote and flushed, through the window's sync: write "
        "amplification, reads a cache served, fsyncs that did not reach the device",
        cost="~0.15 % of one core: ~30 reads of the devices' stat in a 3 s window, 2 a second after 2.5 s",
    ),
    own=True,
)
