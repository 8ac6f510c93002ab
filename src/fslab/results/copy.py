"""`fslab db copy SRC DST`: a database's study runs copied into another (typically one machine's
SQLite file into the team's PostgreSQL), everything with them — targets, workloads, hosts, runs,
their metrics and raw outputs. Ids are the destination's own (remapped); a study run is
recognised by its identity (study_runs.uid, schema 11), so copying again adds nothing, and two
copies at once add each study run once. A study run still running is left for a later copy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from fslab.results.db import ResultsDB, inserted_id
from fslab.results.location import DatabaseUnusable, shown
from fslab.results.schema import (
    check_current,
    hosts,
    metrics,
    run_histograms,
    run_outputs,
    runs,
    study_runs,
    targets,
    workloads,
)

RUNS_PER_BATCH = 500  # runs written in one statement (and progress told after each)


@dataclass
class CopyOutcome:
    copied: dict[int, int] = field(default_factory=dict)  # source study run id → its id in the destination
    already: dict[int, int] = field(default_factory=dict)  # those the destination had: their ids there
    left: dict[int, str] = field(default_factory=dict)  # those not copied, and why
    runs: int = 0  # runs copied


Progress = Callable[[int, int], None]  # runs copied so far, runs to copy


def open_source(location: str) -> ResultsDB:
    """The database copied from: one that exists (a new empty SQLite file is never made for it)."""
    if "://" not in location and not Path(location).is_file():
        raise DatabaseUnusable(
            f"fslab db copy: no database file {location} to copy from; name an existing SQLite file or a database URL"
        )
    return ResultsDB(location, named="SRC")


def copy_study_runs(source: ResultsDB, destination: ResultsDB, progress: Progress | None = None) -> CopyOutcome:
    """Every study run of `source` the destination lacks, copied in one transaction each."""
    if shown(source.location) == shown(destination.location) or _same_file(source.location, destination.location):
        raise DatabaseUnusable(
            f"fslab db copy: {shown(source.location)} is both the source and the destination; name another destination"
        )
    with source.engine.connect() as conn:
        listed = conn.execute(
            sa.select(study_runs.c.id, study_runs.c.uid, study_runs.c.status).order_by(study_runs.c.id)
        ).all()
        counts: dict[int, int] = dict(
            conn.execute(sa.select(runs.c.study_run_id, sa.func.count()).group_by(runs.c.study_run_id)).all()
        )
    with destination.engine.connect() as conn:
        known = dict(
            conn.execute(
                sa.select(study_runs.c.uid, study_runs.c.id).where(study_runs.c.uid.in_([uid for _, uid, _ in listed]))
            ).all()
        )
    outcome = CopyOutcome()
    todo = [sr for sr in listed if sr.uid not in known and sr.status != "running"]
    total = sum(counts.get(sr.id, 0) for sr in todo)
    for sr in listed:
        if sr.uid in known:
            outcome.already[sr.id] = known[sr.uid]
        elif sr.status == "running":
            outcome.left[sr.id] = "still running: copy it once it has finished (or been interrupted)"

    def told(done_in_this_one: int) -> None:
        if progress is not None:
            progress(outcome.runs + done_in_this_one, total)

    for sr in todo:
        try:
            outcome.copied[sr.id] = _copy_one(source, destination, sr.id, told)
            outcome.runs += counts.get(sr.id, 0)
        except sa.exc.IntegrityError:  # another copy stored it meanwhile (its uid is unique there)
            with destination.engine.connect() as conn:
                outcome.already[sr.id] = conn.execute(
                    sa.select(study_runs.c.id).where(study_runs.c.uid == sr.uid)
                ).scalar_one()
    return outcome


def _same_file(a: str, b: str) -> bool:
    return "://" not in a and "://" not in b and Path(b).exists() and Path(a).resolve() == Path(b).resolve()


def _rows(
    conn: sa.Connection, table: sa.Table, where: sa.ColumnElement[bool], order: sa.Column | None = None
) -> list[dict]:
    query = sa.select(table).where(where)
    return [dict(r) for r in conn.execute(query.order_by(order) if order is not None else query).mappings()]


def _copy_one(source: ResultsDB, destination: ResultsDB, study_run_id: int, copied: Callable[[int], None]) -> int:
    """One study run with all that is stored of it; its id in the destination."""
    with source.engine.connect() as read, destination.engine.begin() as write:
        (row,) = _rows(read, study_runs, study_runs.c.id == study_run_id)
        row.pop("id")
        new_id = inserted_id(write.execute(study_runs.insert().values(**row)))
        for table in (targets, workloads, hosts):
            rows = _rows(read, table, table.c.study_run_id == study_run_id)
            if rows:
                write.execute(table.insert(), [r | {"study_run_id": new_id} for r in rows])
        its_runs = _rows(read, runs, runs.c.study_run_id == study_run_id, runs.c.id)
        for start in range(0, len(its_runs), RUNS_PER_BATCH):
            batch = its_runs[start : start + RUNS_PER_BATCH]
            old_ids = [r.pop("id") for r in batch]
            inserted = write.execute(
                runs.insert().returning(runs.c.id, sort_by_parameter_order=True),
                [r | {"study_run_id": new_id} for r in batch],
            )
            new_ids = dict(zip(old_ids, inserted.scalars().all()))
            for table in (metrics, run_outputs, run_histograms):
                rows = _rows(read, table, table.c.run_id.in_(old_ids))
                if rows:
                    write.execute(table.insert(), [r | {"run_id": new_ids[r["run_id"]]} for r in rows])
            copied(start + len(batch))
    return new_id


def append_runs(
    source: ResultsDB,
    source_study_run: int,
    destination: ResultsDB,
    study_run_id: int,
    adjust: Callable[[list[dict]], list[dict]],
    fence: Callable[[sa.Connection], None] | None = None,
) -> list[dict]:
    """Every run of one study run of `source`, with its metrics, raw outputs and histograms (its
    notes are its row's), stored as runs of another study run, `study_run_id` of `destination`, in
    one transaction: each row as `adjust` makes it (a lab VM's boot, lab/study.py: its host, its
    boot, its repetitions and blocks renumbered). `fence`: called first in that transaction, even
    where there is no run (a fleet's unit: raising where its lease was taken, nothing stored; else
    recording the boot's share done with its runs). Returns the rows stored, ids
    the destination's."""
    with source.engine.connect() as read:
        its_runs = _rows(read, runs, runs.c.study_run_id == source_study_run, runs.c.id)
        old_ids = [r.pop("id") for r in its_runs]
        related = {
            table: _rows(read, table, table.c.run_id.in_(old_ids)) for table in (metrics, run_outputs, run_histograms)
        }
    if not its_runs and fence is None:
        return []
    rows = adjust([r | {"study_run_id": study_run_id} for r in its_runs]) if its_runs else []
    with destination.engine.begin() as write:
        check_current(write, shown(destination.location))
        if fence is not None:
            fence(write)
        if not rows:  # a boot that stored no run: its fence's writes alone (its share recorded done)
            return []
        inserted = write.execute(runs.insert().returning(runs.c.id, sort_by_parameter_order=True), rows)
        new_ids = dict(zip(old_ids, inserted.scalars().all()))
        for table, found in related.items():
            if found:
                write.execute(table.insert(), [r | {"run_id": new_ids[r["run_id"]]} for r in found])
    return [r | {"id": new_ids[old]} for r, old in zip(rows, old_ids)]
