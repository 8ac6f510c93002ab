"""What fslab holds on the machine — loop images, mounts — written down before it is taken.

Every resource is recorded before it is acquired and marked released after, in a JSON-lines
file in the work directory, so that a run killed at any point can be undone by `fslab cleanup`.
Each kind of resource has one idempotent release function, registered by the module that
acquires it; normal teardown and clean-up both call that same function.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

_RELEASERS: dict[str, Callable[[str], None]] = {}


def releaser(kind: str) -> Callable[[Callable[[str], None]], Callable[[str], None]]:
    """Register the function that releases resources of one kind, given their identifier."""

    def register(fn: Callable[[str], None]) -> Callable[[str], None]:
        _RELEASERS[kind] = fn
        return fn

    return register


class Journal:
    def __init__(self, path: Path):
        self.path = path

    @property
    def workdir(self) -> Path:
        return self.path.parent

    def _append(self, event: str, kind: str, ident: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"event": event, "kind": kind, "id": ident, "pid": os.getpid(), "time": time.time()})
        with open(self.path, "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    @contextmanager
    def holding(self, kind: str, ident: str) -> Iterator[str]:
        """Record the resource, let the caller acquire and use it, release it however the block ends."""
        self._append("acquire", kind, ident)
        try:
            yield ident
        finally:
            _RELEASERS[kind](ident)
            self._append("release", kind, ident)

    def outstanding(self) -> list[tuple[str, str]]:
        """Resources acquired and never released, newest first (the order to release them in)."""
        if not self.path.exists():
            return []
        held: dict[tuple[str, str], None] = {}
        for line in self.path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a crash
            key = (entry["kind"], entry["id"])
            if entry["event"] == "acquire":
                held[key] = None
            else:
                held.pop(key, None)
        return list(reversed(held))

    def clean_up(self) -> list[tuple[str, str, str | None]]:
        """Release everything outstanding; returns (kind, id, error or None) for each.
        When all is released the journal starts afresh, so it never grows without bound."""
        done: list[tuple[str, str, str | None]] = []
        for kind, ident in self.outstanding():
            try:
                _RELEASERS[kind](ident)
            except Exception as exc:  # report and go on: one stuck resource must not hide the rest
                done.append((kind, ident, str(exc)))
                continue
            self._append("release", kind, ident)
            done.append((kind, ident, None))
        if not any(error for _, _, error in done):
            self.path.unlink(missing_ok=True)
        return done
