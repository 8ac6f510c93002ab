"""The results database as a worker writes it: a write cut off by a lost connection (the server
restarted, pg_terminate_backend, the network gone a while) is tried again once the database
answers, and a run whose commit may have been lost with the connection is looked for before it
is stored again: every run stored exactly once. A run is stored under its worker's lease
(fleet/lease.py), and into a database at this fslab's schema (fleet/versions.py), both checked in
the transaction that stores it. The waiting `fslab run --on` reads by the same rule (steadily)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import sqlalchemy as sa

from fslab.fleet.lease import Lease
from fslab.model import Host
from fslab.model.records import SUPERSEDED, StoredRun
from fslab.results import ResultsDB, RunRecord
from fslab.results.db import insert_run
from fslab.results.location import DatabaseLost, shown
from fslab.results.schema import check_current, runs

T = TypeVar("T")
# What a lost connection raises: what fslab's engines make of the driver's error (location.DatabaseLost),
# and SQLAlchemy's own (psycopg's OperationalError, a connection it invalidated) from any other engine.
LOST = (DatabaseLost, sa.exc.OperationalError, sa.exc.InterfaceError)


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` tells a lost connection: SQLAlchemy's (LOST), or the queue's (psycopg's
    OperationalError — the server gone, a pool unable to connect —, bare or under procrastinate's
    ConnectorException)."""
    import psycopg
    from procrastinate.exceptions import ConnectorException

    if isinstance(exc, ConnectorException):
        exc = exc.__cause__ or exc
    return isinstance(exc, (*LOST, psycopg.OperationalError))


def steadily(
    do: Callable[[], T],
    lost: Callable[[int, BaseException, float], None],
    already: Callable[[], T | None] = lambda: None,
) -> T:
    """`do`, again until the database answers: the fleet's one rule for a database away a while (its
    workers' reads, writes and queue calls; the waiting `fslab run --on`'s).
    `lost(tries, exc, pause)` is told of each try that failed (tries: 1 for an outage's first);
    after one, `already` tells a write that took effect before its connection went (its result, else
    None)."""
    pause, tries = 0.2, 0
    while True:
        try:
            return do()
        except Exception as exc:
            if not connection_lost(exc):
                raise
            tries += 1
            lost(tries, exc, pause)
        time.sleep(pause)  # a signal ends the wait (KeyboardInterrupt), as it ends a run
        pause = min(pause * 2, 5.0)
        try:
            found = already()
        except Exception as exc:
            if not connection_lost(exc):
                raise
            continue
        if found is not None:
            return found


class SteadyResults(ResultsDB):
    def __init__(self, location: str, say: Callable[[str], None]):
        super().__init__(location)
        self.say = say
        self.lease_of: Callable[[RunRecord], Lease | None] = _unleased

    def steadily(self, write: Callable[[], T], already: Callable[[], T | None] = lambda: None) -> T:
        """`write`, again until the database answers, each failed try said (module `steadily`)."""
        return steadily(write, self._lost, already)

    def _lost(self, tries: int, exc: BaseException, pause: float) -> None:
        cause = getattr(exc, "orig", None) or exc.__cause__ or exc
        self.say(f"database connection lost ({type(cause).__name__}); trying again in {pause:.1f} s")

    @contextmanager
    def leased(self, lease_of: Callable[[RunRecord], Lease | None]) -> Iterator[None]:
        """While it lasts, each run is stored under the lease `lease_of` names for it: its unit's,
        or its block's (a spread study run's)."""
        self.lease_of = lease_of
        try:
            yield
        finally:
            self.lease_of = _unleased

    def record_run(self, study_run_id: int, record: RunRecord) -> int:
        """The run stored; under a lease taken from this worker meanwhile, stored aside (superseded,
        not counted), then the lease's withdrawal raised (lease.Lease.withdrawn)."""
        lease = self.lease_of(record)
        if lease is None:
            unleased = super().record_run
            return self.steadily(lambda: unleased(study_run_id, record), lambda: self._stored_id(study_run_id, record))

        def store() -> tuple[int, bool]:
            with self.engine.begin() as conn:
                check_current(conn, shown(self.location))  # first: a migration waits for it, holding nothing yet
                held = lease.held(conn)
                return insert_run(conn, study_run_id, record if held else lease.kept_aside(record)), held

        run_id, held = self.steadily(store, lambda: self._stored(study_run_id, record))
        if not held:
            raise lease.withdrawn()
        return run_id

    def record_host(self, study_run_id: int, host: Host) -> None:
        self.steadily(lambda: super(SteadyResults, self).record_host(study_run_id, host))

    def stored_runs(self, study_run_id: int, host: str | None = None, block: int | None = None) -> list[StoredRun]:
        """Read by the same rule: what a unit's share lacks, what a block holds (runner.run_share)."""
        return self.steadily(lambda: super(SteadyResults, self).stored_runs(study_run_id, host, block))

    def supersede(self, study_run_id: int, run_ids: Iterable[int]) -> int:
        """Runs failing alike across targets stop the unit with that cause, not a lost connection's
        (a try whose commit was lost counts none the second time: the message says fewer)."""
        ids = list(run_ids)
        return self.steadily(lambda: super(SteadyResults, self).supersede(study_run_id, ids))

    def _stored_id(self, study_run_id: int, record: RunRecord) -> int | None:
        found = self._stored(study_run_id, record)
        return None if found is None else found[0]

    def _stored(self, study_run_id: int, record: RunRecord) -> tuple[int, bool] | None:
        """This very run, if it is stored already (its host's, same cell, repetition, warm-up and
        start): its id, and whether it was stored as counted."""
        query = sa.select(runs.c.id, runs.c.status).where(
            runs.c.study_run_id == study_run_id, runs.c.host == record.host, runs.c.target == record.target,
            runs.c.workload == record.workload, runs.c.repetition == record.repetition, runs.c.warmup == record.warmup,
            runs.c.started_at == record.started_at,
        )  # fmt: skip
        with self.engine.connect() as conn:
            found = conn.execute(query).first()
        return None if found is None else (found.id, found.status != SUPERSEDED)


def _unleased(record: RunRecord) -> Lease | None:
    return None
