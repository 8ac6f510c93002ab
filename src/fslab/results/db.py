"""The results database: one schema (SQLAlchemy Core) for SQLite, the default, and PostgreSQL.

Every run is committed as soon as it finishes, with its job file and its tools' raw outputs (one
per phase and tool: run_outputs) beside the parsed metrics (each with its phase, unit, direction
and role: metrics), so statistics can always be recomputed from the raw samples.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

import sqlalchemy as sa

from fslab.errors import FslabError
from fslab.model import Metric, RawOutput, Roles, qualified
from fslab.results.owner import Owner
from fslab.findings import Finding

SCHEMA_VERSION = 8
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
    sa.Column("owner", sa.JSON),  # the process running it (owner.Owner): pid, start time, host, work directory
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
    sa.Column("job_file", sa.Text),  # what the workload ran: its fio job file, its command line
    sa.Column("device", sa.Text),  # every device of the target's stack, bottom last
    sa.Column("image_size", sa.BigInteger),
    sa.Column("direct_io_loop", sa.Boolean),
    sa.Column("mkfs_command", sa.JSON),
    sa.Column("mount_options_requested", sa.Text),
    sa.Column("mount_options_effective", sa.Text),
    sa.Column("fs_details", sa.Text),
    sa.Column("buffered", sa.Boolean, nullable=False),
    sa.Column("data_pattern", sa.Text),
    sa.Column("device_facts", sa.JSON),  # per device under the target: model, serial, size, sectors, queue (guard/block_devices.py)
    sa.Column("timings", sa.JSON, nullable=False),  # seconds per phase: image (first run), provision, layout, drop_caches, workload, parse, teardown
    sa.Column("failure", sa.JSON),  # a failed run's RunFailure: phase, command, exit status, stderr tail, traceback
    sa.Column("notes", sa.JSON),  # since version 6: what its workload kind and monitors found of it (Finding), shown on its cell
    sa.Column("memory_limit", sa.BigInteger),  # since version 7: bytes its measured run could hold, page cache included (cgroups.py); NULL: no limit
    sa.Column("source", sa.JSON),  # since version 8: where an imported run came from (its file, fio version, host: importer.py); NULL: fslab ran it
)

# Since version 5 a metric carries its phase and its roles (model.py); a run keeps one raw
# output per phase and tool.
metrics = sa.Table(
    "metrics",
    metadata,
    sa.Column("run_id", sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("phase", sa.String(60), primary_key=True, server_default=""),  # "" for a workload of one phase
    sa.Column("name", sa.String(60), primary_key=True),
    sa.Column("value", sa.Float, nullable=False),
    sa.Column("unit", sa.String(20), nullable=False),
    sa.Column("higher_is_better", sa.Boolean, nullable=False),
    sa.Column("primary", sa.Boolean, nullable=False, server_default=sa.false()),  # decides precision, rank, adaptive stopping
    sa.Column("compared", sa.Boolean, nullable=False, server_default=sa.false()),  # compared between every pair of targets
)

run_outputs = sa.Table(
    "run_outputs",
    metadata,
    sa.Column("run_id", sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("phase", sa.String(60), primary_key=True),
    sa.Column("tool", sa.String(40), primary_key=True),
    sa.Column("output", sa.Text, nullable=False),
)


@dataclass(frozen=True)
class Only:
    """A migration statement for one database engine alone."""

    dialect: str  # as SQLAlchemy names it: sqlite, postgresql
    sql: str


def _renamed_metric(old: str, new: str) -> str:
    return f"UPDATE metrics SET name = '{new}' WHERE name = '{old}'"


# Statements that bring a database from version N to N+1, kept forever: no result is left behind.
MIGRATIONS: dict[int, list[str | Only]] = {
    1: [
        "ALTER TABLE study_runs ADD COLUMN settings JSON",
        "ALTER TABLE study_runs ADD COLUMN outcome JSON",
        "ALTER TABLE runs ADD COLUMN warmup BOOLEAN NOT NULL DEFAULT FALSE",
    ],
    2: [
        "ALTER TABLE study_runs ADD COLUMN owner JSON",
        "ALTER TABLE runs ADD COLUMN failure JSON",
        "ALTER TABLE runs ADD COLUMN device_facts JSON",
        # SQLite never enforced VARCHAR(100); PostgreSQL did, too short for a stack of devices.
        Only("postgresql", "ALTER TABLE runs ALTER COLUMN device TYPE TEXT"),
    ],
    # Up to version 3 the latency metrics "<direction>_lat_*" were fio's completion latency: they
    # become "<direction>_clat_*", so an old run never shows clat as the total latency it lacks.
    3: [
        _renamed_metric(f"{d}_lat_{stat}_us", f"{d}_clat_{stat}_us")
        for d in ("read", "write")
        for stat in ("mean", "p50", "p95", "p99", "p99_9")
    ],
    # Metrics gain their phase (in their key) and their roles: up to version 4 every metric was
    # fio's, IOPS decided and IOPS and p99 latency were compared. fio's raw output moves from
    # runs.raw_output to run_outputs (one per phase and tool), nothing left behind.
    4: [
        """CREATE TABLE metrics_v5 (
            run_id INTEGER NOT NULL REFERENCES runs (id),
            phase VARCHAR(60) NOT NULL DEFAULT '',
            name VARCHAR(60) NOT NULL,
            value FLOAT NOT NULL,
            unit VARCHAR(20) NOT NULL,
            higher_is_better BOOLEAN NOT NULL,
            "primary" BOOLEAN NOT NULL DEFAULT FALSE,
            compared BOOLEAN NOT NULL DEFAULT FALSE,
            PRIMARY KEY (run_id, phase, name)
        )""",
        """INSERT INTO metrics_v5 (run_id, phase, name, value, unit, higher_is_better, "primary", compared)
        SELECT run_id, '', name, value, unit, higher_is_better,
            name IN ('read_iops', 'write_iops'),
            name IN ('read_iops', 'write_iops', 'read_lat_p99_us', 'write_lat_p99_us')
        FROM metrics""",
        "DROP TABLE metrics",
        "ALTER TABLE metrics_v5 RENAME TO metrics",
        "INSERT INTO run_outputs (run_id, phase, tool, output) SELECT id, '', 'fio', raw_output FROM runs WHERE raw_output IS NOT NULL",
        "ALTER TABLE runs DROP COLUMN raw_output",
    ],
    # Runs keep what was found of them: a figure that cannot be real, a note a reader needs.
    5: ["ALTER TABLE runs ADD COLUMN notes JSON"],
    # Runs keep the memory limit their measured run had (NULL: none, as every run before).
    6: ["ALTER TABLE runs ADD COLUMN memory_limit BIGINT"],
    # Runs imported from fio's JSON keep where they came from (NULL: fslab ran it, as every run before).
    7: ["ALTER TABLE runs ADD COLUMN source JSON"],
}


@dataclass
class RunFailure:
    """What a failed run leaves for diagnosis, besides its one-line error."""

    phase: str  # provision, layout, drop_caches, workload, parse or teardown: under way when it failed
    traceback: str
    argv: list[str] | None = None  # the command that failed, when a command did
    exit_status: int | None = None  # negative: killed by that signal (-9 at a time-out)
    stderr_tail: str | None = None  # the last STDERR_LINES lines it wrote to stderr


STDERR_LINES = 40


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
    outputs: list[RawOutput] = field(default_factory=list)  # each tool's output of each phase, as it came
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
    failure: RunFailure | None = None
    notes: list[Finding] = field(default_factory=list)  # what its kind and monitors found of it
    memory_limit: int | None = None  # bytes its measured run could hold, page cache included (None: no limit)
    source: dict | None = None  # an imported run's origin: its file, fio version, host (None: fslab ran it)


@dataclass(frozen=True)
class StoredRun:
    """A run as the planner needs it again when a study run is resumed."""

    target: str
    workload: str
    repetition: int
    warmup: bool
    ok: bool
    started_at: datetime
    finished_at: datetime
    metrics: dict[str, float]  # by key: "<phase>.<name>", or the name alone
    roles: Roles = Roles()

    @property
    def key(self) -> RunKey:
        return (self.target, self.workload, self.repetition, self.warmup)


class RunMetric(NamedTuple):
    """One metric of one run, in long format (`fslab export`, runs.csv): a run that stored no
    metric (a failed run) is one row with no phase, metric, value or unit. A named tuple: a study
    run has tens of thousands, and a frozen dataclass takes ten times as long to make."""

    study_run: int
    run_id: int
    target: str
    workload: str
    repetition: int
    block: int
    warmup: bool
    status: str
    phase: str | None
    metric: str | None
    value: float | None
    unit: str | None


RunKey = tuple[str, str, int, bool]  # target, workload, repetition, warm-up: one run of a study run


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


class DatabaseUnusable(FslabError):
    """The results database named cannot be opened, or is not fslab's to write."""


class ResultsDB:
    def __init__(self, location: str):
        self.location = location
        self.engine = _engine(location)
        if self.engine.dialect.name == "sqlite":
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        for attempt in range(20):
            try:
                self._refuse_foreign_tables()
                metadata.create_all(self.engine)
                self._check_version()
                break
            except sa.exc.OperationalError as exc:
                if "already exists" in str(exc.orig) and attempt < 19:
                    time.sleep(0.05)  # another fslab is making the same new database: its tables will do
                    continue
                raise DatabaseUnusable(f"cannot use {_shown(location)} as the results database: {exc.orig}; name another --db, or restore it from a backup") from None
            except sa.exc.DatabaseError as exc:  # not a database at all, damaged, or unreachable
                raise DatabaseUnusable(f"cannot use {_shown(location)} as the results database: {exc.orig}; name another --db, or restore it from a backup") from None

    def _refuse_foreign_tables(self) -> None:
        """A database with tables but no schema_info is someone else's: fslab adds nothing to it."""
        tables = sa.inspect(self.engine).get_table_names()
        if tables and schema_info.name not in tables:
            listed = ", ".join(sorted(tables)[:5]) + (", …" if len(tables) > 5 else "")
            raise DatabaseUnusable(f"{_shown(self.location)} is not an fslab results database (it holds tables {listed}); name another --db")

    def _check_version(self) -> None:
        with self.engine.begin() as conn:
            found = conn.execute(sa.select(schema_info.c.version)).scalar()
            if found is None:
                conn.execute(schema_info.insert().values(version=SCHEMA_VERSION))
                return
            if found > SCHEMA_VERSION:
                raise SchemaMismatch(f"{self.location} holds results in schema version {found}, newer than this fslab's {SCHEMA_VERSION}: upgrade fslab")
            if found == SCHEMA_VERSION:
                return  # nothing written: a database fslab may only read (a copy, another user's) still opens
            for version in range(found, SCHEMA_VERSION):
                for statement in MIGRATIONS[version]:
                    if isinstance(statement, Only) and statement.dialect != conn.dialect.name:
                        continue
                    conn.execute(sa.text(statement.sql if isinstance(statement, Only) else statement))
            conn.execute(schema_info.update().values(version=SCHEMA_VERSION))

    def begin_study_run(self, study: Any, plan_seed: int, environment: dict, tool_versions: dict[str, str | None], settings: dict, owner: Owner) -> int:
        with self.engine.begin() as conn:
            return _insert_study_run(
                conn,
                {"study_path": study.path, "study_source": study.source, "scale": study.scale, "repetitions": study.repetitions, "plan_seed": plan_seed,
                 "started_at": now(), "status": "running", "owner": asdict(owner)},
                study, environment, settings, lambda target: tool_versions.get(target.filesystem),
            )

    def store_imported(self, study: Any, environment: dict, settings: dict) -> int:
        """An imported study run (importer.ImportedStudy) with all its runs, in one transaction:
        finished as it is stored, from its first run's start to its last run's end."""
        with self.engine.begin() as conn:
            study_run_id = _insert_study_run(
                conn,
                {"study_path": "\n".join(study.paths), "study_source": "", "scale": 1.0, "repetitions": study.repetitions, "plan_seed": 0, "status": "finished",
                 "started_at": min(r.started_at for r in study.runs), "finished_at": max(r.finished_at for r in study.runs)},
                study, environment, settings, lambda target: ", ".join(target.fio_versions),
            )
            for record in study.runs:
                _insert_run(conn, study_run_id, record)
        return study_run_id

    def record_run(self, study_run_id: int, record: RunRecord) -> int:
        with self.engine.begin() as conn:
            return _insert_run(conn, study_run_id, record)

    def outputs(self, run_id: int) -> list[RawOutput]:
        """A run's raw outputs, by phase and tool."""
        query = sa.select(run_outputs).where(run_outputs.c.run_id == run_id).order_by(run_outputs.c.phase, run_outputs.c.tool)
        with self.engine.connect() as conn:
            return [RawOutput(r.phase, r.tool, r.output) for r in conn.execute(query)]

    def outputs_of_study_run(self, study_run_id: int, tool: str, phase: str | None = "") -> dict[int, list[RawOutput]]:
        """Run id → the raw outputs of one tool and phase (None: of every phase) of every run of a
        study run, in one query (a report reads them all: one query per run would be thousands)."""
        query = (
            sa.select(run_outputs)
            .join(runs, runs.c.id == run_outputs.c.run_id)
            .where(runs.c.study_run_id == study_run_id, run_outputs.c.tool == tool, *([run_outputs.c.phase == phase] if phase is not None else []))
            .order_by(run_outputs.c.run_id, run_outputs.c.phase)
        )
        found: dict[int, list[RawOutput]] = {}
        with self.engine.connect() as conn:
            for r in conn.execute(query):
                found.setdefault(r.run_id, []).append(RawOutput(r.phase, r.tool, r.output))
        return found

    def take_over(self, study_run_id: int, owner: Owner) -> bool:
        """Make an interrupted study run this process's, running again; False if it was not
        interrupted (finished, or taken over by another fslab meanwhile)."""
        query = study_runs.update().where(study_runs.c.id == study_run_id, study_runs.c.status == "interrupted")
        with self.engine.begin() as conn:
            return conn.execute(query.values(status="running", owner=asdict(owner), finished_at=None)).rowcount == 1

    def mark_abandoned(self) -> list[dict]:
        """Mark "interrupted" every running study run whose process is known to have ended
        (killed outright, or the machine restarted); returns those this call marked."""
        running = sa.select(study_runs.c.id, study_runs.c.owner).where(study_runs.c.status == "running")
        with self.engine.connect() as conn:
            candidates = [(row.id, Owner.from_stored(row.owner)) for row in conn.execute(running)]
        marked = []
        for study_run_id, owner in candidates:
            if owner is None or not owner.gone():
                continue  # written before owners were recorded, on another host, or still alive
            # Only the one fslab whose update takes effect reports it: the user hears of it once.
            # (A running study run never changes owner: a take-over starts from "interrupted".)
            query = study_runs.update().where(study_runs.c.id == study_run_id, study_runs.c.status == "running")
            with self.engine.begin() as conn:
                if conn.execute(query.values(status="interrupted")).rowcount == 1:
                    marked.append(self.study_run(study_run_id))
        return marked

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

    def runs(self, study_run_id: int, columns: Iterable[str] | None = None) -> list[dict]:
        """Every run of a study run as stored, in the order stored: each with all its columns, or
        with those named."""
        with self.engine.connect() as conn:
            query = sa.select(*([runs.c[name] for name in columns] if columns is not None else [runs])).where(runs.c.study_run_id == study_run_id).order_by(runs.c.id)
            return [dict(r) for r in conn.execute(query).mappings()]

    def stored_runs(self, study_run_id: int) -> list[StoredRun]:
        """Every stored run of a study run with its metrics, in the order they were stored."""
        query = (
            sa.select(
                runs.c.id, runs.c.target, runs.c.workload, runs.c.repetition, runs.c.warmup, runs.c.status, runs.c.started_at, runs.c.finished_at,
                metrics.c.phase, metrics.c.name, metrics.c.value, metrics.c.primary, metrics.c.compared,
            )
            .outerjoin(metrics, metrics.c.run_id == runs.c.id)
            .where(runs.c.study_run_id == study_run_id)
            .order_by(runs.c.id)
        )
        found: dict[int, tuple[StoredRun, list[tuple[str, str, bool, bool]]]] = {}
        with self.engine.connect() as conn:
            for r in conn.execute(query):
                run, flags = found.setdefault(r.id, (StoredRun(r.target, r.workload, r.repetition, r.warmup, r.status == "ok", r.started_at, r.finished_at, {}), []))
                if r.name is not None:
                    key = qualified(r.phase, r.name)
                    run.metrics[key] = r.value
                    flags.append((r.workload, key, r.primary, r.compared))
        return [replace(run, roles=Roles.flagged(flags)) for run, flags in found.values()]

    def run_metrics(self, study_run_id: int) -> list[RunMetric]:
        """Every run of a study run — failed runs and warm-ups too — with each of its metrics, in
        the order the runs were stored: what runs.csv and runs.json list, and `fslab export`."""
        query = (
            sa.select(
                runs.c.study_run_id, runs.c.id, runs.c.target, runs.c.workload, runs.c.repetition, runs.c.block, runs.c.warmup, runs.c.status,
                metrics.c.phase, metrics.c.name, metrics.c.value, metrics.c.unit,
            )
            .outerjoin(metrics, metrics.c.run_id == runs.c.id)
            .where(runs.c.study_run_id == study_run_id)
            .order_by(runs.c.id, metrics.c.phase, metrics.c.name)
        )
        with self.engine.connect() as conn:
            return list(map(RunMetric._make, conn.execute(query).all()))

    def sample_groups(self, study_run_id: int) -> SampleGroups:
        """The samples of every successful measured run (no warm-ups), grouped by cell in run
        order, with each metric's unit, direction and roles. Read as the statistics need them and
        no more — the values, then each metric's kind once — (a summary of thousands of runs
        spends a tenth of a second less than reading them all as run_metrics)."""
        measured = (runs.c.study_run_id == study_run_id, runs.c.status == "ok", runs.c.warmup == sa.false())
        values_query = (
            sa.select(runs.c.workload, runs.c.target, metrics.c.phase, metrics.c.name, metrics.c.value)
            .join(runs, metrics.c.run_id == runs.c.id).where(*measured).order_by(runs.c.id, metrics.c.phase, metrics.c.name)
        )
        kinds_query = (
            sa.select(runs.c.workload, metrics.c.phase, metrics.c.name, metrics.c.unit, metrics.c.higher_is_better, metrics.c.primary, metrics.c.compared)
            .distinct().join(runs, metrics.c.run_id == runs.c.id).where(*measured)
        )
        workload_kinds = sa.select(workloads.c.name, workloads.c.spec).where(workloads.c.study_run_id == study_run_id)
        with self.engine.connect() as conn:
            found, kinds = conn.execute(values_query).all(), conn.execute(kinds_query).all()
            tools = {name: spec.get("kind", "fio") for name, spec in conn.execute(workload_kinds)}
        values: dict[tuple[str, str], dict[str, list[float]]] = {}
        for workload, target, phase, name, value in found:
            key = qualified(phase, name)
            cell = values.get((workload, target))
            if cell is None:
                cell = values[(workload, target)] = {}
            samples = cell.get(key)
            if samples is None:
                samples = cell[key] = []
            samples.append(value)
        units, higher_is_better, flags = {}, {}, []
        for workload, phase, name, unit, higher, primary, compared in kinds:
            key = qualified(phase, name)
            units[key], higher_is_better[key] = unit, higher
            flags.append((workload, key, primary, compared))
        return SampleGroups(values, units, higher_is_better, Roles.flagged(flags), tools)

    def metric_values(self, study_run_id: int, names: Iterable[str]) -> dict[tuple[int, str, str], float]:
        """(run id, phase, name) → the value of each metric named, of every run of a study run."""
        query = sa.select(metrics.c.run_id, metrics.c.phase, metrics.c.name, metrics.c.value).join(runs, metrics.c.run_id == runs.c.id)
        with self.engine.connect() as conn:
            return {(run_id, phase, name): value for run_id, phase, name, value in conn.execute(query.where(runs.c.study_run_id == study_run_id, metrics.c.name.in_(list(names))))}


def _insert_study_run(conn: sa.Connection, values: dict, study: Any, environment: dict, settings: dict, tool_version: Any) -> int:
    """A study run's row with its targets and workloads (each with `spec()`), in study order."""
    study_run_id = conn.execute(
        study_runs.insert().values(study=study.name, environment=environment, settings=settings, fslab_version=environment.get("fslab", ""), **values)
    ).inserted_primary_key[0]
    conn.execute(
        targets.insert(),
        [
            {"study_run_id": study_run_id, "name": t.name, "position": i, "filesystem": t.filesystem, "spec": t.spec(), "tool_version": tool_version(t)}
            for i, t in enumerate(study.targets)
        ],
    )
    conn.execute(workloads.insert(), [{"study_run_id": study_run_id, "name": w.name, "position": i, "spec": w.spec()} for i, w in enumerate(study.workloads)])
    return study_run_id


def _insert_run(conn: sa.Connection, study_run_id: int, record: RunRecord) -> int:
    """A run's row with its raw outputs and metrics."""
    values = asdict(record)
    values.pop("metrics")
    values.pop("outputs")
    run_id = conn.execute(runs.insert().values(study_run_id=study_run_id, **values)).inserted_primary_key[0]
    if record.outputs:
        conn.execute(run_outputs.insert(), [{"run_id": run_id, "phase": o.phase, "tool": o.tool, "output": o.text} for o in record.outputs])
    if record.metrics:
        conn.execute(metrics.insert(), [{"run_id": run_id, **asdict(m)} for m in record.metrics])
    return run_id


@dataclass
class SampleGroups:
    """A study run's samples grouped by cell, with each metric's unit, direction and roles; a
    metric is keyed "<phase>.<name>", or by its name alone."""

    values: dict[tuple[str, str], dict[str, list[float]]]  # (workload, target) → metric → values in run order
    units: dict[str, str]
    higher_is_better: dict[str, bool]
    roles: Roles = Roles()
    kinds: dict[str, str] = field(default_factory=dict)  # workload → its kind ("fio", "sysbench", …): what printed its figures, and so their resolution


# What the results database may not be: SQLite would write its pages over whatever is there.
_NOT_A_FILE = {stat.S_IFBLK: "a block device", stat.S_IFCHR: "a character device", stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFLNK: "a symbolic link"}
POSTGRESQL_DRIVER = "pip install 'psycopg[binary]' (psycopg 3, what SQLAlchemy uses for postgresql:// URLs)"


def _engine(location: str) -> sa.Engine:
    """An engine for a database URL, or for an SQLite file after checking it is one fslab may write."""
    if "://" not in location:
        return sa.create_engine(f"sqlite:///{_sqlite_file(location)}")
    try:
        return sa.create_engine(location)
    except ImportError as exc:
        hint = POSTGRESQL_DRIVER if location.startswith("postgresql") else f"install the Python package that provides {exc.name}"
        raise DatabaseUnusable(f"the results database {_shown(location)} needs the database driver {exc.name}, which is not installed: {hint}") from None
    except sa.exc.ArgumentError as exc:  # a malformed URL, or an engine SQLAlchemy does not know
        raise DatabaseUnusable(f"--db {_shown(location)}: {exc}; write a file name for SQLite, or postgresql://user@host/database") from None


def _sqlite_file(location: str) -> Path:
    """The SQLite file named: a regular file, or a new name in an existing directory. Its journal
    files beside it must be regular files too — SQLite writes them as readily as the database."""
    path = Path(location).absolute()
    if not path.parent.is_dir():
        raise DatabaseUnusable(f"--db {location}: the directory {path.parent} does not exist; create it, or name a file in an existing directory")
    for candidate in (path, *(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal"))):
        try:
            kind = stat.S_IFMT(os.lstat(candidate).st_mode)
        except FileNotFoundError:
            continue
        if kind != stat.S_IFREG:
            what = _NOT_A_FILE.get(kind, "not a regular file")
            raise DatabaseUnusable(f"--db {location}: {candidate} is {what}, not a database file; fslab writes results only to a regular file (or a new file name)")
    return path


def _shown(location: str) -> str:
    """A location fit to print: a URL without its password."""
    if "://" not in location:
        return location
    try:
        return sa.make_url(location).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return location.split("://", 1)[0] + "://…"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()
