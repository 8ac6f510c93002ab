"""The results database's schema (SQLAlchemy Core, for SQLite and PostgreSQL alike) and the
migrations that bring a database of any older version up to SCHEMA_VERSION, kept forever: no
result is left behind."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

import fslab
from fslab.core.errors import FslabError

SCHEMA_VERSION = 20

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
    # machine facts (running/environment.py) and "vm_hygiene" (lab/hygiene.py: KSM, THP, governor, pinning)
    sa.Column("environment", sa.JSON, nullable=False),
    sa.Column("settings", sa.JSON),  # repetitions asked for (runs, warm-up, target precision, limits)
    sa.Column("outcome", sa.JSON),  # per cell: runs, widest relative half-width, how it ended
    sa.Column("owner", sa.JSON),  # the process running it (owner.Owner): pid, start time, host, work directory
    sa.Column("fslab_version", sa.String(40), nullable=False),
    # since version 11: who it is wherever it is copied (`fslab db copy` adds it once); ids are each database's own
    sa.Column("uid", sa.String(64)),
    sa.Index("ix_study_runs_uid", "uid", unique=True),
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
    # per device under the target: model, serial, size, sectors, queue (core/block_devices.py)
    sa.Column("device_facts", sa.JSON),
    # seconds per phase: image (first run), provision, layout, drop_caches, workload, parse, teardown
    sa.Column("timings", sa.JSON, nullable=False),
    sa.Column("failure", sa.JSON),  # a failed run's RunFailure: phase, command, exit status, stderr tail, traceback
    # since version 6: what its workload kind and monitors found of it (Finding), shown on its cell
    sa.Column("notes", sa.JSON),
    # since version 7: bytes its measured run could hold, page cache included (core/cgroups.py); NULL: no limit
    sa.Column("memory_limit", sa.BigInteger),
    # since version 8: where an imported run came from (its file, fio version, host: results/importer.py);
    # NULL: fslab ran it
    sa.Column("source", sa.JSON),
    # since version 9: what its filesystem made of the options asked (records.OptionsApplied); NULL: imported, or older
    sa.Column("options_applied", sa.JSON),
    # since version 10: the host it ran on (hosts.name); NULL: the study run's own machine (its environment)
    sa.Column("host", sa.String(200)),
    # since version 18: a disturbed run run again (`fslab run --redo-disturbed`): stored, never in
    # the statistics, as a warm-up is; its redo holds its place (monitors/pressure.py)
    sa.Column("redone", sa.Boolean, nullable=False, server_default=sa.false()),
    # since version 19: the boot it ran in (/proc/sys/kernel/random/boot_id of the machine or lab VM
    # that ran it): boots are the unit of replication between kernels (lab/study.py); NULL: stored
    # before 19, or imported
    sa.Column("boot_id", sa.String(36)),
)

# Since version 5 a metric carries its phase and its roles (model/__init__.py); a run keeps one raw
# output per phase and tool.
# Since version 10: each host runs of a study run ran on, once (a fleet's study run has several).
hosts = sa.Table(
    "hosts",
    metadata,
    sa.Column("study_run_id", sa.ForeignKey("study_runs.id"), primary_key=True),
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("facts", sa.JSON, nullable=False),  # model.Host
)

# Since version 11: a fleet (fleet/). Each worker as it last said it was (its name, labels and
# facts, its last heartbeat), and each host's share of a fleet's study run (a unit, handed out
# through the queue): where it stands, what it skipped on that host and why, the run under way.
fleet_workers = sa.Table(
    "fleet_workers",
    metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("labels", sa.JSON, nullable=False),  # list of labels, as `fslab worker --labels` gave them
    sa.Column("facts", sa.JSON, nullable=False),  # model.Host
    sa.Column("seen_at", sa.DateTime, nullable=False),  # its last heartbeat (UTC)
    # since version 12: where it serves fio for shared-storage runs (`--fio-address`, ADDRESS:PORT;
    # NULL: it serves none), and the study run whose clients its server listens for now (NULL: none)
    sa.Column("fio_address", sa.String(60)),
    sa.Column("fio_serving", sa.Integer),
    # since version 13: how long it may go unheard before its unit is taken again (its
    # --heartbeat-lapse, seconds; NULL: a worker of before, the default's)
    sa.Column("lapse", sa.Float),
    # since version 16: the fslab it runs and the schema that fslab writes (fleet/versions.py;
    # NULL: a worker of before, which did not say)
    sa.Column("fslab_version", sa.String(40)),
    sa.Column("schema_version", sa.Integer),
)

fleet_units = sa.Table(
    "fleet_units",
    metadata,
    sa.Column("study_run_id", sa.ForeignKey("study_runs.id"), primary_key=True),
    sa.Column("host", sa.String(200), primary_key=True),
    # queued, waiting (hostlock.py, a busy work directory), running, released, refused (versions.py), done, failed
    sa.Column("state", sa.String(20), nullable=False),
    sa.Column("planned", sa.Integer),  # runs this host's share plans (exact repetitions; adaptive: the first blocks')
    sa.Column("skipped", sa.JSON),  # [{target, why}]: what this host cannot run, judged when it first took the unit
    sa.Column("current", sa.Text),  # the run under way: "target · workload · run N"
    sa.Column("why", sa.Text),  # a failed unit's error, or what a waiting one waits for
    sa.Column("outcome", sa.JSON),  # the planner's outcome of this host's share
    sa.Column("updated_at", sa.DateTime, nullable=False),
    # The queue's own time (schema 12): queued by `fslab run --on`, claimed by a worker, its first run started (UTC).
    sa.Column("queued_at", sa.DateTime),
    sa.Column("claimed_at", sa.DateTime),
    sa.Column("started_at", sa.DateTime),
    # since version 15: the lease's generation, bumped each time a worker takes the unit (fleet/lease.py)
    sa.Column("generation", sa.Integer, nullable=False, server_default="0"),
)

# The blocks of a spread study run (`fslab run --on … --spread`, schema 12): each a job of the
# study run's own queue that any of its hosts may take; who took it, and when.
fleet_blocks = sa.Table(
    "fleet_blocks",
    metadata,
    sa.Column("study_run_id", sa.ForeignKey("study_runs.id"), primary_key=True),
    sa.Column("block", sa.Integer, primary_key=True),  # the plan's block number (1-based)
    sa.Column("host", sa.String(200)),  # the host that took it last
    sa.Column("queued_at", sa.DateTime, nullable=False),
    sa.Column("claimed_at", sa.DateTime),
    sa.Column("started_at", sa.DateTime),  # its first run started (NULL: every run was stored before it was taken)
    sa.Column("finished_at", sa.DateTime),
    # since version 15: the lease's generation, bumped each time a host takes the block (fleet/lease.py)
    sa.Column("generation", sa.Integer, nullable=False, server_default="0"),
)

# The metrics index's columns (ix_metrics_samples): the key, then every other column.
SAMPLE_COLUMNS = ("run_id", "phase", "name", "value", "unit", "higher_is_better", "primary", "compared")

metrics = sa.Table(
    "metrics",
    metadata,
    sa.Column("run_id", sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("phase", sa.String(60), primary_key=True, server_default=""),  # "" for a workload of one phase
    sa.Column("name", sa.String(60), primary_key=True),
    sa.Column("value", sa.Float, nullable=False),
    sa.Column("unit", sa.String(20), nullable=False),
    sa.Column("higher_is_better", sa.Boolean, nullable=False),
    # decides precision, rank, adaptive stopping
    sa.Column("primary", sa.Boolean, nullable=False, server_default=sa.false()),
    # compared between every pair of targets
    sa.Column("compared", sa.Boolean, nullable=False, server_default=sa.false()),
    # Since version 20: every column, in the key's order, so that a summary reads a study run's
    # samples and their kinds (ResultsDB.sample_groups) from the index alone, never looking up the
    # table's row of each value (a 2,000-run summary: 65,000 values; SQLite's DISTINCT of their
    # kinds took 0.2 s of row lookups). 1.4 KB per run (bench/report_scale.py).
    sa.Index("ix_metrics_samples", *SAMPLE_COLUMNS),
)

run_outputs = sa.Table(
    "run_outputs",
    metadata,
    sa.Column("run_id", sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("phase", sa.String(60), primary_key=True),
    sa.Column("tool", sa.String(40), primary_key=True),
    sa.Column("output", sa.Text, nullable=False),  # the output as text; "" since version 14, where it is packed
    # since version 14: the output's UTF-8 compressed by zlib (db.pack), a fifth of its text's room
    # in fio's JSON; NULL: stored as text (before 14)
    sa.Column("packed", sa.LargeBinary),
)

# Since version 17: distributions an opt-in monitor counted in a run's measured window (`--trace
# block`: request sizes, device times, queue depth), one row per histogram, its buckets packed as
# [[low, high, count], ...] in the kind's unit (bytes, ns, requests in flight); `fslab export`
# writes one row per bucket.
run_histograms = sa.Table(
    "run_histograms",
    metadata,
    sa.Column("run_id", sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("phase", sa.String(60), primary_key=True, server_default=""),
    sa.Column("device", sa.String(60), primary_key=True),  # the kernel's name: loop0, zram1, sdb
    sa.Column("direction", sa.String(10), primary_key=True),  # read, write, other
    sa.Column("kind", sa.String(30), primary_key=True),  # request_bytes, device_time_ns, queue_depth
    sa.Column("buckets", sa.JSON, nullable=False),
)


@dataclass(frozen=True)
class Only:
    """A migration statement for one database engine alone."""

    dialect: str  # as SQLAlchemy names it: sqlite, postgresql
    sql: str


# A study run stored before version 11 gets an identity made of what it is (its id, study, start
# and seed): two copies of one old database, migrated apart, still name each study run alike.
_LEGACY = uuid.UUID("6f1d2a8e-3c55-4b8e-9a59-1b0c6f7d2e10")


def new_study_run_uid() -> str:
    return uuid.uuid4().hex


def _legacy_uids(conn: sa.Connection) -> None:
    table = sa.table(
        "study_runs",
        sa.column("id", sa.Integer),
        sa.column("study", sa.String),
        sa.column("started_at", sa.DateTime),
        sa.column("plan_seed", sa.BigInteger),
        sa.column("uid", sa.String),
    )
    for row in conn.execute(sa.select(table).where(table.c.uid.is_(None))).all():
        uid = uuid.uuid5(_LEGACY, f"{row.id}\n{row.study}\n{row.started_at.isoformat()}\n{row.plan_seed}").hex
        conn.execute(table.update().where(table.c.id == row.id).values(uid=uid))


def _fio_columns(conn: sa.Connection) -> None:
    """A fleet's workers name where they serve fio. The table may be new, made by create_all with
    these columns already: only those missing are added."""
    have = {c["name"] for c in sa.inspect(conn).get_columns("fleet_workers")}
    for column, kind in (("fio_address", "VARCHAR(60)"), ("fio_serving", "INTEGER")):
        if column not in have:
            conn.execute(sa.text(f"ALTER TABLE fleet_workers ADD COLUMN {column} {kind}"))


def _lapse_column(conn: sa.Connection) -> None:
    """A fleet's workers say how long they may go unheard (fleet/queue.py judges each by its own)."""
    if "lapse" not in {c["name"] for c in sa.inspect(conn).get_columns("fleet_workers")}:
        conn.execute(sa.text("ALTER TABLE fleet_workers ADD COLUMN lapse FLOAT"))


def _packed_column(conn: sa.Connection) -> None:
    """Raw outputs may be stored compressed. run_outputs may be new (made by create_all from a
    database older than 4), with the column already."""
    if "packed" not in {c["name"] for c in sa.inspect(conn).get_columns("run_outputs")}:
        conn.execute(
            sa.text(f"ALTER TABLE run_outputs ADD COLUMN packed {'BLOB' if conn.dialect.name == 'sqlite' else 'BYTEA'}")
        )


def _generation_columns(conn: sa.Connection) -> None:
    """A fleet's units and blocks carry their lease's generation (fleet/lease.py). Either table may
    be new, made by create_all with the column already: only where missing is it added."""
    for table in ("fleet_units", "fleet_blocks"):
        if "generation" not in {c["name"] for c in sa.inspect(conn).get_columns(table)}:
            conn.execute(sa.text(f"ALTER TABLE {table} ADD COLUMN generation INTEGER NOT NULL DEFAULT 0"))


def _worker_versions(conn: sa.Connection) -> None:
    """A fleet's workers say which fslab they run and which schema it writes (`fslab status` shows them)."""
    have = {c["name"] for c in sa.inspect(conn).get_columns("fleet_workers")}
    for column, kind in (("fslab_version", "VARCHAR(40)"), ("schema_version", "INTEGER")):
        if column not in have:
            conn.execute(sa.text(f"ALTER TABLE fleet_workers ADD COLUMN {column} {kind}"))


def _redone_column(conn: sa.Connection) -> None:
    """Runs may be set aside as disturbed and run again; FALSE for those stored before (a database
    made by this fslab and marked older, as tests make one, has the column already)."""
    if "redone" not in {c["name"] for c in sa.inspect(conn).get_columns("runs")}:
        conn.execute(sa.text("ALTER TABLE runs ADD COLUMN redone BOOLEAN NOT NULL DEFAULT FALSE"))


def _boot_id_column(conn: sa.Connection) -> None:
    """Runs name the boot they ran in; NULL for those stored before (a database made by this fslab
    and marked older, as tests make one, has the column already)."""
    if "boot_id" not in {c["name"] for c in sa.inspect(conn).get_columns("runs")}:
        conn.execute(sa.text("ALTER TABLE runs ADD COLUMN boot_id VARCHAR(36)"))


def _renamed_metric(old: str, new: str) -> str:
    return f"UPDATE metrics SET name = '{new}' WHERE name = '{old}'"


def _unit_times(conn: sa.Connection) -> None:
    """fleet_units' times, where missing: a database older than 11 had it made whole just now (metadata.create_all)."""
    have = {c["name"] for c in sa.inspect(conn).get_columns("fleet_units")}
    kind = "DATETIME" if conn.dialect.name == "sqlite" else "TIMESTAMP WITHOUT TIME ZONE"
    for column in ("queued_at", "claimed_at", "started_at"):
        if column not in have:
            conn.execute(sa.text(f"ALTER TABLE fleet_units ADD COLUMN {column} {kind}"))


# Statements that bring a database from version N to N+1, kept forever: no result is left behind.
MIGRATIONS: dict[int, list[str | Only | Callable[[sa.Connection], None]]] = {
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
        "INSERT INTO run_outputs (run_id, phase, tool, output) SELECT "
        "id, '', 'fio', raw_output FROM runs WHERE raw_output IS NOT NULL",
        "ALTER TABLE runs DROP COLUMN raw_output",
    ],
    # Runs keep what was found of them: a figure that cannot be real, a note a reader needs.
    5: ["ALTER TABLE runs ADD COLUMN notes JSON"],
    # Runs keep the memory limit their measured run had (NULL: none, as every run before).
    6: ["ALTER TABLE runs ADD COLUMN memory_limit BIGINT"],
    # Runs imported from fio's JSON keep where they came from (NULL: fslab ran it, as every run before).
    7: ["ALTER TABLE runs ADD COLUMN source JSON"],
    # Runs keep what their filesystem made of the options asked for, judged when they ran (NULL
    # before: a report judges those from the read-back they stored, with the filesystem's code).
    8: ["ALTER TABLE runs ADD COLUMN options_applied JSON"],
    # Runs name the host they ran on (NULL before: the study run's own machine, its environment);
    # the table of hosts is new, made as every new table is (metadata.create_all).
    9: ["ALTER TABLE runs ADD COLUMN host VARCHAR(200)"],
    # Study runs gain an identity of their own, kept when copied to another database (their ids
    # are remapped there). The indexes of what a summary reads are made again where missing. A
    # fleet's workers and units are new tables, made as every new table is (metadata.create_all).
    10: [
        "ALTER TABLE study_runs ADD COLUMN uid VARCHAR(64)",
        _legacy_uids,
        "CREATE UNIQUE INDEX ix_study_runs_uid ON study_runs (uid)",
        "CREATE INDEX IF NOT EXISTS ix_runs_study_run_id ON runs (study_run_id)",
        "CREATE INDEX IF NOT EXISTS ix_study_runs_study ON study_runs (study)",
    ],
    # A fleet's units keep when they were queued, claimed and started (the queue's own time); the
    # blocks of a spread study run are a new table, made as every new table is (metadata.create_all);
    # workers say where they serve fio for a study run's clients (fleet/roster.py).
    11: [_unit_times, _fio_columns],
    # Workers say how long they may go unheard: each is judged by its own lapse, not its judge's.
    12: [_lapse_column],
    # Raw outputs are stored compressed (run_outputs.packed); those stored before stay text, read as they are.
    13: [_packed_column],
    # A fleet's units and blocks are leased: a worker whose unit or block was taken again (its
    # heartbeat lapsed) stores nothing as its own (fleet/lease.py); 0 for those stored before.
    14: [_generation_columns],
    # Workers say which fslab and schema they run: one of another refuses what it cannot run
    # faithfully (fleet/versions.py).
    15: [_worker_versions],
    # Runs keep the histograms `--trace block` counted: a new table (run_histograms), made as every
    # new table is (metadata.create_all); runs stored before have none.
    16: [],
    # Runs may be set aside as disturbed and run again (--redo-disturbed); FALSE for those stored before.
    17: [_redone_column],
    # Runs name the boot they ran in (a lab VM's, or this machine's): a kernel's runs over several
    # boots are compared with another kernel's by their boot means; NULL for those stored before.
    18: [_boot_id_column],
    # Metrics gain an index of every column (ix_metrics_samples): a summary reads its samples from
    # the index alone. Where it is already (a database made by this fslab and marked older), kept.
    19: [
        "CREATE INDEX IF NOT EXISTS ix_metrics_samples ON metrics (" + ", ".join(f'"{c}"' for c in SAMPLE_COLUMNS) + ")"
    ],
}


class SchemaMismatch(FslabError):
    pass


class SchemaChanged(SchemaMismatch):
    """The database was migrated beneath a running fslab (a newer one opened it meanwhile)."""


def bring_up_to_date(conn: sa.Connection, location: str) -> None:
    """Stamp a new database with SCHEMA_VERSION, or migrate an older one to it; refuse a newer one."""
    found = conn.execute(sa.select(schema_info.c.version)).scalar()
    if found is None:
        conn.execute(schema_info.insert().values(version=SCHEMA_VERSION))
        return
    if found > SCHEMA_VERSION:
        raise SchemaMismatch(
            f"{location} holds results in schema version {found}, "
            f"newer than this fslab's {SCHEMA_VERSION}: upgrade fslab"
        )
    if found == SCHEMA_VERSION:
        return  # nothing written: a database fslab may only read (a copy, another user's) still opens
    # Its version locked (PostgreSQL) before anything is migrated: a run being stored by an older
    # fslab meanwhile (check_current) is stored before the migration, or refused after it.
    conn.execute(sa.select(schema_info.c.version).with_for_update())
    for version in range(found, SCHEMA_VERSION):
        for statement in MIGRATIONS[version]:
            if isinstance(statement, Only) and statement.dialect != conn.dialect.name:
                continue
            if callable(statement):
                statement(conn)
                continue
            conn.execute(sa.text(statement.sql if isinstance(statement, Only) else statement))
    conn.execute(schema_info.update().values(version=SCHEMA_VERSION))


def check_current(conn: sa.Connection, location: str) -> None:
    """In the transaction that stores a run: the database still at this fslab's schema. A newer
    fslab may have migrated it since this one opened it (a fleet's database, migrated by the first
    upgraded fslab to open it): this one would write fields too few, or mean them otherwise."""
    found = conn.execute(sa.select(schema_info.c.version).with_for_update(read=True, key_share=True)).scalar()
    if found != SCHEMA_VERSION:
        raise SchemaChanged(
            f"{location} is at schema version {found} now, and this fslab {fslab.version()} writes schema "
            f"{SCHEMA_VERSION}: it stores nothing more there; upgrade fslab here to one that writes schema {found} "
            '(docs/fleet.md, "Upgrading a fleet")'
        )
