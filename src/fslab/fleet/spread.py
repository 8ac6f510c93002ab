"""A spread study run (`fslab run STUDY --on HOSTS --spread`): one study's planned runs divided
among identical hosts, a homogeneous fleet finishing it sooner, instead of each host running all.

The division is work-stealing by block: each block of the interleaved plan (every cell once, in
its randomised order) is a job of the study run's own queue (queue.spread_queue), and each host's
unit takes the next block no host has taken whenever it is free — a faster host runs more, and
the interleaving holds within every block. A block is finished once every run of it is stored
(by whichever hosts: one taken again after its host went unheard skips what that host stored, and
that host, if it was only cut off, stores nothing more of it as counted: fleet/lease.py); the study
run is finished when its last block is, even if a host never came back for its unit."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa

from fslab.core.errors import FslabError
from fslab.fleet import lease, queue
from fslab.fleet.lease import Lease
from fslab.fleet.steady import SteadyResults
from fslab.model.records import now
from fslab.results.schema import fleet_blocks

if TYPE_CHECKING:
    from fslab.running.plan import Planner, Repetitions

T = TypeVar("T")
SETTING = "spread"  # in the study run's settings: True when it was spread


class CannotSpread(FslabError):
    pass


def is_spread(settings: dict | None) -> bool:
    return bool((settings or {}).get(SETTING))


def check(repetitions: Repetitions) -> None:
    """What cannot be divided among hosts, refused before anything is stored."""
    if repetitions.adaptive:
        raise CannotSpread(
            "--spread: an adaptive study run (--target-ci, --decide) decides each block from "
            "the runs before it; spread study runs have a fixed plan: give --runs N"
        )
    if repetitions.warmup:
        raise CannotSpread(
            f"--spread: warm-up runs ({repetitions.warmup} per cell) warm one "
            "host, not the others the plan's runs are handed to: give --warmup 0"
        )


def block_count(planner: Planner) -> int:
    from fslab.running.plan import TakenBlocks

    return TakenBlocks(planner, lambda: None).count


def queued(engine: sa.Engine, study_run_id: int, count: int) -> None:
    if not count:
        return
    at = now()
    with engine.begin() as conn:
        conn.execute(
            fleet_blocks.insert(),
            [{"study_run_id": study_run_id, "block": b, "queued_at": at} for b in range(1, count + 1)],
        )


def unfinished(engine: sa.Engine, study_run_id: int) -> int:
    with engine.connect() as conn:
        return conn.execute(
            sa.select(sa.func.count()).where(
                fleet_blocks.c.study_run_id == study_run_id, fleet_blocks.c.finished_at.is_(None)
            )
        ).scalar_one()


class BlockTaker:
    """A host's unit of a spread study run taking blocks (runner.run_share's `take`), in the
    worker's main thread: `call` runs a queue operation on the queue thread's loop. Each block is
    leased to this host as it takes it (fleet/lease.py); the block taken before is finished when
    the next is asked for — unless another host took it meanwhile; with none left to take, it
    waits while another host still holds one (that host may die: its block is then queued again)."""

    def __init__(
        self,
        db: SteadyResults,
        call: Callable[[Callable[[Any], Coroutine[Any, Any, Any]]], Any],
        worker_id: Callable[[], int | None],
        study_run_id: int,
        host: str,
        wait: float,
    ):
        self.db, self.call, self.worker_id = db, call, worker_id
        self.study_run_id, self.host, self.wait = study_run_id, host, wait
        self.current: tuple[int, Lease] | None = None  # (job id, lease) of the block taken and not yet finished

    def __call__(self) -> int | None:
        self._finish_current()
        while True:
            taken = self._take()
            if taken is not None:
                job_id, block = taken
                held = self.db.steadily(partial(lease.take_block, self.db.engine, self.study_run_id, block, self.host))
                if held is None:  # finished meanwhile by the host it was taken from
                    self._queue(partial(queue.block_done, job_id=job_id))
                    continue
                self.current = (job_id, held)
                return block
            if not self.db.steadily(lambda: unfinished(self.db.engine, self.study_run_id)):
                return None
            time.sleep(self.wait)

    @property
    def holding(self) -> Lease | None:
        """The block under way, as this host holds it (the runs of it are stored under it)."""
        return self.current[1] if self.current is not None else None

    def started(self, block: int) -> None:
        """The block's first run started here (best effort, as the progress line)."""
        if self.current is not None:
            lease.write(self.db.engine, self.current[1], fleet_blocks.c.started_at.is_(None), started_at=now())

    def give_back(self) -> None:
        """The block under way, unfinished, queued again for any host (this unit stopped or failed)
        — unless another host took it meanwhile: it is that host's."""
        if self.current is not None:
            job_id, held = self.current
            self.current = None
            if self.db.steadily(lambda: lease.holds(self.db.engine, held)):
                self._queue(lambda app: queue.give_back(app, job_id))

    def _finish_current(self) -> None:
        if self.current is None:
            return
        job_id, held = self.current
        # first: a block whose job ended is never thought unfinished; taken by another host
        # meanwhile, it is that host's to finish
        if self.db.steadily(lambda: lease.write(self.db.engine, held, finished_at=now())):
            self._queue(lambda app: queue.block_done(app, job_id))
        self.current = None

    def _take(self) -> tuple[int, int] | None:
        """The next block's job from the queue (its job id, its block), or None. A take whose
        answer was lost with its connection is found "doing" for this worker: taken once."""
        worker_id = self.worker_id()
        if worker_id is None:
            return None
        return self._queue(
            lambda app: queue.take_block(app, self.study_run_id, worker_id),
            lambda app: queue.taken_by(app, self.study_run_id, worker_id),
        )

    def _queue(
        self,
        work: Callable[[Any], Coroutine[Any, Any, T]],
        already: Callable[[Any], Coroutine[Any, Any, T | None]] | None = None,
    ) -> T:
        """A queue operation, by the workers' rule for a database away (block_done and give_back
        find what an earlier try did)."""
        return self.db.steadily(lambda: self.call(work), (lambda: self.call(already)) if already else lambda: None)
