"""Direct I/O that went through the page cache: for a window whose workload asks for direct I/O,
the bytes the filesystem under test dirtied in the page cache, per filesystem, never system-wide.

A filesystem may serve O_DIRECT with buffered I/O, and say nothing: Btrfs writes files with data
checksums so since Linux 6.15 (commit 968f19c5b1b7; `nodatasum` and `nodatacow` keep direct I/O),
zfs-fuse and OpenZFS before 2.3 ignore O_DIRECT. The figures are then true and their label wrong.
The fallback flushes and invalidates what it wrote, so the file's residency afterwards shows
nothing; the kernel's per-backing-device counters do: /bdi/<bdi>/stats in debugfs counts the
bytes dirtied on each bdi (BdiDirtied, kB, cumulative: large folios whole), and a filesystem's
page cache is counted on its own bdi (Filesystem.bdi: ext4's and XFS's block device, Btrfs's
"btrfs-N", a FUSE mount's anonymous device).

Where debugfs is mounted at /sys/kernel/debug it is read there. Else a debugfs is mounted for the
window in fslab's work directory (mounting.mount_point: journalled, released on every exit) —
at start, before the other monitors open (its order comes first), unmounted at stop, after they
closed; every debugfs mount shows one superblock, so the mount is proven by its mount id too
(identity.mount_id), and released only while it is still that very mount. Between, the counter
is read as the devices' counters are (traffic.py; 16 µs of CPU each), counted from the moment the workload's
figures begin (base.counted_from: fio's ramp excluded) to the window's end, through its sync.

write_buffered_bytes = bytes dirtied on the bdi (the filesystem's own metadata counts too: a
    few hundred KiB per 64 MiB here, on Btrfs and ext4; XFS's metadata has a cache of its own);
write_buffered_share = that ÷ the bytes the workload wrote, clamped to [0, 1].
Above BUFFERED_FROM a finding, with a caveat that goes with the cell's figures wherever judged.

Reads: a page read into the cache dirties nothing, so the pages the filesystem *added* to the
cache are counted instead, in the kernel (page_inserts.py: perf counters of the tracepoint
filemap:mm_filemap_add_to_page_cache on its superblock's s_dev, by folio order; no ring buffer,
nothing left in the kernel after any exit), read at the bdi's wake-ups, at most every
INSERTED_APART (31 µs of CPU for 2 CPUs here).
Pages a buffered write fallback adds are added too (Btrfs), and the bdi counts what it dirtied, so
read_buffered_bytes = max(0, bytes added − write_buffered_bytes);
read_buffered_share = that ÷ the bytes the workload read, clamped to [0, 1]. A lower bound of
what was read through the cache: a page read twice in the window is added once (fslab drops the
caches before it, so none is there to begin with); readahead beyond what was read adds more.
"""

from __future__ import annotations

import ctypes
import os
import re
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from fslab.core.checks import Check, kernel_filesystems
from fslab.core.errors import FslabError
from fslab.core.identity import mount_id, mount_proof, mounts_at
from fslab.core.journal import Journal
from fslab.core.names import workdir_tag
from fslab.model.findings import Finding
from fslab.monitors import page_inserts
from fslab.monitors.base import (
    MONITORS,
    Figure,
    Found,
    Measured,
    MonitorKind,
    Sample,
    Sampler,
    Watched,
    WorkloadSaid,
    counted_from,
)
from fslab.monitors.page_inserts import NotCounted, PageInserts
from fslab.monitors.traffic import TRAFFIC_GROWTH, TRAFFIC_LONGEST, TRAFFIC_PERIOD

DEBUGFS_AT = Path("/sys/kernel/debug")
TRACEFS_AT = Path("/sys/kernel/tracing")
INSERTED_APART = 0.05  # s: the insertion counters at every other wake-up or so early in the window (below)
BUFFERED_FROM = 0.05  # a larger share of the workload's writes through the page cache: said
DIRECT_IO_BUFFERED = "direct_io_buffered"  # the finding's kind, as stored with the run (runs.notes)
DIRECT_IO_CAVEAT = "direct I/O went through the page cache"
NOT_MEASURED = "direct_io_not_measured"
BTRFS_CAUSE = (
    "Btrfs writes files with data checksums through the page cache since Linux 6.15 "
    "(nodatasum or nodatacow keep direct I/O)"
)
KIB = 1024
_FIELD = re.compile(r"^(BdiDirtied|BdiWritten):\s+(\d+)\s+kB\s*$", re.MULTILINE)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8


@dataclass(frozen=True)
class BdiCounts:
    """A bdi's cumulative bytes dirtied in the page cache and written back from it."""

    dirtied: int
    written: int


@dataclass(frozen=True)
class Inserted:
    """The cumulative bytes a filesystem added to the page cache (None: a folio of an order whose
    size is not known came)."""

    bytes: int | None


def parse_bdi_stats(text: str) -> BdiCounts:
    """debugfs's /bdi/<bdi>/stats: its BdiDirtied and BdiWritten lines, kB, in bytes."""
    found = {name: int(kb) * KIB for name, kb in _FIELD.findall(text)}
    if set(found) != {"BdiDirtied", "BdiWritten"}:
        raise ValueError(f"a bdi's stats have BdiDirtied and BdiWritten lines in kB: {text[:120]!r}")
    return BdiCounts(found["BdiDirtied"], found["BdiWritten"])


def buffered_share(buffered: float, wrote: float | None) -> float | None:
    """The share of what the workload wrote that went through the page cache, in [0, 1] (the
    filesystem's own metadata can take it past 1 on a small write); None when it wrote nothing."""
    if not wrote:
        return None
    return min(max(buffered / wrote, 0.0), 1.0)


def judged(buffered: int, workload: WorkloadSaid, fstype: str = "") -> Found:
    """The window's values, and the finding when more than BUFFERED_FROM of the workload's
    writes went through the page cache (on Btrfs naming its known cause beside the figure)."""
    cause = f" — {BTRFS_CAUSE}" if fstype == "btrfs" else ""
    return _judged("write", buffered, workload.written_bytes, cause)


def judged_reads(inserted: int, dirtied: int, workload: WorkloadSaid) -> Found:
    """The same for reads, from the bytes the filesystem added to the page cache less those its
    writes dirtied there (a buffered write fallback adds the pages it dirties)."""
    return _judged("read", max(0, inserted - dirtied), workload.read_bytes, "")


def _judged(direction: str, buffered: int, moved: float | None, cause: str) -> Found:
    found = Found([Measured(f"{direction}_buffered_bytes", buffered, "B", False)])
    share = buffered_share(buffered, moved)
    if share is None:
        return found
    found.values.append(Measured(f"{direction}_buffered_share", share, "", False))
    if share > BUFFERED_FROM:
        found.flags.append(
            Finding(
                DIRECT_IO_BUFFERED,
                f"direct I/O requested: {share * 100:.0f} % of {direction}s went through the page cache{cause}",
                implausible=False,  # what the kernel did with the run's I/O, not a broken figure
                caveat=DIRECT_IO_CAVEAT,
            )
        )
    return found


def not_measured(why: str, what: str = "direct I/O's page-cache share") -> Finding:
    return Finding(NOT_MEASURED, f"{what} not measurable here: {why}", implausible=False)


def tracefs_in(debugfs: Path) -> Path | None:
    """Where tracefs can be read: /sys/kernel/tracing where it is mounted; else under the debugfs
    the monitor reads — fslab's own one's tracing/ automounts it (the kernel's, detached with that
    mount), the system's only where it is mounted already (fslab mounts nothing on it)."""
    for path in (TRACEFS_AT, debugfs / "tracing"):
        on = mounts_at(path)
        if on and on[-1].fstype == "tracefs":
            return path
    return debugfs / "tracing" if debugfs != DEBUGFS_AT else None


class Unmounted(FslabError):
    pass


def debugfs_mounted() -> Path | None:
    """/sys/kernel/debug where debugfs is mounted there (what it shows on top), else None."""
    on = mounts_at(DEBUGFS_AT)
    return DEBUGFS_AT if on and on[-1].fstype == "debugfs" else None


def debugfs_dir(root: Path, mounts: Path) -> Path:
    """Where a work directory's debugfs is mounted: among its mount points, by a name of its
    kernel names' (core.names.workdir_tag), which no target's is by chance."""
    return mounts / f"{workdir_tag(root)}debugfs"


def mount_debugfs(journal: Journal, stack: ExitStack) -> Path:
    """A debugfs of fslab's own in its work directory, read-only, unmounted when `stack` closes
    (or by the journal after a crash) only while it is the very mount made here."""
    from fslab.core.mounting import mount_point  # the journal's machinery: not for reading a summary

    path = debugfs_dir(journal.workdir.root, journal.workdir.mounts)
    held = stack.enter_context(mount_point(journal, path))
    source = path.name  # tells a killed run's mount as fslab's (mounting.release_mount)
    libc = ctypes.CDLL(None, use_errno=True)
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    if libc.mount(source.encode(), os.fsencode(path), b"debugfs", flags, None) != 0:
        code = ctypes.get_errno()
        raise Unmounted(f"cannot mount debugfs at {path}: {os.strerror(code)}")
    mount = mount_id(path)
    held.prove(**mount_proof(path), **({"mnt": mount} if mount else {}))
    return path


class PageCacheMonitor:
    """The bdi's counters, sampled from start to stop; what it dirtied from the moment the
    workload's figures begin to the window's end is what went through the page cache."""

    name = "page_cache"

    def __init__(self, bdi: str | None, journal: Journal | None, fstype: str = "", s_dev: str | None = None):
        self.bdi, self.journal, self.fstype = bdi, journal, fstype
        self.why_not = self._why_not()
        self.stats: Path | None = None
        self.inserts = PageInserts(s_dev) if s_dev else None
        self.reads_why_not: str | None = None if s_dev else "its superblock's device number is not known"
        self.inserted: list[Sample[Inserted]] = []
        self.stack = ExitStack()
        # Spaced as the devices' counters (traffic.py: dense where fio's epoch falls, sparse after),
        # so that both are read at one wake-up of the monitors' clock.
        self.sampler = Sampler(
            self._read, "fslab-page-cache-monitor", TRAFFIC_PERIOD, growth=TRAFFIC_GROWTH, longest=TRAFFIC_LONGEST
        )

    def _why_not(self) -> str | None:
        if self.bdi is None:
            return "the kernel's backing device (bdi) of this filesystem is not known"
        if "debugfs" not in kernel_filesystems():
            return "this kernel has no debugfs (CONFIG_DEBUG_FS), whose /bdi/*/stats count it"
        if debugfs_mounted() is None and self.journal is None:
            return "debugfs is not mounted at /sys/kernel/debug, and this window has no journal to mount it with"
        return None

    def _read(self) -> BdiCounts:
        assert self.stats is not None
        counts = parse_bdi_stats(self.stats.read_text())
        now = time.monotonic()
        if not self.inserted or now - self.inserted[-1].at >= INSERTED_APART:
            self._read_inserted(now)
        return counts

    def _read_inserted(self, now: float) -> None:
        """The insertion counters, at most every INSERTED_APART: a read(2) per CPU (31 µs of CPU
        for 2 here) at each of the bdi's samples would cost the always-on monitors a tenth of
        their budget in a 3 s window, where the samples are densest (10 ms apart at first)."""
        if self.inserts is None or self.reads_why_not:
            return
        try:
            self.inserted.append(Sample(now, Inserted(self.inserts.bytes())))
        except (OSError, NotCounted) as exc:  # the writes' side goes on
            self.reads_why_not = f"reading {':'.join(page_inserts.EVENT)}'s counters: {exc}"

    def _count_inserts(self, debugfs: Path) -> None:
        """Open the insertion counters (the reads' side): where it cannot, reads are said not
        measurable and the writes' side goes on."""
        tracefs = tracefs_in(debugfs)
        try:
            if self.inserts is None or tracefs is None:
                self.reads_why_not = self.reads_why_not or "tracefs is not mounted at /sys/kernel/tracing"
                return
            self.inserts.open(tracefs)
            self.stack.callback(self.inserts.close)
        except (OSError, ValueError, NotCounted) as exc:
            self.reads_why_not = f"counting {':'.join(page_inserts.EVENT)}: {exc}"

    def start(self) -> None:
        if self.why_not:
            return
        try:
            root = debugfs_mounted()
            if root is None:
                assert self.journal is not None
                root = mount_debugfs(self.journal, self.stack)
            self.stats = root / "bdi" / str(self.bdi) / "stats"
            self._count_inserts(root)
            self.inserted = []
            self.sampler.start()
        except (OSError, ValueError, FslabError) as exc:  # always on: it says so, and the run goes on
            self.why_not = f"reading {self.stats or 'debugfs'}: {exc}"
            self.stack.close()
        except BaseException:
            self.stack.close()
            raise

    def stop(self) -> None:
        try:
            if not self.why_not:
                self.sampler.stop()
                self._read_inserted(time.monotonic())  # the window's end, however near the last
        except (OSError, ValueError) as exc:
            self.why_not = f"reading {self.stats}: {exc}"
        finally:
            self.stack.close()

    def values(self, workload: WorkloadSaid, found: Found) -> None:
        if not workload.direct:
            return
        if self.why_not:
            found.flags.append(not_measured(self.why_not))
            return
        readings = counted_from(self.sampler.samples, workload.counted_from)
        if not readings:
            return
        first, last = readings[0], readings[-1]
        dirtied = last.dirtied - first.dirtied
        more = [judged(dirtied, workload, self.fstype)]
        inserted = [r.bytes for r in counted_from(self.inserted, workload.counted_from)]
        if self.reads_why_not or not inserted:
            if workload.read_bytes:
                why = self.reads_why_not or "no reading of its counters"
                found.flags.append(not_measured(why, "direct reads' page-cache share"))
        elif inserted[0] is None or inserted[-1] is None:
            found.flags.append(
                not_measured("a folio larger than the orders counted came", "direct reads' page-cache share")
            )
        else:
            more.append(judged_reads(inserted[-1] - inserted[0], dirtied, workload))
        for each in more:
            found.values.extend(each.values)
            found.flags.extend(each.flags)


def page_cache_monitor(watched: Watched) -> PageCacheMonitor | None:
    if not watched.direct or watched.mountpoint is None:
        return None  # buffered I/O goes through the page cache by design; a raw device has no filesystem
    on = mounts_at(watched.mountpoint)  # its superblock's s_dev: mountinfo's (Btrfs's st_dev is a subvolume's)
    return PageCacheMonitor(watched.bdi, watched.journal, on[-1].fstype if on else "", on[-1].dev if on else None)


def checks() -> list[Check]:
    has = "debugfs" in kernel_filesystems()
    return [
        Check(
            "debugfs",
            has,
            (
                "mounted at /sys/kernel/debug"
                if debugfs_mounted()
                else "in the kernel: fslab mounts it in its work directory"
            )
            if has
            else "not in this kernel: direct I/O's page-cache share is not measured",
            "a kernel built with CONFIG_DEBUG_FS",
            required=False,
        ),
        Check(
            "perf tracepoints",
            (why := page_inserts.missing()) is None,
            why or "perf_event_open and tracefs in the kernel: pages added to the cache are counted",
            "a kernel built with CONFIG_PERF_EVENTS and CONFIG_FTRACE, on x86-64, arm64 or riscv64",
            required=False,
        ),
    ]


MONITORS.add(
    MonitorKind(
        "page_cache",
        order=4,  # first in, last out (before --trace block's bpftrace): its debugfs mount outside others' windows
        figures=(
            Figure("write_buffered_bytes", timing="independent"),
            Figure("write_buffered_share", timing="independent"),
            Figure("read_buffered_bytes", timing="independent"),
            Figure("read_buffered_share", timing="independent"),
        ),
        make=page_cache_monitor,
        help="the share of a direct-I/O workload's writes and reads that went through the page cache, from its "
        "filesystem's own bdi counters in debugfs and perf counters of the pages it added to the cache "
        "(direct-I/O windows only)",
        cost="~0.05 % of one core: a read of debugfs's bdi stats (16 µs of CPU) and, at most every 50 ms, of "
        "the insertion counters (31 µs of CPU for 2 CPUs) at the traffic monitor's wake-ups; where debugfs is "
        "not at /sys/kernel/debug, a mount before the window and an unmount after it (1–20 ms each), and the "
        "counters' opening and closing (3–13 ms and ~45 ms), outside the others' windows",
        checks=checks,
    ),
    own=True,
)
