"""`fslab worker`: one test host of a fleet. It registers itself (fleet_workers), then takes the
units of its own queue one at a time and runs each through the same runner as `fslab run` —
guard, journal, its own work directory — storing runs with its host in the shared database.

Two threads. Procrastinate's worker (asyncio: it fetches units, heartbeats, listens for new ones)
runs in a thread of its own; each unit it takes is handed to the main thread, which runs it
there, where Ctrl-C and `kill` are heard as `fslab run` hears them (core/interruption.py): the run
under way is released cleanly, the unit is given back to the queue (UnitReleased: procrastinate
retries it at once) and the worker exits: 0 after SIGTERM (a service manager's stop), 130 after
Ctrl-C (cli.worker). A worker killed outright stops heartbeating: after the lapse any worker
queues its unit again, and the host's next worker runs only what that host's share still lacks
(runner.run_share). A worker only cut off that long finds its unit or block taken when it stores
its next run: it keeps that run aside (fleet/lease.py).

A worker started with --fio-address also takes requests to serve fio for the clients of another
host's unit (shared_storage.py), one at a time with its own units. A unit made by another fslab, or
on a database of another schema, it refuses (versions.py).

Whatever runs on the host — a unit, serving fio — runs under its host lock (hostlock.py): one
benchmark at a time on a host, whichever worker of its name, whichever study run. A work
directory busy with another fslab (a local `fslab run`, another worker on the same directory) is
waited for, tried again after growing pauses (Workdir.claim), never a unit's failure."""

from __future__ import annotations

import asyncio
import faulthandler
import queue as queues
import signal
import tempfile
import threading
import traceback
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from procrastinate.retry import BaseRetryStrategy, RetryDecision

from fslab import version
from fslab.core.errors import FslabError
from fslab.core.interruption import interrupted
from fslab.core.workdir import Workdir
from fslab.fio import Endpoint, Network
from fslab.fleet import lease, logs, queue, roster, spread, units, versions
from fslab.fleet.hostlock import HostLock, HostLockLost
from fslab.fleet.lease import Lease, UnitWithdrawn
from fslab.fleet.shared_storage import FioSettings, serve_fio_for, unit_services
from fslab.fleet.steady import LOST, SteadyResults, connection_lost
from fslab.model import Host, Study
from fslab.model.kernel_hosts import AT
from fslab.model.records import now
from fslab.results.location import shown
from fslab.results.schema import SCHEMA_VERSION, SchemaChanged
from fslab.running import environment

T = TypeVar("T")

# How long a worker may go unheard before its unit is taken again; it heartbeats four times in
# that while. --heartbeat-lapse changes it (tests: seconds); each worker is judged by its own
# (queue.requeue_stalled).
DEFAULT_LAPSE = 60.0
# When procrastinate forgets a silent worker (its stalled-worker timeout, applied by each worker
# as it starts): never sooner than this, or a worker with a short lapse would erase one with a
# long lapse between two of its heartbeats, and its unit, worker-less, be handed out while it runs.
FORGOTTEN_AFTER = 86400.0


# lab/study.py's run_unit_on_kernels: (study, its settings' "lab", keywords) → (outcome, failed shares)
KernelRunner = Callable[..., tuple[dict, list[dict]]]


class UnitReleased(Exception):
    """The unit was given back unfinished (its worker stopped): the queue hands it out again."""


class UnitFailed(Exception):
    """The unit cannot run on this host (its study refused here, or its host's every target
    unsupported): recorded with why, not taken again."""


@dataclass(frozen=True)
class WorkerSettings:
    location: str  # the shared database's URL
    name: str | None  # --name (default: the host name)
    labels: list[str]
    workdir: Path
    lapse: float = DEFAULT_LAPSE
    fio_address: Endpoint | None = None  # --fio-address: where it serves fio for other hosts' units
    allowed: tuple[Network, ...] = ()  # --allow-network
    # How a unit over kernels runs: lab/study.py's run_unit_on_kernels, given by the CLI (the lab is
    # the fleet's sibling floor); None: this worker refuses such units (UnitFailedHere, said why).
    kernels: KernelRunner | None = None

    @property
    def fio(self) -> FioSettings:
        return FioSettings(self.location, self.fio_address, self.allowed)

    @property
    def heartbeat(self) -> float:
        return self.lapse / 4


@dataclass(frozen=True)
class Unit:
    study_run_id: int
    host: str
    claimed_at: datetime | None = None  # when the queue handed it to this worker
    lease: Lease | None = None  # as this worker took it (None: not yet)

    @property
    def generation(self) -> int | None:
        return None if self.lease is None else self.lease.generation


@dataclass(frozen=True)
class ServeFio:
    """A request to serve fio for the clients of study run `study_run_id` (shared_storage.py)."""

    study_run_id: int
    host: str


@dataclass
class _Handoff:
    """Units from the queue's thread to the main thread, each with the future its task waits on."""

    units: queues.Queue = field(default_factory=queues.Queue)
    loop: asyncio.AbstractEventLoop | None = None
    stopping: asyncio.Event | None = None
    worker: Any = None  # procrastinate's Worker under way
    app: Any = None  # procrastinate's App, open on the queue's loop
    failure: BaseException | None = None  # what ended the queue's thread, if not a stop

    def take(self, unit: Unit | ServeFio) -> None:
        """In procrastinate's task thread: hand the unit over, wait until it has run."""
        done: Future = Future()
        self.units.put((unit, done))
        done.result()  # raises what the main thread set: UnitReleased, UnitFailed

    def call(self, work: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
        """In the main thread: `work(app)` run on the queue's loop; its result."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(work(self.app), self.loop).result()

    def worker_id(self) -> int | None:
        return self.worker.worker_id if self.worker is not None else None

    def stop(self) -> None:
        if self.loop is not None and self.stopping is not None:
            self.loop.call_soon_threadsafe(self._stop_in_loop)

    def _stop_in_loop(self) -> None:
        assert self.stopping is not None
        self.stopping.set()
        if self.worker is not None:
            self.worker.stop()


class _ReleasedAgain(BaseRetryStrategy):
    """Procrastinate's retry strategy for units: one given back is queued again at once, one
    refused (versions.py) after `refused_after` seconds, any other end is final."""

    def __init__(self, refused_after: float):
        self.refused_after = refused_after

    def get_retry_decision(self, *, exception: BaseException, job: Any) -> RetryDecision | None:
        if isinstance(exception, versions.UnitRefused):
            # (retry_in takes whole seconds; this is what procrastinate makes of it, to the microsecond)
            return RetryDecision(retry_at=datetime.now(UTC) + timedelta(seconds=self.refused_after))
        return RetryDecision(retry_in={"seconds": 0}) if isinstance(exception, UnitReleased) else None


def serve(settings: WorkerSettings, say: Callable[[str], None]) -> None:
    """Run the worker until a signal stops it (KeyboardInterrupt, raised again once all is
    released and the unit under way, if any, given back)."""
    logs.said_in_one_line(say)
    db = SteadyResults(settings.location, say)
    queue.conninfo(settings.location)  # PostgreSQL, or a clear refusal
    faulthandler.register(
        signal.SIGUSR1, all_threads=True
    )  # `kill -USR1` a worker that seems stuck: each thread's stack on its standard error
    host = environment.host(settings.name)
    if AT in host.name:  # "@" parts a kernel from its worker in the name of a kernel's host (model/kernel_hosts.py)
        raise FslabError(f"worker name {host.name!r} holds {AT!r}: give the worker a --name without it")
    queue.install(db.engine)
    roster.register(db.engine, host, settings.labels, settings.lapse, settings.fio_address)
    hostlock = HostLock(settings.location, host.name, settings.lapse, say)
    for other in hostlock.start():
        say(
            f"warning: another worker named {host.name} is running: {other}; the two take turns, one benchmark at a "
            f"time on {host.name}; give each host a --name of its own (docs/fleet.md)"
        )
    handoff = _Handoff()
    thread = threading.Thread(
        target=_queue_thread, args=(settings, host.name, handoff, db, say), name="fslab-queue", daemon=True
    )
    thread.start()
    serves = f"; serving fio at {settings.fio_address} when asked" if settings.fio_address else ""
    what = f"{', '.join(settings.labels) or 'no labels'}; fslab {version()}, schema {SCHEMA_VERSION}"
    say(f"worker {host.name} ({what}) waiting for units on {queue.queue_of(host.name)}{serves}")
    refused: set[str] = set()  # what it said it refused: each said once
    current: Future | None = None
    try:
        while thread.is_alive():
            try:
                unit, current = handoff.units.get(timeout=0.5)
            except queues.Empty:
                continue
            taker = partial(spread.BlockTaker, db, handoff.call, handoff.worker_id, wait=settings.heartbeat / 2)
            _run_handed(unit, current, db, host, settings, say, taker, refused, hostlock)
            current = None
        raise FslabError(f"worker {host.name} stopped: {handoff.failure or 'its queue ended'}")
    except KeyboardInterrupt:
        if current is not None and not current.done():
            current.set_exception(UnitReleased())
            what = "request to serve fio" if isinstance(unit, ServeFio) else "unit"
            say(f"{what} given back: study run {unit.study_run_id} on {unit.host} will be taken again")
        handoff.stop()
        while thread.is_alive():  # a unit the queue handed out meanwhile goes back too
            thread.join(timeout=0.2)
            _release_waiting(handoff)
        raise
    finally:
        hostlock.stop()


def _release_waiting(handoff: _Handoff) -> None:
    while True:
        try:
            _, waiting = handoff.units.get_nowait()
        except queues.Empty:
            return
        waiting.set_exception(UnitReleased())


def _run_handed(
    unit: Unit | ServeFio,
    done: Future,
    db: SteadyResults,
    host: Host,
    settings: WorkerSettings,
    say: Callable[[str], None],
    taker: Callable[..., spread.BlockTaker],
    refused: set[str],
    hostlock: HostLock,
) -> None:
    """Run the unit the queue handed over (in the main thread) and settle its future: its task
    ends, and procrastinate records the job's end."""
    try:
        if isinstance(unit, ServeFio):
            _serve_handed(unit, db, host, settings, say, hostlock)
        else:
            unit = _leased(unit, db, host)
            run_unit(unit, db, host, Workdir(settings.workdir), say, taker, settings.fio, hostlock, settings.kernels)
    except KeyboardInterrupt:
        raise
    except HostLockLost as exc:  # given back: its next worker waits for the host lock, then runs what is missing
        say(f"unit given back: study run {unit.study_run_id} on {unit.host}: {exc}")
        done.set_exception(UnitReleased())
    except UnitFailed as exc:
        done.set_exception(exc)
    except UnitWithdrawn as exc:  # its job and its row are the other worker's now: left as they are
        say(f"unit withdrawn: {exc}")
        done.set_result(None)
    except versions.UnitRefused as exc:  # left for a worker of the right versions: recorded, given back
        said = f"unit refused: study run {unit.study_run_id} on {unit.host}: {exc}"
        if said not in refused:
            refused.add(said)
            say(said)
        assert isinstance(unit, Unit)  # a request to serve fio refused fails (_serve_handed)
        _settle_refused(db, unit, str(exc))
        done.set_exception(exc)
    except BaseException as exc:  # an error of fslab's own: recorded as the unit's failure, the worker goes on
        why = str(exc) if isinstance(exc, FslabError) else "".join(traceback.format_exception(exc))
        if interrupted():  # raised while releasing after a stop: the stop still ends the worker, its unit given back
            say(f"while stopping: {why}")
            raise KeyboardInterrupt from None
        if connection_lost(exc):  # a call the workers' rule does not cover: given back, never failed for an outage
            say(
                f"given back: study run {unit.study_run_id} on {unit.host}: "
                f"database connection lost ({type(exc).__name__})"
            )
            done.set_exception(UnitReleased())
            return
        say(
            f"{'request to serve fio' if isinstance(unit, ServeFio) else 'unit'} "
            f"failed: study run {unit.study_run_id} on {unit.host}: {why}"
        )
        if isinstance(unit, Unit):
            _settle(db, unit, "failed", why=why)
        done.set_exception(UnitFailed(why))
    else:
        done.set_result(None)


def _settle_refused(db: SteadyResults, unit: Unit, why: str) -> None:
    """The unit waits for a worker of the right versions; why, for `fslab status`."""
    values = {"state": versions.REFUSED, "why": why, "current": None}
    db.steadily(lambda: units.update(db.engine, unit.study_run_id, unit.host, unit.generation, **values))


def _serve_handed(
    request: ServeFio,
    db: SteadyResults,
    host: Host,
    settings: WorkerSettings,
    say: Callable[[str], None],
    hostlock: HostLock,
) -> None:
    """A request to serve fio: one that fails is said and ends (never retried: the driving run
    says which client did not serve), with no unit of this host's to record it in. It is served
    under the host lock (a benchmark's load on this host), waited for while the study run runs."""
    if request.host != host.name:
        raise UnitFailed(f"a request for host {request.host!r} was in the queue of {host.name!r}: not served")
    running = lambda: db.steadily(lambda: units.any_running(db.engine, request.study_run_id))  # noqa: E731
    try:
        with hostlock.held(say, still_wanted=running) as held:
            if not held:
                say(f"study run {request.study_run_id} has no unit running any more: fio not served")
                return
            serve_fio_for(request.study_run_id, db, host, Workdir(settings.workdir), settings.fio, say)
    except FslabError as exc:
        say(f"fio not served for study run {request.study_run_id}: {exc}")
        raise UnitFailed(str(exc)) from None


def _leased(unit: Unit, db: SteadyResults, host: Host) -> Unit:
    """The unit, leased to this worker (fleet/lease.py) before anything of it is read."""
    from fslab.core.errors import Refused

    if unit.host != host.name:
        raise Refused(f"a unit for host {unit.host!r} was in the queue of {host.name!r}: not run")
    taken = db.steadily(lambda: lease.take_unit(db.engine, unit.study_run_id, unit.host))
    if taken is None:
        raise UnitFailedHere(f"study run {unit.study_run_id} has no unit for {host.name} in the database: not run")
    return replace(unit, lease=taken)


def run_unit(
    unit: Unit,
    db: SteadyResults,
    host: Host,
    workdir: Workdir,
    say: Callable[[str], None],
    taker: Callable[..., spread.BlockTaker] | None = None,
    fio: FioSettings | None = None,
    hostlock: HostLock | None = None,
    on_kernels: KernelRunner | None = None,
) -> None:
    """This host's share of the study run (`unit`, leased to this worker): its study as stored
    (untrusted: parsed and checked as any study file), less the targets this host cannot run
    (recorded with why, once: a unit taken again skips what it skipped before), run by the runner;
    only what this host's share still lacks runs. Spread (fleet/spread.py), its share is the blocks
    `taker` takes from the queue. Each run is stored under the unit's lease, or its block's. It
    runs under `hostlock` (none: this process alone keeps the host), its work directory waited for
    while another fslab uses it; meanwhile the unit is "waiting", and says why."""
    from fslab.running.resume import share_of
    from fslab.running.runner import run_share, unsupported_here

    say(f"took unit: study run {unit.study_run_id} on {host.name}")
    row = db.steadily(lambda: db.study_run(unit.study_run_id))
    if row is None:
        raise UnitFailedHere(f"study run {unit.study_run_id} is not in the database")
    db.steadily(lambda: versions.check_runnable(db.engine, shown(db.location), unit.study_run_id, row["fslab_version"]))
    try:
        units.check_self_contained(row["study_source"], f"study run {unit.study_run_id}")
    except units.NotSelfContained as exc:
        raise UnitFailedHere(str(exc)) from None
    kernels = units.kernel_share(row["settings"], f"study run {unit.study_run_id}")  # before anything runs
    with tempfile.TemporaryDirectory(prefix="fslab-fleet-") as nothing_beside:  # the study names no file: none is read
        share = db.steadily(lambda: share_of(db, unit.study_run_id, host.name, Path(nothing_beside)))
    if kernels is not None:
        if on_kernels is None:
            raise UnitFailedHere(f"study run {unit.study_run_id} runs over kernels, which this worker cannot run")
        return _run_on_kernels(unit, db, host, workdir, say, share, kernels, row, hostlock, on_kernels)
    skipped = db.steadily(lambda: units.skipped(db.engine, unit.study_run_id, host.name))
    if skipped is None:
        skipped = [{"target": u.target, "why": u.why} for u in unsupported_here(share.study)]
    study = share.study.without({s["target"] for s in skipped})
    if not study.targets:
        raise UnitFailedHere(
            f"{host.name} can run none of the study's targets: "
            + "; ".join(f"{s['target']}: {s['why']}" for s in skipped)
        )
    spreading = taker is not None and spread.is_spread(row["settings"])
    if spreading and skipped:
        raise UnitFailedHere(
            f"{host.name} cannot run every target of a spread study run (its hosts share one plan): "
            + "; ".join(f"{s['target']}: {s['why']}" for s in skipped)
        )
    planned = (
        None if spreading else len(study.cells) * (share.repetitions.runs + share.repetitions.warmup)
    )  # spread: as many as it takes
    running = {
        "state": "running",
        "skipped": skipped,
        "planned": planned,
        "why": None,
        "claimed_at": unit.claimed_at,
        "started_at": None,
    }
    waiting = partial(_waiting, db, unit, say)
    with hostlock.held(waiting) if hostlock is not None else nullcontext():
        db.steadily(lambda: units.update(db.engine, unit.study_run_id, host.name, unit.generation, **running))
        share = replace(share, study=study)
        blocks = taker(unit.study_run_id, host.name) if spreading and taker is not None else None
        try:
            with (
                db.leased(lambda record: blocks.holding if blocks is not None else unit.lease),
                unit_services(
                    share.study, host, unit.study_run_id, db, fio or FioSettings(db.location, None, ())
                ) as clients,
            ):
                run_share(
                    share,
                    db,
                    workdir,
                    host=host,
                    ended=partial(_ended, db, unit, say),
                    observer=_UnitObserver(db, unit, say, blocks, hostlock),
                    take=blocks,
                    clients=clients,
                    skip=partial(_skipped_midway, db, unit),
                    busy=lambda busy, pause: waiting(f"{busy}; trying again in {pause:.0f} s"),
                )
        except SchemaChanged as exc:  # migrated beneath this unit: the run it measured is not stored
            raise versions.UnitRefused(str(exc)) from None
        finally:
            if blocks is not None:
                blocks.give_back()  # a block under way when the unit stopped or failed (none once every block is done)


def _run_on_kernels(
    unit: Unit,
    db: SteadyResults,
    host: Host,
    workdir: Workdir,
    say: Callable[[str], None],
    share: Any,
    kernels: units.KernelShare,
    row: dict,
    hostlock: HostLock | None,
    on_kernels: KernelRunner,
) -> None:
    """A unit over kernels: this host's share is the whole plan under each kernel, as `fslab run
    --kernel` runs it (lab/study.py's run_unit_on_kernels): a lab VM booted here per kernel and
    boot, "host" this host's own kernel, each kernel's runs stored under its host, "RELEASE@WORKER"
    (model/kernel_hosts.py). Nothing is skipped per host: a kernel that cannot run here (no QEMU, its
    package not to be had, its VM not booting) fails its share, recorded with why (the study run's
    settings, and the unit's note), and the others go on; the unit fails where none ran."""
    study = share.study
    per_boot = len(study.cells) * (share.repetitions.runs + share.repetitions.warmup)
    running = {"state": "running", "skipped": [], "planned": per_boot * kernels.boots * len(kernels.kernels),
               "why": None, "claimed_at": unit.claimed_at, "started_at": now()}  # fmt: skip
    waiting = partial(_waiting, db, unit, say)

    def told(line: str) -> None:
        """The lab's lines said, the latest kept as the unit's current for the progress table
        (`fslab status`): a VM's runs are told as its boot ends, not as each starts."""
        say(line)
        try:
            units.update(db.engine, unit.study_run_id, unit.host, unit.generation, current=line)
        except LOST:
            pass

    def fence(conn: Any) -> None:  # in the transaction storing a boot's runs: the unit still this worker's
        if unit.lease is not None and not unit.lease.held(conn):
            raise unit.lease.withdrawn()

    with hostlock.held(waiting) if hostlock is not None else nullcontext():
        db.steadily(lambda: units.update(db.engine, unit.study_run_id, host.name, unit.generation, **running))
        try:
            outcome, failed = on_kernels(
                study, row["settings"]["lab"], results=db, study_run_id=unit.study_run_id, plan_seed=share.seed,
                repetitions=share.repetitions, work=workdir, machine=host, say=told,
                observer=_UnitObserver(db, unit, say, None, hostlock), fence=fence,
                check=(lambda: hostlock.check(say)) if hostlock is not None else None,  # before each boot, a VM's too
                busy=lambda busy, pause: waiting(f"{busy}; trying again in {pause:.0f} s"), baseline=share.baseline,
            )  # fmt: skip
        except KeyboardInterrupt:  # given back (serve): its next worker goes on from the shares recorded done
            values = {"state": "released", "current": None}
            db.steadily(lambda: units.update(db.engine, unit.study_run_id, unit.host, unit.generation, **values))
            raise
        except SchemaChanged as exc:
            raise versions.UnitRefused(str(exc)) from None
    why = "; ".join(f"{f['kernel']} failed: {f['why']}" for f in failed) or None
    _settle(db, unit, "done", outcome=outcome, why=why)
    say(f"unit done: study run {unit.study_run_id} on {unit.host}")


def _waiting(db: SteadyResults, unit: Unit, say: Callable[[str], None], why: str) -> None:
    """The unit waits for its host (another worker of its name benchmarks there) or its work
    directory (another fslab uses it): said, and shown by `fslab status` (best effort)."""
    say(f"unit waits: study run {unit.study_run_id} on {unit.host}: {why}")
    try:
        units.update(db.engine, unit.study_run_id, unit.host, unit.generation, state="waiting", why=why)
    except LOST:
        pass


def _skipped_midway(db: SteadyResults, unit: Unit, target: str, why: str | None) -> None:
    """A target this host skips since its runs failed alike (None: no longer), kept with what it
    skipped at first: a unit taken again skips it too. (Runs failing alike across targets stop
    the unit instead — runner.StudyStopped —, which then fails with that cause, once: a failed
    unit is never queued again.)"""

    def record() -> None:
        kept = [s for s in units.skipped(db.engine, unit.study_run_id, unit.host) or [] if s["target"] != target]
        now_skipped = kept + ([{"target": target, "why": why}] if why is not None else [])
        units.update(db.engine, unit.study_run_id, unit.host, unit.generation, skipped=now_skipped)

    db.steadily(record)


class UnitFailedHere(FslabError):
    """What stops a unit on this host, said to the user and recorded with the unit."""


def _ended(db: SteadyResults, unit: Unit, say: Callable[[str], None], status: str, outcome: dict) -> None:
    if status == "finished":
        _settle(db, unit, "done", outcome=outcome)
        say(f"unit done: study run {unit.study_run_id} on {unit.host}")
    else:
        db.steadily(
            lambda: units.update(
                db.engine, unit.study_run_id, unit.host, unit.generation, state="released", current=None
            )
        )


def _settle(db: SteadyResults, unit: Unit, state: str, **values: object) -> None:
    db.steadily(lambda: units.ended(db.engine, unit.study_run_id, unit.host, state, unit.generation, **values))


class _UnitObserver:
    """What the runner tells: said on the worker's output, and the run under way kept with the
    unit for the progress table (best effort: a lost connection loses only that line)."""

    def __init__(
        self,
        db: SteadyResults,
        unit: Unit,
        say: Callable[[str], None],
        blocks: spread.BlockTaker | None = None,
        hostlock: HostLock | None = None,
    ):
        self.db, self.unit, self.say, self.blocks, self.hostlock = db, unit, say, blocks, hostlock
        self.started = False  # a run of this unit started: the queue's time ends there (fleet_units.started_at)

    def announce(self, study: Study, skipped: list) -> None:
        from fslab.study import describe_study

        self.say(f"{study.name}: {describe_study(study)}")

    def notice(self, message: str) -> None:
        self.say(message)

    def starting(self, planned: Any, index: int, total: int) -> None:
        if self.hostlock is not None:
            self.hostlock.check(self.say)  # HostLockLost: the unit stops here, before the run
        cell = planned.cell
        current = (
            f"{cell.target.name} · {cell.workload.name} · {'warm-up' if planned.warmup else 'run'} {planned.repetition}"
        )
        self.say(f"starting {current}")
        try:
            first = {} if self.started else {"started_at": now(), "state": "running", "why": None}  # waiting no more
            units.update(
                self.db.engine, self.unit.study_run_id, self.unit.host, self.unit.generation, current=current, **first
            )
            self.started = True
            if self.blocks is not None:
                self.blocks.started(planned.block)
        except LOST:
            pass

    def finished(self, planned: Any, record: Any) -> None:
        self.say(
            f"stored {record.target} · {record.workload} · run {record.repetition}: {record.status}"
            + (f" ({record.error})" if record.error else "")
        )

    def already_stored(self, planned: Any, index: int, total: int) -> None:
        pass


def _queue_thread(
    settings: WorkerSettings, name: str, handoff: _Handoff, db: SteadyResults, say: Callable[[str], None]
) -> None:
    try:
        asyncio.run(_serve_queue(settings, name, handoff, db, say))
    except BaseException as exc:  # noqa: BLE001  (said by the main thread, which ends the worker)
        handoff.failure = exc


async def _serve_queue(
    settings: WorkerSettings, name: str, handoff: _Handoff, db: SteadyResults, say: Callable[[str], None]
) -> None:
    """Procrastinate's worker on this host's queue, started again whenever it stops on its own
    (its database connection lost when it needed it), until the main thread stops it."""
    from procrastinate.worker import Worker

    app = queue.app_for(settings.location)

    def unit_task(study_run_id: int, host: str) -> None:
        handoff.take(Unit(int(study_run_id), str(host), now()))

    def serve_fio_task(study_run_id: int, host: str) -> None:
        handoff.take(ServeFio(int(study_run_id), str(host)))

    app.task(name=queue.UNIT_TASK, retry=_ReleasedAgain(settings.lapse))(unit_task)
    app.task(name=queue.SERVE_TASK, retry=_ReleasedAgain(settings.lapse))(serve_fio_task)
    handoff.loop, handoff.stopping = asyncio.get_running_loop(), asyncio.Event()
    async with app.open_async():
        handoff.app = app
        housekeeping = asyncio.create_task(_housekeeping(app, settings, name, handoff, db, say))
        try:
            while not handoff.stopping.is_set():
                handoff.worker = Worker(
                    app, queues=[queue.queue_of(name)], name=name, concurrency=1, install_signal_handlers=False,
                    update_heartbeat_interval=settings.heartbeat,
                    stalled_worker_timeout=max(settings.lapse, FORGOTTEN_AFTER),
                    fetch_job_polling_interval=settings.heartbeat, abort_job_polling_interval=settings.heartbeat,
                )  # fmt: skip
                try:
                    await handoff.worker.run()
                except Exception as exc:  # noqa: BLE001  (its connection lost: started again)
                    say(f"queue: {type(exc).__name__}: {exc}; starting again")
                if not handoff.stopping.is_set():
                    await asyncio.sleep(settings.heartbeat)
        finally:
            housekeeping.cancel()


async def _housekeeping(
    app: Any, settings: WorkerSettings, name: str, handoff: _Handoff, db: SteadyResults, say: Callable[[str], None]
) -> None:
    """Every heartbeat: this worker heard from (fleet_workers, and procrastinate's own heartbeat,
    beside its worker's: that one ends with the first error, and a worker waiting for its unit to
    end after losing its connection must not look dead, or its unit would be handed out again
    while it runs), and any unit whose worker's heartbeat lapsed queued again, whichever worker
    notices first."""
    while True:
        try:
            worker_id = handoff.worker.worker_id if handoff.worker is not None else None
            if worker_id is not None:
                await app.job_manager.update_heartbeat(worker_id)
            await asyncio.to_thread(roster.heard_from, db.engine, name)
            lapses = await asyncio.to_thread(roster.lapses, db.engine)
            for job_id in await queue.requeue_stalled(app, lapses, settings.lapse):
                say(f"queued again: unit (job {job_id}) of a worker whose heartbeat lapsed")
        except (Exception, *LOST) as exc:  # noqa: BLE001  (the database away: the next beat tries again)
            say(f"housekeeping: {type(exc).__name__}")
        await asyncio.sleep(settings.heartbeat)
