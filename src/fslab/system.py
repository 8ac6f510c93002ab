"""Running external tools: argument lists only, never a shell; a failure carries the tool's words."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from fslab.errors import FslabError


class CommandError(FslabError):
    """A tool exited non-zero; the message names the command and quotes its stderr."""

    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str):
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        said = (stderr.strip() or stdout.strip() or "no output").splitlines()
        super().__init__(f"`{' '.join(argv)}` exited with status {returncode}: {' / '.join(said[-5:])}")


def run(argv: Sequence[str], *, check: bool = True, timeout: float | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command to completion and capture its output; in `cwd` when given (fio writes
    side files such as verify state into its current directory: fslab gives it a private one).

    If fslab is interrupted or the command times out, the command and every process it started
    are killed and waited for: fio's job processes run in sessions of their own, and one left
    behind would keep the mount busy and the output pipes open.
    """
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=cwd)
    except FileNotFoundError as exc:
        raise CommandError(argv, 127, "", f"{argv[0]}: command not found") from exc
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException as exc:
        kill_tree(proc.pid)
        proc.communicate()
        if isinstance(exc, subprocess.TimeoutExpired):
            raise CommandError(argv, -9, "", f"killed after {timeout:g} s without finishing") from None
        raise
    if check and proc.returncode != 0:
        raise CommandError(argv, proc.returncode, stdout, stderr)
    return subprocess.CompletedProcess(list(argv), proc.returncode, stdout, stderr)


def kernel_has_module(module: str) -> bool:
    """Whether the running kernel has a module: loaded, built in, or loadable."""
    return Path(f"/sys/module/{module}").exists() or run(["modprobe", "--dry-run", "--quiet", module], check=False).returncode == 0


def joined(commands: list[list[str]]) -> list[str]:
    """Several commands stored as one argument list, separated by ";"."""
    return [arg for command in commands for arg in (*command, ";")][:-1]


def _descendants(pid: int) -> list[int]:
    """Every living process started, directly or not, by `pid` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def kill_tree(pid: int, *, wait: float = 10.0) -> None:
    """SIGKILL a process and all its descendants, and wait until they are gone."""
    victims = [pid, *_descendants(pid)]
    for victim in victims:
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + wait
    for victim in victims[1:]:  # not our children: poll until the kernel has reaped them
        while Path(f"/proc/{victim}").exists() and _state(victim) != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


def tool_version(argv: Sequence[str]) -> str | None:
    """The first line a tool prints about its version, or None when it is not installed."""
    if shutil.which(argv[0]) is None:
        return None
    proc = run(argv, check=False, timeout=10)
    text = (proc.stdout or proc.stderr).strip()
    return text.splitlines()[0] if proc.returncode == 0 and text else None


def sync_and_drop_caches() -> None:
    """Flush dirty pages and drop the page cache, dentries and inodes before a measured run."""
    run(["sync"])
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
