"""Running a study: for each planned run, provision → lay out → drop caches → workload →
teardown → store, in interleaved order. A failed run is stored with its error and the study
goes on; an interrupted study releases what it holds and is marked interrupted.
"""

from __future__ import annotations

import signal
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from fslab.errors import FslabError
from fslab import doctor, environment
from fslab.devices import layers
from fslab.devices.loop import NotEnoughSpace, attached, check_free_space, image_file
from fslab.filesystems import FILESYSTEMS, Provisioned
from fslab.guard.fio_jobs import parse_only, render, single_job
from fslab.plan import PlannedRun, Planner, Repetitions, Samples, new_seed
from fslab.results import ResultsDB, RunRecord
from fslab.results.db import now
from fslab.study import Study, Target, Workload
from fslab.system import joined, sync_and_drop_caches
from fslab.guard.names import file_name
from fslab.workdir import Workdir, WorkdirBusy
from fslab.workloads import fio

class RunObserver(Protocol):
    def notice(self, message: str) -> None: ...
    def starting(self, planned: PlannedRun, index: int, total: int) -> None: ...
    def finished(self, planned: PlannedRun, record: RunRecord) -> None: ...


class StudyCannotRun(FslabError):
    pass


def run_study(
    study: Study,
    db: ResultsDB,
    workdir: Workdir,
    *,
    repetitions: Repetitions | None = None,
    seed: int | None = None,
    baseline: str | None = None,
    observer: RunObserver | None = None,
) -> int:
    """Run the study (default: its own repetitions, exactly); returns the study run's id.
    `baseline` (default: the study's) guides adaptive runs, which stop comparisons beyond doubt."""
    problems = doctor.study_problems(study, workdir.root)
    if problems:
        raise StudyCannotRun("this machine cannot run the study:\n  " + "\n  ".join(problems))
    check_jobs(study, workdir)
    repetitions = repetitions or Repetitions(runs=study.repetitions, warmup=study.warmup)
    study = replace(study, repetitions=repetitions.runs, warmup=repetitions.warmup)  # as stored with the study run
    plan_seed = seed if seed is not None else study.seed if study.seed is not None else new_seed()
    try:
        _check_image_space(study, workdir)
    except NotEnoughSpace as exc:
        raise StudyCannotRun(str(exc)) from None
    versions = {kind: FILESYSTEMS[kind].version() for kind in {t.filesystem for t in study.targets}}
    try:
        with workdir.claim():
            for kind, ident, error in workdir.journal.clean_up():
                if observer:
                    observer.notice(f"left by an interrupted fslab: {kind} {ident}: {error or 'released'}")
            study_run_id = db.begin_study_run(study, plan_seed, environment.collect(workdir.root), versions, repetitions.describe())
            _run_blocks(study_run_id, Planner(study.cells, repetitions, plan_seed, baseline or study.baseline), db, workdir, observer)
            workdir.journal.clean_up()  # all released by now: the journal starts afresh
    except WorkdirBusy as exc:
        raise StudyCannotRun(str(exc)) from None
    return study_run_id


def _run_blocks(study_run_id: int, planner: Planner, db: ResultsDB, workdir: Workdir, observer: RunObserver | None) -> None:
    """Run block after block until the planner has no more; every run is stored as it ends."""
    samples: Samples = defaultdict(lambda: defaultdict(list))
    started, durations = time.monotonic(), []
    status = "interrupted"
    try:
        with _sigterm_as_interrupt(), ExitStack() as stack:
            images = Images(workdir, stack)
            seconds_per_run = 0.0
            while block := planner.next_block(samples, time.monotonic() - started, seconds_per_run):
                for planned in block:
                    if observer:
                        observer.starting(planned, planner.handed_out - len(block) + planned.position, planner.handed_out)
                    record = execute(planned, workdir, images)
                    db.record_run(study_run_id, record)
                    durations.append((record.finished_at - record.started_at).total_seconds())
                    if record.status == "ok" and not planned.warmup:
                        for m in record.metrics:
                            samples[planned.cell.key][m.name].append(m.value)
                    if observer:
                        observer.finished(planned, record)
                seconds_per_run = sum(durations) / len(durations)
        status = "finished"
    finally:
        db.finish_study_run(study_run_id, status, planner.outcome())


def _check_image_space(study: Study, workdir: Workdir) -> None:
    """Filled images all exist at once; sparse ones grow as far as the runs write them."""
    sizes = list({image: t.image_size for t in study.targets for image in t.images}.values())
    if all(t.image_fill == "full" for t in study.targets):
        check_free_space(workdir.images, sum(sizes), f"{len(sizes)} filled images")
    else:
        check_free_space(workdir.images, max(sizes), "the largest image")


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """`kill` releases mounts and loop devices the same way Ctrl-C does."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _Clock:
    """Seconds spent in each phase of a run, stored with it (the overhead beyond the workload)."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._last = time.monotonic()

    def mark(self, phase: str) -> None:
        moment = time.monotonic()
        self.phases[phase] = round(moment - self._last, 4)
        self._last = moment


class Images:
    """The targets' images, each made at the first run that uses it and deleted when the study ends."""

    def __init__(self, workdir: Workdir, stack: ExitStack):
        self.workdir, self.stack = workdir, stack
        self._made: dict[str, Path] = {}

    def of(self, target: Target) -> tuple[list[Path], bool]:
        """The target's images (one per device), and whether any was made just now."""
        new = [name for name in target.images if name not in self._made]
        for name in new:
            self._made[name] = self.stack.enter_context(
                image_file(self.workdir.journal, self.workdir.images, file_name(name), target.image_size, fill=target.image_fill == "full")
            )
        return [self._made[name] for name in target.images], bool(new)


def execute(planned: PlannedRun, workdir: Workdir, images: Images) -> RunRecord:
    """One run, from attaching the target's image to its record; an error becomes a failed record.
    Every run makes a fresh filesystem on the image."""
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
        data_pattern=fio.DATA_PATTERN if not workload.job_file else "as the job file says",
    )
    clock = _Clock()
    try:
        with ExitStack() as stack:
            paths, made_now = images.of(target)
            if made_now:
                clock.mark("image")  # once per study run, before the target's first run
            loops = [stack.enter_context(attached(workdir.journal, path)) for path in paths]
            layered = stack.enter_context(layers.built(workdir.journal, loops, target))
            mountpoint = workdir.mounts / file_name(target.name)
            ready = stack.enter_context(FILESYSTEMS[target.filesystem].provision(workdir.journal, layered, mountpoint, target))
            loop_devices = [loop.device for loop in loops]
            record.device = " ".join(loop_devices) if ready.device in loop_devices else f"{ready.device} on {' '.join(loop_devices)}"
            record.direct_io_loop = all(loop.direct_io for loop in loops)
            record.mkfs_command = joined([*layered.commands, ready.mkfs_command])
            record.mount_options_effective, record.fs_details = ready.mount_options_effective, layered.details + ready.details
            clock.mark("provision")
            record.job_file = job_for(workload, ready)
            record.raw_output = _measure(record.job_file, workload, ready, clock)
            record.metrics = fio.parse_metrics(record.raw_output)
        clock.mark("teardown")
        record.status = "ok"
    except Exception as exc:  # recorded, and the study goes on with the other runs
        record.error = str(exc) or type(exc).__name__
    record.finished_at = now()
    record.timings = clock.phases
    return record


def check_jobs(study: Study, workdir: Workdir) -> None:
    """fio's own parser on every job the study will run, before anything is made: what the
    allow-list passed, fio must accept too (an engine's option under another engine, …)."""
    somewhere = Provisioned(device="", directory=workdir.mounts / "check")  # fio --parse-only makes nothing
    for workload in study.workloads:
        for job in (job_for(workload, somewhere), layout_job_for(workload, somewhere)):
            if job:
                parse_only(job, where=f"workload '{workload.name}'" + (f" ({workload.job_file})" if workload.job_file else ""))


def job_for(workload: Workload, ready: Provisioned) -> str:
    """The exact fio job file of this run, written from the checked job, pointed at the target's
    directory or raw device; fslab's fixed options end every job it built itself."""
    return render(workload.job, **ready.fio_location, fixed=None if workload.job_file else fio.FIXED_OPTIONS)


def layout_job_for(workload: Workload, ready: Provisioned) -> str | None:
    """The job that writes what the measured job will read, or None when nothing needs writing."""
    if not workload.reads:
        return None
    if workload.job_file:  # fio's own layout; on a raw device the region a job file reads is unknown
        return render(workload.job, directory=ready.directory, device=None, fixed={"create_only": "1"}) if ready.directory else None
    return render(single_job(workload.name, fio.layout_options(workload.fio_options)), **ready.fio_location, fixed=fio.FIXED_OPTIONS)


def _measure(job: str, workload: Workload, ready: Provisioned, clock: _Clock) -> str:
    """Lay out what the workload reads, drop caches, run fio; returns fio's output."""
    with tempfile.TemporaryDirectory(prefix="fslab-job-") as scratch:
        layout = layout_job_for(workload, ready)
        if layout:
            layout_path = Path(scratch) / "layout.fio"
            layout_path.write_text(layout)
            fio.run_fio(layout_path, timeout=None, output_format="normal")
        clock.mark("layout")
        sync_and_drop_caches()
        clock.mark("drop_caches")
        job_path = Path(scratch) / "job.fio"
        job_path.write_text(job)
        output = fio.run_fio(job_path, timeout=workload.seconds * 3 + 300 if workload.seconds else None)
        clock.mark("workload")
    return output
