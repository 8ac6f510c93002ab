"""Direct reads through the page cache (monitors/page_cache.py, page_inserts.py): the pages a
filesystem added to the cache, counted by perf counters of a tracepoint filtered to its
superblock — through fslab's real runner on loop images (ext4 `data=journal` and Btrfs's
compressed extents read buffered; ext4, XFS, Btrfs, nodatasum direct), the counters closed on
every exit; the encoding, the filter and the arithmetic on synthetic counts."""

import json
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from conftest import fresh_workdir, ran_study
from fslab.core.identity import mounts_at
from fslab.monitors import for_run, measuring
from fslab.monitors.base import Found, Sample, WorkloadSaid, counted_from
from fslab.monitors.page_cache import (
    DIRECT_IO_BUFFERED,
    DIRECT_IO_CAVEAT,
    NOT_MEASURED,
    BdiCounts,
    Inserted,
    PageCacheMonitor,
    debugfs_dir,
    debugfs_mounted,
    judged_reads,
    mount_debugfs,
    tracefs_in,
)
from fslab.monitors.page_inserts import (
    MAX_ORDER,
    PageInserts,
    insert_filter,
    inserted_bytes,
    kernel_dev,
    online_cpus,
)

MiB = 2**20

# Each target's file laid out (zeros: they compress on compress=zstd), caches dropped, then read
# 1 MiB at a time with direct I/O, and once more buffered (not watched).
STUDY = """\
[study]
name = "direct-read-honesty"
repetitions = 2
image_size = "512MiB"
image_fill = "sparse"
baseline = "ext4"

[[target]]
filesystem = ["ext4", "xfs"]

[[target]]
name = "ext4-journal"
filesystem = "ext4"
mount_options = "data=journal"

[[target]]
name = "btrfs"
filesystem = "btrfs"

[[target]]
name = "btrfs-nodatasum"
filesystem = "btrfs"
mount_options = "nodatasum"

[[target]]
name = "btrfs-zstd"
filesystem = "btrfs"
mount_options = "compress=zstd"

[[workload]]
name = "read"
rw = "read"
bs = "1m"
size = "96MiB"
runtime = "0s"
direct = true
data = "zeros"

[[workload]]
name = "buffered"
rw = "read"
bs = "1m"
size = "32MiB"
runtime = "0s"
direct = false
data = "zeros"
"""


@pytest.fixture(scope="module")
def honesty(tmp_path_factory, needs_root):
    directory = tmp_path_factory.mktemp("direct-read-honesty")
    with fresh_workdir() as workdir:  # checked afterwards: nothing left attached or mounted
        _result, _results, study_run = ran_study(directory, STUDY, workdir, "--no-ceiling")
        assert not mounts_at(debugfs_dir(workdir.root, workdir.mounts)), "debugfs left mounted"
        assert not mounts_at(debugfs_dir(workdir.root, workdir.mounts) / "tracing"), "tracefs left mounted"
    reports = directory / "reports" / f"direct-read-honesty-{study_run}"
    report = json.loads((reports / "summary.json").read_text())
    return {(c["target"], c["workload"]): c for c in report["cells"]}


def _share(cell: dict) -> float:
    return cell["metrics"]["read_buffered_share"]["median"]


@pytest.mark.root
def test_direct_reads_served_through_the_cache_are_measured_and_the_others_not(honesty):
    """Catches a read share inferred from the filesystem's name, counted system-wide (the other
    targets, the host), on the wrong device number (Btrfs's st_dev is its subvolume's: 0 bytes
    counted), or in userspace's dev_t encoding (nothing matches)."""
    share = {target: _share(cell) for (target, workload), cell in honesty.items() if workload == "read"}
    assert share["ext4-journal"] >= 0.5, share
    assert share["btrfs-zstd"] >= 0.5, share  # measured on Btrfs too, where it reads compressed extents
    for target in ("ext4", "xfs", "btrfs", "btrfs-nodatasum"):
        assert share[target] <= 0.05, share
    # in bytes, not pages or kB (at least half the 96 MiB read: its window opens at fio's epoch, and a 0.1 s read
    # loses what comes before the sample it is interpolated from; 0.86 of it seen)
    assert honesty[("ext4-journal", "read")]["metrics"]["read_buffered_bytes"]["median"] >= 0.5 * 96 * MiB


@pytest.mark.root
def test_the_cells_say_so_and_buffered_reads_are_not_watched(honesty):
    """Catches a read share stored but never said, said of a direct target, or a buffered
    workload watched (its page cache is what it asked for)."""
    notes = " ".join(honesty[("ext4-journal", "read")].get("notes", []))
    assert "direct I/O requested:" in notes and "% of reads went through the page cache" in notes, notes
    assert "Btrfs" not in notes
    assert DIRECT_IO_CAVEAT in honesty[("ext4-journal", "read")].get("caveats", [])
    for target in ("ext4", "xfs", "btrfs-nodatasum"):  # (a cache serving reads is the traffic monitor's note)
        assert "went through the page cache" not in " ".join(honesty[(target, "read")].get("notes", [])), honesty[
            (target, "read")
        ]
    for (target, workload), cell in honesty.items():
        if workload == "buffered":
            assert not any(name.endswith("_buffered_share") for name in cell["metrics"]), (target, cell["metrics"])


def test_device_numbers_in_the_kernels_encoding():
    """Catches userspace's dev_t (os.makedev) used for the tracepoint's s_dev, or a text that is
    not two numbers reaching the filter."""
    assert kernel_dev("7:0") == 7 << 20 and kernel_dev("0:39") == 39 and kernel_dev("259:3") == 259 << 20 | 3
    assert kernel_dev("7:0") != os.makedev(7, 0) or os.makedev(7, 0) == 7 << 20  # not what userspace encodes
    assert kernel_dev("8:300") == 8 << 20 | 300  # minors above 255: userspace splits them, the kernel does not
    for bad in ("7", "7:0:1", "a:b", "7:0 || 1", "-1:0", "4096:0", f"0:{1 << 20}"):
        with pytest.raises(ValueError):
            kernel_dev(bad)


def test_the_filter_is_two_numbers_fslab_computed():
    """Catches a filter that takes text (what reached it could widen it to every device)."""
    assert insert_filter(7 << 20, 0) == "s_dev == 7340032 && order == 0"
    assert insert_filter(39, None) == f"s_dev == 39 && order > {MAX_ORDER}"
    for bad in ("7340032", True, -1):
        with pytest.raises(ValueError):
            insert_filter(bad, 0)


def test_bytes_by_order_and_an_unknown_order_is_not_a_figure():
    """Catches folios counted as pages (a large folio is 2^order pages), or a folio of an order
    not counted summed as nothing."""
    counts = [3, 1, 0, 0, 2] + [0] * (MAX_ORDER - 4) + [0]
    assert inserted_bytes(counts, 4096) == 3 * 4096 + 8192 + 2 * 16 * 4096
    assert inserted_bytes([0] * (MAX_ORDER + 1) + [1], 4096) is None
    assert online_cpus("0-3,6\n") == [0, 1, 2, 3, 6] and online_cpus("0") == [0]


def test_reads_less_what_the_writes_dirtied_clamped_and_said_above_five_percent():
    """Catches the write fallback's pages (Btrfs adds what it dirties) counted as reads, a share
    above 1 (readahead past the end), or the note on the wrong side of 5 %."""
    said = WorkloadSaid(read_bytes=100 * MiB, written_bytes=100 * MiB, direct=True)
    writes = judged_reads(100 * MiB, 100 * MiB, said)
    assert {v.name: v.value for v in writes.values} == {"read_buffered_bytes": 0, "read_buffered_share": 0.0}
    assert writes.flags == []
    quiet = judged_reads(5 * MiB, 0, said)
    assert quiet.flags == []
    (finding,) = judged_reads(150 * MiB, 0, said).flags
    assert finding.kind == DIRECT_IO_BUFFERED and finding.caveat == DIRECT_IO_CAVEAT
    assert finding.says == "direct I/O requested: 100 % of reads went through the page cache"
    nothing_read = judged_reads(MiB, 0, WorkloadSaid(written_bytes=MiB, direct=True))
    assert [v.name for v in nothing_read.values] == ["read_buffered_bytes"]


def _monitor(inserted: list) -> PageCacheMonitor:
    monitor = PageCacheMonitor("7:0", None, "ext4", "7:0")
    monitor.why_not = monitor.reads_why_not = None
    monitor.sampler.samples = [Sample(0.0, BdiCounts(0, 0)), Sample(2.0, BdiCounts(0, 0))]
    monitor.inserted = [Sample(at, Inserted(value)) for at, value in inserted]
    return monitor


def test_reads_counted_from_the_workloads_own_start():
    """Catches fio's start-up counted against bytes fio itself leaves out (interpolated between
    readings as the writes' are)."""
    monitor = _monitor([(0.0, 0), (2.0, 40 * MiB)])
    found = Found()
    monitor.values(WorkloadSaid(read_bytes=20 * MiB, counted_from=1.0, direct=True), found)
    assert {v.name: v.value for v in found.values}["read_buffered_bytes"] == 20 * MiB


def test_an_unknown_order_or_counters_not_opened_are_said_never_zero():
    """Catches a 0 stored where the reads were not measured, and a read-side failure that takes
    the writes' figures with it."""
    for inserted, why in (([(0.0, 0), (1.0, None)], "larger than"), ([], "no reading")):
        monitor = _monitor(inserted)
        found = Found()
        monitor.values(WorkloadSaid(read_bytes=MiB, direct=True), found)
        assert [v.name for v in found.values] == ["write_buffered_bytes"]
        assert [f.kind for f in found.flags] == [NOT_MEASURED] and why in found.flags[0].says
    assert counted_from([Sample(0.0, Inserted(None)), Sample(2.0, Inserted(8))], 1.0)[0] == Inserted(None)
    monitor = _monitor([(0.0, 0), (1.0, MiB)])
    monitor.reads_why_not = "tracefs is not mounted at /sys/kernel/tracing"
    found = Found()
    monitor.values(WorkloadSaid(read_bytes=MiB, direct=True), found)
    assert {v.name for v in found.values} == {"write_buffered_bytes"}
    assert found.flags[0].says == (
        "direct reads' page-cache share not measurable here: tracefs is not mounted at /sys/kernel/tracing"
    )


def test_the_counters_are_read_at_most_every_fifty_ms(tmp_path, monkeypatch):
    """Catches a read(2) per CPU at every one of the bdi's samples (10 ms apart early in the
    window): a tenth of the always-on monitors' CPU budget (bench/monitors.py)."""
    import fslab.monitors.page_cache as page_cache

    class Counting:
        reads = 0

        def bytes(self) -> int:
            self.reads += 1
            return 0

    monitor = _monitor([])
    monitor.inserts = counting = Counting()
    monitor.stats = tmp_path / "stats"
    monitor.stats.write_text("BdiDirtied: 1 kB\nBdiWritten: 1 kB\n")
    for now in (0.0, 0.01, 0.02, 0.049, 0.05, 0.06, 0.2):
        monkeypatch.setattr(page_cache.time, "monotonic", lambda now=now: now)
        assert monitor._read() == BdiCounts(1024, 1024)
    assert [s.at for s in monitor.inserted] == [0.0, 0.05, 0.2] and counting.reads == 3


def _perf_fds(pid: str = "self") -> int:
    found = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found += os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[perf_event]"
        except FileNotFoundError:  # the listing's own descriptor, closed since
            pass
    return found


@pytest.mark.root
def test_counting_is_the_filesystems_own_and_closed_on_every_exit(needs_root, tmp_path):
    """The counters on their own, on a buffered read (what a filesystem serving direct reads
    buffered does): catches a count of another filesystem's pages (two ext4 images read alike,
    one counted), pages counted before their filter was set (an unfiltered counter counts every
    page on the machine), tracefs's global state touched (an instance, the event's own enable or
    filter: another tracer's), or counters left open after the window, ended by an error too."""
    with fresh_workdir() as workdir, ExitStack() as stack:
        mounts = [_ext4(tmp_path / name, stack) for name in ("counted", "other")]
        for mount in mounts:
            (mount / "f").write_bytes(os.urandom(8 * MiB))
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3")
        counted = PageInserts(mounts_at(mounts[0])[-1].dev)
        before = _perf_fds()
        with ExitStack() as tracing:
            tracefs = tracefs_in(debugfs_mounted() or mount_debugfs(workdir.journal, tracing))
            assert tracefs is not None
            untouched = _tracefs_state(tracefs)
            counted.open(tracefs)
            try:
                assert counted.bytes() == 0, "counted before anything was read here"
                (mounts[1] / "f").read_bytes()
                assert counted.bytes() == 0, "the other filesystem's pages counted"
                (mounts[0] / "f").read_bytes()
                assert 8 * MiB <= (counted.bytes() or 0) <= 9 * MiB
                assert _tracefs_state(tracefs) == untouched, "tracefs's global state changed while counting"
            finally:
                counted.close()
            assert _tracefs_state(tracefs) == untouched
        assert _perf_fds() == before
        monitors = for_run([], tmp_path, journal=workdir.journal, direct=True, bdi=_bdi_of(mounts[0]))
        monitors = [m for m in monitors if m.name == "page_cache"]
        monitors[0].inserts = PageInserts(mounts_at(mounts[0])[-1].dev)  # (built for tmp_path: no superblock)
        monitors[0].reads_why_not = None
        with pytest.raises(RuntimeError, match="mid-window"):
            with measuring(monitors):
                assert _perf_fds() > before, "not counting in the window"
                raise RuntimeError("mid-window")
        assert _perf_fds() == before
        if debugfs_mounted() is None:
            assert not mounts_at(debugfs_dir(workdir.root, workdir.mounts) / "tracing")
            assert not mounts_at(debugfs_dir(workdir.root, workdir.mounts))


def _tracefs_state(tracefs: Path) -> tuple:
    """What another user of tracefs sees: its instances, the event's enable and filter, the events
    set — none of which counting through perf may change (nothing of fslab's to leave behind)."""
    event = tracefs / "events" / "filemap" / "mm_filemap_add_to_page_cache"
    return (
        sorted(os.listdir(tracefs / "instances")),
        (event / "enable").read_text(),
        (event / "filter").read_text(),
        (tracefs / "set_event").read_text(),
    )


def _bdi_of(mount: Path) -> str:
    return mounts_at(mount)[-1].dev


def _ext4(where: Path, stack: ExitStack) -> Path:
    image, mount = where.with_suffix(".img"), where
    mount.mkdir()
    with open(image, "wb") as file:
        file.truncate(64 * MiB)
    loop = subprocess.run(["losetup", "-f", "--show", str(image)], check=True, capture_output=True, text=True)
    device = loop.stdout.strip()
    stack.callback(subprocess.run, ["losetup", "-d", device], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", device], check=True)
    subprocess.run(["mount", device, str(mount)], check=True)
    stack.callback(subprocess.run, ["umount", str(mount)], check=True)
    return mount


KILLED = """\
import sys, time
from contextlib import ExitStack
from pathlib import Path
from fslab.core.workdir import Workdir
from fslab.monitors.page_cache import debugfs_mounted, mount_debugfs, tracefs_in
from fslab.monitors.page_inserts import PageInserts
with ExitStack() as stack:
    debugfs = debugfs_mounted() or mount_debugfs(Workdir(Path(sys.argv[1])).journal, stack)
    PageInserts("7:0").open(tracefs_in(debugfs))
    print("counting", flush=True)
    time.sleep(600)
"""


@pytest.mark.root
def test_a_killed_fslab_leaves_nothing_counting_and_cleanup_the_rest(needs_root):
    """Catches a resource of the reads' counting that outlives fslab killed (SIGKILL) mid-window:
    its counters die with it (nothing in the journal but the debugfs mount, which `fslab cleanup`
    releases with the tracefs automounted beneath it)."""
    with fresh_workdir() as workdir:
        child = subprocess.Popen([sys.executable, "-c", KILLED, str(workdir.root)], stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None and child.stdout.readline() == "counting\n"
            assert _perf_fds(str(child.pid)) == (MAX_ORDER + 2) * len(online_cpus(_online()))
        finally:
            child.kill()
            child.wait()
        assert {kind for kind, _ in workdir.journal.outstanding()} <= {"mount"}
        assert all(o.status == "released" for o in workdir.journal.clean_up())
        path = debugfs_dir(workdir.root, workdir.mounts)
        assert not mounts_at(path) and not mounts_at(path / "tracing")


def _online() -> str:
    return Path("/sys/devices/system/cpu/online").read_text()
