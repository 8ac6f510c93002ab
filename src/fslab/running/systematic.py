"""Failures with one cause: a run's failure has a signature — the executable that failed, its exit
status and the last line it wrote to stderr, its paths and numbers normalised (for a failure no
command caused: its error's last line, normalised alike). `FailureWatch` follows the runs of a
study run as they end: `LIMIT` failures in a row with one signature across two cells or more
stop the study run when they span two targets or more (the cause is the machine's or the study's,
not a target's: every run after them would fail alike), or skip their target when they span that
one alone — as do `LIMIT` failures in a row of one target's own runs, across two of its workloads
or more (its other runs interleaved with other targets' that went well). Pure: data in, data out.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import PurePath

from fslab.model import FAILED_ALIKE

LIMIT = 3

_PATH = re.compile(r"(?<![\w.])(?:\.{0,2}/[^\s:'\"`,;()\[\]]*)+")
# Not within a word: a name keeps its digits whole (ext4, loop12), a number after a digit is its rest.
_NUMBER = re.compile(r"(?<!\w)[-+]?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class Signature:
    executable: str | None  # its name alone (a path says where it was found, not what it is)
    exit_status: int | None
    last_line: str  # normalised: each path "PATH", each number "N"

    def __str__(self) -> str:
        return f"`{self.executable}` exited {self.exit_status}: {self.last_line}" if self.executable else self.last_line


def normalised(line: str) -> str:
    """A line with what changes from run to run (paths, device and job numbers, sizes, times) made alike."""
    return " ".join(_NUMBER.sub("N", _PATH.sub("PATH", line)).split())


def missing_tool(argv: list[str], exit_status: int, stderr: str) -> str | None:
    """The tool a command's failure says is missing (system.run's "TOOL: command not found", 127)."""
    tool = PurePath(argv[0]).name if argv else ""
    return tool if tool and exit_status == 127 and stderr.rstrip().endswith(f"{argv[0]}: command not found") else None


def signature_of(
    error: str, argv: list[str] | None, exit_status: int | None, stderr_tail: str | None, missing: str | None = None
) -> tuple[Signature, str]:
    """A failed run's signature, from what its RunFailure keeps (the command, its exit status and
    stderr) and its one-line error; and the same as it was said (its paths and numbers kept). A
    tool found `missing` is signed as its command's "not found" is, however fslab found it
    missing (fio's option table: no fio on PATH): one cause, one signature."""
    if missing and not argv:  # found missing before it was run: said as a shell would say it
        return Signature(missing, 127, f"{missing}: command not found"), f"{missing}: command not found"
    said = [line for line in (stderr_tail or "").splitlines() if line.strip()] if argv else []
    last = " ".join((said[-1] if said else (error.strip().splitlines() or [""])[-1]).split())
    executable, status = (PurePath(argv[0]).name, exit_status) if argv else (None, None)
    if missing:
        return Signature(missing, 127, f"{missing}: command not found"), str(Signature(executable, status, last))
    return Signature(executable, status, normalised(last)), str(Signature(executable, status, last))


@dataclass(frozen=True)
class Stop:
    """The study run stops: `runs` (what observe was given for each) failed by this cause."""

    signature: Signature
    example: str  # the last of them as it was said: a real path and number read better than PATH and N
    count: int
    targets: tuple[str, ...]
    runs: tuple[Hashable, ...]

    @property
    def cause(self) -> str:
        targets = f"{len(self.targets)} targets ({', '.join(self.targets)})"
        return f"{self.count} runs in a row failed alike on {targets}: {self.example}"


@dataclass(frozen=True)
class Skip:
    """One target is skipped: its runs fail alike, the others' do not."""

    target: str
    signature: Signature
    example: str
    count: int

    @property
    def why(self) -> str:
        return f"{FAILED_ALIKE} ({self.count} in a row, then skipped): {self.example}"


@dataclass
class _Streak:
    signature: Signature | None = None
    runs: list[tuple[Hashable, str, str]] = field(default_factory=list)  # (run, target, workload)

    def extend(self, signature: Signature | None, run: Hashable, target: str, workload: str) -> None:
        if signature is None or signature != self.signature:
            self.signature, self.runs = signature, []
        if signature is not None:
            self.runs.append((run, target, workload))

    def cells(self) -> int:
        return len({(t, w) for _, t, w in self.runs})

    def targets(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t for _, t, _ in self.runs))


@dataclass
class FailureWatch:
    """Told of each run as it ends (its signature, None when it went well); says when to stop or skip."""

    limit: int = LIMIT
    _all: _Streak = field(default_factory=_Streak)
    _of_target: dict[str, _Streak] = field(default_factory=dict)
    _failed: dict[Signature, list[Hashable]] = field(default_factory=dict)  # every failure so far, by signature
    skipped: dict[str, Signature] = field(default_factory=dict)  # the targets skipped, and for what

    def observe(
        self, run: Hashable, target: str, workload: str, signature: Signature | None, example: str = ""
    ) -> Stop | Skip | None:
        if signature is not None:
            self._failed.setdefault(signature, []).append(run)
        self._all.extend(signature, run, target, workload)
        mine = self._of_target.setdefault(target, _Streak())
        mine.extend(signature, run, target, workload)
        said = example or (str(signature) if signature else "")
        if len(self._all.runs) >= self.limit and self._all.cells() >= 2:
            targets = self._all.targets()
            if len(targets) >= 2:
                assert signature is not None
                return Stop(signature, said, len(self._all.runs), targets, tuple(self._failed[signature]))
            if target not in self.skipped:
                return self._skip(target, signature, said, len(self._all.runs))
        if len(mine.runs) >= self.limit and mine.cells() >= 2 and target not in self.skipped:
            return self._skip(target, signature, said, len(mine.runs))
        return None

    def _skip(self, target: str, signature: Signature | None, example: str, count: int) -> Skip:
        assert signature is not None
        self.skipped[target] = signature
        return Skip(target, signature, example, count)

    def skipped_for(self, signature: Signature) -> list[str]:
        """The targets skipped for what turned out to stop the study run: not theirs to answer for."""
        return [t for t, s in self.skipped.items() if s == signature]
