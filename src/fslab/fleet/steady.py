"""The results database as a worker writes it: a write cut off by a lost connection (the server
restarted, pg_terminate_backend, the network gone a while) is tried again once the database
answers, and a run whose commit may have been lost with the connection is looked for before it
is stored again: every run stored exactly once."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

from fslab.model import Host
from fslab.results import ResultsDB, RunRecord
from fslab.results.db import COUNTED
from fslab.results.schema import runs

T = TypeVar("T")
# What a lost connection raises (psycopg's OperationalError, a connection SQLAlchemy invalidated).
LOST = (sa.exc.OperationalError, sa.exc.InterfaceError)


class SteadyResults(ResultsDB):
    def __init__(self, location: str, say: Callable[[str], None]):
        super().__init__(location)
        self.say = say

    def steadily(self, write: Callable[[], T], already: Callable[[], T | None] = lambda: None) -> T:
        """`write`, again until the database answers; after a failed try, `already` tells a write
        that took effect before its connection went (its result, else None)."""
        pause = 0.2
        while True:
            try:
                return write()
            except LOST as exc:
                self.say(f"database connection lost ({type(exc.orig).__name__ if hasattr(exc, 'orig') else type(exc).__name__}); trying again in {pause:.1f} s")
            time.sleep(pause)  # a signal ends the wait (KeyboardInterrupt), as it ends a run
            pause = min(pause * 2, 5.0)
            try:
                found = already()
            except LOST:
                continue
            if found is not None:
                return found

    def record_run(self, study_run_id: int, record: RunRecord) -> int:
        return self.steadily(lambda: super(SteadyResults, self).record_run(study_run_id, record), lambda: self._stored(study_run_id, record))

    def record_host(self, study_run_id: int, host: Host) -> None:
        self.steadily(lambda: super(SteadyResults, self).record_host(study_run_id, host))

    def _stored(self, study_run_id: int, record: RunRecord) -> int | None:
        """The run's id if it is stored already (its host's, same cell, repetition and warm-up)."""
        query = sa.select(runs.c.id).where(
            runs.c.study_run_id == study_run_id, runs.c.host == record.host, runs.c.target == record.target,
            runs.c.workload == record.workload, runs.c.repetition == record.repetition, runs.c.warmup == record.warmup,
            COUNTED,
        )  # fmt: skip
        with self.engine.connect() as conn:
            return conn.execute(query).scalar()
