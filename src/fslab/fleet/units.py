"""Each host's share of a fleet's study run — a unit — as the database keeps it (fleet_units,
schema 11): queued, waiting (for its host or its work directory: why), running, released (its
worker was stopped: taken again), refused (by a worker of other versions: fleet/versions.py),
done, failed; what that host skipped and why; the run under way. And the progress table `fslab
run --on` and `fslab status` show: host, runs done of planned, current cell, ETA, from the runs
stored."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa

from fslab.core.errors import FslabError
from fslab.model.kernel_hosts import named_kernel
from fslab.model.records import SUPERSEDED, now
from fslab.results.db import COUNTED
from fslab.results.schema import fleet_blocks, fleet_units, runs, study_runs

ENDED = ("done", "failed")


@dataclass(frozen=True)
class Progress:
    """One host's share, as the progress table shows it."""

    host: str
    state: str
    done: int  # runs stored
    planned: int | None
    current: str
    eta: timedelta | None  # from the runs it stored so far
    why: str  # a failed unit's error, or what the host skipped
    # runs stored but not counted (records.SUPERSEDED): measured after its lease was taken, or
    # failed by a systematic cause
    superseded: int = 0

    @property
    def ended(self) -> bool:
        return self.state in ENDED


# A study run over kernels on a fleet (`fslab run --kernel K … --on HOSTS`): each unit runs the
# study under every kernel named, `boots` boots each (lab/study.py's run_unit_on_kernels). What the
# unit carries of it is its study run's settings' "lab", as a local run over kernels stores it, plus
# its format: a worker refuses a unit whose format it does not know, as it refuses one of another
# fslab (versions.py), rather than run it as a plain unit of its host. (A worker of an fslab that
# knows no kernels runs another version: versions.check_runnable refuses it before anything.)
LAB_FORMAT = 1


class BadUnit(FslabError):
    """A unit whose stored settings no fslab made (the database is untrusted): failed, said why."""


@dataclass(frozen=True)
class KernelShare:
    """The kernels each host's unit runs the study under, and how many boots of each."""

    kernels: tuple[str, ...]
    boots: int

    def encoded(self) -> dict:
        """As the study run's settings keep it ("lab"): with what its workers add as they go, each
        share done and each kernel failed, named by host (model/kernel_hosts.py)."""
        return {"kernels": list(self.kernels), "boots": self.boots, "failed": [], "done": [], "format": LAB_FORMAT}


def kernel_share(settings: dict | None, where: str) -> KernelShare | None:
    """A unit's kernels, from its study run's settings (None: a plain unit of its host). Refused
    (versions.UnitRefused) where their format is not this worker's; BadUnit where no fslab made them
    (each release is checked by the lab as it runs them: lab/study.py's run_unit_on_kernels)."""
    from fslab.fleet.versions import UnitRefused

    lab = (settings or {}).get("lab")
    if lab is None:
        return None
    if not isinstance(lab, dict):
        raise BadUnit(f"{where}: its settings' lab is not a table of kernels")
    if lab.get("format") != LAB_FORMAT:
        raise UnitRefused(
            f"{where} runs over kernels as format {lab.get('format')!r} says, and this worker knows format "
            f"{LAB_FORMAT}: run a worker of the fslab that queued it on this host"
        )
    kernels, boots = lab.get("kernels"), lab.get("boots")
    if not isinstance(kernels, list) or not kernels or not all(isinstance(k, str) for k in kernels):
        raise BadUnit(f"{where}: its settings name no kernels")
    if not isinstance(boots, int) or isinstance(boots, bool) or not 1 <= boots <= 1000:
        raise BadUnit(f"{where}: its settings' boots {boots!r} is not a number of boots")
    for key, fields in _RECORDED.items():  # what its workers recorded, read back as they wrote it
        entries = lab.get(key, [])
        if not isinstance(entries, list):
            raise BadUnit(f"{where}: its settings' lab.{key} is not a list")
        for at, entry in enumerate(entries):
            if not isinstance(entry, dict) or not all(_of(entry.get(name), kind) for name, kind in fields.items()):
                said = ", ".join(f"{name} ({kind.__name__})" for name, kind in fields.items())
                raise BadUnit(f"{where}: its settings' lab.{key}[{at}] is not a table of {said}")
    return KernelShare(tuple(kernels), boots)


_RECORDED = {  # lab/study.py's entries: a share done, a kernel failed, each of its host
    "done": {"host": str, "boot": int},
    "failed": {"host": str, "kernel": str, "boot": int, "why": str},
}


def _of(value: object, kind: type) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


def queued(engine: sa.Engine, study_run_id: int, hosts: list[str]) -> None:
    with engine.begin() as conn:
        at = now()
        conn.execute(
            fleet_units.insert(),
            [
                {"study_run_id": study_run_id, "host": h, "state": "queued", "updated_at": at, "queued_at": at}
                for h in hosts
            ],
        )


def hosts_of(engine: sa.Engine, study_run_id: int) -> list[str]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                sa.select(fleet_units.c.host)
                .where(fleet_units.c.study_run_id == study_run_id)
                .order_by(fleet_units.c.host)
            ).scalars()
        )


def skipped(engine: sa.Engine, study_run_id: int, host: str) -> list[dict] | None:
    """What the host skipped when it first took the unit (None: not taken yet)."""
    with engine.connect() as conn:
        return conn.execute(sa.select(fleet_units.c.skipped).where(*_unit(study_run_id, host))).scalar()


def update(engine: sa.Engine, study_run_id: int, host: str, generation: int | None = None, **values: object) -> None:
    """The unit's row; `generation`: only while the unit is leased so (fleet/lease.py): a worker
    whose unit was taken by another writes nothing of it."""
    with engine.begin() as conn:
        unit = fleet_units.update().where(*_unit(study_run_id, host, generation))
        conn.execute(unit.values(updated_at=now(), **values))


def ended(
    engine: sa.Engine, study_run_id: int, host: str, state: str, generation: int | None = None, **values: object
) -> None:
    """The unit done or failed (`generation`: as update's); the study run finished once every unit
    has ended (the one that ends last, whichever it is, says so: the study run's row is locked
    while units are counted), or, spread, once every block is (a host that never came back leaves
    its unit waiting)."""
    with engine.begin() as conn:
        conn.execute(sa.select(study_runs.c.id).where(study_runs.c.id == study_run_id).with_for_update())
        unit = fleet_units.update().where(*_unit(study_run_id, host, generation))
        if not conn.execute(unit.values(state=state, current=None, updated_at=now(), **values)).rowcount:
            return  # its lease was taken: the unit is another worker's
        units = conn.execute(
            sa.select(fleet_units.c.host, fleet_units.c.state, fleet_units.c.outcome).where(
                fleet_units.c.study_run_id == study_run_id
            )
        ).all()
        blocks = conn.execute(
            sa.select(sa.func.count(), sa.func.count(fleet_blocks.c.finished_at)).where(
                fleet_blocks.c.study_run_id == study_run_id
            )
        ).one()
        spread_done = blocks[0] > 0 and blocks[0] == blocks[1]
        if all(u.state in ENDED for u in units) or spread_done:
            outcome = (
                {f"{u.host} · {cell}": o for u in units for cell, o in (u.outcome or {}).items()}
                if len(units) > 1
                else units[0].outcome or {}
            )
            conn.execute(
                study_runs.update()
                .where(study_runs.c.id == study_run_id, study_runs.c.status != "finished")
                .values(status="finished", finished_at=now(), outcome=outcome)
            )


def finished(engine: sa.Engine, study_run_id: int) -> bool:
    with engine.connect() as conn:
        return (
            conn.execute(sa.select(study_runs.c.status).where(study_runs.c.id == study_run_id)).scalar() == "finished"
        )


def progress(engine: sa.Engine, study_run_id: int) -> list[Progress]:
    """Every unit of the study run, by host."""
    counted = (
        sa.select(runs.c.host, sa.func.count(), sa.func.min(runs.c.started_at), sa.func.max(runs.c.finished_at))
        .where(runs.c.study_run_id == study_run_id, COUNTED)
        .group_by(runs.c.host)
    )
    kept_aside = (
        sa.select(runs.c.host, sa.func.count())
        .where(runs.c.study_run_id == study_run_id, runs.c.status == SUPERSEDED)
        .group_by(runs.c.host)
    )
    with engine.connect() as conn:
        stored: dict[str, tuple] = {}
        for host, n, first, last in conn.execute(counted):  # a kernel's host is its worker's unit's
            had = stored.get(worker := _worker_of(host))
            stored[worker] = (n, first, last) if had is None else (had[0] + n, min(had[1], first), max(had[2], last))
        superseded: dict[str, int] = {}
        for host, n in conn.execute(kept_aside).all():
            superseded[_worker_of(host)] = superseded.get(_worker_of(host), 0) + n
        units = conn.execute(
            sa.select(fleet_units).where(fleet_units.c.study_run_id == study_run_id).order_by(fleet_units.c.host)
        ).all()
    found = []
    for u in units:
        done, first, last = stored.get(u.host, (0, None, None))
        eta = None
        if u.planned and done and first and last and u.state not in ENDED:
            eta = (last - first) / done * max(u.planned - done, 0)
        why = u.why or "; ".join(f"skipped {s['target']}: {s['why']}" for s in u.skipped or [])
        found.append(Progress(u.host, u.state, done, u.planned, u.current or "", eta, why, superseded.get(u.host, 0)))
    return found


def _worker_of(host: str) -> str:
    """The worker whose unit stored runs under `host` (a kernel's, "RELEASE@WORKER"; else itself)."""
    return named_kernel(host)[1] or host


def any_running(engine: sa.Engine, study_run_id: int) -> bool:
    """Whether some host's unit of the study run is running now."""
    with engine.connect() as conn:
        return (
            conn.execute(
                sa.select(fleet_units.c.host)
                .where(fleet_units.c.study_run_id == study_run_id, fleet_units.c.state == "running")
                .limit(1)
            ).first()
            is not None
        )


def _unit(study_run_id: int, host: str, generation: int | None = None) -> tuple:
    leased = (fleet_units.c.generation == generation,) if generation is not None else ()
    return (fleet_units.c.study_run_id == study_run_id, fleet_units.c.host == host, *leased)


class NotSelfContained(Exception):
    pass


def check_self_contained(source: str, where: str) -> None:
    """A fleet's study reaches its workers as text, from the database: a file beside it (a fio
    job_file) is not there, and a path read on a worker would be one the database chose."""
    import tomllib

    try:
        tables = tomllib.loads(source).get("workload", [])
    except tomllib.TOMLDecodeError:
        return  # the study's own parser says what is wrong, and where
    named = [w.get("name", "?") for w in tables if isinstance(tables, list) and isinstance(w, dict) and "job_file" in w]
    if named:
        raise NotSelfContained(
            f"{where}: workload(s) {', '.join(map(repr, named))} name a "
            "job_file; a fleet's workers read the study from the database, "
            "not files beside it: write the job's options in the "
            'study ([[workload]] with kind = "fio" and its options)'
        )
