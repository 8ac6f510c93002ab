"""What fslab holds on the machine, written down before it is taken, with what proves it.

Every resource (image, loop device, mount, pool, array, mapping, daemon, process) is recorded
in the work directory's journal before it is made, and the proof of its identity (core/
identity.py) as soon as it exists, so a run killed at any point can be undone by `fslab
cleanup`. Each kind has one release function, registered by the module that makes it; normal
teardown and clean-up both call it. A release function acts only when the proof still matches
what it finds, and raises `Refused` otherwise: the journal is untrusted input too, so a planted
or stale entry is left alone and reported, never acted on.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fslab.core.errors import Refused
from fslab.core.identity import open_own
from fslab.core.interruption import releasing
from fslab.core.registry import Registry


@dataclass(frozen=True)
class Entry:
    kind: str
    ident: str
    proof: dict = field(default_factory=dict)  # identity, as recorded when made


class Home(Protocol):
    """What a journal needs of the work directory it lives in: where it is, and a pass releasing
    several entries; and what the kinds' makers ask of it through their journal (a directory of
    its own, the devices it has written). workdir.Workdir makes its journal and reads it, so it is
    named here, not imported."""

    @property
    def root(self) -> Path: ...

    def one_pass(self) -> AbstractContextManager[None]: ...

    @property
    def images(self) -> Path: ...

    @property
    def mounts(self) -> Path: ...

    def subdirectory(self, path: Path) -> Path: ...

    def written(self) -> dict[str, list[list[str]]]: ...

    def record_written(self, identity: str, signatures: list[list[str]]) -> None: ...


# A kind's release function: given the entry and the journal's work directory (its Home: a
# workdir.Workdir, whose images, mounts and owned() the function checks the proof against). It may
# return what it did, for `fslab cleanup` to say (a host setting: the value it restored).
Releaser = Callable[[Entry, Any], str | None]

# Each kind fslab journals → the module that makes it, which registers the kind's release function
# (@releaser) as it is imported: imported when an entry of that kind is first released or read,
# so every kind fslab writes is known whichever command reads a journal (`fslab cleanup` imports
# none of them itself) and only the kinds a journal holds are imported. A test checks that every
# kind registered is here. (A plugin's kinds are its own: fslab.core.registry.)
MAKERS = {
    "process": "fslab.core.system", "scratch": "fslab.core.scratch", "cgroup": "fslab.core.cgroups",
    "mount": "fslab.core.mounting", "zpool": "fslab.filesystems.zfs",
    "zfs-daemon": "fslab.filesystems.zfs_engine", "arc-max": "fslab.filesystems.zfs_engine",
    "device": "fslab.devices.named", "md": "fslab.devices.layers.md", "luks": "fslab.devices.layers.luks",
    "lvm": "fslab.devices.layers.lvm", "image": "fslab.devices.loop", "loop": "fslab.devices.loop",
    "zram": "fslab.devices.zram", "host-setting": "fslab.lab.hygiene", "lab-boot": "fslab.lab.vm",
}  # fmt: skip


@dataclass(frozen=True)
class Releasing:
    """How resources of one kind are released, as the registry holds it."""

    name: str  # the kind
    release: Releaser


RELEASERS: Registry[Releasing] = Registry("journalled kind", MAKERS)


def releaser(kind: str) -> Callable[[Releaser], Releaser]:
    """Register the function that releases resources of one kind (idempotent; Refused when the
    proof does not match what is there)."""

    def register(fn: Releaser) -> Releaser:
        RELEASERS.add(Releasing(kind, fn), own=fn.__module__.startswith("fslab."))  # a plugin's, too
        return fn

    return register


@dataclass(frozen=True)
class Outcome:
    """What clean-up did with one entry: released, left alone (with why), or failed (with why)."""

    kind: str
    ident: str
    status: str  # "released", "left alone", "failed"
    detail: str = ""


class Held:
    """A resource being made: `prove` records its identity once it exists."""

    def __init__(self, journal: Journal, kind: str, ident: str, proof: dict):
        self.journal, self.kind, self.ident, self.proof = journal, kind, ident, dict(proof)

    def prove(self, **proof: int | str) -> None:
        self.proof |= proof
        self.journal._append("proof", self.kind, self.ident, proof)


_EVENTS = {"acquire", "proof", "release", "disowned"}
# An id or a proof's text: a path (any byte but NUL: a work directory's path may hold a tab or a
# newline), or a name. Control characters are escaped wherever fslab shows one.
_PLAIN = re.compile(r"[^\x00]{1,4096}")


class Journal:
    def __init__(self, workdir: Home):
        self.workdir = workdir
        self.path = workdir.root / "journal.jsonl"

    def _append(self, event: str, kind: str, ident: str, proof: dict | None = None) -> None:
        entry = {"event": event, "kind": kind, "id": ident, "pid": os.getpid(), "time": time.time()}
        if proof:
            entry["proof"] = proof
        fd = open_own(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, (json.dumps(entry) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    @contextmanager
    def holding(self, kind: str, ident: str, *, release_unproven: bool = False, **proof: int | str) -> Iterator[Held]:
        """Record the resource, let the caller make it (and prove it) and use it; release it
        however the block ends. `proof` given here is identity known before it is made. Nothing
        proven means nothing made, so nothing is released — unless `release_unproven`: a pool,
        array or mapping is known by its name alone (one fslab gives, scoped to this work
        directory), and its releaser checks that name before it acts."""
        held = Held(self, kind, ident, proof)
        acquired = failed = False
        try:
            # A signal as the entry is written is acted on once it is: inside this try, so that
            # the entry is closed below — else the next fslab finds it "left by an interrupted fslab".
            with releasing():
                self._append("acquire", kind, ident, proof)
                acquired = True
            yield held
        except BaseException:
            failed = True
            raise
        finally:
            if acquired:
                with releasing():
                    try:
                        if held.proof or release_unproven:
                            RELEASERS[kind].release(Entry(kind, ident, held.proof), self.workdir)
                    except Refused:
                        if not failed:
                            raise
                        # making it failed, and what is there is not what fslab made: left alone,
                        # and the error that stopped the making says what happened
                    self._append("release", kind, ident)

    def read(self) -> tuple[list[Entry], list[str]]:
        """Resources acquired and never released, newest first (the order to release them in),
        and the lines that are not entries fslab wrote (reported, never acted on)."""
        try:
            fd = open_own(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return [], []
        with os.fdopen(fd, errors="replace") as journal:
            lines = journal.read().splitlines()
        held: dict[tuple[str, str], dict] = {}
        problems = []
        for number, line in enumerate(lines, start=1):
            entry = _parse(line, RELEASERS)
            if entry is None:
                problems.append(f"{self.path.name} line {number}")
                continue
            event, key, proof = entry
            if event == "acquire":
                held[key] = dict(proof)
            elif event == "proof" and key in held:
                held[key] |= proof
            elif event in ("release", "disowned"):
                held.pop(key, None)
        return [Entry(kind, ident, proof) for (kind, ident), proof in reversed(held.items())], problems

    def outstanding(self) -> list[tuple[str, str]]:
        return [(e.kind, e.ident) for e in self.read()[0]]

    def clean_up(self) -> list[Outcome]:
        """Release everything outstanding whose proof still holds; leave the rest alone and say
        so. When nothing is outstanding any more the journal starts afresh."""
        entries, problems = self.read()
        done = [Outcome("journal", line, "left alone", "not an entry fslab writes") for line in problems]
        with self.workdir.one_pass():
            done += self._release(entries)
        if not any(o.status == "failed" for o in done):  # nothing outstanding: the journal starts afresh
            if problems:  # but lines fslab did not write are kept (nothing is lost), and read no more
                done.append(Outcome("journal", str(self.path), "left alone", f"set aside as {self.set_aside().name}"))
            else:
                self.forget()
        return done

    def _release(self, entries: list[Entry]) -> list[Outcome]:
        done = []
        for entry in entries:
            try:
                said = RELEASERS[entry.kind].release(entry, self.workdir)
            except Refused as exc:
                self._append("disowned", entry.kind, entry.ident)
                done.append(Outcome(entry.kind, entry.ident, "left alone", str(exc)))
                continue
            except Exception as exc:  # report and go on: one stuck resource must not hide the rest
                done.append(Outcome(entry.kind, entry.ident, "failed", str(exc) or type(exc).__name__))
                continue
            self._append("release", entry.kind, entry.ident)
            done.append(Outcome(entry.kind, entry.ident, "released", said or ""))
        return done

    def set_aside(self) -> Path:
        aside = self.path.with_name(f"journal-set-aside-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.jsonl")
        os.rename(self.path, aside)  # renames the link itself, were it one (read() refused that)
        return aside

    def forget(self) -> None:
        """Delete the journal file, which fslab made (lstat: never through a symlink)."""
        try:
            if os.path.isfile(self.path) and not os.path.islink(self.path):
                self.path.unlink()
        except FileNotFoundError:
            pass


def _parse(line: str, kinds: Registry[Releasing]) -> tuple[str, tuple[str, str], dict] | None:
    """(event, (kind, id), proof) of a well-formed line of one of `kinds`, or None."""
    try:
        raw = json.loads(line)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    event, kind, ident, proof = raw.get("event"), raw.get("kind"), raw.get("id"), raw.get("proof", {})
    if event not in _EVENTS or not isinstance(kind, str) or kind not in kinds:  # (a Registry holds names only)
        return None
    if not isinstance(ident, str) or not _PLAIN.fullmatch(ident):
        return None
    if not isinstance(proof, dict) or not all(
        isinstance(k, str) and (isinstance(v, int) or (isinstance(v, str) and _PLAIN.fullmatch(v)))
        for k, v in proof.items()
    ):
        return None
    return event, (kind, ident), proof
