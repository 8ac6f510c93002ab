"""One of fslab's bpftrace programs running over a measured window: started in a mount namespace
of its own with tracefs there (namespace.py), held in the journal from before it runs (pid and
start time: core/system.running_held), awaited until it says it has attached (its BEGIN, which
bpftrace runs once every probe is attached: never a fixed sleep), asked to print its maps and end
(SIGINT) when the window closes, and killed — by that proof — however the window ends: an error,
Ctrl-C, or `fslab cleanup` after a kill -9. Its output is JSON lines (`-f json`), read by the
program's own module (block.py); what else it says (warnings, errors) is kept for the message."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from fslab.core.errors import FslabError
from fslab.core.journal import Journal
from fslab.core.scratch import scratch_directory
from fslab.core.system import running_held
from fslab.tracing.output import attached, said

ATTACH_SECONDS = 60.0  # bpftrace compiles and attaches in 1–2 s here: past this it is stuck
STOP_SECONDS = 30.0  # from SIGINT to its maps printed and its exit (a fraction of a second here)
POLL = 0.02  # seconds between looks at its output while waiting for it to attach


class TraceFailed(FslabError):
    """bpftrace could not start, attach or end as asked: the message quotes what it said."""


def command(program: str) -> list[str]:
    """The argument list that runs `program` (fslab's own text) in a namespace of its own."""
    bpftrace, unshare = shutil.which("bpftrace"), shutil.which("unshare")
    if bpftrace is None or unshare is None:
        raise TraceFailed(
            f"--trace needs {'bpftrace' if bpftrace is None else 'unshare'}: apt-get install "
            f"{'bpftrace' if bpftrace is None else 'util-linux'} (`fslab doctor` lists what tracing needs)"
        )
    return [
        unshare, "--mount", "--propagation", "private", "--",
        sys.executable, "-I", "-m", "fslab.tracing.namespace", bpftrace, "-f", "json", "-e", program,
    ]  # fmt: skip


class Trace:
    """A bpftrace program over one window: `start` returns once it has attached, `stop` once it
    has printed its maps and ended, with its output."""

    def __init__(self, journal: Journal, program: str):
        self.journal, self.program = journal, program
        self._stack = ExitStack()
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    def start(self) -> None:
        try:
            directory = self._stack.enter_context(scratch_directory(self.journal))
            self._log = directory / "bpftrace.log"
            self._proc = self._stack.enter_context(
                running_held(self.journal, command(self.program), cwd=directory, log=self._log, name="bpftrace")
            )
            self._await_attached(self._proc)
        except BaseException:
            self._stack.close()  # killed by its proof, its scratch directory removed
            raise

    def _read(self) -> str:
        return self._log.read_text(errors="replace") if self._log is not None else ""

    def _await_attached(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + ATTACH_SECONDS
        while not attached(text := self._read()):
            if proc.poll() is not None:
                raise TraceFailed(f"bpftrace ended before it attached (exit status {proc.returncode}): {said(text)}")
            if time.monotonic() > deadline:
                raise TraceFailed(f"bpftrace did not attach within {ATTACH_SECONDS:g} s: {said(text)}")
            time.sleep(POLL)

    def stop(self) -> str:
        """Ask it to print its maps and end; its whole output. Killed if it does not end in time."""
        proc, text = self._proc, ""
        try:
            if proc is None:
                return ""
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # our own child, not yet reaped: its pid is still its own
                try:
                    proc.wait(STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    raise TraceFailed(f"bpftrace did not end within {STOP_SECONDS:g} s of SIGINT: killed") from None
            text = self._read()
        finally:
            self._stack.close()
            self._proc = None
        if proc.returncode != 0:
            raise TraceFailed(f"bpftrace exited with status {proc.returncode}: {said(text)}")
        return text
