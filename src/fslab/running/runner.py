"""Running a study: for each planned run, provision → prepare (lay out what the workload reads)
→ drop caches → workload (its measured windows watched by the monitors, `Windows`) → parse →
teardown → store, each workload through its kind
(workloads/base.py), in interleaved order. A failed run is stored with its error and the study
goes on — unless runs fail alike (fslab.running.systematic): then their target is skipped, or, across
targets, the study run stops (StudyStopped). An interrupted or stopped study releases what it
holds and is marked interrupted, and a resumed one (running/resume.py) runs only what its plan still lacks.
A run has a time limit (its workload's).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import replace
from functools import partial
from typing import Protocol

from fslab.core.block_devices import BlockDevice, DeviceFacts, facts, resolve
from fslab.core.cgroups import memory_limited
from fslab.core.checks import Unsupported
from fslab.core.errors import FslabError
from fslab.core.interruption import raise_if_interrupted
from fslab.core.journal import Journal
from fslab.core.names import file_name
from fslab.core.scratch import scratch_directory
from fslab.core.system import CommandError, joined, sync_and_drop_caches, time_limit
from fslab.core.workdir import Workdir, WorkdirBusy
from fslab.devices import layers
from fslab.devices.loop import Image, ImageSource, check_free_space, image_file
from fslab.devices.named import NamedSource, confirmed_devices
from fslab.devices.source import DeviceSource, discard
from fslab.devices.zram import ZramSource
from fslab.filesystems import FILESYSTEMS, Filesystem, Provisioned
from fslab.fio import fill_device
from fslab.model import Host, Metric, RawOutput, Roles, Study, Target, Workload, with_primary
from fslab.model.findings import DISTURBED, Finding
from fslab.model.records import STDERR_LINES, Histogram, RunFailure, RunKey, StoredRun, now
from fslab.monitors import Monitor, Records, Synced, WorkloadSaid, collect, for_run, measuring
from fslab.monitors.space import CompressionRatio
from fslab.results import ResultsDB, RunRecord
from fslab.results.location import DatabaseLost
from fslab.results.owner import Owner
from fslab.running import doctor, environment
from fslab.running.plan import BlockWithdrawn, PlannedRun, Planner, Repetitions, TakenBlocks, Tally, new_seed
from fslab.running.resume import Resumable
from fslab.running.systematic import FailureWatch, Skip, Stop, missing_tool, signature_of
from fslab.study import space_problem
from fslab.workloads import kind_of, workload_problems
from fslab.workloads.base import (
    FSYNCS,
    IOS,
    READ_BYTES,
    WRITTEN_BYTES,
    ClientDirectory,
    StudyScope,
    Window,
    WorkloadKind,
)

# What a study run holds on the host beyond its targets, for as long as it runs (lab/hygiene.py:
# the host tuned for lab VMs, --tune-host): given the work directory's journal, entered once the
# work directory is claimed and what a killed fslab left there released (else that clean-up would
# undo it), left before the journal starts afresh; what it yields goes into the study run's
# environment ({"vm_hygiene": …}).
Hold = Callable[[Journal], AbstractContextManager[dict]]


class RunObserver(Protocol):
    def announce(
        self, study: Study, skipped: list[Unsupported]
    ) -> None: ...  # the study as it will run, before anything is made
    def notice(self, message: str) -> None: ...
    def starting(self, planned: PlannedRun, index: int, total: int) -> None: ...
    def finished(self, planned: PlannedRun, record: RunRecord) -> None: ...
    def already_stored(self, planned: PlannedRun, index: int, total: int) -> None: ...  # resuming: not run again


class StudyCannotRun(FslabError):
    pass


class StudyStopped(FslabError):
    """Runs failed alike across targets (fslab.running.systematic): the study run stopped, interrupted,
    with its failed runs superseded, to be made again by a resume once the cause is fixed."""

    def __init__(self, study_run_id: int, stop: Stop, superseded: int, *, resumable: bool = True):
        self.study_run_id, self.stop = study_run_id, stop
        then = (
            f"Once that is fixed, `fslab run --resume {study_run_id}` (with the same --db and --workdir) "
            "makes them again"
            if resumable
            else "This host's unit fails with that cause (a failed unit is not queued again)"
        )
        superseded_ = f"its {superseded} run(s) that failed so are superseded (not counted)"
        super().__init__(f"study run {study_run_id} stopped: {stop.cause}; {superseded_}. {then}")


# Told a target skipped since the study run began, and why (None: no longer skipped).
SkipRecorder = Callable[[str, "str | None"], None]


def run_study(
    study: Study,
    db: ResultsDB,
    workdir: Workdir,
    *,
    repetitions: Repetitions | None = None,
    seed: int | None = None,
    baseline: str | None = None,
    observer: RunObserver | None = None,
    destroy_flags: tuple[str, ...] = (),
    skip_unsupported: bool = False,
    host: Host | None = None,
    clients: ClientDirectory | None = None,
    hold: Hold | None = None,
    already_claimed: bool = False,
) -> int:
    """Run the study (default: its own repetitions, exactly); returns the study run's id.
    `baseline` (--baseline: one target for all; default: each target's own, as settled when the study
    was read) guides adaptive runs, which stop comparisons beyond doubt.
    `destroy_flags` are the --destroy-data paths that confirm the user's devices the study names.
    `skip_unsupported`: targets this machine cannot run are skipped (and recorded), not refused.
    `host`: the machine its runs are recorded as run on (default: this one, by its host name).
    `clients`: where the hosts its workloads' `clients` name serve fio (docs/shared-storage.md).
    `hold`: what the run holds on the host besides (Hold), recorded in its environment.
    `already_claimed`: the caller holds the work directory (`claimed`, its own hold entered: a
    study run over kernels, across its rounds), which this run neither claims nor cleans again."""
    named, skipped = _check_can_run(study, workdir, destroy_flags, skip_unsupported=skip_unsupported)
    study = study.without({u.target for u in skipped})
    repetitions = repetitions or Repetitions(runs=study.repetitions, warmup=study.warmup)
    study = replace(study, repetitions=repetitions.runs, warmup=repetitions.warmup)  # as stored with the study run
    plan_seed = seed if seed is not None else study.seed if study.seed is not None else new_seed()
    planner = Planner(
        study.cells, repetitions, plan_seed, baseline
    )  # refuses a --baseline no target answers before anything begins
    if observer:
        observer.announce(study, skipped)
    settings = (
        repetitions.describe() | ({"baseline": baseline} if baseline else {}) | study_run_settings(study, skipped)
    )  # all a resumed study run needs again
    versions = {kind: FILESYSTEMS[kind].version() for kind in {t.filesystem for t in study.targets}}
    with nullcontext() if already_claimed else claimed(study, workdir, observer), held(hold, workdir) as holding:
        study_run_id = db.begin_study_run(
            study,
            plan_seed,
            environment.collect(workdir.root) | holding,
            versions,
            settings,
            Owner.current(workdir.root),
        )
        _run_blocks(
            study_run_id,
            planner,
            db,
            workdir,
            named,
            observer,
            Tally(),
            host=host,
            clients=clients,
            traces=study.traces,
            redo_disturbed=study.redo_disturbed,
        )
    return study_run_id


def study_run_settings(study: Study, skipped: list[Unsupported]) -> dict:
    """What the study run keeps beside its repetitions: how it was scaled, whether the user
    opted out of the ceiling (model/ceiling.py), what it skipped and why."""
    settings: dict = {"scale_sizes_only": True} if study.scale_sizes_only else {}
    if study.no_ceiling:
        settings["no_ceiling"] = True
    if study.traces:
        settings["traces"] = list(study.traces)
    if study.redo_disturbed:
        settings["redo_disturbed"] = True
    if skipped:
        settings["skipped"] = [{"target": u.target, "why": u.why} for u in skipped]
    return settings


def resume_study(
    resumable: Resumable,
    db: ResultsDB,
    workdir: Workdir,
    *,
    observer: RunObserver | None = None,
    destroy_flags: tuple[str, ...] = (),
    host: Host | None = None,
    hold: Hold | None = None,
) -> int:
    """Continue an interrupted study run with its own plan: the planner hands out its blocks again,
    runs already stored are taken as they are, and only the others run. Returns its id. `hold`: as
    run_study's (its environment is the one the study run began with: what it yields is not kept)."""
    named, _ = _check_can_run(resumable.study, workdir, destroy_flags, resuming=True)
    with claimed(resumable.study, workdir, observer), held(hold, workdir):
        if not db.take_over(resumable.study_run_id, Owner.current(workdir.root)):
            raise StudyCannotRun(
                f"study run {resumable.study_run_id} is no longer interrupted: another fslab has resumed it"
            )
        planner = Planner(resumable.study.cells, resumable.repetitions, resumable.seed, resumable.baseline)
        done = {run.key: run for run in resumable.stored}
        tally = Tally(resumable.started_at)
        _run_blocks(
            resumable.study_run_id,
            planner,
            db,
            workdir,
            named,
            observer,
            tally,
            done,
            host=host,
            dropped=resumable.dropped,
            traces=resumable.study.traces,
            redo_disturbed=resumable.study.redo_disturbed,
        )
        if done and observer:  # only where a time budget was judged differently on replay
            observer.notice(f"{len(done)} stored run(s) were not planned again; they stay stored")
    return resumable.study_run_id


def run_share(
    share: Resumable,
    db: ResultsDB,
    workdir: Workdir,
    *,
    host: Host,
    ended: Callable[[str, dict], None],
    observer: RunObserver | None = None,
    take: Callable[[], int | None] | None = None,
    clients: ClientDirectory | None = None,
    skip: SkipRecorder | None = None,
    busy: Callable[[WorkdirBusy, float], None] | None = None,
) -> None:
    """One host's share of a fleet's study run (fleet/worker.py): the study run's plan on `host`,
    of which only what `share.stored` (this host's stored runs: the resume key includes the host)
    lacks is run. The study run is the fleet's and goes on: `ended` hears how this share ended
    ("finished" or "interrupted") and its planner's outcome. The targets this host cannot run
    are left out of `share.study` by the caller, who records them. With `take` (a spread study
    run), only the blocks it hands out run, and a run any host stored is not run again: what the
    other hosts stored is read afresh with each block (one may have stored part of it, then died).
    `clients`: where the hosts its workloads' `clients` name serve fio (fleet/shared_storage.py).
    `skip` records a target this host skips once its runs failed alike (default: nowhere but the
    observer's notice); runs failing alike across targets stop the share (StudyStopped). `busy`
    hears why a busy work directory is waited for (default: refused, WorkdirBusy)."""
    named, _ = _check_can_run(share.study, workdir, (), skip_unsupported=True)
    with claimed(share.study, workdir, observer, busy):
        whole = Planner(share.study.cells, share.repetitions, share.seed, share.baseline)
        planner: Planner | TakenBlocks = whole
        done = {run.key: run for run in share.stored}
        if take is not None:

            def take_fresh() -> int | None:
                number = take()
                if number is not None:
                    done.update((run.key, run) for run in db.stored_runs(share.study_run_id, block=number))
                return number

            planner = TakenBlocks(whole, take_fresh)
        _run_blocks(
            share.study_run_id,
            planner,
            db,
            workdir,
            named,
            observer,
            Tally(share.started_at),
            done,
            host=host,
            clients=clients,
            ended=ended,
            skip=skip or (lambda target, why: None),
            traces=share.study.traces,
            redo_disturbed=share.study.redo_disturbed,
        )


def unsupported_here(study: Study) -> list[Unsupported]:
    """The targets of `study` this machine cannot run (a kernel feature or tool it lacks), and why."""
    return doctor.unsupported_targets(study)


def _check_can_run(
    study: Study,
    workdir: Workdir,
    destroy_flags: tuple[str, ...],
    *,
    skip_unsupported: bool = False,
    resuming: bool = False,
) -> tuple[dict[str, BlockDevice], list[Unsupported]]:
    """Everything that can be checked before anything is attached or formatted, all at once;
    returns the user's devices the study names, confirmed, and the targets to skip. Only what
    the machine lacks for one target is skipped, never a refusal: a refused option, job or
    device stops the whole study, skipping or not."""
    named, refused = confirmed_devices(study, destroy_flags, space_problem)
    unsupported = doctor.unsupported_targets(study)
    problems = doctor.study_problems(study, workdir.root) + workload_problems(study, workdir) + refused
    if not skip_unsupported:
        problems[:0] = [str(u) for u in unsupported]
    elif {u.target for u in unsupported} >= {t.name for t in study.targets}:
        problems[:0] = [f"{u} (every target is unsupported here: nothing would run)" for u in unsupported]
    if problems:
        hint = (
            ""
            if skip_unsupported or resuming or not unsupported
            else "\n`fslab run --skip-unsupported` skips the targets this machine cannot run and runs the others"
        )
        raise StudyCannotRun(
            "the study cannot run here; nothing was attached or formatted:\n  "
            + "\n  ".join(dict.fromkeys(problems))
            + hint
        )
    return named, unsupported if skip_unsupported else []


@contextmanager
def claimed(
    study: Study | None,
    workdir: Workdir,
    observer: RunObserver | None,
    busy: Callable[[WorkdirBusy, float], None] | None = None,
) -> Iterator[None]:
    """The work directory, to this study run alone, with whatever a killed fslab left in it released
    first; then room checked for `study`'s images (None: none are made here)."""
    with workdir.claim(busy):
        for outcome in workdir.journal.clean_up():
            if observer:
                observer.notice(
                    f"left by an interrupted fslab: {outcome.kind} {outcome.ident}: {outcome.status}"
                    + (f" ({outcome.detail})" if outcome.detail else "")
                )
        if study is not None:
            _check_image_space(study, workdir)
        yield
        workdir.journal.clean_up()  # all released by now: the journal starts afresh


def held(hold: Hold | None, workdir: Workdir) -> AbstractContextManager[dict]:
    """What the study run holds besides (Hold), entered inside `claimed`: what it yields goes into
    the study run's environment."""
    return hold(workdir.journal) if hold is not None else nullcontext({})


def _run_blocks(
    study_run_id: int,
    planner: Planner | TakenBlocks,
    db: ResultsDB,
    workdir: Workdir,
    named: dict[str, BlockDevice],
    observer: RunObserver | None,
    tally: Tally,
    done: dict[RunKey, StoredRun] | None = None,
    *,
    host: Host | None = None,
    clients: ClientDirectory | None = None,
    ended: Callable[[str, dict], None] | None = None,
    skip: SkipRecorder | None = None,
    dropped: Iterable[str] = (),
    traces: Iterable[str] = (),
    redo_disturbed: bool = False,
) -> None:
    """Run block after block until the planner has no more; every run is stored as it ends, with
        the host it ran on. A planned run found in `done` (stored before a resume) is taken from
        there, and removed. How it ended ("finished", "interrupted") and the planner's outcome go to
        `ended` (default: the study run's own row). Runs failing alike (fslab.running.systematic) skip their
        target — recorded by `skip` (default: in the study run's settings) — or stop the study run;
        the targets in `dropped` were skipped so before a resume: their runs are passed over. Every run
    is watched by the opt-in monitors `traces` names too (--trace). With `redo_disturbed`, a
    measured run found disturbed is stored set aside (redone) and run again (`redone`)."""
    done = {} if done is None else done
    host = host or environment.host()
    db.record_host(study_run_id, host)
    boot = environment.boot_id()
    skip = skip or partial(db.record_skipped, study_run_id)
    watch = _Watched(study_run_id, db, planner, observer, skip, dropped, resumable=ended is None)
    status: str | None = "interrupted"
    storing: RunRecord | None = None  # a run ended and not yet stored
    try:
        with ExitStack() as stack:
            for (
                filesystem
            ) in FILESYSTEMS.values():  # what their runs share (zfs-fuse's daemon), until the study run ends
                stack.enter_context(filesystem.across_runs(workdir.journal))
            sources = Sources(workdir, stack, named, observer.notice if observer else lambda _: None, clients)
            while block := planner.next_block(
                tally.samples, tally.elapsed(), tally.seconds_per_run(), tally.roles, tally.blocks
            ):
                for planned in block:
                    index = planner.handed_out - len(block) + planned.position
                    stored = done.pop(run_key(planned), None)
                    if stored:
                        tally.restore(planned, stored)
                        if observer:
                            observer.already_stored(planned, index, planner.handed_out)
                        continue
                    if planned.cell.target.name in watch.skipped:
                        continue
                    if observer:
                        observer.starting(planned, index, planner.handed_out)
                    record = execute(planned, workdir, sources, frozenset(traces))
                    raise_if_interrupted()  # a run the signal stopped is not a failed run: it is run again on resume
                    storing = record
                    try:
                        if redo_disturbed:
                            record = redone(
                                planned,
                                record,
                                partial(execute, planned, workdir, sources, frozenset(traces)),
                                lambda r: db.record_run(study_run_id, replace(r, host=host.name, boot_id=boot)),
                                tally,
                                observer,
                            )
                        run_id = db.record_run(study_run_id, replace(record, host=host.name, boot_id=boot))
                    except BlockWithdrawn as withdrawn:
                        storing = None  # withdrawn, not lost: no failure after this may call it "not stored"
                        if observer:
                            observer.notice(str(withdrawn))
                        break  # on to the next block this host takes
                    storing = None
                    tally.add(
                        planned,
                        record.status == "ok",
                        {m.key: m.value for m in record.metrics},
                        record.started_at,
                        record.finished_at,
                        Roles.of(planned.cell.workload.name, record.metrics),
                    )
                    if observer:
                        observer.finished(planned, record)
                    watch.ended(run_id, record)
        status = "finished"
    except DatabaseLost as lost:
        # Nor can the database hear how the study run ended: the next fslab to open it finds its
        # fslab gone and marks it interrupted (ResultsDB.mark_abandoned).
        status = None
        raise _said(lost, study_run_id, storing, resumable=ended is None) from None
    finally:
        if status is not None:
            try:
                (ended or partial(db.finish_study_run, study_run_id))(status, planner.outcome())
            except DatabaseLost as lost:  # every run stored, and then its end not
                raise _said(lost, study_run_id, None, resumable=ended is None) from None


def _said(lost: DatabaseLost, study_run_id: int, storing: RunRecord | None, *, resumable: bool) -> DatabaseLost:
    """A study run's database failed: what it did not store (the run `storing`), and how to go on."""
    resume = f"`fslab run --resume {study_run_id}` (with the same --db and --workdir) goes on from there"
    return lost.noting(_not_stored(study_run_id, storing), resume if resumable else None)


def _not_stored(study_run_id: int, record: RunRecord | None) -> str:
    """What a study run whose database failed did not store."""
    if record is None:  # a target's skip, the runs a stop superseded: the study run's own state
        return f"Study run {study_run_id} keeps every run it stored, and lost none"
    warmup = ", a warm-up" if record.warmup else ""
    return (
        f"Study run {study_run_id} keeps every run it stored; not stored: the run of {record.workload} "
        f"on {record.target} (repetition {record.repetition}{warmup}) that had just ended"
    )


# How many times one planned run is run again for being disturbed (--redo-disturbed): a neighbour
# that outlasts three runs is no passing one, and the third run counts, flagged.
REDO_DISTURBED_AT_MOST = 2


def disturbed(record: RunRecord) -> str | None:
    """What disturbed a successful measured run (its `disturbed` finding: monitors/pressure.py), or None."""
    if record.status != "ok" or record.warmup:
        return None
    return next((n.says for n in record.notes if n.kind == DISTURBED), None)


def redone(
    planned: PlannedRun,
    record: RunRecord,
    again: Callable[[], RunRecord],
    store: Callable[[RunRecord], int],
    tally: Tally,
    observer: RunObserver | None,
) -> RunRecord:
    """The run to store in `planned`'s place: `record`, or while it was disturbed (and at most
    REDO_DISTURBED_AT_MOST times) a run made `again`, each disturbed one stored first set aside
    (`redone`: marked, left out of the statistics, as a warm-up is)."""
    for attempt in range(1, REDO_DISTURBED_AT_MOST + 1):
        said = disturbed(record)
        if said is None:
            break
        store(replace(record, redone=True))
        tally.add(planned, False, {}, record.started_at, record.finished_at)  # its time, not its figures
        if observer:
            observer.notice(
                f"{planned.cell.target.name} · {planned.cell.workload.name} run {planned.repetition} {said}: "
                f"set aside, run again ({attempt} of at most {REDO_DISTURBED_AT_MOST})"
            )
        record = again()
        raise_if_interrupted()
    return record


class _Watched:
    """A study run's runs as they end, watched for failures alike (systematic.FailureWatch): a
    target whose runs alone fail so is skipped (the planner runs no more of it, the skip is
    recorded with why); failures alike across targets stop the study run, superseding the runs
    that failed so — a target skipped for that same cause is no longer skipped: it was not its own."""

    def __init__(
        self,
        study_run_id: int,
        db: ResultsDB,
        planner: Planner | TakenBlocks,
        observer: RunObserver | None,
        skip: SkipRecorder,
        dropped: Iterable[str],
        *,
        resumable: bool,
    ):
        self.study_run_id, self.db, self.planner, self.observer = study_run_id, db, planner, observer
        self.skip, self.resumable = skip, resumable
        self.watch = FailureWatch()
        self.skipped = set(dropped)
        for target in self.skipped:
            planner.drop(target)

    def ended(self, run_id: int, record: RunRecord) -> None:
        failure = record.failure if record.status != "ok" else None
        said = failure and signature_of(
            record.error or "", failure.argv, failure.exit_status, failure.stderr_tail, failure.missing_tool
        )
        verdict = self.watch.observe(run_id, record.target, record.workload, *(said or (None, "")))
        if isinstance(verdict, Skip):
            self.skipped.add(verdict.target)
            self.planner.drop(verdict.target)
            self.skip(verdict.target, verdict.why)
            if self.observer:
                self.observer.notice(f"target '{verdict.target}' skipped: {verdict.why}")
        elif isinstance(verdict, Stop):
            superseded = self.db.supersede(self.study_run_id, verdict.runs)  # type: ignore[arg-type]  # the run ids
            for target in self.watch.skipped_for(verdict.signature):
                self.skip(target, None)
            raise StudyStopped(self.study_run_id, verdict, superseded, resumable=self.resumable)


def run_key(planned: PlannedRun) -> RunKey:
    return (planned.cell.target.name, planned.cell.workload.name, planned.repetition, planned.warmup)


def _check_image_space(study: Study, workdir: Workdir) -> None:
    needed = image_space(study)
    if needed:
        check_free_space(workdir.root, *needed)


def image_space(study: Study) -> tuple[int, str] | None:
    """The room the study's images need in the work directory, and what it is: filled images all
    exist at once; sparse ones grow as far as the runs write them. None: it has no image."""
    on_images = [t for t in study.targets if t.on_images]
    # a raw baseline shares its target's images
    sizes = list({image: t.image_size for t in on_images for image in t.images}.values())
    if not sizes:
        return None
    if all(t.image_fill == "full" for t in on_images):
        return sum(sizes), f"{len(sizes)} filled images"
    return max(sizes), "the largest image"


# The phase that follows each one a run marks as done: where a failure happened.
_NEXT_PHASE = {
    "image": "provision",
    "provision": "layout",
    "layout": "drop_caches",
    "drop_caches": "workload",
    "workload": "parse",
    "parse": "teardown",
    "teardown": "teardown",
}


class _Clock:
    """Seconds spent in each phase of a run, stored with it (the overhead beyond the workload),
    and the phase under way."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.phase = "provision"
        self._last = time.monotonic()

    def mark(self, phase: str) -> None:
        moment = time.monotonic()
        self.phases[phase] = round(moment - self._last, 4)
        self.phase = _NEXT_PHASE[phase]
        self._last = moment


class Sources:
    """Each target's device source. Images are made at the first run that uses them and deleted
    when the study ends; the user's devices were confirmed before it began; zram devices are made
    for each run. `scope`: what workload kinds keep until the study ends (rsync's source image),
    released with the images."""

    def __init__(
        self,
        workdir: Workdir,
        stack: ExitStack,
        named: dict[str, BlockDevice],
        notice: Callable[[str], None],
        clients: ClientDirectory | None = None,
    ):
        self.workdir, self.stack, self.named, self.notice = workdir, stack, named, notice
        self._made: dict[str, Image] = {}
        self.scope = StudyScope(stack, clients)

    def of(self, target: Target) -> tuple[DeviceSource, bool]:
        """The target's source, and whether any image was made just now."""
        if target.zram:
            return ZramSource(target.name, target.devices, target.image_size), False
        if target.named:
            return NamedSource([self.named[path] for path in target.named], self.notice), False
        new = [name for name in target.images if name not in self._made]
        for name in new:
            self._made[name] = self.stack.enter_context(
                image_file(
                    self.workdir.journal,
                    self.workdir.images,
                    file_name(name),
                    target.image_size,
                    fill=fill_device if target.image_fill == "full" else None,
                )
            )
        return ImageSource([self._made[name] for name in target.images]), bool(new)


def _discards(target: Target, source: DeviceSource, found: list[DeviceFacts]) -> bool:
    """The study's blkdiscard, else the source's default where every device takes discards and
    none spins (a discard on a disk that spins does nothing but take time)."""
    if target.blkdiscard is not None:
        return target.blkdiscard
    return source.discards_by_default and all(f.discard and f.rotational is False for f in found)


def execute(planned: PlannedRun, workdir: Workdir, sources: Sources, traces: frozenset[str] = frozenset()) -> RunRecord:
    """One run, from attaching the target's devices to its record; an error becomes a failed
    record. Every run makes a fresh filesystem on the devices, and is watched by every monitor
    always on and the opt-in ones `traces` names."""
    target, workload = planned.cell.target, planned.cell.workload
    record = RunRecord(
        target=target.name,
        workload=workload.name,
        repetition=planned.repetition,
        warmup=planned.warmup,
        block=planned.block,
        position=planned.position,
        started_at=now(),
        finished_at=now(),
        status="failed",
        buffered=not workload.direct,
        image_size=target.image_size,
        mount_options_requested=target.mount_options,
        data_pattern=workload.tool.data_pattern(),
        memory_limit=workload.memory_limit,
    )
    clock = _Clock()
    try:
        with ExitStack() as stack:
            source, made_now = sources.of(target)
            if made_now:
                clock.mark("image")  # once per study run, before the target's first run
            with time_limit(workload.timeout):  # from attaching to parsing; teardown, after it, always gets its time
                attached = stack.enter_context(source.attach(workdir.journal))
                found = [facts(resolve(device)) for device in attached.devices]
                record.device_facts = [f.as_dict() for f in found]
                if not target.on_images:
                    record.image_size = found[0].size
                if _discards(target, source, found):
                    discard(attached)
                layered = stack.enter_context(layers.built(workdir.journal, attached, target))
                mountpoint = workdir.mounts / file_name(target.name)
                ready = stack.enter_context(
                    FILESYSTEMS[target.filesystem].provision(workdir.journal, layered, mountpoint, target)
                )
                record.device = ready.described
                record.direct_io_loop = attached.direct_io
                record.mkfs_command = joined([c for c in (*layered.commands, ready.mkfs_command) if c])
                record.mount_options_effective, record.fs_details = (
                    ready.mount_options_effective,
                    layered.details + ready.details,
                )
                clock.mark("provision")
                kind = kind_of(workload)
                record.job_file = kind.command(workload, ready)
                filesystem = FILESYSTEMS[target.filesystem]
                windows = Windows(
                    ready,
                    filesystem.compression_ratio(ready),
                    partial(filesystem.sync, ready),
                    traces=traces,
                    journal=workdir.journal,
                    direct=workload.direct,
                    bdi=filesystem.bdi(ready),
                    records=filesystem.records(ready),
                )
                record.outputs = _measure(
                    workdir.journal, kind, workload, ready, record.job_file, sources.scope, clock, windows, filesystem
                )
                metrics, notes = kind.parse(record.outputs), kind.judge(workload, record.outputs)
                monitored, flagged = windows.found(
                    kind, record.outputs
                )  # after the workload's own figures: it needs them
                # flagged primary as the study names them ([study] primary), as they are stored
                record.metrics, record.notes = with_primary(metrics + monitored, workload.primary), notes + flagged
                record.histograms = windows.histograms
                clock.mark("parse")
        clock.mark("teardown")
        record.status = "ok"
    except Exception as exc:  # recorded, and the study goes on with the other runs
        record.error, record.failure = failure_of(exc, clock.phase)
    record.options_applied = FILESYSTEMS[target.filesystem].options_applied(
        target.spec(), record.mount_options_effective, record.fs_details or ""
    )
    record.finished_at = now()
    record.timings = clock.phases
    return record


def failure_of(exc: Exception, phase: str) -> tuple[str, RunFailure]:
    """A failed run's one-line error and its details. When tearing down failed after the run
    had failed, the first error is the cause (and its command the one described); the line
    adds the second, and the traceback holds both."""
    first = _first_error(exc)
    error = str(first) or type(first).__name__
    if first is not exc:
        error += f" (then, tearing down: {exc})"
    command = next((e for e in (first, exc) if isinstance(e, CommandError)), None)
    return error, RunFailure(
        phase=phase,
        traceback="".join(traceback.format_exception(exc)),
        argv=command.argv if command else None,
        exit_status=command.returncode if command else None,
        stderr_tail="\n".join(command.stderr.splitlines()[-STDERR_LINES:]) if command else None,
        missing_tool=getattr(first, "missing_tool", None) or _missing_in(command),
    )


def _missing_in(command: CommandError | None) -> str | None:
    return missing_tool(command.argv, command.returncode, command.stderr) if command else None


def _first_error(exc: Exception) -> Exception:
    """The error an implicit chain began with (one raised while another was being handled, as
    a teardown error is); an explicit `raise … from` is one error told twice, and ends the walk."""
    while isinstance(exc.__context__, Exception) and exc.__cause__ is None and not exc.__suppress_context__:
        exc = exc.__context__
    return exc


class Windows:
    """A run's measured windows, each watched by a fresh set of the run's monitors (CPU, the
    traffic of the target's own devices, the space its filesystem uses): `measured` is what a
    kind's `run` enters around each measured step; `found` turns what the monitors saw into the
    run's metrics and findings once the kind's output is parsed, each window counted from the
    moment its step's own figures began (Window.counted_from: fio's ramp excluded), so that
    the workload's bytes and the devices' are of the same interval.

    Each window ends with `sync` (Filesystem.sync: the target's filesystem written to its
    devices — a Btrfs transaction, a ZFS transaction group, dirty pages — when the step is done),
    inside it: the devices' bytes are counted through it, since what they write then is the
    step's; CPU stops where it began, and the step's own figures never saw it.

    Traffic is counted on `ready.bottom` alone (loop images, zram, the user's devices): the
    layers above (md, dm, a zvol) pass the same bytes on, and would count them twice."""

    def __init__(
        self,
        ready: Provisioned,
        compression: CompressionRatio | None,
        sync: Callable[[], None],
        *,
        traces: frozenset[str] = frozenset(),
        journal: Journal | None = None,
        direct: bool = False,
        bdi: str | None = None,
        records: Records | None = None,
    ):
        self.ready, self.compression, self.sync, self.direct, self.bdi = ready, compression, sync, direct, bdi
        self.records = records
        self.traces, self.journal = (
            traces,
            journal,
        )  # the opt-in monitors asked for; where a traced one holds what it starts
        self.watched: dict[str, list[Monitor]] = {}  # by phase, in the order measured
        self.windows: dict[str, Window] = {}  # by phase: when its workload's figures began
        self.synced: dict[str, Synced] = {}  # by phase: the sync that ended its window
        self.histograms: list[Histogram] = []  # what opt-in monitors counted, each of its window's phase (found)

    @contextmanager
    def measured(self, phase: str) -> Iterator[Window]:
        if phase in self.watched:  # its metrics would be keyed alike
            raise ValueError(
                f"phase {phase!r} was measured twice in one run: each measured step needs a phase of its own"
            )
        monitors = for_run(  # built before the window opens
            self.ready.bottom,
            self.ready.directory,
            self.compression,
            traces=self.traces,
            journal=self.journal,
            direct=self.direct,
            bdi=self.bdi,
            records=self.records,
        )
        self.watched[phase] = monitors
        window = self.windows[phase] = Window()
        with measuring(monitors):
            yield window
            began = time.monotonic()
            self.sync()
            self.synced[phase] = Synced(began, time.monotonic() - began)

    def found(self, kind: WorkloadKind, outputs: list[RawOutput]) -> tuple[list[Metric], list[Finding]]:
        """Each window's monitor values as metrics of its phase (neither primary nor compared:
        what a run cost, beside what it measured), and what they flag as notes. The workload's own
        bytes for a window come from that phase's outputs parsed alone (parse is pure, and cheap
        beside a run): the run's metrics do not all carry their window's phase — dd names its
        steps' metrics by direction (write_bytes, read_bytes), phase "" — so they cannot be split."""
        metrics: list[Metric] = []
        findings: list[Finding] = []
        for phase, monitors in self.watched.items():
            moved = {m.name: m.value for m in kind.parse([o for o in outputs if o.phase == phase])}
            began = self.windows.get(phase, Window()).counted_from
            bytes_moved = WorkloadSaid(
                read_bytes=moved.get(READ_BYTES),
                written_bytes=moved.get(WRITTEN_BYTES),
                fsyncs=moved.get(FSYNCS),
                ios=moved.get(IOS),
                counted_from=began,
                synced=self.synced.get(phase),
                direct=self.direct,
            )
            found = collect(monitors, bytes_moved)
            metrics += [Metric(v.name, v.value, v.unit, v.higher_is_better, phase=phase) for v in found.values]
            findings += found.flags
            self.histograms += [replace(h, phase=phase) for h in found.histograms]
        return metrics, findings


def _measure(
    journal: Journal,
    kind: WorkloadKind,
    workload: Workload,
    ready: Provisioned,
    command: str,
    scope: StudyScope,
    clock: _Clock,
    windows: Windows,
    filesystem: Filesystem,
) -> list[RawOutput]:
    """Prepare what the workload reads (and precondition the target), drop caches (the page
    cache, and what `filesystem` caches beside it: zfs-fuse's ARC), run it with its measured
    steps watched by `windows`; returns its raw outputs, the unmeasured ones its preparing kept
    first.

    A workload's memory limit covers the measured run alone: the layout is not measured, and
    what it leaves in the page cache is dropped before the run starts in its limited cgroup."""
    with scratch_directory(journal) as scratch:
        prepared = kind.prepare(journal, workload, ready, scratch, scope)
        clock.mark("layout")
        sync_and_drop_caches()
        filesystem.empty_cache(journal, ready)
        clock.mark("drop_caches")
        with memory_limited(journal, workload.memory_limit):
            outputs = kind.run(
                journal, workload, ready, command, scratch, scope, windows.measured
            )  # within the run's time limit (execute)
        clock.mark("workload")
    return prepared + outputs
