"""The process that runs a study run, recorded with it, so that a later fslab can tell a study
run whose process died (killed, or the machine rebooted) from one still under way."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from fslab.core.identity import process


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


@dataclass(frozen=True)
class Owner:
    pid: int
    start_time: int  # /proc/PID/stat field 22: a reused pid comes with another start time
    hostname: str
    workdir: str
    boot_id: str = ""  # start times count from boot: after a reboot, the same pair can recur

    @classmethod
    def current(cls, workdir: Path) -> Owner:
        pid = os.getpid()
        return cls(pid, _start_of(pid), socket.gethostname(), str(workdir.resolve()), _boot_id())

    @classmethod
    def from_stored(cls, stored: dict | None) -> Owner | None:
        """The owner as stored (None for a study run written before schema version 3)."""
        if not stored:
            return None
        return cls(**{name: stored[name] for name in cls.__dataclass_fields__ if name in stored})

    def on_this_host(self) -> bool:
        return self.hostname == socket.gethostname()

    def gone(self) -> bool:
        """Whether the owner is known to have ended. Only this host can tell: a study run owned
        on another host is never judged from here."""
        if not self.on_this_host():
            return False
        if self.boot_id and self.boot_id != _boot_id():
            return True
        return _start_of(self.pid) != self.start_time


def _start_of(pid: int) -> int:
    """When the living process `pid` started (clock ticks after boot), or 0 when none lives."""
    found = process(pid)
    return found.start if found else 0
