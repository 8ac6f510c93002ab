"""Leases: a fleet's unit, or a block of a spread study run, as the worker that took it holds it.

The queue hands a unit or block out again when its worker's heartbeat lapses (queue.requeue_stalled):
right when that worker died, wrong when it was only cut off a while (its link down, the server
away) — alive all along, it goes on with what it had under way. So each take bumps the row's
generation (fleet_units.generation, fleet_blocks.generation: schema 15), the lease's fencing
token, before the taker reads which runs are stored; and a run is stored as its worker's only in a
transaction that finds the generation it took still there, the row locked until it commits (a
taker's bump waits for it, then reads that run as stored). A worker whose lease was taken keeps
the run it measured aside — superseded, never counted (records.SUPERSEDED) — and writes nothing
more of that unit or block (each of its writes names the generation it took): every planned run
is stored, as counted, exactly once."""

from __future__ import annotations

from dataclasses import dataclass, replace

import sqlalchemy as sa

from fslab.model.records import SUPERSEDED, RunRecord, now
from fslab.results.schema import fleet_blocks, fleet_units


class UnitWithdrawn(Exception):
    """The unit was taken by another worker of its host's name while this one was unheard: this
    one runs no more of it."""


@dataclass(frozen=True)
class Lease:
    study_run_id: int
    host: str  # the unit's host; a block's, the host that took it
    block: int | None  # a spread study run's block; None: the host's unit
    generation: int

    @property
    def table(self) -> sa.Table:
        return fleet_units if self.block is None else fleet_blocks

    @property
    def what(self) -> str:
        if self.block is not None:
            return f"block {self.block} of study run {self.study_run_id}"
        return f"the unit of study run {self.study_run_id} on {self.host}"

    def row(self) -> tuple:
        if self.block is None:
            return (fleet_units.c.study_run_id == self.study_run_id, fleet_units.c.host == self.host)
        return (fleet_blocks.c.study_run_id == self.study_run_id, fleet_blocks.c.block == self.block)

    def mine(self) -> tuple:
        """Where a write of this lease's row applies: the row, while its generation is this lease's."""
        return (*self.row(), self.table.c.generation == self.generation)

    def held(self, conn: sa.Connection) -> bool:
        """Whether the lease is still this worker's; its row locked until `conn`'s transaction ends."""
        found = conn.execute(sa.select(self.table.c.generation).where(*self.row()).with_for_update()).scalar()
        return found == self.generation

    def kept_aside(self, record: RunRecord) -> RunRecord:
        """A run measured under this lease once it was taken: stored, never counted."""
        why = (
            f"measured on {self.host} after {self.what} was taken by another worker (its heartbeat had lapsed): "
            "kept aside, not counted"
        )
        return replace(record, status=SUPERSEDED, error=why + (f"; it failed: {record.error}" if record.error else ""))

    def withdrawn(self) -> Exception:
        """What the worker hears once its lease was taken: a block's (the runner goes on to the
        next block: plan.BlockWithdrawn) or its unit's (the unit ends here: UnitWithdrawn)."""
        message = (
            f"{self.what} was taken by another worker while this one was unheard; "
            "the run it had under way is kept aside (superseded, not counted)"
        )
        if self.block is None:
            return UnitWithdrawn(message)
        from fslab.running.plan import BlockWithdrawn  # here: `fslab status` loads no planner

        return BlockWithdrawn(message)


def take_unit(engine: sa.Engine, study_run_id: int, host: str) -> Lease | None:
    """The host's unit, leased to the worker that took it from the queue (None: no such unit)."""
    with engine.begin() as conn:
        query = fleet_units.update().where(fleet_units.c.study_run_id == study_run_id, fleet_units.c.host == host)
        bumped = query.values(generation=fleet_units.c.generation + 1).returning(fleet_units.c.generation)
        generation = conn.execute(bumped).scalar()
    return None if generation is None else Lease(study_run_id, host, None, generation)


def take_block(engine: sa.Engine, study_run_id: int, block: int, host: str) -> Lease | None:
    """The block, leased to the host that took it from the queue and claimed by it; None if it was
    finished meanwhile (by the host it was taken from, which still held it)."""
    with engine.begin() as conn:
        query = fleet_blocks.update().where(fleet_blocks.c.study_run_id == study_run_id, fleet_blocks.c.block == block)
        query = query.where(fleet_blocks.c.finished_at.is_(None))
        values = {"generation": fleet_blocks.c.generation + 1, "host": host, "claimed_at": now(), "started_at": None}
        generation = conn.execute(query.values(**values).returning(fleet_blocks.c.generation)).scalar()
    return None if generation is None else Lease(study_run_id, host, block, generation)


def holds(engine: sa.Engine, lease: Lease) -> bool:
    with engine.begin() as conn:
        return lease.held(conn)


def write(engine: sa.Engine, lease: Lease, *where: sa.ColumnElement[bool], **values: object) -> bool:
    """The lease's row updated (where `where` holds too) if the lease is still this worker's; whether it was."""
    with engine.begin() as conn:
        return conn.execute(lease.table.update().where(*lease.mine(), *where).values(**values)).rowcount == 1
