"""Which ZFS runs here, and keeping it to one fslab at a time: the OpenZFS kernel module (its ARC
capped for a run and restored after), else zfs-fuse, whose daemon fslab starts at a study run's
first ZFS run and keeps for the others (`FuseDaemons`: starting one costs seconds, every run),
and stops when the study run ends — that very process, by pid and start time. Each run still
makes and destroys its own pool, and closing a pool flushes its buffers from the ARC
(dsl_pool_close → arc_flush, in zfs-fuse's code too), so every run still starts with a cold
ARC, like a fresh mount. There is one zfs-fuse per machine: fslab
processes in different work directories take turns on it (`zfs_turn`) rather than stop each
other's daemon or pools.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import stat
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fslab.core.errors import FslabError, Refused
from fslab.core.identity import ProcessId, open_own, process, same_process
from fslab.core.journal import Entry, Home, Journal, releaser
from fslab.core.names import workdir_tag
from fslab.core.system import TimedOut, run

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir

KERNEL_MODULE = Path("/sys/module/zfs")
PIDFILE_DIR = Path("/run/fslab")
# Set (to 1) by the kernel lab's guest setup (lab/openzfs.py): in a lab VM, ZFS is the OpenZFS
# module or none. The guest sees the host's root, zfs-fuse with it, and a FUSE figure must never
# pass for the kernel's: where the module did not load, ZFS targets are unsupported there.
KERNEL_ONLY = "FSLAB_ZFS_KERNEL_ONLY"


@dataclass(frozen=True)
class Engine:
    name: str  # "OpenZFS kernel module" or "zfs-fuse"
    version: str
    fuse: bool

    def describe(self) -> str:
        return f"{self.name} {self.version}" + (" (through FUSE, pool version 23)" if self.fuse else "")


class NotSupported(FslabError):
    pass


def runs_on_fuse() -> bool:
    """Whether engine() finds zfs-fuse, known without asking dpkg its version."""
    return not KERNEL_MODULE.exists() and not _kernel_only() and shutil.which("zfs-fuse") is not None


def _kernel_only() -> bool:
    return os.environ.get(KERNEL_ONLY) == "1"


def engine() -> Engine | None:
    """The ZFS this machine has: the kernel module, else zfs-fuse (unless KERNEL_ONLY), else none."""
    if KERNEL_MODULE.exists():
        version = (KERNEL_MODULE / "version").read_text().strip() if (KERNEL_MODULE / "version").exists() else "unknown"
        return Engine("OpenZFS kernel module", version, fuse=False)
    if shutil.which("zfs-fuse") and not _kernel_only():
        version = run(["dpkg-query", "-W", "-f=${Version}", "zfs-fuse"], check=False).stdout.strip() or "unknown"
        return Engine("zfs-fuse", version, fuse=True)
    return None


ANSWER_SECONDS = 10.0  # how long zfs-fuse has to answer a `zpool list` before it counts as hung


def daemon_answers() -> bool:
    """Whether zfs-fuse answers a `zpool list` within ANSWER_SECONDS (a daemon that hangs does not)."""
    try:
        return run(["zpool", "list", "-H"], check=False, timeout=ANSWER_SECONDS).returncode == 0
    except TimedOut:
        return False


@releaser("zfs-daemon")
def stop_daemon(entry: Entry, workdir: Workdir) -> None:
    """Stop the zfs-fuse daemon fslab started — that very process, by pid and start time — and
    wait until it is gone."""
    proof = dict(entry.proof)
    pidfile = daemon_pidfile(workdir)
    if Path(str(proof.get("pidfile", ""))) != pidfile:  # another work directory's daemon, or a planted line
        raise Refused(
            f"{entry.ident}: the journal names a pidfile that is not this work directory's ({pidfile}); not signalled"
        )
    if "pid" not in proof:  # killed before the pid was recorded: its pidfile (fslab's own) says it
        started = process(_pid_in(Path(str(proof.get("pidfile", "")))) or 0)
        if started is None or started.comm != "zfs-fuse":
            _forget_pidfile(pidfile)
            return
        proof |= started.proof()
    if proof.get("comm") != "zfs-fuse":
        raise Refused(f"{entry.ident}: the journal names a process that is not zfs-fuse; not signalled")
    if same_process(proof) is not None and _pid_in(pidfile) != proof.get("pid"):
        raise Refused(f"{entry.ident}: {pidfile} does not name the process the journal names; not signalled")
    deadline = time.monotonic() + 30
    while (daemon := same_process(proof)) is not None:  # while any thread of it runs (identity.process)
        os.kill(daemon.pid, signal.SIGTERM if time.monotonic() < deadline else signal.SIGKILL)
        time.sleep(0.1)
    _forget_pidfile(pidfile)


def daemon_pidfile(workdir: Home) -> Path:
    """The pidfile of the zfs-fuse daemon fslab starts for this work directory."""
    return PIDFILE_DIR / f"zfs-fuse-{workdir_tag(workdir.root)}pid"


def _forget_pidfile(pidfile: Path) -> None:
    """zfs-fuse leaves its pidfile behind: fslab's own, in its own directory, goes with it."""
    if pidfile.parent == PIDFILE_DIR and pidfile.name.startswith("zfs-fuse-fslab_") and not pidfile.is_symlink():
        pidfile.unlink(missing_ok=True)


def _pid_in(pidfile: Path) -> int | None:
    if pidfile.parent != PIDFILE_DIR:
        return None
    try:
        return int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None


@contextmanager
def zfs_turn() -> Iterator[None]:
    """This machine's zfs-fuse to this fslab alone for one run. There is one zfs-fuse per machine:
    two fslab processes (two work directories) take turns rather than stop each other's daemon."""
    _own_run_directory()
    fd = open_own(PIDFILE_DIR / "zfs.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits while another fslab's ZFS run holds it
        yield
    finally:
        os.close(fd)


def _own_run_directory() -> None:
    PIDFILE_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(PIDFILE_DIR)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise Refused(
            f"{PIDFILE_DIR} is not a directory of fslab's own (a symlink, another owner, or writable by others)"
        )


# The smallest ARC cap both engines take: zfs-fuse's --max-arc-size from 16MiB (its --help);
# the OpenZFS module ignores a zfs_arc_max under 64MiB (and under its c_min: 1/32 of memory,
# which kernel_arc_max checks when the run starts).
SCALED_ARC_FLOOR = 64 * 2**20


def arc_flag(arc_max: int | None) -> tuple[str, ...]:
    """zfs-fuse's flag capping its ARC at `arc_max` bytes (whole MiB, within what it takes): what
    tells whether a running daemon has the cap a run asks for."""
    return ("--max-arc-size", str(max(16, min(16384, arc_max // 2**20)))) if arc_max else ()


@dataclass(frozen=True)
class Daemon:
    """The zfs-fuse daemon a run used: the process fslab started (None: someone else's, found
    running, used and left alone) and the ARC flag it was started with."""

    started: ProcessId | None
    cap: tuple[str, ...]

    def alive(self) -> bool:
        """Still that very process (someone else's: still a daemon), and answering: one that lives
        but hangs is not alive either."""
        return (self.started is None or same_process(self.started.proof()) is not None) and daemon_answers()

    def describe(self) -> str:
        """Stored with each run: which runs shared a daemon, and which had one of their own."""
        if self.started is None:
            return "daemon: a zfs-fuse fslab did not start"
        return f"daemon: zfs-fuse pid {self.started.pid}, started {self.started.start} ticks after boot" + (
            f" ({' '.join(self.cap)})" if self.cap else ""
        )


@contextmanager
def zfs_fuse_daemon(journal: Journal, arc_max: int | None) -> Iterator[Daemon]:
    """zfs-fuse running: started (and stopped after) unless one already runs. `arc_max` (bytes)
    caps its ARC, which only a daemon fslab starts itself can have."""
    pids = run(["pgrep", "-x", "zfs-fuse"], check=False).stdout.split()
    if any(process(int(pid)) for pid in pids):  # a daemon lives (a stopped one may linger as a zombie)
        if arc_max is not None:
            raise NotSupported("arc_max needs a zfs-fuse daemon fslab starts itself, and one is already running")
        yield Daemon(None, ())  # someone else's daemon: use it, leave it
        return
    pidfile = daemon_pidfile(journal.workdir)
    cap = arc_flag(arc_max)
    with journal.holding("zfs-daemon", "zfs-fuse", pidfile=str(pidfile)) as held:
        pidfile.unlink(missing_ok=True)
        run(["zfs-fuse", "--pidfile", str(pidfile), *cap])
        started = process(_pid_in(pidfile) or 0)
        if started is None or started.comm != "zfs-fuse":
            raise RuntimeError(f"zfs-fuse started but {pidfile} names no zfs-fuse process")
        held.prove(**started.proof())
        deadline = time.monotonic() + 20
        while not daemon_answers():
            if time.monotonic() > deadline:
                raise RuntimeError("zfs-fuse started but does not answer zpool commands")
            time.sleep(0.1)
        yield Daemon(started, cap)


class FuseDaemons:
    """zfs-fuse for the ZFS runs of one study run: started at the first, kept for the next, and
    stopped when the study run ends (`kept_daemons`): zfs-fuse takes about 3 s to exit after
    SIGTERM, and a run of its own cost that every run (bench/zfs_overhead.py --compare). It starts
    again only where a run asks for another ARC cap (only a start sets one) or it is gone or hangs
    (`Daemon.alive`: that very process, answering `zpool list`). While it
    is kept, zfs-fuse is this fslab's alone (`zfs_turn` held from the first ZFS run to the end):
    another fslab's ZFS runs wait for this study run's end."""

    def __init__(self, journal: Journal):
        self.journal = journal
        self._turn = ExitStack()  # the machine's zfs-fuse lock, from the first ZFS run on
        self._running = ExitStack()  # the daemon runs use now (its journal entry, its stop)
        self._locked = False
        self.daemon: Daemon | None = None

    def ready(self, arc_max: int | None) -> Daemon:
        """The daemon ready for a run capped at `arc_max`: the one kept, else a new one."""
        if self.daemon is not None and (self.daemon.cap != arc_flag(arc_max) or not self.daemon.alive()):
            self.stop()
        if not self._locked:
            self._turn.enter_context(zfs_turn())
            self._locked = True
        if self.daemon is None:
            self.daemon = self._running.enter_context(zfs_fuse_daemon(self.journal, arc_max))
        return self.daemon

    def stop(self) -> None:
        """Stop the daemon fslab started (stop_daemon: that very process), if any; keep the lock."""
        self.daemon = None
        self._running.close()

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self._turn.close()
            self._locked = False


@contextmanager
def kept_daemons(journal: Journal) -> Iterator[FuseDaemons]:
    """zfs-fuse kept for the runs within; stopped, and the lock released, however they end."""
    daemons = FuseDaemons(journal)
    try:
        yield daemons
    finally:
        daemons.close()


ARC_MAX = KERNEL_MODULE / "parameters" / "zfs_arc_max"
ARC_STATS = Path("/proc/spl/kstat/zfs/arcstats")


def arc_stat(name: str) -> int:
    """One figure of the module's ARC statistics (c_max: the cap in force; c_min: its floor)."""
    for line in ARC_STATS.read_text().splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0] == name:
            return int(fields[2])
    raise RuntimeError(f"no {name} in {ARC_STATS}")


@releaser("arc-max")
def restore_arc_max(entry: Entry, workdir: Workdir) -> None:
    """Put the module's ARC cap back (the parameter and c_max as they were before the run).

    Writing the old parameter alone (usually 0, "the default") leaves the lowered cap in
    force; writing the old c_max first restores it."""
    parameter, c_max = entry.proof.get("parameter"), entry.proof.get("c_max")
    if entry.ident != "zfs_arc_max" or not isinstance(parameter, int) or not isinstance(c_max, int):
        raise Refused(f"{entry.ident}: the journal's values are not the numbers fslab records")
    if not ARC_MAX.exists():
        return
    ARC_MAX.write_text(f"{c_max}\n")
    ARC_MAX.write_text(f"{parameter}\n")


@contextmanager
def kernel_arc_max(journal: Journal, arc_max: int | None) -> Iterator[None]:
    """The OpenZFS module's ARC capped at `arc_max` for the run, checked in force, restored after."""
    if arc_max is None:
        yield
        return
    with journal.holding("arc-max", "zfs_arc_max", parameter=int(ARC_MAX.read_text()), c_max=arc_stat("c_max")):
        ARC_MAX.write_text(f"{arc_max}\n")
        in_force = arc_stat("c_max")
        if in_force != arc_max:  # the module ignores a cap below its floor, silently
            raise NotSupported(
                f"the OpenZFS module did not take zfs_arc_max = {arc_max}: the ARC's "
                f"cap in force is {in_force} and its floor (c_min) {arc_stat('c_min')}"
            )
        yield
