"""The order of runs: randomised blocks, each holding every cell (still in play) once.

Interleaving spreads the machine's drift over all cells instead of loading it onto the last
ones; the seed makes the order reproducible and is recorded with the study run. Warm-up
blocks come first (stored, never counted). With a target precision, more blocks follow, each
holding only the cells whose interval is still too wide, until all are narrow enough or the
run limit or time budget is reached.
"""

from __future__ import annotations

import math
import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from fslab.model import Cell, Roles
from fslab.model.ceiling import copies_per_block
from fslab.statistics.analysis import Samples, check_override, compared_with, roles_of
from fslab.statistics.stats import compare, projected_half_width, summarize

if TYPE_CHECKING:
    from fslab.model.records import StoredRun

# A change smaller than this fraction of the interval max_runs would give stays undetected:
# a cell showing no more is not run further (bench/adaptive.py measures the effect).
HOPELESS = 3


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
    threshold: float = 0.03  # the practical threshold of the verdicts: a cell beyond it is decided

    def describe(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class CellProgress:
    runs: int = 0
    half_width: float | None = None  # the widest relative half-width over the cell's primary metrics
    status: str = "running"  # converged, decided, max runs, time budget, no successful run, fixed, skipped


@dataclass
class Planner:
    """Hands out blocks of runs (a ceiling's cells, model/ceiling.py, more than once a block where the
    study runs fewer than CEILING_RUNS).

    Adaptive mode stops adding runs to a cell when its interval is within ±target_ci
    ("converged"), or when its comparison with its baseline target is already beyond doubt: the
    whole 95 % interval of the ratio lies past the practical threshold ("decided"; more runs
    could not change the verdict). A cell others are compared with goes on until it has
    converged or every cell compared with it has stopped (and its own comparison is decided).
    """

    cells: list[Cell]
    repetitions: Repetitions
    seed: int
    baseline: str | None = None  # the target all others are compared with (default: each target's own, else the first)
    block: int = field(default=0, init=False)  # blocks handed out so far
    handed_out: int = field(default=0, init=False)  # runs handed out so far
    progress: dict[tuple[str, str], CellProgress] = field(init=False)

    def __post_init__(self) -> None:
        own = dict.fromkeys(c.target.name for c in self.cells if not c.target.ceiling)  # a ceiling is nobody's baseline
        check_override(self.baseline, list(own))
        self._rng = random.Random(self.seed)
        self._counts: dict[tuple[tuple[str, str], bool], int] = {}
        self._warmups = self._measured = 0
        self.progress = {c.key: CellProgress() for c in self.cells}
        # Who is compared with whom, fixed by the cells and the baseline: worked out once.
        self._bases: dict[tuple[str, str], Cell | None] = {c.key: self._find_base(c) for c in self.cells}
        self._compared_with: dict[tuple[str, str], list[Cell]] = {c.key: [] for c in self.cells}
        for c in self.cells:
            base = self._bases[c.key]
            if base is not None:
                self._compared_with[base.key].append(c)

    def next_block(
        self, samples: Samples, elapsed: float = 0.0, seconds_per_run: float = 0.0, roles: Roles | None = None
    ) -> list[PlannedRun]:
        """The next block to run, given the samples so far and which of their metrics are primary
        (`roles`: as the runs reported them; default: as declared); empty when the study run is done."""
        if self._warmups < self.repetitions.warmup:
            self._warmups += 1
            return self._block(self.cells, warmup=True)
        if self._measured < self.repetitions.runs:
            self._measured += 1
            copies = copies_per_block(self.repetitions.runs)  # a ceiling's cells run at least CEILING_RUNS times
            return self._block([c for c in self.cells for _ in range(copies if c.target.ceiling else 1)])
        self._update(samples, roles_of(samples, roles))
        if self.repetitions.target_ci is None:
            return []
        wanting = [c for c in self.cells if self.progress[c.key].status == "running"]
        budget = self.repetitions.time_budget
        if wanting and budget is not None and elapsed + len(wanting) * seconds_per_run > budget:
            for cell in wanting:
                self.progress[cell.key].status = "time budget"
            return []
        return self._block(wanting) if wanting else []

    def _update(self, samples: Samples, roles: Roles) -> None:
        reps = self.repetitions
        for cell in self.cells:
            state = self.progress[cell.key]
            metrics = samples.get(cell.key, {})
            primary = roles.primary_in(cell.workload.name, metrics)
            widths = [summarize(metrics[m]).relative_half_width for m in primary]
            state.runs = max((len(metrics[m]) for m in primary), default=0)
            known = [w for w in widths if w is not None]
            state.half_width = max(known) if widths and len(known) == len(widths) else None
            if state.status != "running":
                continue
            if reps.target_ci is None:
                state.status = "fixed"
            elif not widths:
                state.status = "no successful run"
            elif state.half_width is not None and state.half_width <= reps.target_ci:
                state.status = "converged"
            elif self._decided(cell, samples, roles) and not self._awaited(cell):
                state.status = "decided"
            elif self._counts.get((cell.key, False), 0) >= reps.max_runs:
                state.status = "max runs"
        for cell in self.cells:  # a baseline nobody waits for is done
            state = self.progress[cell.key]
            waiting = self._compared_with[cell.key]
            done = (self.base_of(cell) is None or self._decided(cell, samples, roles)) and not self._awaited(cell)
            if state.status == "running" and waiting and done:
                state.status = "decided"

    def drop(self, target: str) -> None:
        """Run no more of a target's cells beyond the fixed blocks (whose order stays as planned:
        the runner passes over its runs there): it is skipped (runner: a systematic failure)."""
        for cell in self.cells:
            if cell.target.name == target:
                self.progress[cell.key].status = "skipped"

    def base_of(self, cell: Cell) -> Cell | None:
        """The cell `cell` is compared with (analysis.compared_with, as the summary's); None for a
        cell compared with none."""
        return self._bases[cell.key]

    def _find_base(self, cell: Cell) -> Cell | None:
        same = {c.target.name: c for c in self.cells if c.workload.name == cell.workload.name}
        name = compared_with(cell.target.name, cell.target.baseline, list(same), self.baseline)
        return None if name is None else same[name]

    def _awaited(self, cell: Cell) -> bool:
        """Whether a cell compared with this one is still running."""
        return any(self.progress[c.key].status == "running" for c in self._compared_with[cell.key])

    def _decided(self, cell: Cell, samples: Samples, roles: Roles) -> bool:
        """More runs, up to max_runs, would not change the verdict of any primary metric: its
        ratio to its baseline lies, interval and all, past the threshold; or the change seen so
        far is under a third of the interval max_runs would give, so it would stay undetected."""
        base = self.base_of(cell)
        if base is None:
            return False
        mine, theirs = samples.get(cell.key, {}), samples.get(base.key, {})
        metrics = [
            m for m in roles.primary_in(cell.workload.name, mine) if len(theirs.get(m, [])) >= 2 and len(mine[m]) >= 2
        ]
        if not metrics:
            return False
        limit, most = self.repetitions.threshold, self.repetitions.max_runs
        for metric in metrics:
            c = compare(theirs[metric], mine[metric])  # the direction does not matter: both bounds are judged
            # (two runs a side or more: there is an interval)
            beyond = c.ci_low is not None and c.ci_high is not None and (c.ci_low > 1 + limit or c.ci_high < 1 - limit)
            hopeless = abs(math.log(c.ratio)) < projected_half_width([theirs[metric], mine[metric]], most) / HOPELESS
            if not (beyond or hopeless):
                return False
        return True

    def outcome(self) -> dict:
        """Per cell ("target · workload"): runs, widest relative half-width, and how it ended."""
        return {
            f"{t} · {w}": {"runs": p.runs, "half_width": p.half_width, "status": p.status}
            for (w, t), p in self.progress.items()
        }

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


class BlockWithdrawn(Exception):
    """The block under way was handed to another host meanwhile (a fleet's, fleet/lease.py): the
    run just measured was kept aside, and the rest of the block is that host's."""


class TakenBlocks:
    """The blocks of a fixed plan, each run only when `take` hands out its number (a spread study
    run: the fleet's queue hands each block to whichever of its hosts asks first); the blocks
    themselves are the planner's, so every host plans alike. None from `take`: no block left."""

    def __init__(self, planner: Planner, take: Callable[[], int | None]):
        if planner.repetitions.target_ci is not None:
            raise ValueError(
                "an adaptive plan's blocks depend on the runs before them: it cannot be handed out by block"
            )
        self.blocks: list[list[PlannedRun]] = []
        while block := planner.next_block({}):
            self.blocks.append(block)
        self.take = take
        self.handed_out = 0  # the runs of the plan up to the block handed out last (its runs are numbered so)

    def next_block(
        self, samples: Samples, elapsed: float = 0.0, seconds_per_run: float = 0.0, roles: Roles | None = None
    ) -> list[PlannedRun]:
        number = self.take()
        if number is None:
            return []
        block = self.blocks[number - 1]
        self.handed_out = sum(len(b) for b in self.blocks[:number])
        return block

    @property
    def count(self) -> int:
        return len(self.blocks)

    def drop(self, target: str) -> None:
        """Nothing to change: a fixed plan's blocks are run as planned, a skipped target's runs passed over."""

    def outcome(self) -> dict:
        """Nothing of a share's own: its runs are a fixed plan's, whichever host ran them."""
        return {}


def new_seed() -> int:
    return random.SystemRandom().randrange(2**31)


class Tally:
    """What the planner decides from: the samples of the measured runs and their metrics' roles,
    the time spent, the seconds per run. A resumed study run counts its stored runs as the first
    session did."""

    def __init__(self, study_started: datetime | None = None):
        self.samples: Samples = defaultdict(lambda: defaultdict(list))
        self.roles = Roles()
        self.durations: list[float] = []
        self.study_started = study_started
        self.before, self.since = 0.0, time.monotonic()  # seconds spent by earlier sessions; this one's start

    def add(
        self,
        planned: PlannedRun,
        ok: bool,
        metrics: dict[str, float],
        started: datetime,
        finished: datetime,
        roles: Roles = Roles(),
    ) -> None:
        self.durations.append((finished - started).total_seconds())
        if ok and not planned.warmup:
            for name, value in metrics.items():
                self.samples[planned.cell.key][name].append(value)
            self.roles |= roles

    def restore(self, planned: PlannedRun, stored: StoredRun) -> None:
        """A run stored by an earlier session: the clock reads what it read when that run ended."""
        self.add(planned, stored.ok, stored.metrics, stored.started_at, stored.finished_at, stored.roles)
        if self.study_started is not None:
            self.before, self.since = (
                max(self.before, (stored.finished_at - self.study_started).total_seconds()),
                time.monotonic(),
            )

    def elapsed(self) -> float:
        return self.before + time.monotonic() - self.since

    def seconds_per_run(self) -> float:
        return sum(self.durations) / len(self.durations) if self.durations else 0.0
