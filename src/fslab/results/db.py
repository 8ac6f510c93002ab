"""The results database: one schema (SQLAlchemy Core) for SQLite, the default, and PostgreSQL.

Every run is committed as soon as it finishes, with its job file and fio's raw output beside
the parsed metrics, so statistics can always be recomputed from the raw samples.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from fslab.errors import FslabError
from fslab.workloads.fio import Metric

SCHEMA_VERSION = 3
DEFAULT_DB = "fslab.db"
DB_ENV = "FSLAB_DB"

metadata = sa.MetaData()

schema_info = sa.Table("schema_info", metadata, sa.Column("version", sa.Integer, nullable=False))

study_runs = sa.Table(
    "study_runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("study", sa.String(200), nullable=False, index=True),
    sa.Column("study_path", sa.Text, nullable=False),
    sa.Column("study_source", sa.Text, nullable=False),
    sa.Column("scale", sa.Float, nullable=False),
    sa.Column("repetitions", sa.Integer, nullable=False),
    sa.Column("plan_seed", sa.BigInteger, nullable=False),
    sa.Column("started_at", sa.DateTime, nullable=False),
    sa.Column("finished_at", sa.DateTime),
    sa.Column("status", sa.String(20), nullable=False),  # running, finished, interrupted
    sa.Column("environment", sa.JSON, nullable=False),
    sa.Column("settings", sa.JSON),  # repetitions asked for (runs, warm-up, target precision, limits)
    sa.Column("outcome", sa.JSON),  # per cell: runs, widest relative half-width, how it ended
    sa.Column("fslab_version", sa.String(40), nullable=False),
)

targets = sa.Table(
    "targets",
    metadata,
    sa.Column("study_run_id", sa.ForeignKey("study_runs.id"), primary_key=True),
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("position", sa.Integer, nullable=False),  # order in the study file
    sa.Column("filesystem", sa.String(40), nullable=False),
    sa.Column("spec", sa.JSON, nullable=False),  # as requested in the study file
    sa.Column("tool_version", sa.Text),
)

workloads = sa.Table(
    "workloads",
    metadata,
    sa.Column("study_run_id", sa.ForeignKey("study_runs.id"), primary_key=True),
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("spec", sa.JSON, nullable=False),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("study_run_id", sa.ForeignKey("study_runs.id"), nullable=False, index=True),
    sa.Column("target", sa.String(200), nullable=False),
    sa.Column("workload", sa.String(200), nullable=False),
    sa.Column("repetition", sa.Integer, nullable=False),
    sa.Column("warmup", sa.Boolean, nullable=False, default=False),  # stored, never in the statistics
    sa.Column("block", sa.Integer, nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("started_at", sa.DateTime, nullable=False),
    sa.Column("finished_at", sa.DateTime, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),  # ok, failed
    sa.Column("error", sa.Text),
    sa.Column("job_file", sa.Text),
    sa.Column("raw_output", sa.Text),
    sa.Column("device", sa.String(100)),
    sa.Column("image_size", sa.BigInteger),
    sa.Column("direct_io_loop", sa.Boolean),
    sa.Column("mkfs_command", sa.JSON),
    sa.Column("mount_options_requested", sa.Text),
    sa.Column("mount_options_effective", sa.Text),
    sa.Column("fs_details", sa.Text),
    sa.Column("buffered", sa.Boolean, nullable=False),
    sa.Column("data_pattern", sa.Text),
    sa.Column("device_facts", sa.JSON),  # per device under the target: model, serial, size, sectors, queue (guard/block_devices.py)
    sa.Column("timings", sa.JSON, nullable=False),  # seconds per phase: image (first run), provision, layout, drop_caches, workload, teardown
)

metrics = sa.Table(
    "metrics",
    metadata,
    sa.Column("run_id", sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("name", sa.String(60), primary_key=True),
    sa.Column("value", sa.Float, nullable=False),
    sa.Column("unit", sa.String(20), nullable=False),
    sa.Column("higher_is_better", sa.Boolean, nullable=False),
)


# Statements that bring a database from version N to N+1, kept forever: no result is left behind.
MIGRATIONS: dict[int, list[str]] = {
    1: [
        "ALTER TABLE study_runs ADD COLUMN settings JSON",
        "ALTER TABLE study_runs ADD COLUMN outcome JSON",
        "ALTER TABLE runs ADD COLUMN warmup BOOLEAN NOT NULL DEFAULT FALSE",
    ],
    2: [
        "ALTER TABLE runs ADD COLUMN device_facts JSON",
    ],
}


@dataclass
class RunRecord:
    """Everything stored about one run, whatever its outcome."""

    target: str
    workload: str
    repetition: int
    warmup: bool
    block: int
    position: int
    started_at: datetime
    finished_at: datetime
    status: str
    buffered: bool
    error: str | None = None
    job_file: str | None = None
    raw_output: str | None = None
    device: str | None = None
    image_size: int | None = None
    direct_io_loop: bool | None = None
    mkfs_command: list[str] | None = None
    mount_options_requested: str | None = None
    mount_options_effective: str | None = None
    fs_details: str | None = None
    data_pattern: str | None = None
    device_facts: list[dict] | None = None  # DeviceFacts of each device under the target
    timings: dict[str, float] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)


def now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def resolve_location(db: str | None) -> str:
    """The --db value, else $FSLAB_DB, else fslab.db in the current directory."""
    return db or os.environ.get(DB_ENV) or DEFAULT_DB


def reports_dir(location: str) -> Path:
    """Where report files go: beside an SQLite file, or in the current directory for a server."""
    return (Path.cwd() if "://" in location else Path(location).resolve().parent) / "reports"


class SchemaMismatch(FslabError):
    pass


class ResultsDB:
    def __init__(self, location: str):
        self.location = location
        url = location if "://" in location else f"sqlite:///{Path(location).resolve()}"
        self.engine = sa.create_engine(url)
        if self.engine.dialect.name == "sqlite":
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        metadata.create_all(self.engine)
        self._check_version()

    def _check_version(self) -> None:
        with self.engine.begin() as conn:
            found = conn.execute(sa.select(schema_info.c.version)).scalar()
            if found is None:
                conn.execute(schema_info.insert().values(version=SCHEMA_VERSION))
                return
            if found > SCHEMA_VERSION:
                raise SchemaMismatch(f"{self.location} holds results in schema version {found}, newer than this fslab's {SCHEMA_VERSION}: upgrade fslab")
            for version in range(found, SCHEMA_VERSION):
                for statement in MIGRATIONS[version]:
                    conn.execute(sa.text(statement))
            conn.execute(schema_info.update().values(version=SCHEMA_VERSION))

    def begin_study_run(self, study: Any, plan_seed: int, environment: dict, tool_versions: dict[str, str | None], settings: dict) -> int:
        with self.engine.begin() as conn:
            study_run_id = conn.execute(
                study_runs.insert().values(
                    study=study.name,
                    study_path=study.path,
                    study_source=study.source,
                    scale=study.scale,
                    repetitions=study.repetitions,
                    plan_seed=plan_seed,
                    started_at=now(),
                    status="running",
                    environment=environment,
                    settings=settings,
                    fslab_version=environment.get("fslab", ""),
                )
            ).inserted_primary_key[0]
            conn.execute(
                targets.insert(),
                [
                    {"study_run_id": study_run_id, "name": t.name, "position": i, "filesystem": t.filesystem, "spec": t.spec(), "tool_version": tool_versions.get(t.filesystem)}
                    for i, t in enumerate(study.targets)
                ],
            )
            conn.execute(workloads.insert(), [{"study_run_id": study_run_id, "name": w.name, "position": i, "spec": w.spec()} for i, w in enumerate(study.workloads)])
        return study_run_id

    def record_run(self, study_run_id: int, record: RunRecord) -> int:
        values = asdict(record)
        values.pop("metrics")
        with self.engine.begin() as conn:
            run_id = conn.execute(runs.insert().values(study_run_id=study_run_id, **values)).inserted_primary_key[0]
            if record.metrics:
                conn.execute(
                    metrics.insert(),
                    [{"run_id": run_id, "name": m.name, "value": m.value, "unit": m.unit, "higher_is_better": m.higher_is_better} for m in record.metrics],
                )
        return run_id

    def finish_study_run(self, study_run_id: int, status: str, outcome: dict) -> None:
        with self.engine.begin() as conn:
            values = {"status": status, "finished_at": now(), "outcome": outcome}
            conn.execute(study_runs.update().where(study_runs.c.id == study_run_id).values(**values))

    def study_run(self, ref: str | int | None = None) -> dict | None:
        """A study run by id, the newest of a study by name, or the newest of all."""
        query = sa.select(study_runs).order_by(study_runs.c.id.desc()).limit(1)
        if ref is not None and str(ref).isdigit():
            query = query.where(study_runs.c.id == int(ref))
        elif ref is not None:
            query = query.where(study_runs.c.study == str(ref))
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return dict(row) if row else None

    def study_runs(self) -> list[dict]:
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(sa.select(study_runs).order_by(study_runs.c.id)).mappings()]

    def targets(self, study_run_id: int) -> list[dict]:
        return self._in_study_order(targets, study_run_id)

    def workloads(self, study_run_id: int) -> list[dict]:
        return self._in_study_order(workloads, study_run_id)

    def _in_study_order(self, table: sa.Table, study_run_id: int) -> list[dict]:
        query = sa.select(table).where(table.c.study_run_id == study_run_id).order_by(table.c.position)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def runs(self, study_run_id: int) -> list[dict]:
        with self.engine.connect() as conn:
            query = sa.select(runs).where(runs.c.study_run_id == study_run_id).order_by(runs.c.id)
            return [dict(r) for r in conn.execute(query).mappings()]

    def sample_groups(self, study_run_id: int) -> SampleGroups:
        return group_samples(self.samples(study_run_id))

    def samples(self, study_run_id: int) -> list[dict]:
        """One row per metric of every successful measured run (no warm-ups), in run order."""
        query = (
            sa.select(runs.c.target, runs.c.workload, runs.c.repetition, metrics.c.name, metrics.c.value, metrics.c.unit, metrics.c.higher_is_better)
            .join(metrics, metrics.c.run_id == runs.c.id)
            .where(runs.c.study_run_id == study_run_id, runs.c.status == "ok", runs.c.warmup == sa.false())
            .order_by(runs.c.id)
        )
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]


@dataclass
class SampleGroups:
    """A study run's samples grouped by cell, with each metric's unit and direction."""

    values: dict[tuple[str, str], dict[str, list[float]]]  # (workload, target) → metric → values in run order
    units: dict[str, str]
    higher_is_better: dict[str, bool]


def group_samples(rows: list[dict]) -> SampleGroups:
    groups = SampleGroups({}, {}, {})
    for row in rows:
        groups.values.setdefault((row["workload"], row["target"]), {}).setdefault(row["name"], []).append(row["value"])
        groups.units[row["name"]] = row["unit"]
        groups.higher_is_better[row["name"]] = row["higher_is_better"]
    return groups


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()
