"""A scenario's phases (scenarios/kind.py runs them), and the registry of the built-in scenarios,
whose phases fslab writes: one module each in scenarios/builtin/, each joining BUILTIN_SCENARIOS
itself; the registry imports every module there the first time it is read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fslab.core.registry import Registry
from fslab.workloads.dd import DdOptions
from fslab.workloads.sysbench import SysbenchOptions


@dataclass(frozen=True)
class Phase:
    """One step of a scenario, every value checked."""

    name: str
    action: str  # "fio", a tool's name (kind.PHASE_TOOLS), or "sync", "drop_caches", "sleep"
    measured: bool = True
    options: dict[str, str] = field(default_factory=dict)  # fio's, checked (action "fio")
    seconds: float = 0.0  # action "sleep"
    snapshot_every: float | None = None  # seconds between snapshots while the phase runs
    extents: bool = False  # count the file's extents after the phase
    tool: SysbenchOptions | DdOptions | None = None  # what a tool phase runs (action "sysbench", "dd")

    def spec(self) -> dict[str, Any]:
        tool = {"tool": self.tool.spec()} if self.tool else {}  # absent from other phases: their specs as before tools
        return {"name": self.name, "action": self.action, "measured": self.measured, "options": self.options,
                "seconds": self.seconds, "snapshot_every": self.snapshot_every,
                "extents": self.extents} | tool  # fmt: skip


@dataclass(frozen=True)
class BuiltinScenario:
    """A scenario whose phases fslab writes (`scenario = NAME`), as the registry holds it."""

    name: str
    # (its timed phase's runtime, the study's seconds between snapshots or None) → its phases
    phases: Callable[[float, float | None], tuple[Phase, ...]]


BUILTIN_SCENARIOS: Registry[BuiltinScenario] = Registry("scenario", package="fslab.scenarios.builtin")
