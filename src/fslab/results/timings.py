"""How long this host's stored runs took beyond their workloads (`fslab run --plan`'s estimate),
read without writing: a database that does not exist is not made, one of another schema version
is not migrated, and nothing is marked."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from fslab.results.location import DatabaseUnusable, engine_for
from fslab.results.schema import SCHEMA_VERSION, runs, schema_info, workloads


@dataclass(frozen=True)
class RunTiming:
    """One stored run: its seconds from start to end but for writing its image whole (when it was
    the first of its target: bytes, seconds; 0 when not), its workload phase's seconds, and what
    its fio workload's job as stored ("" for another kind)."""

    seconds: float
    workload_seconds: float
    job: str
    image_bytes: int
    image_seconds: float


def stored_timings(location: str, host: str, limit: int = 500) -> list[RunTiming]:
    """The newest `limit` successful runs `host` made and stored in the database at `location`;
    none when there is no such database, or it is not at this schema version, or cannot be read."""
    import sqlalchemy as sa

    try:
        if "://" not in location and not Path(location).is_file():  # never made here
            return []
        engine = engine_for(location)
        with engine.connect() as conn:
            if conn.execute(sa.select(schema_info.c.version)).scalar() != SCHEMA_VERSION:
                return []
            query = (
                sa.select(
                    runs.c.started_at,
                    runs.c.finished_at,
                    runs.c.timings,
                    runs.c.image_size,
                    runs.c.source,
                    workloads.c.spec,
                )
                .outerjoin(
                    workloads, (workloads.c.study_run_id == runs.c.study_run_id) & (workloads.c.name == runs.c.workload)
                )
                .where(runs.c.status == "ok", runs.c.host == host)
                .order_by(runs.c.id.desc())
                .limit(limit)
            )
            rows = conn.execute(query).all()
        engine.dispose()
    except (sa.exc.SQLAlchemyError, OSError, DatabaseUnusable):
        return []
    return [
        _timing(r.started_at, r.finished_at, r.timings or {}, r.image_size or 0, _job_of(r.spec))
        for r in rows
        if not r.source
    ]  # imported: not made here


def _job_of(spec: object) -> str:
    """A stored fio workload's job (as the report reads it: report/steady_state.py); "" for another kind."""
    return spec["job"] if isinstance(spec, dict) and isinstance(spec.get("job"), str) else ""


def _timing(started: datetime, finished: datetime, timings: dict, image_size: int, job: str) -> RunTiming:
    image = float(timings.get("image", 0.0))
    return RunTiming(
        (finished - started).total_seconds() - image,
        float(timings.get("workload", 0.0)),
        job,
        image_size if image else 0,
        image,
    )
