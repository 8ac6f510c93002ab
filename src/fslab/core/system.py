"""Running external tools: argument lists only, never a shell; a failure carries the tool's words."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path

from fslab.core import cgroups
from fslab.core.errors import FslabError, Refused
from fslab.core.identity import process, same_process
from fslab.core.interruption import releasing
from fslab.core.journal import Entry, Journal, releaser


class CommandError(FslabError):
    """A tool exited non-zero; the message names the command and quotes its stderr."""

    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str):
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        said = (stderr.strip() or stdout.strip() or "no output").splitlines()
        super().__init__(f"`{' '.join(argv)}` exited with status {returncode}: {' / '.join(said[-5:])}")


class TimedOut(CommandError):
    """A command still running at its time-out (its own, or what was left of the run's): it was
    killed with every process it started. stderr holds what it said until then."""

    def __init__(self, argv: Sequence[str], seconds: float, stdout: str, stderr: str):
        super().__init__(argv, -signal.SIGKILL, stdout, stderr)
        self.seconds = seconds
        self.args = (f"timed out after {seconds:g} s: `{' '.join(argv)}` was killed with every process it started",)


class CannotStart(FslabError):
    """A command that could not be started for want of something else than the tool itself (its
    working directory): the message says what is missing, not that the tool exited."""

    def __init__(self, argv: Sequence[str], why: str):
        self.argv = list(argv)
        super().__init__(f"cannot run `{' '.join(argv)}`: {why}")


_WHY_NOT = {
    FileNotFoundError: "does not exist",
    NotADirectoryError: "is not a directory",
    PermissionError: "may not be entered",
}


@dataclass(frozen=True)
class _Limit:
    seconds: float  # as set, for the message
    ends: float  # time.monotonic() at which it runs out


_LIMIT: ContextVar[_Limit | None] = ContextVar("fslab_time_limit", default=None)


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Every command run inside gets only what is left of `seconds` (None: no limit).

    One limit covers a whole run — mkfs, mount, zpool, fio — though most of those commands are
    started by modules that know nothing of runs; a hang anywhere ends the run, not the study.
    """
    token = _LIMIT.set(_Limit(seconds, time.monotonic() + seconds) if seconds else None)
    try:
        yield
    finally:
        _LIMIT.reset(token)


def _time_left(timeout: float | None) -> tuple[float | None, float | None]:
    """The time-out to apply to one command, and the limit to name if it strikes."""
    limit = _LIMIT.get()
    if limit is None:
        return timeout, timeout
    left = max(limit.ends - time.monotonic(), 0.0)
    return (timeout, timeout) if timeout is not None and timeout < left else (left, limit.seconds)


# Waits for fslab's go on the pipe named by argv[1], then becomes the command (argv[2:]).
_GATE = """import os, sys
if os.read(int(sys.argv[1]), 1) != b"1":
    sys.exit(111)
os.close(int(sys.argv[1]))
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except FileNotFoundError:
    sys.stderr.write(sys.argv[2] + ": command not found\\n")
    sys.exit(127)
"""


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    timeout: float | None = None,
    cwd: Path | None = None,
    on_start: Callable[[int], None] | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | bytearray | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command to completion and capture its output; in `cwd` when given (fio writes
    side files such as verify state into its current directory: fslab gives it a private one).

    If fslab is interrupted or the command times out (`timeout`, or the end of an enclosing
    `time_limit`), the command and every process it started are killed and waited for: fio's
    job processes run in sessions of their own, and one left behind would keep the mount busy
    and the output pipes open.

    `on_start` is told the pid before the command runs: the new process (_GATE) waits on a pipe
    until `on_start` has returned (to journal it), then becomes the command (exec: same pid, same
    start time); it ends without running the command if fslab dies first. So no command runs
    that the journal does not know.

    `env`: variables set for the command on top of fslab's own (LC_ALL=C, for output read back).

    `stdin`: bytes the command reads on its standard input (a pipe holding them, closed after
    them; at most a pipe's buffer, 64 KiB): a secret given this way is in no file and in no
    argument list. Without it the command reads fslab's own standard input.
    """
    timeout, named = _time_left(timeout)
    if timeout is not None and timeout <= 0:
        raise TimedOut(argv, named or 0.0, "", "not started: no time left")
    gate_read, gate_write = os.pipe() if on_start else (-1, -1)
    command = [sys.executable, "-I", "-S", "-c", _GATE, str(gate_read), *argv] if on_start else list(argv)
    given = _pipe_holding(stdin) if stdin is not None else None
    proc = None
    try:
        try:
            # A signal while the command starts (between its fork and its exec) is acted on once it
            # has: it is then killed below. Raised inside Popen, it left the command running
            # unwatched — a `mount` done after fslab had released its mount point, there for good.
            with releasing():
                proc = subprocess.Popen(
                    command,
                    stdin=given,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                    cwd=cwd,
                    env={**os.environ, **env} if env else None,
                    pass_fds=(gate_read,) if on_start else (),
                )
        except OSError as exc:
            if cwd is not None and exc.filename is not None and os.fsdecode(exc.filename) == os.fsdecode(cwd):
                why = _WHY_NOT.get(type(exc), exc.strerror or "is unusable")
                raise CannotStart(argv, f"its working directory {cwd} {why}") from exc
            if isinstance(exc, FileNotFoundError):
                raise CommandError(argv, 127, "", f"{argv[0]}: command not found") from exc
            raise
        finally:
            if on_start:
                os.close(gate_read)
            if given is not None:
                os.close(given)
        if on_start:
            try:
                on_start(proc.pid)
                os.write(gate_write, b"1")
            finally:
                os.close(gate_write)
                gate_write = -1
        stdout, stderr = _communicate_awake(proc, timeout)
    except BaseException as exc:
        if gate_write != -1:
            os.close(gate_write)  # the gate's command never runs: it ends as its end of the pipe closes
        if proc is None:
            raise
        kill_tree(proc.pid)
        try:
            stdout, stderr = proc.communicate(timeout=KILLED_OUTPUT_SECONDS)
        except subprocess.TimeoutExpired:  # something out of the tree holds its pipes: fslab goes on without the rest
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            proc.wait()
            stdout, stderr = "", ""
        if isinstance(exc, subprocess.TimeoutExpired):
            raise TimedOut(argv, named or 0.0, stdout, stderr) from None
        raise
    if check and proc.returncode != 0:
        raise CommandError(argv, proc.returncode, stdout, stderr)
    return subprocess.CompletedProcess(list(argv), proc.returncode, stdout, stderr)


# How often the wait for a command wakes. A signal the kernel hands to another thread (it does
# while the main thread blocks signals: CPython's vfork around a command's start) wakes no wait of
# the main thread's: its handler runs when that thread next wakes. Waiting whole, a Ctrl-C that
# came so was acted on only as the command ended (make test: 271 s, the test's whole `sleep`).
WAKE_SECONDS = 0.5


def _communicate_awake(proc: subprocess.Popen[str], timeout: float | None) -> tuple[str, str]:
    """proc.communicate(timeout=timeout), waking every WAKE_SECONDS, where a signal handled on
    another thread meanwhile is acted on (KeyboardInterrupt); subprocess.TimeoutExpired at `timeout`."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        try:
            return proc.communicate(timeout=WAKE_SECONDS if left is None else min(left, WAKE_SECONDS))
        except subprocess.TimeoutExpired:
            if left is not None and left <= WAKE_SECONDS:
                raise


# How long a killed command's output is read before fslab goes on: its pipes end as its processes do.
KILLED_OUTPUT_SECONDS = 10.0


def _pipe_holding(data: bytes | bytearray) -> int:
    """The read end of a pipe that holds `data` and then ends (its write end closed)."""
    read_end, write_end = os.pipe()
    try:
        if os.write(write_end, data) != len(data):  # a pipe takes 64 KiB at once, and fslab gives less
            raise ValueError(f"{len(data)} bytes do not fit in a pipe's buffer")
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    return read_end


def run_held(
    journal: Journal,
    argv: Sequence[str],
    *,
    timeout: float | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a tool that works on fslab's mounts and devices (a workload, a layout or fill job),
    recorded in the journal with its pid and start time: `fslab cleanup` after a kill -9 stops
    that very process and its children before it unmounts or detaches what they hold.

    Inside `cgroups.memory_limited`, the process joins that memory-limited cgroup before it
    runs the command, so all it and its children bring into the page cache counts against the limit."""
    group = cgroups.current()
    with journal.holding("process", Path(argv[0]).name[:15]) as held:

        def prove(pid: int) -> None:  # still waiting to run the command: its name is to come
            started = process(pid)
            if started is not None:
                held.prove(**replace(started, comm=held.ident).proof())
            if group is not None:
                group.admit(pid)

        return run(argv, timeout=timeout, cwd=cwd, on_start=prove, env=env)


@contextmanager
def running_held(
    journal: Journal,
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
    name: str | None = None,
    pass_fds: Sequence[int] = (),
) -> Iterator[subprocess.Popen[bytes]]:
    """A long-lived tool (fio's server) running while the block runs: journalled with its pid and
    start time before it runs (the gate of `run`), stopped with its children when the block ends
    — by the "process" releaser, which signals only that very process — or by `fslab cleanup`
    after a kill -9. Its output goes to `log` (else nowhere). `name`: the process's name once it
    runs, where argv[0] execs another (unshare becomes bpftrace: tracing/bpftrace.py). `pass_fds`:
    descriptors it inherits (a lab VM's disks that QEMU opens nothing of by name: lab/vm.py)."""
    gate_read, gate_write = os.pipe()
    proc: subprocess.Popen[bytes] | None = None
    try:
        with journal.holding("process", (name or Path(argv[0]).name)[:15]) as held:
            out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 (closed below)
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", _GATE, str(gate_read), *argv],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    cwd=cwd,
                    env={**os.environ, **env} if env else None,
                    pass_fds=(gate_read, *pass_fds),
                )
            finally:
                os.close(gate_read)
                if not isinstance(out, int):  # the log's file, not DEVNULL
                    out.close()
            started = process(proc.pid)  # waiting at the gate: alive
            if started is not None:
                held.prove(**replace(started, comm=held.ident).proof())
            os.write(gate_write, b"1")
            yield proc
    finally:
        os.close(gate_write)
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()  # released above unless its proof failed; never left unreaped
            proc.wait()


@releaser("process")
def stop_process(entry: Entry, workdir: object) -> None:
    """Kill the process fslab started, and its children, if that very process still lives."""
    living = process(int(entry.proof.get("pid", 0)))
    if living is None:
        return  # gone
    if same_process(entry.proof) is None or living.comm != entry.ident:
        raise Refused(
            f"process {living.pid} ({living.comm}) is not the {entry.ident} "
            "fslab started (its start time or name differs); not signalled"
        )
    kill_tree(living.pid)


def kernel_has_module(module: str) -> bool:
    """Whether the running kernel has a module: loaded, built in, or loadable."""
    return (
        Path(f"/sys/module/{module}").exists()
        or run(["modprobe", "--dry-run", "--quiet", module], check=False).returncode == 0
    )


def joined(commands: list[list[str]]) -> list[str]:
    """Several commands stored as one argument list, separated by ";"."""
    return [arg for command in commands for arg in (*command, ";")][:-1]


def descendants(pid: int) -> list[int]:
    """Every living process started, directly or not, by `pid` (from /proc)."""
    children: dict[int, list[int]] = {}
    # the names alone (os.listdir), not Path.glob: glob stats each /proc/PID/stat, and one of a
    # process that ended meanwhile raises ESRCH, which pathlib does not take for "not there"
    for name in os.listdir("/proc"):
        with contextlib.suppress(ValueError, IndexError):  # not a process, or gone meanwhile: no fields
            child = int(name)
            children.setdefault(int(_stat_fields(child)[1]), []).append(child)
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def kill_tree(pid: int, *, wait: float = 10.0) -> None:
    """SIGKILL a process and all its descendants, and wait until they are gone. The tree is
    stopped first, until no new process appears in it: a process stopped forks no more, so every
    child it made is in /proc when it is. Killed as they were found, a child forked meanwhile went
    to init unkilled (fio's job process, holding fio's output pipes: fslab waited on them forever)."""
    stopped: list[int] = []
    found = [pid]
    deadline = time.monotonic() + wait
    while found:
        for victim in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGSTOP)
            stopped.append(victim)
        for victim in found:
            while _state(victim) not in ("T", "t", "Z", "X") and time.monotonic() < deadline:
                time.sleep(0.01)
        seen = set(stopped)
        found = [p for p in descendants(pid) if p not in seen]
    for victim in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + wait
    for victim in stopped[1:]:  # not our children: poll until the kernel has reaped them
        while Path(f"/proc/{victim}").exists() and _state(victim) != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat from field 3 (state) on; the command name before it may hold spaces."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _state(pid: int) -> str:
    fields = _stat_fields(pid)
    return fields[0] if fields else "X"


# A tool that prints its version for longer than this has hung. Generous: under software
# emulation on a busy host (a QEMU guest without KVM), fio took over 10 s to say its version.
VERSION_SECONDS = 60


def tool_version(argv: Sequence[str]) -> str | None:
    """The first line a tool prints about its version, or None when it is not installed. Asked
    once a process for each executable: a study run asks of each tool several times (checks,
    support, the environment); an executable replaced meanwhile (an upgrade under a long-lived
    worker) is another file, asked anew."""
    found = executable(argv[0])
    return None if found is None else _version_of(tuple(argv), found.identity)


@dataclass(frozen=True)
class Executable:
    """A tool's executable as found on PATH, and what tells it from another file: its device,
    inode and mtime (an upgrade replaces the file)."""

    path: str
    identity: tuple[int, int, int]


def executable(name: str) -> Executable | None:
    """The executable `name` runs, or None when it is not installed."""
    found = shutil.which(name)
    if found is None:
        return None
    try:
        stat = os.stat(found)
    except OSError:
        return None
    return Executable(found, (stat.st_dev, stat.st_ino, stat.st_mtime_ns))


@functools.cache
def _version_of(argv: tuple[str, ...], identity: tuple[int, int, int]) -> str | None:
    proc = run(argv, check=False, timeout=VERSION_SECONDS)
    text = (proc.stdout or proc.stderr).strip()
    return text.splitlines()[0] if proc.returncode == 0 and text else None


def sync_and_drop_caches() -> None:
    """Flush dirty pages and drop the page cache, dentries and inodes before a measured run."""
    run(["sync"])
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
