"""What `fslab run STUDY --plan` prints: the study as it would run here — its targets and workloads
after --scale, its runs, the room its images need, the time it would take, what this machine
would skip or lacks — worked out without attaching, formatting, locking or storing anything.

The time of a run is its workload's (runtime and ramp; a precondition's time-bound phases) and
fslab's overhead around it (attaching, mkfs, mount, laying out files, dropping caches, parsing,
teardown): the median of what this host's stored runs took beyond their workload's phase
(results/timings.py), else DEFAULT_OVERHEAD, said to be one."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from fslab.core.errors import FslabError
from fslab.core.units import format_size
from fslab.fio import expected_seconds, stored_job
from fslab.model import Study, Target, Workload
from fslab.model.ceiling import copies_per_block
from fslab.results.timings import RunTiming
from fslab.running import doctor
from fslab.running.environment import filesystem_of
from fslab.running.plan import Repetitions
from fslab.running.runner import image_space

# Seconds of fslab's own work around a run's workload when this host has stored no run: 1.8 s
# was the median here (2 cores, loaded) over `quick --scale 0.147 --runs 1`'s 16 runs on 301MiB
# images; larger images take longer to format and lay out.
DEFAULT_OVERHEAD = 2.0

# An image written whole in less than this is taken as sparse: no measure of the disk's speed.
_FILLED_IMAGE = 1.0  # seconds


@dataclass(frozen=True)
class Overhead:
    """fslab's seconds per run beyond the workload, and where they come from; how fast this host
    wrote an image whole (bytes per second; None when it never did)."""

    seconds: float
    measured_runs: int  # 0: DEFAULT_OVERHEAD
    fill_rate: float | None = None

    @classmethod
    def of(cls, stored: list[RunTiming]) -> Overhead:
        filled = [t for t in stored if t.image_seconds >= _FILLED_IMAGE]
        rate = sum(t.image_bytes for t in filled) / sum(t.image_seconds for t in filled) if filled else None
        if not stored:
            return cls(DEFAULT_OVERHEAD, 0, rate)
        return cls(statistics.median(max(0.0, t.seconds - _expected(t)) for t in stored), len(stored), rate)

    def describe(self) -> str:
        if not self.measured_runs:
            default = "a default: this host has stored no run in this database"
            return f"{self.seconds:g} s of fslab's own work per run ({default})"
        last = f"the median of this host's last {self.measured_runs} stored runs"
        return f"{self.seconds:.1f} s of fslab's own work per run ({last})"


def _expected(run: RunTiming) -> float:
    """The seconds a stored run's workload was to take: its fio job's ramp and runtime (fio's start
    and laying out its files are overhead, as they are not in a plan's workload time), else the
    time its workload phase took (a command line, a size-bound job)."""
    try:
        expected = expected_seconds(stored_job(run.job)) if run.job else 0.0
    except (FslabError, ValueError):  # stored by another fslab, unreadable to this one
        expected = 0.0
    return expected or run.workload_seconds


def run_seconds(workload: Workload) -> float:
    """A run's own time: its workload's (0: unknown, as a size-bound job's) and its precondition's
    time-bound phases (a fio workload's, fio_steady.Precondition)."""
    precondition = getattr(workload.tool, "precondition", None)
    return workload.seconds + (precondition.known_seconds() if precondition else 0.0)


def plan_lines(
    study: Study, repetitions: Repetitions, overhead: Overhead, workdir: Path, *, skip_unsupported: bool
) -> list[str]:
    """The plan, a line each, in the order a user asks of it."""
    unsupported = doctor.unsupported_targets(study)
    running = study.without({u.target for u in unsupported}) if skip_unsupported else study
    lines = [
        f"{study.name}: the plan (nothing is attached, formatted, locked or stored)",
        *study_lines(running, repetitions),
    ]
    lines += here_lines(running, repetitions, overhead, workdir)
    lines += unsupported_lines(unsupported, skip_unsupported=skip_unsupported)
    return lines + needs_lines(study, workdir)


def study_lines(study: Study, repetitions: Repetitions) -> list[str]:
    """The study as it runs: its scale, targets, workloads and runs."""
    lines = [_scale_line(study)]
    lines += [f"targets ({len(study.targets)}):", *(f"  {_target_line(t)}" for t in study.targets)]
    lines += [f"workloads ({len(study.workloads)}):", *(f"  {_workload_line(w)}" for w in study.workloads)]
    return lines + _runs_lines(study, repetitions)


def here_lines(study: Study, repetitions: Repetitions, overhead: Overhead, workdir: Path) -> list[str]:
    """What running it on this machine takes: the room its images need, and the time."""
    return _space_lines(study, workdir) + _time_lines(study, repetitions, overhead)


def unsupported_lines(unsupported: list, *, skip_unsupported: bool) -> list[str]:
    """The targets this machine cannot run, and what becomes of them."""
    if not unsupported:
        return []
    head = (
        "skipped (--skip-unsupported), this machine cannot run them:"
        if skip_unsupported
        else ("cannot run here — `fslab run` refuses the study unless --skip-unsupported skips them:")
    )
    return [head, *(f"  {u}" for u in unsupported)]


def needs_lines(study: Study, workdir: Path, also: list[str] | None = None) -> list[str]:
    """What this machine lacks for the study (and `also`: the lab's own needs), or that it lacks nothing."""
    lacking = (also or []) + doctor.machine_needs(study, workdir)
    return (
        ["to install or set up first:", *(f"  {line}" for line in lacking)]
        if lacking
        else ["nothing to install: this machine has every tool the runs need"]
    )


def _scale_line(study: Study) -> str:
    if study.scale == 1.0:
        return "scale: 1 (sizes and runtimes as the study file says)"
    what = (
        "image and file sizes (runtimes as the study says)"
        if study.scale_sizes_only
        else "image sizes, file sizes and runtimes"
    )
    return f"scale: {study.scale:g} × the study file's {what}"


def _target_line(target: Target) -> str:
    size = format_size(target.image_size)
    where = f"{target.devices} × {size}" if target.devices > 1 else size
    device = (
        f"the user's {', '.join(target.named)}"
        if target.named
        else f"zram {where}"
        if target.zram
        else f"image {where} ({target.image_fill})"
    )
    options = [
        f"mkfs {' '.join(target.mkfs_options)}" if target.mkfs_options else "",
        f"mount {target.mount_options}" if target.mount_options else "",
    ]
    layers = f" on {' → '.join(target.layers)}" if target.layers else ""
    return f"{target.name}: {target.filesystem}{layers}, {device}" + "".join(f", {o}" for o in options if o)


def _workload_line(workload: Workload) -> str:
    files = workload.tool.bytes_needed(False)
    seconds = run_seconds(workload)
    size = f", {format_size(files)} of files" if files else ""
    time = f", {seconds:g} s a run" if seconds else ", as long as its work takes (no runtime)"
    return f"{workload.name}: {workload.kind}{size}{time}, {'direct' if workload.direct else 'buffered'} I/O"


def run_count(study: Study, repetitions: Repetitions) -> int:
    """The runs of an exact plan, warm-ups too."""
    each = repetitions.runs * copies_per_block(repetitions.runs)
    return sum(repetitions.warmup + (each if c.target.ceiling else repetitions.runs) for c in study.cells)


def _runs_lines(study: Study, repetitions: Repetitions) -> list[str]:
    cells = len(study.cells)
    own = cells - (ceiling := sum(c.target.ceiling for c in study.cells))
    each = repetitions.runs * copies_per_block(repetitions.runs)  # a ceiling's cell's runs (model/ceiling.py)
    warm = (
        f", and {cells * repetitions.warmup} warm-up runs ({repetitions.warmup} a cell) first"
        if repetitions.warmup
        else ""
    )
    least = own * repetitions.runs + ceiling * each
    if not repetitions.adaptive:
        the_ceiling = f" + the ceiling's {ceiling} cells × {each}" if ceiling else ""
        return [f"runs: {own} cells × {repetitions.runs}{the_ceiling} = {least}{warm}"]
    budget = f", no block started that would end after {repetitions.time_budget:g} s" if repetitions.time_budget else ""
    most = own * repetitions.max_runs + ceiling * max(each, repetitions.max_runs)
    the_ceiling = f" + the ceiling's {ceiling} cells × {each} to {max(each, repetitions.max_runs)}" if ceiling else ""
    until = (
        "every main comparison is decided or cannot be"
        if repetitions.target_ci is None
        else f"each cell is within ±{repetitions.target_ci:.1%} or decided"
    )
    return [
        f"runs (adaptive, until {until}; {repetitions.looks} looks): "
        f"{own} cells × {repetitions.runs} to {repetitions.max_runs}{the_ceiling} = {least} to {most}{warm}{budget}"
    ]


def _space_lines(study: Study, workdir: Path) -> list[str]:
    needed = image_space(study)
    if needed is None:
        return ["disk: no image (the targets are on the user's devices or zram)"]
    where = filesystem_of(workdir / "images")
    return [
        f"disk: {format_size(needed[0])} for {needed[1]} in {workdir} "
        f"({format_size(where['free_bytes'])} free on {where['fstype']} there)"
    ]


def plan_seconds(study: Study, repetitions: Repetitions, overhead: Overhead) -> float:
    """The least time its runs take, all told (an exact plan's: its time)."""
    block = sum(run_seconds(c.workload) + overhead.seconds for c in study.cells)  # one run of every cell
    copies = copies_per_block(repetitions.runs)  # a ceiling's cell, in each of the first blocks (model/ceiling.py)
    first = sum((run_seconds(c.workload) + overhead.seconds) * (copies if c.target.ceiling else 1) for c in study.cells)
    return block * repetitions.warmup + first * repetitions.runs


def _time_lines(study: Study, repetitions: Repetitions, overhead: Overhead) -> list[str]:
    block = sum(run_seconds(c.workload) + overhead.seconds for c in study.cells)  # one run of every cell
    unknown = [w.name for w in study.workloads if not run_seconds(w)]
    least = plan_seconds(study, repetitions, overhead)
    if not repetitions.adaptive:
        estimate = f"about {duration(least)}"
    else:
        most = block * (repetitions.warmup + max(repetitions.max_runs, repetitions.runs))
        if repetitions.time_budget is not None:
            most = min(most, max(least, repetitions.time_budget))
        estimate = f"from about {duration(least)} to about {duration(most)}"
    lines = [f"time: {estimate} — the workloads' runtime, ramp and precondition, and {overhead.describe()}"]
    filled = {
        image: t.image_size for t in study.targets if t.on_images and t.image_fill == "full" for image in t.images
    }
    if filled and overhead.fill_rate:
        lines.append(
            f"  and {duration(sum(filled.values()) / overhead.fill_rate)} writing {len(filled)} image(s) whole once, "
            f"at the {format_size(int(overhead.fill_rate))}/s this host wrote them"
        )
    elif filled:
        lines.append(
            f"  and writing {len(filled)} image(s) whole once "
            f"({format_size(sum(filled.values()))}; this host's speed at it is not yet measured)"
        )
    if unknown:
        lines.append(f"  and the time of {', '.join(unknown)}, bound by size, not by a runtime (not estimated)")
    return lines


def duration(seconds: float) -> str:
    """A time as a plan says it: seconds, minutes or hours."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
