"""Running a study: for each planned run, provision → lay out → drop caches → workload →
teardown → store, in interleaved order. A failed run is stored with its error and the study
goes on; an interrupted study releases what it holds and is marked interrupted.
"""

from __future__ import annotations

import signal
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from fslab.errors import FslabError, Refused
from fslab import doctor, environment
from fslab.devices import layers
from fslab.devices.loop import Image, ImageSource, check_free_space, image_file
from fslab.devices.named import NamedSource, confirmed
from fslab.devices.source import DeviceSource, discard
from fslab.devices.zram import ZramSource
from fslab.guard.block_devices import BlockDevice, DeviceFacts, facts, resolve
from fslab.filesystems import FILESYSTEMS, Provisioned
from fslab.plan import PlannedRun, Planner, Repetitions, Samples, new_seed
from fslab.results import ResultsDB, RunRecord
from fslab.results.db import now
from fslab.study import Study, Target, Workload
from fslab.journal import Journal
from fslab.system import joined, run_held, sync_and_drop_caches
from fslab.guard.names import file_name
from fslab.workdir import Workdir
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
    destroy_flags: tuple[str, ...] = (),
) -> int:
    """Run the study (default: its own repetitions, exactly); returns the study run's id.
    `baseline` (default: the study's) guides adaptive runs, which stop comparisons beyond doubt.
    `destroy_flags` are the --destroy-data paths that confirm the user's devices the study names."""
    problems = doctor.study_problems(study, workdir.root)
    if problems:
        raise StudyCannotRun("this machine cannot run the study:\n  " + "\n  ".join(problems))
    named = confirmed_devices(study, destroy_flags)
    repetitions = repetitions or Repetitions(runs=study.repetitions, warmup=study.warmup)
    study = replace(study, repetitions=repetitions.runs, warmup=repetitions.warmup)  # as stored with the study run
    plan_seed = seed if seed is not None else study.seed if study.seed is not None else new_seed()
    versions = {kind: FILESYSTEMS[kind].version() for kind in {t.filesystem for t in study.targets}}
    with workdir.claim():
        for outcome in workdir.journal.clean_up():
            if observer:
                observer.notice(f"left by an interrupted fslab: {outcome.kind} {outcome.ident}: {outcome.status}" + (f" ({outcome.detail})" if outcome.detail else ""))
        _check_image_space(study, workdir)
        study_run_id = db.begin_study_run(study, plan_seed, environment.collect(workdir.root), versions, repetitions.describe())
        _run_blocks(study_run_id, Planner(study.cells, repetitions, plan_seed, baseline or study.baseline), db, workdir, named, observer)
        workdir.journal.clean_up()  # all released by now: the journal starts afresh
    return study_run_id


def confirmed_devices(study: Study, destroy_flags: tuple[str, ...]) -> dict[str, BlockDevice]:
    """The user's devices the study names, each confirmed on the command line and unused, by the
    path the study names it by; Refused with every problem at once, before anything is made."""
    found: dict[str, BlockDevice] = {}
    problems: list[str] = []
    for target in study.targets:
        devices, refused = confirmed(target.named, destroy_flags)
        found |= devices
        problems += refused
        if len({d.number for d in devices.values()}) < len(devices):
            problems.append(f"target '{target.name}' names one device twice: {', '.join(target.named)}")
    if problems:
        raise Refused("nothing was attached or formatted:\n  " + "\n  ".join(dict.fromkeys(problems)))
    return found


def _run_blocks(study_run_id: int, planner: Planner, db: ResultsDB, workdir: Workdir, named: dict[str, BlockDevice], observer: RunObserver | None) -> None:
    """Run block after block until the planner has no more; every run is stored as it ends."""
    samples: Samples = defaultdict(lambda: defaultdict(list))
    started, durations = time.monotonic(), []
    status = "interrupted"
    try:
        with _sigterm_as_interrupt(), ExitStack() as stack:
            sources = Sources(workdir, stack, named, observer.notice if observer else lambda _: None)
            seconds_per_run = 0.0
            while block := planner.next_block(samples, time.monotonic() - started, seconds_per_run):
                for planned in block:
                    if observer:
                        observer.starting(planned, planner.handed_out - len(block) + planned.position, planner.handed_out)
                    record = execute(planned, workdir, sources)
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
    on_images = [t for t in study.targets if t.on_images]
    sizes = list({image: t.image_size for t in on_images for image in t.images}.values())
    if not sizes:
        return
    if all(t.image_fill == "full" for t in on_images):
        check_free_space(workdir.root, sum(sizes), f"{len(sizes)} filled images")
    else:
        check_free_space(workdir.root, max(sizes), "the largest image")


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


class Sources:
    """Each target's device source. Images are made at the first run that uses them and deleted
    when the study ends; the user's devices were confirmed before it began; zram devices are made
    for each run."""

    def __init__(self, workdir: Workdir, stack: ExitStack, named: dict[str, BlockDevice], notice: Callable[[str], None]):
        self.workdir, self.stack, self.named, self.notice = workdir, stack, named, notice
        self._made: dict[str, Image] = {}

    def of(self, target: Target) -> tuple[DeviceSource, bool]:
        """The target's source, and whether any image was made just now."""
        if target.zram:
            return ZramSource(target.name, target.devices, target.image_size), False
        if target.named:
            return NamedSource([self.named[path] for path in target.named], self.notice), False
        new = [name for name in target.images if name not in self._made]
        for name in new:
            self._made[name] = self.stack.enter_context(
                image_file(self.workdir.journal, self.workdir.images, file_name(name), target.image_size, fill=target.image_fill == "full")
            )
        return ImageSource([self._made[name] for name in target.images]), bool(new)


def _discards(target: Target, source: DeviceSource, found: list[DeviceFacts]) -> bool:
    """The study's blkdiscard, else the source's default where every device takes discards and
    none spins (a discard on a disk that spins does nothing but take time)."""
    if target.blkdiscard is not None:
        return target.blkdiscard
    return source.discards_by_default and all(f.discard and f.rotational is False for f in found)


def execute(planned: PlannedRun, workdir: Workdir, sources: Sources) -> RunRecord:
    """One run, from attaching the target's devices to its record; an error becomes a failed
    record. Every run makes a fresh filesystem on the devices."""
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
            source, made_now = sources.of(target)
            if made_now:
                clock.mark("image")  # once per study run, before the target's first run
            attached = stack.enter_context(source.attach(workdir.journal))
            found = [facts(resolve(device)) for device in attached.devices]
            record.device_facts = [f.as_dict() for f in found]
            if not target.on_images:
                record.image_size = found[0].size
            if _discards(target, source, found):
                discard(attached)
            layered = stack.enter_context(layers.built(workdir.journal, attached, target))
            mountpoint = workdir.mounts / file_name(target.name)
            ready = stack.enter_context(FILESYSTEMS[target.filesystem].provision(workdir.journal, layered, mountpoint, target))
            record.device = " ".join(attached.devices) if ready.device in attached.devices else f"{ready.device} on {' '.join(attached.devices)}"
            record.direct_io_loop = attached.direct_io
            record.mkfs_command = joined([c for c in (*layered.commands, ready.mkfs_command) if c])
            record.mount_options_effective, record.fs_details = ready.mount_options_effective, layered.details + ready.details
            clock.mark("provision")
            record.job_file = job_for(workload, ready)
            record.raw_output = _measure(workdir.journal, record.job_file, workload, ready, clock)
            record.metrics = fio.parse_metrics(record.raw_output)
        clock.mark("teardown")
        record.status = "ok"
    except Exception as exc:  # recorded, and the study goes on with the other runs
        record.error = str(exc) or type(exc).__name__
    record.finished_at = now()
    record.timings = clock.phases
    return record


def job_for(workload: Workload, ready: Provisioned) -> str:
    """The exact fio job file of this run, pointed at the target's directory or raw device."""
    if workload.job_file:
        return fio.retarget_job_file(workload.job_file, **ready.fio_location)
    return fio.job_text(workload.name, workload.fio_options, **ready.fio_location)


def layout_job_for(workload: Workload, ready: Provisioned) -> str | None:
    """The job that writes what the measured job will read, or None when nothing needs writing."""
    if not workload.reads:
        return None
    if workload.job_file:  # fio's own layout; on a raw device the region a job file reads is unknown
        return fio.retarget_job_file(workload.job_file, directory=ready.directory, device=None, extra=("create_only=1",)) if ready.directory else None
    return fio.job_text(workload.name, fio.layout_options(workload.fio_options), **ready.fio_location)


def _measure(journal: Journal, job: str, workload: Workload, ready: Provisioned, clock: _Clock) -> str:
    """Lay out what the workload reads, drop caches, run fio; returns fio's output."""
    with tempfile.TemporaryDirectory(prefix="fslab-job-") as scratch:
        layout = layout_job_for(workload, ready)
        if layout:
            layout_path = Path(scratch) / "layout.fio"
            layout_path.write_text(layout)
            run_held(journal, ["fio", f"--output={layout_path.with_suffix('.out')}", str(layout_path)])
        clock.mark("layout")
        sync_and_drop_caches()
        clock.mark("drop_caches")
        job_path = Path(scratch) / "job.fio"
        job_path.write_text(job)
        output = fio.run_fio(journal, job_path, timeout=workload.seconds * 3 + 300 if workload.seconds else None)
        clock.mark("workload")
    return output
