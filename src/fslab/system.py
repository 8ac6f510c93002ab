"""Running external tools: argument lists only, never a shell; a failure carries the tool's words."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence


class CommandError(RuntimeError):
    """A tool exited non-zero; the message names the command and quotes its stderr."""

    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str):
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        said = (stderr.strip() or stdout.strip() or "no output").splitlines()
        super().__init__(f"`{' '.join(argv)}` exited with status {returncode}: {' / '.join(said[-5:])}")


def run(argv: Sequence[str], *, check: bool = True, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command to completion and capture its output."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise CommandError(argv, 127, "", f"{argv[0]}: command not found") from exc
    if check and proc.returncode != 0:
        raise CommandError(argv, proc.returncode, proc.stdout, proc.stderr)
    return proc


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
