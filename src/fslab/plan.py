"""The order of runs: randomised blocks, each holding every cell (still in play) once.

Interleaving spreads the machine's drift over all cells instead of loading it onto the last
ones; the seed makes the order reproducible and is recorded with the study run. Warm-up
blocks come first (stored, never counted). With a target precision, more blocks follow, each
holding only the cells whose interval is still too wide, until all are narrow enough or the
run limit or time budget is reached.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from fslab.analysis import primary_metrics
from fslab.stats import summarize
from fslab.study import Cell

Samples = dict[tuple[str, str], dict[str, list[float]]]  # (workload, target) → metric → values


@dataclass(frozen=True)
class PlannedRun:
    block: int  # 1-based, over the whole study run
    position: int  # 1-based place within the block
    cell: Cell
    repetition: int  # this cell's run number, counted apart for warm-up and measured runs
    warmup: bool = False


@dataclass(frozen=True)
class Repetitions:
    """How many runs: exactly `runs` per cell, or (with `target_ci`) `runs` first, then more."""

    runs: int
    warmup: int = 0
    target_ci: float | None = None  # wanted 95 % half-width, relative to the mean (0.03 = ±3 %)
    max_runs: int = 30
    time_budget: float | None = None  # seconds for the whole study run

    def describe(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class CellProgress:
    runs: int = 0
    half_width: float | None = None  # the widest relative half-width over the cell's primary metrics
    status: str = "running"  # converged, max runs, time budget, no successful run, fixed


@dataclass
class Planner:
    cells: list[Cell]
    repetitions: Repetitions
    seed: int
    block: int = 0
    handed_out: int = 0
    progress: dict[tuple[str, str], CellProgress] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._counts: dict[tuple[tuple[str, str], bool], int] = {}
        self._warmups = self._measured = 0
        self.progress = {c.key: CellProgress() for c in self.cells}

    def next_block(self, samples: Samples, elapsed: float = 0.0, seconds_per_run: float = 0.0) -> list[PlannedRun]:
        """The next block to run, given the samples so far; empty when the study run is done."""
        if self._warmups < self.repetitions.warmup:
            self._warmups += 1
            return self._block(self.cells, warmup=True)
        if self._measured < self.repetitions.runs:
            self._measured += 1
            return self._block(self.cells)
        self._update(samples)
        if self.repetitions.target_ci is None:
            return []
        wanting = [c for c in self.cells if self.progress[c.key].status == "running"]
        budget = self.repetitions.time_budget
        if wanting and budget is not None and elapsed + len(wanting) * seconds_per_run > budget:
            for cell in wanting:
                self.progress[cell.key].status = "time budget"
            return []
        return self._block(wanting) if wanting else []

    def _update(self, samples: Samples) -> None:
        reps = self.repetitions
        for cell in self.cells:
            state = self.progress[cell.key]
            metrics = samples.get(cell.key, {})
            widths = [summarize(metrics[m]).relative_half_width for m in primary_metrics(metrics)]
            state.runs = max((len(metrics[m]) for m in primary_metrics(metrics)), default=0)
            state.half_width = None if not widths or None in widths else max(widths)
            if state.status != "running":
                continue
            if reps.target_ci is None:
                state.status = "fixed"
            elif not widths:
                state.status = "no successful run"
            elif state.half_width is not None and state.half_width <= reps.target_ci:
                state.status = "converged"
            elif self._counts.get((cell.key, False), 0) >= reps.max_runs:
                state.status = "max runs"

    def outcome(self) -> dict:
        """Per cell ("target · workload"): runs, widest relative half-width, and how it ended."""
        return {f"{t} · {w}": {"runs": p.runs, "half_width": p.half_width, "status": p.status} for (w, t), p in self.progress.items()}

    def _block(self, cells: list[Cell], warmup: bool = False) -> list[PlannedRun]:
        self.block += 1
        order = list(cells)
        self._rng.shuffle(order)
        runs = []
        for position, cell in enumerate(order, start=1):
            count = self._counts[(cell.key, warmup)] = self._counts.get((cell.key, warmup), 0) + 1
            runs.append(PlannedRun(self.block, position, cell, count, warmup))
        self.handed_out += len(runs)
        return runs


def new_seed() -> int:
    return random.SystemRandom().randrange(2**31)
