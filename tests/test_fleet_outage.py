"""What a worker takes for a database away (steady.connection_lost): waited for by the workers'
one rule, and a unit that still meets one given back to the queue, never failed for it. The
outages themselves, on a real server, are in tests/test_fleet_fencing.py."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace

import psycopg
import pytest
import sqlalchemy as sa
from procrastinate.exceptions import ConnectorException

from fslab.core.errors import FslabError


def raised(cause: BaseException) -> ConnectorException:
    """procrastinate's ConnectorException over `cause`, as its connector raises it."""
    try:
        try:
            raise cause
        except BaseException as exc:
            raise ConnectorException("Database error.") from exc
    except ConnectorException as wrapped:
        return wrapped


def test_a_lost_connection_is_told_from_other_errors_whichever_client_raised_it():
    from fslab.fleet.steady import connection_lost

    assert connection_lost(sa.exc.OperationalError("SELECT 1", {}, Exception("server closed the connection")))
    assert connection_lost(raised(psycopg.errors.AdminShutdown("terminating connection")))
    assert connection_lost(psycopg.OperationalError("connection refused"))
    assert not connection_lost(raised(psycopg.errors.UniqueViolation("duplicate key")))
    assert not connection_lost(FslabError("study run 1 is not in the database"))


@pytest.mark.parametrize(
    "lost",
    [
        sa.exc.OperationalError("SELECT 1", {}, Exception("server closed the connection")),
        raised(psycopg.errors.AdminShutdown("terminating connection")),
    ],
)
def test_a_unit_meeting_a_lost_connection_outside_the_rule_is_given_back_not_failed(monkeypatch, tmp_path, lost):
    from fslab.fleet import worker

    def runs_into_it(*args: object, **kwargs: object) -> None:
        raise lost

    monkeypatch.setattr(worker, "_leased", lambda unit, db, host: unit)
    monkeypatch.setattr(worker, "run_unit", runs_into_it)
    settled: list = []
    db = SimpleNamespace(steadily=settled.append)  # what _settle would write: the unit's end
    done: Future = Future()
    said: list[str] = []
    worker._run_handed(
        worker.Unit(1, "h"),
        done,
        db,
        SimpleNamespace(name="h"),
        SimpleNamespace(workdir=tmp_path, fio=None, kernels=None),
        said.append,
        None,
        set(),
        None,
    )
    assert isinstance(done.exception(), worker.UnitReleased), said
    assert not settled, "nothing written of the unit: not failed"
    assert said == [f"given back: study run 1 on h: database connection lost ({type(lost).__name__})"]
