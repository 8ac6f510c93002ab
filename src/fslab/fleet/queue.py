"""The fleet's queue: procrastinate, living in the results database itself (no broker beyond it).

A unit is one host's share of a study run: one procrastinate job of the task UNIT_TASK on that
host's own queue (QUEUE_PREFIX + name), holding the lock of (study run, host) — two workers of
one name never run it at once — and the queueing lock of the same — it is never queued twice.
(Units of different study runs on one host take turns under the host lock: hostlock.py.)
A worker that stops heartbeating for longer than the lapse (killed, its host down) leaves its
unit "doing": any worker finds it stalled and queues it again (requeue_stalled).

A spread study run (`--spread`) queues, beside its hosts' units, one job of BLOCK_TASK per block
of its plan on a queue of its own (spread_queue): a host's unit takes block after block from it
(take_block: procrastinate's own fetch, so no two hosts take one block) until none is left —
work-stealing, a faster host runs more. A block's job is never run by procrastinate's worker
itself: it is only fetched by a unit, finished or given back by it, and taken again, like a unit,
when its worker's heartbeat lapses.

A client host of a shared-storage workload gets a job of SERVE_TASK on its own queue, from the
unit that drives it: "serve fio for study run N while its units run". Its worker takes it between
its own units (one at a time: a host serves fio only while it runs no benchmark of its own)."""

from __future__ import annotations

from collections.abc import Mapping

import sqlalchemy as sa

from fslab.core.errors import FslabError
from fslab.results.location import shown

QUEUE_PREFIX = "fslab.host."
UNIT_TASK = "fslab.unit"
BLOCK_TASK = "fslab.block"
SPREAD_PREFIX = "fslab.study-run."
SERVE_TASK = "fslab.serve_fio"
# Held while procrastinate's schema is installed: several workers may start on a new database at once.
_SCHEMA_LOCK = 0x66736C61  # "fsla"


class NotAFleetDatabase(FslabError):
    """A fleet needs a PostgreSQL database: its queue lives there."""


def queue_of(host: str) -> str:
    return QUEUE_PREFIX + host


def spread_queue(study_run_id: int) -> str:
    return f"{SPREAD_PREFIX}{study_run_id}"


def unit_lock(study_run_id: int, host: str) -> str:
    return f"fslab.unit.{study_run_id}.{host}"


def conninfo(location: str) -> str:
    """libpq's URL for a results database's URL (SQLAlchemy's driver name dropped): what psycopg,
    under procrastinate, connects with. Never printed (it may hold a password)."""
    try:
        url = sa.make_url(location)
    except sa.exc.ArgumentError:
        url = None
    if url is None or url.get_backend_name() != "postgresql":
        raise NotAFleetDatabase(
            f"--db {shown(location)}: a fleet's queue lives in PostgreSQL; "
            "give --db postgresql://user@host/database (or set FSLAB_DB)"
        )
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


def app_for(location: str):  # noqa: ANN201  (procrastinate.App: imported here alone)
    """A procrastinate App on the results database (not yet open)."""
    import procrastinate

    return procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=conninfo(location), min_size=1, max_size=4)
    )


def install(engine: sa.Engine) -> None:
    """Procrastinate's tables and functions, made once in the results database (the first worker
    or dispatcher to come makes them; the others wait for it, then find them)."""
    from procrastinate.schema import SchemaManager

    with engine.begin() as conn:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK})
        if conn.execute(sa.text("SELECT to_regclass('procrastinate_jobs')")).scalar() is None:
            # psycopg's own execute, with no parameters: the script's % signs stay as they are
            driver = conn.connection.driver_connection
            assert driver is not None  # a connection in use has its driver's
            driver.execute(SchemaManager.get_schema())


def enqueue(app, study_run_id: int, host: str) -> int | None:  # noqa: ANN001
    """Queue `host`'s share of the study run (app open, synchronously); its job id, None if queued already."""
    from procrastinate.exceptions import AlreadyEnqueued

    lock = unit_lock(study_run_id, host)
    try:
        return app.configure_task(UNIT_TASK, queue=queue_of(host), lock=lock, queueing_lock=lock).defer(
            study_run_id=study_run_id, host=host
        )
    except AlreadyEnqueued:
        return None


def enqueue_blocks(app, study_run_id: int, count: int) -> None:  # noqa: ANN001
    """Queue the blocks 1…count of a spread study run (app open, synchronously)."""
    for block in range(1, count + 1):
        lock = f"fslab.block.{study_run_id}.{block}"
        app.configure_task(BLOCK_TASK, queue=spread_queue(study_run_id), queueing_lock=lock).defer(
            study_run_id=study_run_id, block=block
        )


async def take_block(app, study_run_id: int, worker_id: int) -> tuple[int, int] | None:  # noqa: ANN001
    """The next block of a spread study run no host has taken, now "doing" for this worker: (its job id, its block)."""
    job = await app.job_manager.fetch_job([spread_queue(study_run_id)], worker_id)
    return None if job is None else (job.id, int(job.task_kwargs["block"]))


async def taken_by(app, study_run_id: int, worker_id: int) -> tuple[int, int] | None:  # noqa: ANN001
    """The block of a spread study run "doing" for this worker (take_block's, its answer lost with
    its connection): (its job id, its block)."""
    jobs = await app.job_manager.list_jobs_async(queue=spread_queue(study_run_id), status="doing", worker_id=worker_id)
    return next(((job.id, int(job.task_kwargs["block"])) for job in jobs), None)


async def block_done(app, job_id: int) -> None:  # noqa: ANN001
    """A block's job ended. Finished by the host it was taken from just as another took it (the
    block was that host's still: fleet/lease.py), either host may end it: once is enough."""
    from procrastinate.exceptions import ConnectorException
    from procrastinate.jobs import Status

    try:
        await app.job_manager.finish_job_by_id_async(job_id, Status.SUCCEEDED, delete_job=False)
    except ConnectorException:
        if [job.status for job in await app.job_manager.list_jobs_async(id=job_id)] != [Status.SUCCEEDED.value]:
            raise


async def give_back(app, job_id: int) -> None:  # noqa: ANN001
    """A block (or unit) left unfinished, queued again at once for any host to take (or already:
    its worker's heartbeat had lapsed, and no host has taken it yet)."""
    from procrastinate import utils
    from procrastinate.exceptions import ConnectorException
    from procrastinate.jobs import Status

    try:
        await app.job_manager.retry_job_by_id_async(job_id, retry_at=utils.utcnow())
    except ConnectorException:
        if [job.status for job in await app.job_manager.list_jobs_async(id=job_id)] != [Status.TODO.value]:
            raise


def request_fio(app, study_run_id: int, host: str) -> int | None:  # noqa: ANN001
    """Ask `host`'s worker to serve fio for the study run (app open, synchronously); the job's id,
    None if such a request already waits there."""
    from procrastinate.exceptions import AlreadyEnqueued

    lock = f"fslab.serve_fio.{study_run_id}.{host}"
    try:
        return app.configure_task(SERVE_TASK, queue=queue_of(host), lock=lock, queueing_lock=lock).defer(
            study_run_id=study_run_id, host=host
        )
    except AlreadyEnqueued:
        return None


async def requeue_stalled(app, lapses: Mapping[str, float | None], default: float) -> list[int]:  # noqa: ANN001
    """Units, blocks and requests to serve fio whose worker's heartbeat lapsed, queued again;
    their job ids. Each job is judged by the lapse its own worker declared (`lapses`, by host;
    None or absent: `default`), whoever judges: a worker that may go unheard for ten minutes is
    not taken for dead by one that may not for ten seconds. A block is its unit's worker's: the
    same procrastinate worker holds both."""
    own = {host: default if lapse is None else lapse for host, lapse in lapses.items()}
    requeued: list[int] = []
    for lapse in sorted({default, *own.values()}):
        stalled = [
            job
            for task in (UNIT_TASK, BLOCK_TASK, SERVE_TASK)
            for job in await app.job_manager.get_stalled_jobs(task_name=task, seconds_since_heartbeat=lapse)
        ]
        hosts = {
            job.worker_id: job.queue.removeprefix(QUEUE_PREFIX)
            for job in stalled
            if job.queue.startswith(QUEUE_PREFIX) and job.worker_id is not None
        }
        for job in stalled:
            host = (
                job.queue.removeprefix(QUEUE_PREFIX) if job.queue.startswith(QUEUE_PREFIX) else hosts.get(job.worker_id)
            )
            judged_by = own.get(host, default) if host is not None else max(own.values(), default=default)
            if judged_by == lapse and job.id not in requeued:
                await app.job_manager.retry_job(job)
                requeued.append(job.id)
    return requeued
