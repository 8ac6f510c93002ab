"""A lab guest's progress, streamed to the host while its boot runs (not only once it ends).

The guest's fslab (`fslab run … --lab-progress FILE`, FILE in the boot's share) writes a JSON line
as each run ends and for each notice its runner gives (GuestProgress, beside its ordinary
output); the host made FILE empty before the boot and reads it as it grows (`tailing`), each line
handed on as it comes. The guest is root in its VM and writes the share as it likes: the host
opens the very file it made (never through a symlink, never a FIFO or a device), reads only
whole lines of at most LINE_BYTES, at most LIMIT_BYTES in all, and takes from a line only the
fields it knows, of their types (Progress); anything else is passed over.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fslab.core.errors import FslabError

FILE = "progress.jsonl"
LINE_BYTES = 4096
LIMIT_BYTES = 16 * 2**20
POLL_SECONDS = 0.2  # how often the host looks for new lines: the guest tells no one when it writes


class ProgressError(FslabError):
    pass


@dataclass(frozen=True)
class GuestRun:
    """A run as the guest's fslab numbered it, once it ended."""

    target: str
    workload: str
    warmup: bool
    repetition: int
    status: str
    error: str = ""


@dataclass(frozen=True)
class Progress:
    """One line of a guest's progress: a run that ended, or a notice of its runner's."""

    run: GuestRun | None = None
    notice: str | None = None


# --- the guest's side: `fslab run --lab-progress FILE` ----------------------------------------


class GuestProgress:
    """A RunObserver that writes each run's end and each notice to FILE as a line, and passes
    everything on to `inner` (the guest's ordinary progress display)."""

    def __init__(self, path: Path, inner: Any):
        try:  # the host made it: appended to, never made, never followed
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise ProgressError(f"--lab-progress {path}: {exc.strerror}: the lab's host makes that file") from None
        if not stat.S_ISREG(os.fstat(self.fd).st_mode):
            os.close(self.fd)
            raise ProgressError(f"--lab-progress {path} is not a regular file")
        self.inner = inner

    def _write(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=True)
        if len(line) < LINE_BYTES:
            try:
                os.write(self.fd, (line + "\n").encode())  # one write, appended whole
            except OSError:  # the study goes on: the host tells the runs it did not hear of as the boot ends
                pass

    def announce(self, study: Any, skipped: list) -> None:
        self.inner.announce(study, skipped)

    def notice(self, message: str) -> None:
        self._write({"notice": message[: LINE_BYTES // 2]})
        self.inner.notice(message)

    def starting(self, planned: Any, index: int, total: int) -> None:
        self.inner.starting(planned, index, total)

    def finished(self, planned: Any, record: Any) -> None:
        run = {
            "target": record.target, "workload": record.workload, "warmup": bool(record.warmup),
            "repetition": int(record.repetition), "status": record.status, "error": (record.error or "")[:1000],
        }  # fmt: skip
        self._write({"run": run})
        self.inner.finished(planned, record)

    def already_stored(self, planned: Any, index: int, total: int) -> None:
        self.inner.already_stored(planned, index, total)


# --- the host's side ------------------------------------------------------------------------------


def parse(line: bytes) -> Progress | None:
    """A line as the guest wrote it, or None when it is not one GuestProgress writes."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    if isinstance(record.get("notice"), str):
        return Progress(notice=record["notice"])
    run = record.get("run")
    if not isinstance(run, dict):
        return None
    texts = [run.get(k) for k in ("target", "workload", "status", "error")]
    warmup, repetition = run.get("warmup"), run.get("repetition")
    if not all(isinstance(t, str) for t in texts) or not isinstance(warmup, bool) or type(repetition) is not int:
        return None
    target, workload, status, error = texts
    return Progress(run=GuestRun(target, workload, warmup, repetition, status, error))  # type: ignore[arg-type]


def make(share: Path) -> Path:
    """The empty progress file of a boot, in the host's new share (before the guest sees it)."""
    path = share / FILE
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))
    return path


@contextmanager
def tailing(path: Path, told: Callable[[Progress], None]) -> Iterator[None]:
    """For the block (a boot), each line the guest adds to `path` (made by `make`) handed to `told`
    as it comes, from a thread of its own; what is there when the block ends, handed on before
    it ends."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ProgressError(f"{path} is not the progress file the lab made")
    reader = _Reader(fd, told)
    stop = threading.Event()

    def follow() -> None:
        while not stop.wait(POLL_SECONDS):
            reader.read()

    thread = threading.Thread(target=follow, name="fslab-lab-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        reader.read()
        os.close(fd)


class _Reader:
    def __init__(self, fd: int, told: Callable[[Progress], None]):
        self.fd, self.told = fd, told
        self.pending = b""
        self.total = 0
        self.skipping = False  # within a line too long to be GuestProgress's, passed over to its end
        self.failed = False  # telling failed (a console gone, say): nothing more is told

    def read(self) -> None:
        while self.total < LIMIT_BYTES:
            chunk = os.read(self.fd, min(65536, LIMIT_BYTES - self.total))
            if not chunk:
                return
            self.total += len(chunk)
            *lines, self.pending = (self.pending + chunk).split(b"\n")
            if lines and self.skipping:
                lines, self.skipping = lines[1:], False
            if len(self.pending) > LINE_BYTES:
                self.pending, self.skipping = b"", True
            for line in lines:
                found = parse(line) if len(line) <= LINE_BYTES else None
                if found is not None and not self.failed:
                    try:
                        self.told(found)
                    except Exception:  # telling is best effort: never the boot's end, nor its error's mask
                        self.failed = True
