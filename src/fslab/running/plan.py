"""The order of runs: randomised blocks, each holding every cell (still in play) once.

Interleaving spreads the machine's drift over all cells instead of loading it onto the last
ones; the seed makes the order reproducible and is recorded with the study run. Warm-up
blocks come first (stored, never counted). An adaptive study run (--target-ci, --decide) adds
more blocks, each holding only the cells still wanted, until none is or the run limit or time
budget is reached. It judges its comparisons after its first blocks and after each one added —
its *looks*, as many as the plan allows (analysis.looks_of) — with the very analysis the summary
makes of it, every interval widened over those looks, so that its error holds whichever look it
stopped at (docs/statistics.md, "How many runs").
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from fslab.model import Cell, Roles, unqualified
from fslab.model.ceiling import copies_per_block
from fslab.statistics import analysis
from fslab.statistics.analysis import Analysis, Samples, analyse, check_override, looks_of, roles_of
from fslab.statistics.stats import EQUIVALENT, Comparison, summarize

if TYPE_CHECKING:
    from fslab.model.records import StoredRun

Blocks = dict[tuple[str, str], dict[str, list[int]]]  # as Samples: the block each value ran in


@dataclass(frozen=True)
class PlannedRun:
    block: int  # 1-based, over the whole study run
    position: int  # 1-based place within the block
    cell: Cell
    repetition: int  # this cell's run number, counted apart for warm-up and measured runs
    warmup: bool = False


@dataclass(frozen=True)
class Repetitions:
    """How many runs: exactly `runs` per cell, or (with `target_ci` or `decide`) `runs` first, then more."""

    runs: int
    warmup: int = 0
    target_ci: float | None = None  # wanted 95 % half-width, relative to the mean (0.03 = ±3 %)
    max_runs: int = 30
    time_budget: float | None = None  # seconds for the whole study run
    threshold: float = 0.03  # the practical threshold of the verdicts, and the margin of "equivalent"
    decide: bool = False  # add blocks until every main comparison is decided (or cannot be by max_runs)

    @property
    def adaptive(self) -> bool:
        return self.target_ci is not None or self.decide

    @property
    def looks(self) -> int:
        """How many times the plan may stop adding runs (analysis.looks_of, as the summary reads it)."""
        return looks_of(self.describe())

    def describe(self) -> dict:
        """As stored with the study run (its settings): `decide` only when set, as runs before it were stored."""
        return {k: v for k, v in self.__dict__.items() if v is not None and (k != "decide" or v)}


@dataclass
class CellProgress:
    runs: int = 0
    half_width: float | None = None  # the widest relative half-width over the cell's primary metrics
    # converged, decided, equivalent, futile, max runs, time budget, no successful run, fixed, skipped
    status: str = "running"
    # futile: the runs per cell that would decide its comparisons at the spread seen (None: more than RUNS_NEEDED_LIMIT)
    would_decide: int | None = None


@dataclass(frozen=True)
class MainComparison:
    """A target against its baseline on a primary metric (Analysis.main_rows): what an adaptive plan decides."""

    workload: str
    metric: str
    baseline: tuple[str, str]  # its cells' keys
    other: tuple[str, str]


# How a main comparison closed: its verdict decided it ("decided", "equivalent"), or no run up to
# max_runs could (futile).
DECIDED, FUTILE = "decided", "futile"
NOTHING_TO_DECIDE = "no comparison"  # a cell in no main comparison (a ceiling's, a lone target's): its first runs


def futile(c: Comparison, most: int) -> bool:
    """Whether an undecided comparison cannot be decided by `most` runs per cell (blocks, when
    paired): at the spread seen and its ratio staying where it is, the interval at its level
    (the family's, over the plan's looks) would still span the threshold (Comparison.runs_to_decide);
    or it has a value of 0 on a side, so no ratio. Too few runs for a spread: not judged yet."""
    if c.decided:
        return False
    if c.zero_side is not None:
        return True
    if c.log_se is None or not c.log_se:
        return False
    needed = c.runs_to_decide
    return needed is None or needed > most


@dataclass
class Planner:
    """Hands out blocks of runs (a ceiling's cells, model/ceiling.py, more than once a block where the
    study runs fewer than CEILING_RUNS).

    An adaptive plan judges, after its first `runs` blocks and after each block it adds, every
    main comparison (each target against its baseline on its primary metrics) with the analysis
    the summary makes (`analysis`: the same family, the same looks), and closes one for good once
    its verdict is faster, slower or equivalent ("decided", "equivalent"), or once even max_runs
    could not decide it ("futile"). With --decide a cell runs on while a main comparison it is in
    is open (a baseline while any comparison with it is); with --target-ci alone, while its own
    interval is wider than ±target_ci ("converged" when not) and a comparison it is in is open.
    """

    cells: list[Cell]
    repetitions: Repetitions
    seed: int
    baseline: str | None = None  # the target all others are compared with (default: each target's own, else the first)
    block: int = field(default=0, init=False)  # blocks handed out so far
    handed_out: int = field(default=0, init=False)  # runs handed out so far
    progress: dict[tuple[str, str], CellProgress] = field(init=False)

    def __post_init__(self) -> None:
        judged = [c for c in self.cells if not c.target.ceiling]  # a ceiling is nobody's baseline, never judged
        own = dict.fromkeys(c.target.name for c in judged)
        check_override(self.baseline, list(own))
        self._rng = random.Random(self.seed)
        self._counts: dict[tuple[tuple[str, str], bool], int] = {}
        self._warmups = self._measured = 0
        self._added = 0  # blocks added after the first `runs`
        self.progress = {c.key: CellProgress() for c in self.cells}
        self._targets = list(own)
        self._workloads = list(dict.fromkeys(c.workload.name for c in self.cells))
        self._own_baselines = {c.target.name: c.target.baseline for c in judged if c.target.baseline is not None}
        self._kinds = {c.workload.name: c.workload.kind for c in self.cells}
        names = set(self._workloads)
        self._compare_with = {
            c.workload.name: c.workload.compare_with for c in self.cells if c.workload.compare_with in names
        }
        self.closed: dict[MainComparison, str] = {}  # a main comparison → how it closed (DECIDED, EQUIVALENT, FUTILE)
        self.would_decide: dict[MainComparison, int | None] = {}  # a futile one → runs_to_decide when it closed

    def next_block(
        self,
        samples: Samples,
        elapsed: float = 0.0,
        seconds_per_run: float = 0.0,
        roles: Roles | None = None,
        blocks: Blocks | None = None,
    ) -> list[PlannedRun]:
        """The next block to run, given the samples so far, which of their metrics are primary
        (`roles`: as the runs reported them; default: as declared) and the block each value ran in
        (`blocks`: what pairs comparisons within blocks, as the summary does); empty when the
        study run is done."""
        if self._warmups < self.repetitions.warmup:
            self._warmups += 1
            return self._block(self.cells, warmup=True)
        if self._measured < self.repetitions.runs:
            self._measured += 1
            copies = copies_per_block(self.repetitions.runs)  # a ceiling's cells run at least CEILING_RUNS times
            return self._block([c for c in self.cells for _ in range(copies if c.target.ceiling else 1)])
        looking = self._measured + self._added in analysis.look_schedule(
            self.repetitions.runs, self.repetitions.max_runs
        )
        self._update(samples, roles_of(samples, roles), blocks, looking)
        if not self.repetitions.adaptive:
            return []
        wanting = [c for c in self.cells if self.progress[c.key].status == "running"]
        budget = self.repetitions.time_budget
        if wanting and budget is not None and elapsed + len(wanting) * seconds_per_run > budget:
            for cell in wanting:
                self.progress[cell.key].status = "time budget"
            return []
        if not wanting:
            return []
        self._added += 1
        return self._block(wanting)

    def analysis(self, samples: Samples, roles: Roles, blocks: Blocks | None = None) -> Analysis:
        """The summary's analysis of these samples (report/summary.py's call): every pair of targets
        per workload and compared metric as one family, each target's baseline as the summary
        finds it, intervals widened over the plan's looks. Only what the summary learns after the
        runs (a cell whose figures cannot be real, left out there) it cannot know."""
        present = {m for metrics in samples.values() for m in metrics}
        return analyse(
            {k: v for k, v in samples.items() if v},
            {m: _higher_is_better(m) for m in present},
            self._targets,
            self._workloads,
            baselines=self._own_baselines,
            baseline=self.baseline,
            threshold=self.repetitions.threshold,
            roles=roles,
            kinds=self._kinds,
            compare_with=self._compare_with,
            blocks=blocks,
            looks=self.repetitions.looks,
        )

    def _update(self, samples: Samples, roles: Roles, blocks: Blocks | None, looking: bool = True) -> None:
        reps = self.repetitions
        for cell in self.cells:
            state = self.progress[cell.key]
            metrics = samples.get(cell.key, {})
            primary = roles.primary_in(cell.workload.name, metrics)
            widths = [summarize(metrics[m]).relative_half_width for m in primary]
            state.runs = max((len(metrics[m]) for m in primary), default=0)
            known = [w for w in widths if w is not None]
            state.half_width = max(known) if widths and len(known) == len(widths) else None
            if not reps.adaptive and state.status == "running":
                state.status = "fixed"
        if not reps.adaptive:
            return
        mains = self._judge(samples, roles, blocks) if looking else []  # between looks, what is open runs on unjudged
        involved: dict[tuple[str, str], list[MainComparison]] = defaultdict(list)
        for m in mains:
            involved[m.baseline].append(m)
            involved[m.other].append(m)
        for cell in self.cells:
            state = self.progress[cell.key]
            if state.status != "running":
                continue
            mine = involved[cell.key]
            still_open = [m for m in mine if m not in self.closed]
            converged = (
                state.half_width is not None and reps.target_ci is not None and state.half_width <= reps.target_ci
            )
            if not samples.get(cell.key) or not roles.primary_in(cell.workload.name, samples[cell.key]):
                state.status = "no successful run"
            elif not looking:  # a cell stops at a look only, where its intervals hold (or at max runs, a look too)
                continue
            elif reps.decide and not still_open and (reps.target_ci is None or converged):
                self._stopped(state, mine)
            elif not reps.decide and converged:
                state.status = "converged"
            elif not reps.decide and mine and not still_open:
                self._stopped(state, mine)
            elif self._counts.get((cell.key, False), 0) >= reps.max_runs:
                state.status = "max runs"

    def _stopped(self, state: CellProgress, mine: list[MainComparison]) -> None:
        """A cell whose main comparisons all closed: its status says how (none: nothing to decide)."""
        state.status = _closed_status([self.closed[m] for m in mine]) if mine else NOTHING_TO_DECIDE
        futile = [self.would_decide[m] for m in mine if self.closed[m] == FUTILE]
        if futile:
            state.would_decide = None if None in futile else max(n for n in futile if n is not None)

    def _judge(self, samples: Samples, roles: Roles, blocks: Blocks | None) -> list[MainComparison]:
        """The main comparisons as the summary's analysis has them (Analysis.main_rows), each open
        one judged there: decided, or futile at max_runs, it closes for good (later runs of its
        baseline for others change nothing)."""
        mains = []
        for row in self.analysis(samples, roles, blocks).main_rows():
            m = MainComparison(row.workload, row.metric, (row.workload, row.baseline), (row.workload, row.target))
            mains.append(m)
            c = row.comparison
            if m in self.closed:
                continue
            if c.decided:
                self.closed[m] = EQUIVALENT if c.verdict == EQUIVALENT else DECIDED
            elif futile(c, self.repetitions.max_runs):
                self.closed[m] = FUTILE
                self.would_decide[m] = c.runs_to_decide
        return mains

    def drop(self, target: str) -> None:
        """Run no more of a target's cells beyond the fixed blocks (whose order stays as planned:
        the runner passes over its runs there): it is skipped (runner: a systematic failure)."""
        for cell in self.cells:
            if cell.target.name == target:
                self.progress[cell.key].status = "skipped"

    def outcome(self) -> dict:
        """Per cell ("target · workload"): runs, widest relative half-width, and how it ended; a
        futile one also the runs that would have decided it (None: more than stats.RUNS_NEEDED_LIMIT)."""
        return {
            f"{t} · {w}": {"runs": p.runs, "half_width": p.half_width, "status": p.status}
            | ({"would_decide": p.would_decide} if p.status == FUTILE else {})
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


def _closed_status(how: list[str]) -> str:
    """A cell's status from how its main comparisons closed: futile if any could not be decided,
    equivalent if all were equivalent, else decided."""
    if FUTILE in how:
        return FUTILE
    return EQUIVALENT if all(h == EQUIVALENT for h in how) else DECIDED


def _higher_is_better(metric: str) -> bool:
    """A metric's direction as its kind declares it (the planner's samples come without it; it
    orders a verdict, faster or slower, and never changes whether a comparison is decided)."""
    from fslab.workloads import declared_metrics

    found = declared_metrics().get(unqualified(metric))
    return True if found is None else found.higher_is_better


class BlockWithdrawn(Exception):
    """The block under way was handed to another host meanwhile (a fleet's, fleet/lease.py): the
    run just measured was kept aside, and the rest of the block is that host's."""


class TakenBlocks:
    """The blocks of a fixed plan, each run only when `take` hands out its number (a spread study
    run: the fleet's queue hands each block to whichever of its hosts asks first); the blocks
    themselves are the planner's, so every host plans alike. None from `take`: no block left."""

    def __init__(self, planner: Planner, take: Callable[[], int | None]):
        if planner.repetitions.adaptive:
            raise ValueError(
                "an adaptive plan's blocks depend on the runs before them: it cannot be handed out by block"
            )
        self.blocks: list[list[PlannedRun]] = []
        while block := planner.next_block({}):
            self.blocks.append(block)
        self.take = take
        self.handed_out = 0  # the runs of the plan up to the block handed out last (its runs are numbered so)

    def next_block(
        self,
        samples: Samples,
        elapsed: float = 0.0,
        seconds_per_run: float = 0.0,
        roles: Roles | None = None,
        blocks: Blocks | None = None,
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
        self.blocks: Blocks = defaultdict(lambda: defaultdict(list))  # the block each value ran in
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
                self.blocks[planned.cell.key][name].append(planned.block)
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
