"""The results database: every run is committed as soon as it finishes, with its job file and
its tools' raw outputs (one per phase and tool: run_outputs) beside the parsed metrics (each with
its phase, unit, direction and role: metrics), so statistics can always be recomputed from the
raw samples. Its tables and migrations are schema.py's, the records it stores and gives back
records.py's, which databases it may open location.py's.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, replace
from typing import Any

import sqlalchemy as sa

from fslab.core.errors import FslabError
from fslab.model import PHASE_SEPARATOR, Host, RawOutput, Roles, qualified
from fslab.model.records import SUPERSEDED, RunMetric, RunRecord, SampleGroups, StoredHistogram, StoredRun, now
from fslab.results.location import DatabaseLost, DatabaseUnusable, engine_for, failed, reason, shown, what_to_do
from fslab.results.owner import Owner
from fslab.results.schema import (
    SCHEMA_VERSION,
    bring_up_to_date,
    check_current,
    hosts,
    metadata,
    metrics,
    new_study_run_uid,
    run_histograms,
    run_outputs,
    runs,
    schema_info,
    study_runs,
    targets,
    workloads,
)

# Taken while a PostgreSQL database's tables are made or migrated: fslabs on several hosts may
# meet a new (or older) database at once, and one sets it up while the others wait, then find it done.
_SETUP_LOCK = int.from_bytes(b"fslab-db", "big") >> 1


# The runs every reader counts: all but those a systematic failure superseded (records.SUPERSEDED).
COUNTED = runs.c.status != SUPERSEDED

# The runs the statistics are of: successful, neither warm-ups nor disturbed runs run again (redone).
MEASURED = (runs.c.status == "ok", runs.c.warmup == sa.false(), runs.c.redone == sa.false())

# What a study run reads as (summaries, reports): its identity across databases is `fslab db copy`'s alone.
_STUDY_RUN_FIELDS = [column for column in study_runs.c if column.name != "uid"]


class AmbiguousStudyRun(FslabError):
    """An argument that names two study runs: one by id, another by its study's name."""


class ResultsDB:
    def __init__(self, location: str, named: str = "--db"):
        """`named`: what the user called the database (an option, an argument), which a refusal names."""
        self.location = location
        self.engine = engine_for(location, named)
        try:
            if self._current():
                return
            if self.engine.dialect.name == "postgresql":
                self._set_up_under_lock()
            else:
                self._set_up_sqlite()
        except (DatabaseLost, sa.exc.DBAPIError) as exc:  # not a database at all, damaged, unreachable, or refused
            why = exc.reason if isinstance(exc, DatabaseLost) else reason(exc.orig or exc, location)
            raise DatabaseUnusable(
                f"cannot use {shown(location)} as the results database: {why}; {what_to_do(location, named)}"
            ) from None

    def _current(self) -> bool:
        """Whether the database is fslab's at this schema version already: opening it then reads one
        row — no lock, no inspection of its tables (a summary on a team's PostgreSQL opens it once)."""
        with self.engine.connect() as conn:  # a server it cannot reach: said once, by __init__
            try:
                return conn.execute(sa.select(schema_info.c.version)).scalar() == SCHEMA_VERSION
            except (
                DatabaseLost,
                sa.exc.DBAPIError,
            ):  # no such table (a new or foreign database), or unreadable: the set-up says why
                return False

    def _set_up_under_lock(self) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_SETUP_LOCK)))
            self._set_up(conn)

    def _set_up_sqlite(self) -> None:
        for attempt in range(20):
            try:
                with self.engine.begin() as conn:
                    self._set_up(conn)
                return
            except DatabaseLost as exc:
                if "already exists" not in exc.reason or attempt == 19:
                    raise
                time.sleep(0.05)  # another fslab is making the same new database: its tables will do

    def _set_up(self, conn: sa.Connection) -> None:
        """Make a new database's tables, or bring an older one up to date; a current one is only
        read (a database fslab may only read still opens)."""
        self._refuse_foreign_tables(conn)
        metadata.create_all(conn)
        bring_up_to_date(conn, shown(self.location))

    def _refuse_foreign_tables(self, conn: sa.Connection) -> None:
        """A database with tables but no schema_info is someone else's: fslab adds nothing to it."""
        tables = [
            t for t in sa.inspect(conn).get_table_names() if not t.startswith("procrastinate_")
        ]  # a fleet's queue (fleet/queue.py) shares the database
        if tables and schema_info.name not in tables:
            listed = ", ".join(sorted(tables)[:5]) + (", …" if len(tables) > 5 else "")
            raise DatabaseUnusable(
                f"{shown(self.location)} is not an fslab results database (it holds tables {listed}); name another --db"
            )

    def begin_study_run(
        self,
        study: Any,
        plan_seed: int,
        environment: dict,
        tool_versions: dict[str, str | None],
        settings: dict,
        owner: Owner | None,
    ) -> int:
        """`owner`: the process running it, None for a fleet's (its workers run it, each its share)."""
        with self.engine.begin() as conn:
            return _insert_study_run(
                conn,
                {
                    "study_path": study.path,
                    "study_source": study.source,
                    "scale": study.scale,
                    "repetitions": study.repetitions,
                    "plan_seed": plan_seed,
                    "started_at": now(),
                    "status": "running",
                    "owner": asdict(owner) if owner else None,
                },
                study,
                environment,
                settings,
                lambda target: tool_versions.get(target.filesystem),
            )

    def store_imported(self, study: Any, environment: dict, settings: dict) -> int:
        """An imported study run (importer.ImportedStudy) with all its runs, in one transaction:
        finished as it is stored, from its first run's start to its last run's end."""
        with self.engine.begin() as conn:
            study_run_id = _insert_study_run(
                conn,
                {
                    "study_path": "\n".join(study.paths),
                    "study_source": "",
                    "scale": 1.0,
                    "repetitions": study.repetitions,
                    "plan_seed": 0,
                    "status": "finished",
                    "started_at": min(r.started_at for r in study.runs),
                    "finished_at": max(r.finished_at for r in study.runs),
                },
                study,
                environment,
                settings,
                lambda target: ", ".join(target.fio_versions),
            )
            for record in study.runs:
                insert_run(conn, study_run_id, record)
        return study_run_id

    def record_host(self, study_run_id: int, host: Host) -> None:
        """Keeps the host's facts with the study run, once (again: a resumed study run, another
        unit of a fleet's): the first record stays."""
        with self.engine.begin() as conn:
            known = conn.execute(
                sa.select(hosts.c.name).where(hosts.c.study_run_id == study_run_id, hosts.c.name == host.name)
            ).first()
            if known is None:
                conn.execute(hosts.insert().values(study_run_id=study_run_id, name=host.name, facts=asdict(host)))

    def hosts(self, study_run_id: int) -> list[Host]:
        """The hosts of a study run's runs, by name (none for a study run stored before version 10)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(hosts.c.facts).where(hosts.c.study_run_id == study_run_id).order_by(hosts.c.name)
            )
            return [Host(**facts) for (facts,) in rows]

    def record_run(self, study_run_id: int, record: RunRecord) -> int:
        """Store a run, if the database is still at this fslab's schema (it may have been migrated
        since it was opened: schema.check_current)."""
        with self.engine.begin() as conn:
            check_current(conn, shown(self.location))
            return insert_run(conn, study_run_id, record)

    def outputs(self, run_id: int) -> list[RawOutput]:
        """A run's raw outputs, by phase and tool."""
        query = (
            sa.select(run_outputs)
            .where(run_outputs.c.run_id == run_id)
            .order_by(run_outputs.c.phase, run_outputs.c.tool)
        )
        with self.engine.connect() as conn:
            return [RawOutput(r.phase, r.tool, unpacked(r)) for r in conn.execute(query)]

    def outputs_of_study_run(
        self, study_run_id: int, tool: str, phase: str | None = "", only: Iterable[int] | None = None
    ) -> dict[int, list[RawOutput]]:
        """Run id → the raw outputs of one tool and phase (None: of every phase) of every run of a
        study run — of the runs `only` names, when given —, in one query (a report reads them all:
        one query per run would be thousands)."""
        query = (
            sa.select(run_outputs)
            .join(runs, runs.c.id == run_outputs.c.run_id)
            .where(
                *self._outputs_of(study_run_id, tool), *([run_outputs.c.phase == phase] if phase is not None else [])
            )
            .order_by(run_outputs.c.run_id, run_outputs.c.phase)
        )
        if only is not None:
            query = query.where(run_outputs.c.run_id.in_(list(only)))
        found: dict[int, list[RawOutput]] = {}
        with self.engine.connect() as conn:
            for r in conn.execute(query):
                found.setdefault(r.run_id, []).append(RawOutput(r.phase, r.tool, unpacked(r)))
        return found

    def output_phases(self, study_run_id: int, tool: str) -> dict[int, list[str]]:
        """Run id → the phases of which a run of a study run has a raw output of `tool`, none of
        their text read: what a report chooses among before it reads only those it draws."""
        query = (
            sa.select(run_outputs.c.run_id, run_outputs.c.phase)
            .join(runs, runs.c.id == run_outputs.c.run_id)
            .where(*self._outputs_of(study_run_id, tool))
        )
        found: dict[int, list[str]] = {}
        with self.engine.connect() as conn:
            for run_id, phase in conn.execute(query.order_by(run_outputs.c.run_id, run_outputs.c.phase)):
                found.setdefault(run_id, []).append(phase)
        return found

    @staticmethod
    def _outputs_of(study_run_id: int, tool: str) -> tuple:
        return runs.c.study_run_id == study_run_id, COUNTED, run_outputs.c.tool == tool

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
                changed = conn.execute(query.values(status="interrupted")).rowcount == 1
                if changed and (marked_run := self.study_run(study_run_id)) is not None:
                    marked.append(marked_run)
        return marked

    def finish_study_run(self, study_run_id: int, status: str, outcome: dict) -> None:
        with self.engine.begin() as conn:
            values = {"status": status, "finished_at": now(), "outcome": outcome}
            conn.execute(study_runs.update().where(study_runs.c.id == study_run_id).values(**values))

    def supersede(self, study_run_id: int, run_ids: Iterable[int]) -> int:
        """Mark failed runs superseded (a systematic failure stopped their study run); how many."""
        query = runs.update().where(
            runs.c.study_run_id == study_run_id, runs.c.id.in_(list(run_ids)), runs.c.status == "failed"
        )
        with self.engine.begin() as conn:
            return conn.execute(query.values(status=SUPERSEDED)).rowcount

    def record_skipped(self, study_run_id: int, target: str, why: str | None) -> None:
        """A target skipped since the study run began (why), or no longer (None), in its settings'
        "skipped" as --skip-unsupported's are: a summary and a resume read them alike."""
        with self.engine.begin() as conn:
            stored = sa.select(study_runs.c.settings).where(study_runs.c.id == study_run_id).with_for_update()
            settings = dict(conn.execute(stored).scalar() or {})
            kept = [s for s in settings.get("skipped", []) if s["target"] != target]
            settings["skipped"] = kept + ([{"target": target, "why": why}] if why is not None else [])
            if not settings["skipped"]:
                del settings["skipped"]
            conn.execute(study_runs.update().where(study_runs.c.id == study_run_id).values(settings=settings))

    def update_settings(self, study_run_id: int, values: dict) -> None:
        """Keys of a study run's settings set anew (a lab's kernels as they fared: lab/study.py)."""
        with self.engine.begin() as conn:
            stored = sa.select(study_runs.c.settings).where(study_runs.c.id == study_run_id).with_for_update()
            settings = dict(conn.execute(stored).scalar() or {}) | values
            conn.execute(study_runs.update().where(study_runs.c.id == study_run_id).values(settings=settings))

    def add_to_lab(self, study_run_id: int, key: str, item: dict) -> None:
        """`item` added to the list `key` of a study run over kernels' settings ("lab": a kernel's
        share done or failed, lab/study.py), in one transaction: a fleet's workers add theirs at once."""
        with self.engine.begin() as conn:
            add_to_lab(conn, study_run_id, key, item)

    def study_run(self, ref: str | int | None = None) -> dict | None:
        """A study run by id (12, or "#12": always an id, since no name begins with "#"), the
        newest of a study by name, or the newest of all. Digits that are both a study run's id
        and a study's name (a study named "2024") are refused, naming both."""
        if isinstance(ref, int) or ref is None:
            return self._newest(None if ref is None else study_runs.c.id == ref)
        if ref.startswith("#") and ref[1:].isdigit():
            return self._newest(study_runs.c.id == int(ref[1:]))
        by_name = self._newest(study_runs.c.study == ref)
        if not ref.isdigit():
            return by_name
        by_id = self._newest(study_runs.c.id == int(ref))
        if by_id is not None and by_name is not None and by_id["id"] != by_name["id"]:
            raise AmbiguousStudyRun(
                f"{ref!r} is both the id of study run {ref} ({by_id['study']}) and the name of study {ref!r} "
                f"(its newest study run is {by_name['id']}): write #{ref} for study run {ref}, "
                f"or #{by_name['id']} for study {ref!r}'s newest"
            )
        return by_id or by_name

    def _newest(self, where: Any) -> dict | None:
        query = sa.select(*_STUDY_RUN_FIELDS).order_by(study_runs.c.id.desc()).limit(1)
        with self.engine.connect() as conn:
            row = conn.execute(query if where is None else query.where(where)).mappings().first()
        return dict(row) if row else None

    def study_runs(self) -> list[dict]:
        with self.engine.connect() as conn:
            return _records(conn.execute(sa.select(*_STUDY_RUN_FIELDS).order_by(study_runs.c.id)))

    def targets(self, study_run_id: int) -> list[dict]:
        return self._in_study_order(targets, study_run_id)

    def workloads(self, study_run_id: int) -> list[dict]:
        return self._in_study_order(workloads, study_run_id)

    def _in_study_order(self, table: sa.Table, study_run_id: int) -> list[dict]:
        query = sa.select(table).where(table.c.study_run_id == study_run_id).order_by(table.c.position)
        with self.engine.connect() as conn:
            return _records(conn.execute(query))

    def runs(self, study_run_id: int, columns: Iterable[str] | None = None) -> list[dict]:
        """Every run of a study run as stored (but those superseded), in the order stored: each with
        all its columns, or with those named."""
        with self.engine.connect() as conn:
            chosen = [runs.c[name] for name in columns] if columns is not None else [runs]
            query = sa.select(*chosen).where(runs.c.study_run_id == study_run_id, COUNTED).order_by(runs.c.id)
            return _records(conn.execute(query))

    def stored_runs(self, study_run_id: int, host: str | None = None, block: int | None = None) -> list[StoredRun]:
        """Every stored run of a study run (or of its runs on `host`, of its `block`) with its
        metrics, in the order they were stored; not those redone (a disturbed run run again: its
        redo holds its place)."""
        query = (
            sa.select(
                runs.c.id,
                runs.c.target,
                runs.c.workload,
                runs.c.repetition,
                runs.c.warmup,
                runs.c.status,
                runs.c.started_at,
                runs.c.finished_at,
                metrics.c.phase,
                metrics.c.name,
                metrics.c.value,
                metrics.c.primary,
                metrics.c.compared,
            )
            .outerjoin(metrics, metrics.c.run_id == runs.c.id)
            .where(
                runs.c.study_run_id == study_run_id,
                COUNTED,
                runs.c.redone == sa.false(),  # a redone run's redo holds its place in the plan
                *([runs.c.host == host] if host is not None else []),
                *([runs.c.block == block] if block is not None else []),
            )
            .order_by(runs.c.id)
        )
        found: dict[int, tuple[StoredRun, list[tuple[str, str, bool, bool]]]] = {}
        with self.engine.connect() as conn:
            for r in conn.execute(query):
                run, flags = found.setdefault(
                    r.id,
                    (
                        StoredRun(
                            r.target,
                            r.workload,
                            r.repetition,
                            r.warmup,
                            r.status == "ok",
                            r.started_at,
                            r.finished_at,
                            {},
                        ),
                        [],
                    ),
                )
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
                runs.c.study_run_id,
                runs.c.id,
                runs.c.target,
                runs.c.workload,
                runs.c.repetition,
                runs.c.block,
                runs.c.warmup,
                runs.c.status,
                metrics.c.phase,
                metrics.c.name,
                metrics.c.value,
                metrics.c.unit,
            )
            .outerjoin(metrics, metrics.c.run_id == runs.c.id)
            .where(runs.c.study_run_id == study_run_id, COUNTED)
            .order_by(runs.c.id, metrics.c.phase, metrics.c.name)
        )
        with self.engine.connect() as conn:
            return list(map(RunMetric._make, conn.execute(query).all()))

    def histograms(self, study_run_id: int) -> list[StoredHistogram]:
        """Every histogram its runs' opt-in monitors counted (`--trace block`), in the order the
        runs were stored: what `fslab export` writes (histograms table) and the page reads."""
        h = run_histograms
        query = (
            sa.select(
                runs.c.id, runs.c.target, runs.c.workload, runs.c.repetition,
                h.c.phase, h.c.device, h.c.direction, h.c.kind, h.c.buckets,
            )
            .join(h, h.c.run_id == runs.c.id)
            .where(runs.c.study_run_id == study_run_id, COUNTED)
            .order_by(runs.c.id, h.c.phase, h.c.device, h.c.direction, h.c.kind)
        )  # fmt: skip
        with self.engine.connect() as conn:
            return [
                StoredHistogram(*row[:8], tuple((float(lo), float(hi), int(n)) for lo, hi, n in row[8]))
                for row in conn.execute(query).all()
            ]

    def sample_groups(self, study_run_id: int) -> SampleGroups:
        """The samples of every successful measured run (no warm-ups), grouped by cell in run
        order, with each metric's unit, direction and roles. Read as the statistics need them and
        no more: each run's cell once, then its values keyed as samples are (phase.name, joined by
        the database), then each metric's kind once — not a cell's two names and a metric's two
        on every value's row (a summary of 2,000 runs, 63,000 values: a third of the time)."""
        measured = (runs.c.study_run_id == study_run_id, *MEASURED)
        cells_query = sa.select(runs.c.id, runs.c.workload, runs.c.target, runs.c.block).where(*measured)
        key = sa.case(
            (metrics.c.phase == "", metrics.c.name), else_=metrics.c.phase + PHASE_SEPARATOR + metrics.c.name
        )  # model.qualified, in SQL
        values_query = (
            sa.select(metrics.c.run_id, key, metrics.c.value)
            .where(metrics.c.run_id.in_(sa.select(runs.c.id).where(*measured)))
            .order_by(metrics.c.run_id, metrics.c.phase, metrics.c.name)
        )
        kinds_query = (
            sa.select(
                runs.c.workload,
                metrics.c.phase,
                metrics.c.name,
                metrics.c.unit,
                metrics.c.higher_is_better,
                metrics.c.primary,
                metrics.c.compared,
            )
            .distinct()
            .join(runs, metrics.c.run_id == runs.c.id)
            .where(*measured)
        )
        workload_kinds = sa.select(workloads.c.name, workloads.c.spec).where(workloads.c.study_run_id == study_run_id)
        with self.engine.connect() as conn:
            cell_of, block_of = {}, {}
            for run_id, workload, target, block in self._plain_rows(conn, cells_query):
                cell_of[run_id], block_of[run_id] = (workload, target), block
            found, kinds = self._plain_rows(conn, values_query), conn.execute(kinds_query).all()
            tools = {name: spec.get("kind", "fio") for name, spec in conn.execute(workload_kinds)}
        values: dict[tuple[str, str], dict[str, list[float]]] = {}
        blocks: dict[tuple[str, str], dict[str, list[int]]] = {}
        cell: dict[str, list[float]] = {}
        cell_blocks: dict[str, list[int]] = {}
        last, block = None, 0
        for run_id, key_, value in found:
            if run_id != last:  # a run's values come together
                last, cell = run_id, values.setdefault(cell_of[run_id], {})
                cell_blocks, block = blocks.setdefault(cell_of[run_id], {}), block_of[run_id]
            samples = cell.get(key_)
            if samples is None:
                samples = cell[key_] = []
                cell_blocks[key_] = []
            samples.append(value)
            cell_blocks[key_].append(block)
        units, higher_is_better, flags = {}, {}, []
        for workload, phase, name, unit, higher, primary, compared in kinds:
            metric = qualified(phase, name)
            units[metric], higher_is_better[metric] = unit, higher
            flags.append((workload, metric, primary, compared))
        return SampleGroups(values, units, higher_is_better, Roles.flagged(flags), tools, blocks)

    def host_samples(self, study_run_id: int) -> dict[tuple[str, str, str | None], dict[str, list[float]]]:
        """(workload, target, host) → metric → the values of its successful measured runs in run
        order: sample_groups' values with the host each run ran on (NULL: the study run's own
        machine), for a study run whose runs span several hosts, and a study's history
        (statistics/history_reading.py)."""
        query = (
            sa.select(runs.c.workload, runs.c.target, runs.c.host, metrics.c.phase, metrics.c.name, metrics.c.value)
            .join(runs, metrics.c.run_id == runs.c.id)
            .where(runs.c.study_run_id == study_run_id, *MEASURED)
            .order_by(runs.c.id, metrics.c.phase, metrics.c.name)
        )
        values: dict[tuple[str, str, str | None], dict[str, list[float]]] = {}
        with self.engine.connect() as conn:
            for workload, target, host, phase, name, value in self._plain_rows(conn, query):
                values.setdefault((workload, target, host), {}).setdefault(qualified(phase, name), []).append(value)
        return values

    def boot_samples(
        self, study_run_id: int
    ) -> dict[tuple[str, str, str | None], dict[str, list[tuple[str | None, float]]]]:
        """host_samples' values, each with the boot its run ran in (runs.boot_id, schema 19; None
        before): a kernel's runs over several boots are compared by their boot means (statistics/boots.py)."""
        query = (
            sa.select(
                runs.c.workload, runs.c.target, runs.c.host, runs.c.boot_id, metrics.c.phase, metrics.c.name,
                metrics.c.value,
            )
            .join(runs, metrics.c.run_id == runs.c.id)
            .where(runs.c.study_run_id == study_run_id, *MEASURED)
            .order_by(runs.c.id, metrics.c.phase, metrics.c.name)
        )  # fmt: skip
        values: dict[tuple[str, str, str | None], dict[str, list[tuple[str | None, float]]]] = {}
        with self.engine.connect() as conn:
            for workload, target, host, boot, phase, name, value in self._plain_rows(conn, query):
                cell = values.setdefault((workload, target, host), {})
                cell.setdefault(qualified(phase, name), []).append((boot, value))
        return values

    def _plain_rows(self, conn: sa.Connection, query: sa.Select) -> Sequence[tuple]:
        """A query's rows as the database's driver gives them, plain tuples: for the reads of tens of
        thousands of rows (a study run's samples) whose columns SQLAlchemy converts nothing of — text
        and numbers, no JSON, boolean or time —, where making each a Row costs a summary of 2,000
        runs more than its driver's reading them (0.07 s of 0.14, bench/pg_scale.py). PostgreSQL's
        are read in binary (psycopg's cursor(binary=True)): the numbers as the server holds them,
        not as text to parse, the same values (another 0.03 s). The driver's own calls pass
        SQLAlchemy's handle_error by: their failure is made a DatabaseLost here."""
        try:
            if conn.dialect.name == "postgresql":
                compiled = query.compile(dialect=conn.dialect)
                driver = conn.connection.driver_connection
                assert driver is not None  # a connection in use has its driver's
                with driver.cursor(binary=True) as cursor:
                    return cursor.execute(compiled.string, compiled.params).fetchall()
            with conn.execute(query) as result:
                return result.cursor.fetchall()
        except conn.dialect.loaded_dbapi.Error as exc:
            lost = failed(exc, conn.dialect.loaded_dbapi, self.location)
            if lost is None:
                raise
            raise lost from exc

    def metric_values(self, study_run_id: int, names: Iterable[str]) -> dict[tuple[int, str, str], float]:
        """(run id, phase, name) → the value of each metric named, of every run of a study run."""
        query = sa.select(metrics.c.run_id, metrics.c.phase, metrics.c.name, metrics.c.value).join(
            runs, metrics.c.run_id == runs.c.id
        )
        with self.engine.connect() as conn:
            found = conn.execute(
                query.where(runs.c.study_run_id == study_run_id, COUNTED, metrics.c.name.in_(list(names)))
            )
            return {(run_id, phase, name): value for run_id, phase, name, value in found}


def _records(result: sa.CursorResult) -> list[dict]:
    """Each row a dict of its columns, by name: made from the rows' tuples (a summary reads
    thousands of runs; a RowMapping each, then a dict of it, cost a quarter more)."""
    keys = list(result.keys())
    return [dict(zip(keys, row)) for row in result.all()]


def _insert_study_run(
    conn: sa.Connection, values: dict, study: Any, environment: dict, settings: dict, tool_version: Any
) -> int:
    """A study run's row with its targets and workloads (each with `spec()`), in study order."""
    study_run_id = inserted_id(
        conn.execute(
            study_runs.insert().values(
                study=study.name,
                environment=environment,
                settings=settings,
                fslab_version=environment.get("fslab", ""),
                uid=new_study_run_uid(),
                **values,
            )
        )
    )
    conn.execute(
        targets.insert(),
        [
            {
                "study_run_id": study_run_id,
                "name": t.name,
                "position": i,
                "filesystem": t.filesystem,
                "spec": t.spec(),
                "tool_version": tool_version(t),
            }
            for i, t in enumerate(study.targets)
        ],
    )
    conn.execute(
        workloads.insert(),
        [
            {"study_run_id": study_run_id, "name": w.name, "position": i, "spec": w.spec()}
            for i, w in enumerate(study.workloads)
        ],
    )
    return study_run_id


# zlib, not a better compressor: it is in Python's standard library, reads 2,000 runs' outputs in a
# tenth of a second, and keeps fio's JSON in a fifth of its room (bench/report_scale.py prints the bytes per run).
PACK_LEVEL = 6


def inserted_id(result: sa.CursorResult[Any]) -> int:
    """The primary key of the one row an INSERT just made."""
    key = result.inserted_primary_key
    if key is None:
        raise FslabError("the database gave no key for the row just inserted")
    return key[0]


def pack(text: str) -> bytes:
    """A raw output as run_outputs.packed holds it (schema 14)."""
    return zlib.compress(text.encode(), PACK_LEVEL)


def unpacked(row: Any) -> str:
    """A run_outputs row's text: packed since schema 14, as text before."""
    return row.output if row.packed is None else zlib.decompress(row.packed).decode()


def insert_run(conn: sa.Connection, study_run_id: int, record: RunRecord) -> int:
    """A run's row with its raw outputs and metrics, in the caller's transaction (a fleet's worker
    decides in that same transaction whether the run is still its to store: fleet/steady.py)."""
    values = asdict(record)
    values.pop("metrics")
    values.pop("outputs")
    values.pop("histograms")
    run_id = inserted_id(conn.execute(runs.insert().values(study_run_id=study_run_id, **values)))
    if record.outputs:
        packed = [
            {"run_id": run_id, "phase": o.phase, "tool": o.tool, "output": "", "packed": pack(o.text)}
            for o in record.outputs
        ]
        conn.execute(run_outputs.insert(), packed)
    if record.metrics:
        conn.execute(metrics.insert(), [{"run_id": run_id, **asdict(m)} for m in record.metrics])
    if record.histograms:
        conn.execute(
            run_histograms.insert(),
            [
                {
                    "run_id": run_id, "phase": h.phase, "device": h.device, "direction": h.direction,
                    "kind": h.kind, "buckets": [list(b) for b in h.buckets],
                }
                for h in record.histograms
            ],
        )  # fmt: skip
    return run_id


def add_to_lab(conn: sa.Connection, study_run_id: int, key: str, item: dict) -> None:
    """ResultsDB.add_to_lab in the transaction of `conn` (lab/study.py: a boot's runs stored with its
    share recorded done, at once or not at all). Its row locked for no key update: the runs other
    workers insert at once only lock its key, and wait for nothing (PostgreSQL: no deadlock)."""
    stored = sa.select(study_runs.c.settings).where(study_runs.c.id == study_run_id).with_for_update(key_share=True)
    settings = dict(conn.execute(stored).scalar() or {})
    lab = dict(settings.get("lab") or {})
    lab[key] = [*lab.get(key, []), item]
    conn.execute(study_runs.update().where(study_runs.c.id == study_run_id).values(settings=settings | {"lab": lab}))
