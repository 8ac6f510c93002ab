"""fio, the first workload kind (workloads/base.py): the options fslab adds to the jobs it
builds, the job files of a run (the measured job, the layout before it), the command it runs; its
output is read by output.py (METRICS: the metrics, with their units, directions and roles).
Job files themselves are parsed, checked and written in fio/jobs.py.

Every measured run also keeps fio's bandwidth and IOPS logs (LOG_TOOL), averaged over windows of
log_avg_msec: its throughput over time (throughput_over_time), to see ramp-up and steady state; and
its histogram logs of completion latency (fio_hist.HIST_TOOL), in windows of two of theirs: its
latency over time (fio_hist.latency_over_time).
fio stamps them on the monotonic clock, which is also how the runner's monitors learn when fio's
own figures began (after its start-up and ramp_time): `run_measured`, fio_epoch.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, NoReturn

from pydantic import Field, field_validator, model_validator

from fslab.core.errors import Refused
from fslab.core.journal import Journal
from fslab.core.names import file_name
from fslab.core.system import run_held
from fslab.core.toml_errors import FieldError, unknown
from fslab.core.units import format_size, parse_duration, parse_size, scaled_size
from fslab.filesystems.base import Provisioned
from fslab.fio import (
    clients as fio_clients,
    epoch as fio_epoch,
    hist as fio_hist,
    jobs as fio_jobs,
    space as fio_space,
    steady as fio_steady,
)
from fslab.fio.jobs import JobFile, fio_environment, parse_all, render, single_job
from fslab.fio.options import DIRECTORY_ENGINES
from fslab.fio.output import (
    LOG_FILE,
    LOG_KINDS,
    LOG_PREFIX,
    LOG_TOOL,
    METRICS,
    PRECONDITION_TOOL,
    load_json,
    parse_metrics,
    precondition_metrics,
    precondition_output,
    stored_bins,
)
from fslab.fio.preallocation import preallocation_of
from fslab.fio.report import FIO_REPORT
from fslab.fio.rewrite import Asked, Rewrite, asked_of, refused_beside, rewritten
from fslab.fio.section import FIO_RW_MODES, BlockSize, FioSection, IoDepth, NumJobs, study_fio
from fslab.fio.values import block_size, ms_text
from fslab.model import Metric, RawOutput, Workload
from fslab.model.findings import Finding
from fslab.workloads import KINDS, Needed, Registered
from fslab.workloads.base import Measured, StudyScope, Window, directory_of, tool_of
from fslab.workloads.builtin import BUILTIN_WORKLOADS
from fslab.workloads.data import DataPattern, buffer_options
from fslab.workloads.tables import Building, Name, OnTargets, run_timeout

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir


@dataclass(frozen=True)
class FioJob:
    """A fio workload (model.Tool): what fio runs, every option checked — built from a
    study's parameters, or a user's job file parsed."""

    kind: ClassVar[str] = "fio"
    takes_snapshots: ClassVar[bool] = False

    job: JobFile
    fio_options: dict[str, str]  # the parameters `job` was built from, in order; empty for a job file
    job_file: str | None  # the job file as the study names it; None when built from parameters
    reads: bool  # needs its data laid out before the measured run
    data: DataPattern = DataPattern()  # what it writes; fslab adds data.fio_options() to the jobs it builds
    shared_file: bool = False  # its jobs work on one file, fio_options' filename (built from parameters only)
    clients: tuple[str, ...] = ()  # hosts that run it at once on the target's shared directory (clients.py); none: here
    rewritten: tuple[Rewrite, ...] = ()  # what fslab rewrote in a job file's jobs, from what (rewrite.py)
    precondition: fio_steady.Precondition | None = None  # phases run unmeasured before the measured run (steady.py)

    def spec(self) -> dict[str, Any]:
        return (
            {
                "fio_options": self.fio_options,
                "job_file": self.job_file,
                "job": fio_jobs.job_text(self.job),
                "data": self.data.describe(),
                "shared_file": self.shared_file,
                "preallocation": preallocation_of(self.job.jobs()),
            }
            | ({"clients": list(self.clients)} if self.clients else {})
            | ({"rewritten": [r.spec() for r in self.rewritten]} if self.rewritten else {})
            | ({"precondition": self.precondition.spec()} if self.precondition else {})
        )  # fmt: skip  (absent: stored as before)

    @property
    def needs_directory(self) -> bool:
        """Whether a job of it makes, stats or deletes files by name, or a donor file
        (fio_options.DIRECTORY_ENGINES, donorname), or it runs from clients on the target's shared
        directory: refused on a raw target, and run on no ceiling (model/ceiling.py)."""
        in_files = any(job.get("ioengine") in DIRECTORY_ENGINES or "donorname" in job for job in self.job.jobs())
        return bool(self.clients) or in_files

    def data_pattern(self) -> str:
        return self.data.describe()

    def bytes_needed(self, block_device: bool) -> int:
        """The room its jobs' files take, read from the jobs themselves (space.py)."""
        return fio_space.room_needed(self.job, block_device)

    def measured_seconds(self) -> float:
        return fio_jobs.measured_seconds(self.job)


# What fio must record for fslab's metrics: set on every job fslab runs, its own and job files
# alike (and so recorded in every stored job file). fio keeps histogram bins of completion
# latency by default, of total and submission latency only with these.
MEASUREMENT_OPTIONS = {
    "lat_percentiles": "1",
    "slat_percentiles": "1",
}
# fio options fslab also sets on the jobs it builds itself, with those of the data they write
# (workloads/data.py).
FIXED_OPTIONS = {"group_reporting": "1", **MEASUREMENT_OPTIONS}
# How fslab's jobs lay out their files unless the study sets fio's `fallocate` (a default, not a
# fixed option): no preallocation, as most applications write. fio's own default preallocates
# every file (native), and a filesystem writes into preallocated blocks in place: Btrfs then
# neither compresses nor copies on write what the job writes. Recorded with every workload
# (FioJob.spec, Scenario.spec: fio_preallocation.preallocation).
NO_PREALLOCATION = {"fallocate": "none"}


def without_preallocation(job: JobFile) -> JobFile:
    """A user's job file, fslab's NO_PREALLOCATION before its sections ([global]) unless one of
    them sets fallocate: then the job file is respected as written."""
    if any(name == "fallocate" for section in job.sections for name, _ in section.options):
        return job
    default = fio_jobs.Section(fio_jobs.GLOBAL, tuple(NO_PREALLOCATION.items()), line=0)
    return replace(job, sections=(default, *job.sections))


# Laying out what a workload will read: the same job (same files, same region) written once,
# sequentially, with large direct writes — faster than fio's own buffered layout, and the same
# on a raw device, where reading a never-written sparse image would measure nothing.
_LAYOUT = {"rw": "write", "bs": "1m", "iodepth": "16", "direct": "1", "ioengine": "libaio"}
# What the layout leaves out of the workload's options: its timing, its mix, and its steady state
# (a layout ended by steady state would leave part of what the measured run reads unwritten).
_TIMING = ("time_based", "runtime", "ramp_time", "rwmixread", "rwmixwrite", *fio_steady.STEADY_OPTIONS)


# fio's bandwidth and IOPS logs of a measured run (write_bw_log, write_iops_log), each job's own
# file in fio's format — "msec, value, direction, block size, offset" a line, bandwidth in KiB/s —,
# averaged over windows of log_avg_msec. The runner keeps them as one raw output of this tool.
#
# fslab has fio stamp them on the monotonic clock (log_alternate_epoch_clock_id): from them and
# fio's JSON, fio_epoch finds when fio's own figures began, which the monitors count from.
CLOCK_MONOTONIC = 1  # Linux's clockid_t, as fio's log_alternate_epoch_clock_id takes it
LOG_POINTS = 100  # about this many windows over a measured run: enough for a ramp, small to store
# Each histogram window is this many of the others': 50 over a run, as many as a report draws
# (histograms are the larger logs).
HIST_WINDOWS = 2
# fio writes total, completion and submission latency logs (write_lat_log): read for the epoch alone;
# and histogram logs of completion latency (write_hist_log), kept as their own raw output
_ANY_LOG = re.compile(rf"{LOG_PREFIX}_({LOG_KINDS})\.(\d+)\.log")


def log_interval_ms(seconds: float) -> int:
    """The logs' window: LOG_POINTS of them over a measured run of `seconds`, in whole tenths of
    a second, at least one — also when the run's length is unknown (0: it ends with its size; a
    long one is drawn in coarser windows, Throughput.coarsened)."""
    return max(100, math.ceil(seconds * 1000 / LOG_POINTS / 100) * 100)


def log_options(seconds: float) -> dict[str, str]:
    """What makes fio write the logs of a measured job that runs `seconds` (fio_jobs.measured_seconds):
    its histogram logs in windows of HIST_WINDOWS of the others' (on their clock, from the same
    epoch), of the completion-latency bins fio keeps unless a job file says clat_percentiles=0
    (fslab's own options win)."""
    interval = log_interval_ms(seconds)
    return {
        "write_bw_log": LOG_PREFIX, "write_iops_log": LOG_PREFIX, "write_lat_log": LOG_PREFIX,
        "log_avg_msec": str(interval), "write_hist_log": LOG_PREFIX, "log_hist_msec": str(interval * HIST_WINDOWS),
        "log_hist_coarseness": str(fio_hist.COARSENESS), "clat_percentiles": "1",
        "log_alternate_epoch": "1", "log_alternate_epoch_clock_id": str(CLOCK_MONOTONIC),
    }  # fmt: skip


def run_measured(
    journal: Journal, job_path: Path, phase: str, seconds: float, window: Window, *, directory: Path | None
) -> tuple[str, list[RawOutput]]:
    """Run a measured job (`seconds` long, fio_jobs.measured_seconds) inside its window: fio's
    JSON, and its logs of `phase` (LOG_TOOL) when it wrote any. Tells the window when fio's own
    figures began, after its start-up and ramp_time (fio_epoch): what fio counts and what the
    monitors count then cover the same interval. Every fio a workload measures runs here.
    `directory`: the target's, which the job was rendered for (run_fio)."""
    output = run_fio(journal, job_path, directory=directory)  # within the run's time limit (runner.execute)
    wall_less_monotonic_ms = (time.time() - time.monotonic()) * 1000  # as fio exits: for its wall-clock report
    files = taken_logs(job_path.parent)
    interval = log_interval_ms(seconds)
    epoch = epoch_ms(output, files, interval, wall_less_monotonic_ms)
    window.counted_from = epoch / 1000 if epoch is not None else None
    return output, [*stored_bins(phase, output), *stored_logs(phase, files, interval, epoch)]


def stored_logs(phase: str, files: dict[str, str], interval: int, epoch: float | None) -> list[RawOutput]:
    """A run's logs (`files` by name) as it keeps them: its bandwidth and IOPS logs as one raw
    output of LOG_TOOL — JSON {"log_avg_msec": …, "epoch_ms": …, "files": {name: text}}, epoch_ms
    the run's epoch on the monotonic clock (logs stored before have none: their stamps count from
    it) —, and its histogram logs as one of fio_hist.HIST_TOOL (fio_hist.stored); none of a kind
    when fio wrote none. Its latency logs served the epoch alone."""
    kept = {name: text for name, text in files.items() if LOG_FILE.fullmatch(name)}
    histograms = {name: text for name, text in files.items() if fio_hist.hist_files(LOG_PREFIX).fullmatch(name)}
    stored = (
        [RawOutput(phase, LOG_TOOL, json.dumps({"log_avg_msec": interval, "epoch_ms": epoch, "files": kept}))]
        if kept
        else []
    )
    return stored + fio_hist.stored(phase, histograms, interval * HIST_WINDOWS, epoch)


def epoch_ms(output: str, files: dict[str, str], interval: int, wall_less_monotonic_ms: float) -> float | None:
    """The run's epoch (fio_epoch), from fio's JSON and its jobs' bandwidth and latency logs among
    `files` (by name, as fio wrote them); None when neither says (fio's output unreadable:
    parsing it later says why). Pure."""
    try:
        document = load_json(output)
    except ValueError:
        return None
    entries = [e for e in document.get("jobs") or [] if isinstance(e, dict)]
    logs: dict[int, list[str]] = {}  # every job writes its logs, empty when it logged nothing
    for name, text in files.items():
        if m := _ANY_LOG.fullmatch(name):
            logs.setdefault(int(m.group(2)), []).extend([text] if m.group(1) in ("bw", "lat") else [])
    jobs = max([len(entries), *logs])
    run_times = fio_epoch.jobs_run_times_ms(entries, jobs)
    reported = document.get("timestamp_ms")
    # fio's report is stamped on the wall clock once it has reaped its jobs: tens of ms late
    fallback = (
        {job: reported - wall_less_monotonic_ms - t for job, t in run_times.items()}
        if isinstance(reported, (int, float))
        else {}
    )
    return fio_epoch.run_epoch_ms(logs, interval, run_times, fallback)


def taken_logs(directory: Path) -> dict[str, str]:
    """The logs fslab asks a fio run for (log_options) that it wrote in `directory` (its private
    scratch directory), each as fio wrote it, by name — by kind, then by job. The files are
    removed: a later fio of the run writes its own."""
    files = {}
    for _, _, path in sorted(
        (m.group(1), int(m.group(2)), path) for path in directory.iterdir() if (m := _ANY_LOG.fullmatch(path.name))
    ):
        files[path.name] = path.read_text()
        path.unlink()
    return files


def layout_options(options: dict[str, str]) -> dict[str, str]:
    """The layout job's options: the workload's, writing. Jobs that share one file (`filename`)
    lay it out once, by one job — unless offset_increment gives each job its own region of it."""
    laid = {k: v for k, v in options.items() if k not in _TIMING} | _LAYOUT
    if "filename" in options and "offset_increment" not in options:
        laid["numjobs"] = "1"
    return laid


def run_fio(
    journal: Journal,
    job_path: Path,
    *,
    directory: Path | None,
    timeout: float | None = None,
    output_format: str = "json+",
) -> str:
    """Run one job file (journalled: clean-up stops it); returns fio's output text. fio's current
    directory is the job's own (fslab's private scratch directory): fio writes side files there,
    such as verify state. `directory`: the target's, which the job was rendered for."""
    output = job_path.with_suffix(".out")
    argv = ["fio", f"--output-format={output_format}", f"--output={output}", str(job_path)]
    run_held(journal, argv, timeout=timeout, cwd=job_path.parent, env=fio_environment(directory))
    return output.read_text()


def job_problems(workloads: list[Workload], workdir: Workdir) -> list[str]:
    """fio's own parser on every job the study will run, before anything is made: what the
    allow-list passed, fio must accept too (an engine's option under another engine, …)."""
    somewhere = Provisioned(top="", directory=workdir.mounts / "check")  # fio --parse-only makes nothing
    jobs = []
    for workload in workloads:
        job_file = tool_of(workload, FioJob).job_file
        where = f"workload '{workload.name}'" + (f" ({job_file})" if job_file else "")
        jobs += [
            (job, where)
            for job in (
                job_for(workload, somewhere),
                layout_job_for(workload, somewhere),
                *precondition_jobs_for(workload, somewhere),
            )
            if job
        ]
    return parse_all(jobs, directory=somewhere.directory)


def fslab_options(fio: FioJob) -> dict[str, str]:
    """What fslab adds at the end of each job (its own win): what fio must measure, on every job;
    on a job it built, also group reporting and the data the workload asked for."""
    return MEASUREMENT_OPTIONS if fio.job_file else FIXED_OPTIONS | fio.data.fio_options()


def job_for(workload: Workload, ready: Provisioned) -> str:
    """The exact fio job file of this run, written from the checked job, pointed at the target's
    directory or raw device, fslab's options ending every job."""
    fio = tool_of(workload, FioJob)
    return render(fio.job, **ready.fio_location, fixed=fslab_options(fio) | log_options(fio.measured_seconds()))


def layout_job_for(workload: Workload, ready: Provisioned) -> str | None:
    """The job that writes what the measured job will read, or None when nothing needs writing."""
    fio = tool_of(workload, FioJob)
    if not fio.reads:
        return None
    if (
        fio.job_file
    ):  # fio's own layout, of the jobs it can lay out alone; on a raw device the region a job file reads is unknown
        laid = fio_space.laid_out(fio.job)
        return (
            render(laid, directory=ready.directory, device=None, fixed={"create_only": "1"})
            if ready.directory and laid
            else None
        )
    return render(
        single_job(file_name(workload.name), layout_options(fio.fio_options)),
        **ready.fio_location,
        fixed=fslab_options(fio),
    )


def precondition_jobs_for(workload: Workload, ready: Provisioned) -> list[str]:
    """The jobs of the workload's precondition phases, in order, on the target (none without one)."""
    fio = tool_of(workload, FioJob)
    phases = fio.precondition.phases if fio.precondition else ()
    return [render(job, **ready.fio_location, fixed=fslab_options(fio)) for job in phases]


def run_precondition(journal: Journal, workload: Workload, ready: Provisioned, scratch: Path) -> list[RawOutput]:
    """The workload's precondition phases, one after another, unmeasured: each one's fio output
    and how long it took (output.precondition_output)."""
    outputs = []
    for number, job in enumerate(precondition_jobs_for(workload, ready), start=1):
        path = scratch / f"precondition-{number}.fio"
        path.write_text(job)
        began = time.monotonic()
        text = run_fio(journal, path, directory=ready.directory, output_format="json")
        outputs.append(precondition_output(number, time.monotonic() - began, text))
    return outputs


class Fio:
    """fio behind the workload protocol: the measured job file is the command recorded; its
    layout job prepares; its outputs are fio's JSON, and its logs (LOG_TOOL) beside."""

    name = "fio"
    metrics = METRICS
    report = FIO_REPORT
    accepted_options = fio_jobs.accepted_options()  # fio's own table, read when first listed
    refused_options = fio_jobs.refused_options()

    def problems(self, workloads: list[Workload], workdir: Workdir) -> list[str]:
        return job_problems(workloads, workdir)

    def command(self, workload: Workload, ready: Provisioned) -> str:
        return job_for(workload, ready)

    def prepare(
        self, journal: Journal, workload: Workload, ready: Provisioned, scratch: Path, scope: StudyScope
    ) -> list[RawOutput]:
        if tool_of(workload, FioJob).clients:
            return []  # each client's fio lays out what it reads, in its own directory, before it measures
        layout = layout_job_for(workload, ready)
        if layout:
            layout_path = scratch / "layout.fio"
            layout_path.write_text(layout)
            run_fio(journal, layout_path, directory=ready.directory, timeout=None, output_format="normal")
        return run_precondition(journal, workload, ready, scratch)

    def run(
        self,
        journal: Journal,
        workload: Workload,
        ready: Provisioned,
        command: str,
        scratch: Path,
        scope: StudyScope,
        measured: Measured,
    ) -> list[RawOutput]:
        fio = tool_of(workload, FioJob)
        if fio.clients:
            if scope.clients is None:
                raise Refused(
                    f"workload '{workload.name}' runs on clients {', '.join(fio.clients)}: "
                    "say where each serves fio (--client HOST=ADDRESS:PORT)"
                )
            clients = fio_clients.clients_of(
                fio.clients, scope.clients
            )  # a fleet's clients may need a while to serve: not in the measured window
            with measured(""):
                return fio_clients.run_from_clients(
                    journal,
                    fio.job,
                    clients,
                    directory_of(ready, self.name),
                    scratch,
                    shared_files=fio.shared_file,
                    fixed=fslab_options(fio),
                )
        job_path = scratch / "job.fio"
        job_path.write_text(command)
        with measured("") as window:
            output, logs = run_measured(
                journal, job_path, "", tool_of(workload, FioJob).measured_seconds(), window, directory=ready.directory
            )
        return [RawOutput("", self.name, output), *logs]

    def parse(self, outputs: list[RawOutput]) -> list[Metric]:
        ours = [output for output in outputs if output.tool == self.name]
        preconditioned = [
            m for output in outputs if output.tool == PRECONDITION_TOOL for m in precondition_metrics(output)
        ]
        if any(output.phase for output in ours):  # each client's own output (clients.py)
            return fio_clients.client_metrics(ours) + preconditioned
        return [m for output in ours for m in parse_metrics(output.text)] + preconditioned

    def judge(self, workload: Workload, outputs: list[RawOutput]) -> list[Finding]:
        # fio's figures are judged in the summary (raw reference, submission latency); here, a
        # steady state fio did not reach
        return fio_steady.not_steady(outputs)


FIO = Fio()


# ---- its table in a study file, and the study's [fio] table ----------------------------------------

# fslab's defaults for every fio workload, overridden by a study's [fio] table, then by the workload.
FIO_DEFAULTS: dict[str, Any] = {
    "bs": "4k",
    "iodepth": 1,
    "numjobs": 1,
    "size": "1GiB",
    "runtime": "10s",
    "ramp_time": "0s",
    "direct": True,
    "ioengine": "libaio",
    "randseed": 24301,
}


def data_pattern(
    fio: FioSection, workload: tuple[int, FioSection] | None, refuse: Callable[[tuple, str], NoReturn]
) -> DataPattern:
    """What a workload built from parameters writes: its `data` (else the study's [fio] data, else
    random), or what buffer options in its options (or [fio]'s) set. Both at once is refused."""
    index, section = workload if workload else (None, None)
    own = section.data if section is not None else None
    data, table = (own, ("workload", index, "data")) if own is not None else (fio.data, ("fio", "data"))
    set_by_workload = buffer_options(section.options.items()) if section is not None else ()
    found = buffer_options({**fio.options, **(section.options if section is not None else {})}.items())
    if not found:
        return DataPattern.asked(data)
    options_where = "the workload's options" if set_by_workload else "the study's [fio] options"
    if data is not None:
        asked = f'"{data}"' if isinstance(data, str) else f"{{ compressible = {data['compressible']} }}"
        listed = ", ".join(f"{name}={value}" for name, value in found)
        refuse(
            table,
            f"data = {asked} and {listed} in {options_where} both set what is written; "
            "keep one: data (random, zeros or { compressible = N }), or the buffer options alone",
        )
    return DataPattern.from_options("options", found, set_by=options_where)


def fio_workload(
    name: str,
    settings: dict[str, Any],
    extra: dict[str, Any],
    scale: float,
    time_scale: float,
    data: DataPattern,
    *,
    shared_file: bool = False,
) -> Workload:
    size = scaled_size(parse_size(settings["size"]), scale)
    runtime = parse_duration(settings["runtime"]) * time_scale
    ramp = parse_duration(settings["ramp_time"]) * time_scale
    options = {
        "rw": settings["rw"],
        "bs": block_size(settings["bs"]),  # as fio reads it as fslab does ("4KiB" → "4k")
        "iodepth": settings["iodepth"],
        "numjobs": settings["numjobs"],
        "size": size,
        "ioengine": settings["ioengine"],
        "direct": int(settings["direct"]),
        "randseed": settings["randseed"],
        **NO_PREALLOCATION,  # unless the study's options set fallocate
    }
    if "rwmixread" in settings:
        options["rwmixread"] = settings["rwmixread"]
    if "io_size" in settings:
        options["io_size"] = scaled_size(parse_size(settings["io_size"]), scale)
    if runtime > 0:
        options |= {"time_based": 1, "runtime": ms_text(runtime)}
    if ramp > 0:
        options["ramp_time"] = ms_text(ramp)
    options |= fio_steady.scaled_steadystate(
        {k: str(v) for k, v in extra.items()}, time_scale
    )  # checked, as fio writes them (section.fio_options)
    if shared_file:  # one file for every job, named as fslab names every file (in the target's directory)
        options["filename"] = file_name(name)
    fio_options = {key: str(value) for key, value in options.items()}
    job = fio_jobs.single_job(file_name(name), fio_options)  # a sweep's name (randread[iodepth=8]) is no job name
    seconds = fio_jobs.expected_seconds(job)
    return Workload(
        name=name,
        tool=FioJob(job, fio_options, None, fio_jobs.reads(job), data, shared_file),
        # from the job, as for a job file: a workload's own options may change rw, direct or runtime
        seconds=seconds,
        direct=fio_jobs.direct(job),
        timeout=run_timeout(seconds, settings.get("timeout")),
    )


def job_file_workload(
    name: str, job_file: str, building: Building, asked: dict[str, Asked], timeout: str | int | float | None
) -> Workload:
    """A workload from a job file, parsed and checked now (a job that breaks a rule stops the
    study before anything is formatted), its jobs rewritten as the study asks (`asked`) and
    scaled (rewrite.py)."""
    try:
        job = fio_jobs.parse_job_file(_read_job_file(building.base_dir / job_file), job_file)
    except (Refused, ValueError) as exc:
        building.refuse((*building.table, "job_file"), str(exc))
    try:
        job, rewrites = rewritten(job, asked, building.scale, building.time_scale)
    except Refused as exc:
        building.refuse((*building.table, "bs"), str(exc))  # the one refusal: bs beside jobs that set bssplit
    if problem := fio_jobs.steadystate_problem(job):  # as rewritten: a runtime asked may leave its window no time
        building.refuse(
            (*building.table, "job_file"), f"{job_file}: {problem}" + (" (as the study rewrote it)" if rewrites else "")
        )
    data = DataPattern.from_options("job_file", (option for section in job.sections for option in section.options))
    job = without_preallocation(job)
    return Workload(
        name=name,
        tool=FioJob(job, {}, job_file, fio_jobs.reads(job), data, rewritten=rewrites),
        seconds=(seconds := fio_jobs.expected_seconds(job)),
        direct=fio_jobs.direct(job),
        timeout=run_timeout(seconds, timeout),
    )


JOB_FILE_LIMIT = 1 << 20  # far above any real job file


def _read_job_file(path: Path) -> str:
    """A job file's text. Opened without blocking and refused unless a regular file, so a job_file
    naming a FIFO or /dev/zero cannot hang or flood fslab; refused when binary or too long."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ValueError(f"{path} is not a regular file")
            data = f.read(JOB_FILE_LIMIT + 1)
    except OSError as exc:
        raise ValueError(f"cannot read job_file {path}: {exc.strerror}") from None
    if len(data) > JOB_FILE_LIMIT:
        raise ValueError(f"{path} is longer than {format_size(JOB_FILE_LIMIT)}: not a fio job file")
    if b"\0" in data:
        raise ValueError(f"{path} is binary, not a fio job file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text, not a fio job file") from None


class WorkloadSection(FioSection, OnTargets):
    name: Name
    kind: Literal["fio"] = "fio"
    # A list sweeps (swept_fields), here, not in [fio]: these three widen [fio]'s (a field's type
    # is what its table may hold).
    bs: BlockSize | Annotated[list[BlockSize], Field(min_length=1)] | None = None  # type: ignore[assignment]
    iodepth: IoDepth | Annotated[list[IoDepth], Field(min_length=1)] | None = None  # type: ignore[assignment]
    numjobs: NumJobs | Annotated[list[NumJobs], Field(min_length=1)] | None = None  # type: ignore[assignment]
    swept_fields: ClassVar[tuple[str, ...]] = (
        "bs",
        "iodepth",
        "numjobs",
    )  # its workloads named in this order: randread[bs=4k, iodepth=8]
    rw: str | None = None
    job_file: str | None = None
    shared_file: bool = False  # all numjobs jobs work on one file (fio filename=), laid out once
    clients: list[str] | None = None  # hosts that run it at once on the target's shared directory
    precondition: fio_steady.PreconditionField | None = Field(
        None, description='"fill", or a list of phases'
    )  # run unmeasured before it (steady.py)

    @field_validator("clients")
    @classmethod
    def _clients(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else list(fio_clients.checked_clients(value))

    @field_validator("rw")
    @classmethod
    def _rw(cls, value: str | None) -> str | None:
        if value is not None and value not in FIO_RW_MODES:
            raise ValueError(unknown("rw mode", value, FIO_RW_MODES))
        return value

    @model_validator(mode="after")
    def _pattern_or_file(self) -> WorkloadSection:
        if (self.rw is None) == (self.job_file is None):
            raise ValueError(
                "a workload needs either rw (fio parameters) or job_file (your own "
                "fio job file), not both: a job file's jobs each set their own rw"
            )
        if self.job_file is not None and (refused := refused_beside(self.model_fields_set)):
            raise FieldError(*refused)
        return self

    @model_validator(mode="after")
    def _preconditioned_here(self) -> WorkloadSection:
        if self.precondition is not None and self.job_file is not None:
            raise FieldError(
                "precondition",
                "fslab cannot tell which files or region a job file's jobs work on: put the precondition's "
                "jobs in the job file (stonewall), or describe the workload by its fio parameters (rw, bs, …)",
            )
        if self.precondition is not None and self.clients:
            raise FieldError(
                "precondition",
                "a workload run from clients lays out its files from each client, not here: "
                "precondition it in a workload of its own before it, or leave clients out",
            )
        return self


def builtin_workload(name: str, building: Building) -> Workload:
    """A built-in workload (builtin.py) the study's [study] workloads names, with the study's [fio] table."""
    pattern, study = BUILTIN_WORKLOADS[name], study_fio(building)
    settings = {**study_defaults(study), **pattern}
    workload = fio_workload(
        name,
        settings,
        study.options,
        building.scale,
        building.time_scale,
        building.data,
        shared_file=pattern.get("shared_file", False),
    )
    return steady_checked(workload, building, ("fio", "options"))


def study_defaults(fio: FioSection) -> dict[str, Any]:
    """fslab's defaults under the study's [fio] table."""
    return {**FIO_DEFAULTS, **fio.model_dump(exclude_none=True, exclude={"options", "data"})}


def build(section: WorkloadSection, building: Building) -> Workload:
    """A [[workload]] of fio: its user's job file, or a job of its parameters over the study's [fio] table."""
    study = study_fio(building)
    if section.job_file:
        timeout = study.timeout if section.timeout is None else section.timeout
        workload = job_file_workload(section.name, section.job_file, building, asked_of(section, study), timeout)
        return with_clients(workload, section.clients)
    own = section.model_dump(
        exclude_none=True,
        exclude={
            "name",
            "kind",
            "job_file",
            "options",
            "data",
            "shared_file",
            "memory_limit",
            "clients",
            "precondition",
        },
    )
    data = data_pattern(study, (building.index, section), building.refuse)
    settings = {**study_defaults(study), **own}
    workload = fio_workload(
        section.name,
        settings,
        {**study.options, **section.options},
        building.scale,
        building.time_scale,
        data,
        shared_file=section.shared_file,
    )
    workload = steady_checked(workload, building, (*building.table, "options"))
    if section.precondition:
        workload = preconditioned(workload, section, building)
    return with_clients(workload, section.clients)


def steady_checked(workload: Workload, building: Building, table: tuple) -> Workload:
    """The workload, unless its options ask for a steady state fio could never judge (refused at `table`)."""
    if problem := fio_jobs.steadystate_problem(tool_of(workload, FioJob).job):
        building.refuse(table, problem)
    return workload


def preconditioned(workload: Workload, section: WorkloadSection, building: Building) -> Workload:
    """The workload with its precondition, which its run's time-out also covers (unless the study
    sets the time-out itself)."""
    fio = tool_of(workload, FioJob)
    found = fio_steady.precondition(
        file_name(workload.name),
        section.precondition or [],
        layout_options(fio.fio_options),
        building,
        shared_file=fio.shared_file,
    )
    timeout = (
        workload.timeout
        if section.timeout is not None or study_fio(building).timeout is not None
        else workload.timeout + found.timeout()
    )
    return replace(workload, tool=replace(fio, precondition=found), timeout=timeout)


def with_clients(workload: Workload, clients: list[str] | None) -> Workload:
    return replace(workload, tool=replace(tool_of(workload, FioJob), clients=tuple(clients))) if clients else workload


# The fio tool fslab cannot start without: every built-in study runs it.
KINDS.add(
    Registered(FIO, section=WorkloadSection, build=build, tool=Needed(("fio", "--version"), "fio", required=True)),
    own=True,
)
