"""One check of what this machine offers fslab (a tool, a kernel feature), shared by `fslab
doctor` and by the modules that know what they need (each filesystem names its own)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""  # how to get it, when not ok
    required: bool = True  # a failed optional check is a note, not a blocker


@dataclass(frozen=True)
class Unsupported:
    """A target this machine cannot run, and what it lacks (a kernel feature, a tool, memory):
    found by `fslab doctor`'s checks, stored with the study run, read by its summary."""

    target: str
    why: str

    def __str__(self) -> str:
        return f"target '{self.target}': {self.why}"


def by_target(found: Iterable[Unsupported]) -> list[Unsupported]:
    """One Unsupported per target, in the order met, what it lacks joined (each reason once): a
    target that needs md, LUKS and LVM on a machine without them is one target skipped, not three."""
    reasons: dict[str, dict[str, None]] = {}
    for u in found:
        reasons.setdefault(u.target, {})[u.why] = None
    return [Unsupported(target, "; ".join(why)) for target, why in reasons.items()]


def tool_check(name: str, argv: tuple[str, ...], package: str, required: bool = True) -> Check:
    from fslab.core.system import tool_version  # subprocess and the journal: not for a summary's Unsupported

    version = tool_version(argv)
    return Check(name, version is not None, version or "not installed", f"apt-get install {package}", required)


def kernel_filesystems() -> set[str]:
    try:
        return {line.split()[-1] for line in Path("/proc/filesystems").read_text().splitlines() if line.strip()}
    except OSError:
        return set()
