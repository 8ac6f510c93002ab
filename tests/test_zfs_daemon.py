"""zfs-fuse's daemon kept across a study run's ZFS runs: started once, started again only where a
run asks for another ARC cap, stopped when the study run ends, and stopped by `fslab cleanup`
when a killed fslab left it. (The kernel module has no daemon: these need zfs-fuse.)"""

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conftest import ZFS_FUSE, fslab, held_by, wait_for, write_study
from fslab.core.identity import ProcessId, process
from fslab.core.journal import Entry
from fslab.core.names import workdir_tag

# (its module registers the loop and image releasers: the journal reads only kinds it knows)
from fslab.devices.loop import devices_backed_by
from fslab.filesystems.zfs_engine import daemon_pidfile, engine, kept_daemons, stop_daemon
from fslab.results import ResultsDB
from short_studies import short_study

pytestmark = ZFS_FUSE  # zfs-fuse: one daemon on the machine (conftest)

STUDY = short_study(
    "daemons",
    """\
[[target]]
name = "z1"
filesystem = "zfs"

[[target]]
name = "z2"
filesystem = "zfs"

[[target]]
name = "capped"
filesystem = "zfs"
arc_max = "64MiB"
""",
)


def zfs_fuse_pids() -> list[int]:
    """Living zfs-fuse processes (a stopped one may linger a moment as a zombie)."""
    pids = subprocess.run(["pgrep", "-x", "zfs-fuse"], capture_output=True, text=True, check=False).stdout.split()
    return [int(pid) for pid in pids if process(int(pid))]


@pytest.fixture
def fuse():
    found = engine()
    if found is None or not found.fuse:
        pytest.skip("the daemon is zfs-fuse's (the OpenZFS kernel module has none)")
    if zfs_fuse_pids():
        pytest.skip("a zfs-fuse daemon fslab did not start runs: fslab uses it and starts none")


def daemon_of(run: dict) -> str:
    """The daemon line fslab stores with each ZFS run (its pid and start time)."""
    lines = [line for line in run["fs_details"].splitlines() if line.startswith("daemon: ")]
    assert len(lines) == 1, run["fs_details"]
    return lines[0]


@pytest.mark.root
def test_a_study_run_keeps_one_daemon_and_restarts_it_for_another_arc_cap(fuse, workdir, tmp_path):
    result = fslab(
        "run",
        str(write_study(tmp_path, STUDY)),
        "--no-ceiling",
        "--db",
        str(tmp_path / "r.db"),
        "--workdir",
        str(workdir.root),
        "--seed",
        "3",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    db = ResultsDB(str(tmp_path / "r.db"))
    runs = sorted(db.runs(db.study_run()["id"]), key=lambda r: r["started_at"])
    assert len(runs) == 6 and all(r["status"] == "ok" for r in runs), [r["error"] for r in runs]
    assert all(r["fs_details"].startswith(f"engine: {engine().describe()}") for r in runs), (
        "the engine, recorded with every run as before"
    )
    for before, after in itertools.pairwise(runs):
        same_cap = (before["target"] == "capped") == (after["target"] == "capped")
        assert (daemon_of(before) == daemon_of(after)) == same_cap, (
            f"{before['target']} → {after['target']}: {daemon_of(before)} / {daemon_of(after)}"
        )
    assert all("--max-arc-size 64" in daemon_of(r) for r in runs if r["target"] == "capped")
    assert len({daemon_of(r) for r in runs}) < len(runs), (
        "four uncapped runs among six: at least two in a row share a daemon"
    )
    # nothing left: no daemon, no pool in its cache, no loop device or mount, nothing in the journal
    assert zfs_fuse_pids() == [], "the daemon is stopped when the study run ends"
    cache = Path("/var/lib/zfs/zpool.cache")
    assert not cache.exists() or b"fslab_" not in cache.read_bytes(), "no fslab pool left imported"
    assert held_by(workdir.root) == [] and workdir.journal.outstanding() == []
    assert not daemon_pidfile(workdir).exists()


KILLED_BETWEEN_RUNS = """
import os, sys
from pathlib import Path
from fslab.core.workdir import Workdir
from fslab.devices.layers import Stack
from fslab.devices.loop import attached, image_file, on_loops
from fslab.filesystems import FILESYSTEMS
from fslab.model import Target
wd = Workdir(Path(sys.argv[1]))
zfs, target = FILESYSTEMS["zfs"], Target("killed", "zfs", (), "", 256 * 2**20, "sparse")
with zfs.across_runs(wd.journal), image_file(wd.journal, wd.images, "killed", target.image_size, fill=None) as image:
    for run in range(2):
        with attached(wd.journal, image) as loop, zfs.provision(
            wd.journal, Stack.on(on_loops([loop])), wd.mounts / "killed", target
        ) as ready:
            print(ready.details.splitlines()[1], flush=True)
            if run == 1:
                os._exit(9)  # dies in its second run, holding the daemon both used, a pool, a mount, a loop device
"""


@pytest.mark.root
def test_cleanup_stops_the_kept_daemon_a_killed_fslab_left(fuse, workdir):
    killed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILLED_BETWEEN_RUNS), str(workdir.root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert killed.returncode == 9, killed.stderr
    first, second = killed.stdout.splitlines()
    assert first == second and first.startswith("daemon: zfs-fuse pid "), "both runs used the one daemon"
    assert len(zfs_fuse_pids()) == 1
    kinds = [kind for kind, _ in workdir.journal.outstanding()]
    assert kinds == ["mount", "zpool", "loop", "zfs-daemon", "image"], kinds
    pools = subprocess.run(
        ["zpool", "list", "-H", "-o", "name"], capture_output=True, text=True, check=True
    ).stdout.split()
    left = [pool for pool in pools if pool.startswith(workdir_tag(workdir.root))]
    assert len(left) == 1
    cachefile = subprocess.run(
        ["zpool", "get", "cachefile", left[0]], capture_output=True, text=True, check=True
    ).stdout  # zfs-fuse's has no -H, -o
    assert cachefile.splitlines()[1].split()[:3] == [left[0], "cachefile", "none"], (
        "a pool a killed fslab left is in no cache file: nothing imports it again"
    )
    result = fslab("cleanup", "--workdir", str(workdir.root))
    assert result.returncode == 0, result.stdout + result.stderr
    for released in ("mount", "zpool", "loop", "zfs-daemon", "image"):
        assert f"\n{released} " in f"\n{result.stdout}" and ": released" in result.stdout, result.stdout
    assert "left alone" not in result.stdout and "failed" not in result.stdout, result.stdout
    assert zfs_fuse_pids() == [] and held_by(workdir.root) == [] and workdir.journal.outstanding() == []
    assert not daemon_pidfile(workdir).exists() and not devices_backed_by(workdir.images / "killed.img")


# A process named zfs-fuse that, as zfs-fuse does, ends its main thread on SIGTERM while another
# thread works on: here until two more SIGTERMs have come since the main thread went (each signal's
# number is written to a pipe by the handler, in whichever thread takes it), the stopper's proof
# that it waits on every thread; then it exits the process (no sleep guesses how long that takes).
LINGERING = """
import ctypes, os, signal, sys, threading
signals, wakeup = os.pipe()
os.set_blocking(wakeup, False)
signal.set_wakeup_fd(wakeup)
def main_thread_gone():
    with open(f"/proc/self/task/{os.getpid()}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
def linger():
    since = 0
    while since < 2:
        os.read(signals, 1)
        since += main_thread_gone()
    os._exit(0)
threading.Thread(target=linger, daemon=True).start()
# the main thread alone; ctypes lets the other run
signal.signal(signal.SIGTERM, lambda *_: ctypes.CDLL(None).pthread_exit(None))
with open(sys.argv[1] + ".new", "w") as pidfile:
    pidfile.write(str(os.getpid()))
os.rename(sys.argv[1] + ".new", sys.argv[1])
while True:
    signal.pause()
"""


@pytest.mark.root
def test_the_daemon_is_stopped_when_every_thread_has_exited_not_its_main_thread_alone(workdir, tmp_path):
    """zfs-fuse's main thread exits seconds before its others, which still hold its socket: a
    daemon started once the old one's main thread alone was gone lost its pidfile (a study run's
    capped target failed, and its daemon was left running)."""
    pidfile = daemon_pidfile(workdir)
    named = tmp_path / "zfs-fuse"  # the name the kernel reports (comm) is the program's
    named.symlink_to(sys.executable)
    started = subprocess.Popen([str(named), "-c", LINGERING, str(pidfile)], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while not pidfile.exists():
            assert started.poll() is None and time.monotonic() < deadline, "the lingering process did not start"
            time.sleep(0.05)
        daemon = process(started.pid)
        assert daemon is not None and daemon.comm == "zfs-fuse"
        stop_daemon(Entry("zfs-daemon", "zfs-fuse", daemon.proof() | {"pidfile": str(pidfile)}), workdir)
        threads = Path(f"/proc/{started.pid}/task")  # read here, not through fslab's process()
        assert not threads.exists() or len(list(threads.iterdir())) == 1, "stopped: every thread of it has exited"
        assert process(started.pid) is None
        assert not pidfile.exists()
    finally:
        started.kill()
        started.wait()
        pidfile.unlink(missing_ok=True)


@pytest.fixture
def users_daemon(fuse, workdir, tmp_path):
    """A zfs-fuse daemon fslab did not start (its pidfile the user's), holding a pool of the
    user's named as this work directory's pools are (not mounted): stopped and destroyed after."""
    pidfile = tmp_path / "users-zfs-fuse.pid"
    subprocess.run(["zfs-fuse", "--pidfile", str(pidfile)], check=True)
    daemon = process(int(pidfile.read_text()))
    assert daemon is not None and daemon.comm == "zfs-fuse"
    vdev = tmp_path / "users-vdev.img"
    pool = f"{workdir_tag(workdir.root)}00000000"
    try:
        deadline = time.monotonic() + 20
        while subprocess.run(["zpool", "list", "-H"], capture_output=True, check=False).returncode != 0:
            assert time.monotonic() < deadline, "the user's zfs-fuse does not answer"
            time.sleep(0.1)
        with vdev.open("wb") as sparse:
            sparse.truncate(128 * 2**20)
        subprocess.run(["zpool", "create", "-O", "mountpoint=none", pool, str(vdev)], check=True, capture_output=True)
        yield daemon, pool
    finally:
        deadline = time.monotonic() + 15
        while (
            subprocess.run(["zpool", "list", "-H", pool], capture_output=True, check=False).returncode == 0
            and time.monotonic() < deadline
        ):
            subprocess.run(
                ["zpool", "destroy", "-f", pool], capture_output=True, check=False
            )  # busy for a moment after use
            time.sleep(0.2)
        deadline = time.monotonic() + 30
        while process(daemon.pid) == daemon:
            os.kill(daemon.pid, signal.SIGTERM if time.monotonic() < deadline else signal.SIGKILL)
            time.sleep(0.1)


@pytest.mark.root
def test_a_daemon_fslab_did_not_start_is_used_and_left_alone(users_daemon, workdir, tmp_path):
    """A running zfs-fuse is someone else's: fslab's runs use it, take no pool of it for a
    leftover of theirs (even one named as theirs are), and a run asking another ARC cap — which
    would stop and restart a daemon of fslab's own — is refused rather than stopping it."""
    daemon, pool = users_daemon
    targets = (
        '[[target]]\nname = "z"\nfilesystem = "zfs"\n\n[[target]]\n'
        'name = "capped"\nfilesystem = "zfs"\narc_max = "64MiB"\n'
    )
    result = fslab(
        "run",
        str(write_study(tmp_path, short_study("users-daemon", targets, repetitions=1))),
        "--no-ceiling",
        "--db",
        str(tmp_path / "r.db"),
        "--workdir",
        str(workdir.root),
    )
    db = ResultsDB(str(tmp_path / "r.db"))
    runs = {r["target"]: r for r in db.runs(db.study_run()["id"])}
    assert runs["z"]["status"] == "ok", (runs["z"]["error"], result.stdout + result.stderr)
    assert daemon_of(runs["z"]) == "daemon: a zfs-fuse fslab did not start"
    assert (
        runs["capped"]["status"] != "ok"
        and "arc_max needs a zfs-fuse daemon fslab starts itself" in runs["capped"]["error"]
    )
    assert process(daemon.pid) == daemon, "the user's daemon, that very process, still runs"
    assert zfs_fuse_pids() == [daemon.pid], "and fslab started none beside it"
    listed = subprocess.run(
        ["zpool", "list", "-H", "-o", "name"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert listed == [pool], "the user's pool stays; fslab's own is gone"
    assert held_by(workdir.root) == [] and workdir.journal.outstanding() == []
    assert not daemon_pidfile(workdir).exists()


@pytest.mark.slow
def test_a_kept_daemon_that_hangs_is_stopped_and_started_again(fuse, workdir, monkeypatch):
    """A kept daemon that lives but no longer answers (stopped here with SIGSTOP) is not used for
    the next run: that one gets a daemon of its own, and the hung one is stopped. (It is let go on
    once fslab's SIGTERM waits for it, so that it can act on it.)"""
    import fslab.filesystems.zfs_engine as zfs_engine

    monkeypatch.setattr(zfs_engine, "ANSWER_SECONDS", 1.0)
    with kept_daemons(workdir.journal) as daemons:
        hung = daemons.ready(None)
        assert hung.started is not None and hung.alive()
        os.kill(hung.started.pid, signal.SIGSTOP)
        done = threading.Event()
        resume = threading.Thread(target=let_go_once_terminated, args=(hung.started, done))
        resume.start()
        try:
            again = daemons.ready(None)
        finally:
            done.set()
            resume.join()
            if process(hung.started.pid) == hung.started:
                os.kill(hung.started.pid, signal.SIGCONT)
        assert again.started is not None and again.started != hung.started, "a daemon of its own"
        assert process(hung.started.pid) != hung.started, "the hung one is stopped"
        assert zfs_fuse_pids() == [again.started.pid] and again.alive()
    assert zfs_fuse_pids() == [] and workdir.journal.outstanding() == []


def let_go_once_terminated(stopped: ProcessId, done: threading.Event) -> None:
    """SIGCONT to the process `stopped` (SIGSTOP) once a SIGTERM is pending for it (the kernel's
    ShdPnd mask: sent to it, not yet acted on), or when `done` is set."""

    def terminated() -> bool:
        try:
            status = Path(f"/proc/{stopped.pid}/status").read_text()
        except OSError:
            return False
        pending = next(int(line.split()[1], 16) for line in status.splitlines() if line.startswith("ShdPnd:"))
        return bool(pending & 1 << (signal.SIGTERM - 1))

    with contextlib.suppress(AssertionError):
        wait_for("fslab's SIGTERM to the hung daemon", lambda: done.is_set() or terminated(), deadline=120, every=0.05)
    if process(stopped.pid) == stopped:
        os.kill(stopped.pid, signal.SIGCONT)
