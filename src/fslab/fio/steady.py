"""Preconditioning a fio workload, and scaling its steady-state windows.

SSDs and filesystems measure differently fresh and worn in: SNIA's performance test
specification preconditions a device (written sequentially twice, then randomly until steady
state) and measures it only then. A fio workload built from parameters may say so:

    precondition = "fill"                     # its region written sequentially once
    precondition = [ { rw = "write", bs = "128k", loops = 2 },
                     { rw = "randwrite", bs = "4k", iodepth = 32, runtime = "30m",
                       steadystate = "iops_slope:0.3%", steadystate_duration = "5m" } ]

Each phase is a fio job on the measured job's own files or region (its name, size, numjobs and
filename, as the layout job is: fio.layout_options), starting from the layout's pattern — direct
sequential writes of 1 MiB, 16 deep — and changing what the phase says; every value goes
through fio's allow-list, every job through fio's own parser before the study runs. The phases
run in order after the layout and before the caches are dropped (fio.Fio.prepare), unmeasured:
no monitor watches them and none of their bytes is in the run's figures. Each is kept as a raw
output of its own (fio_output.PRECONDITION_TOOL), with how long it took and fio's judgement of
its steady state, which the summary shows on the cell.

Sizes scale with the workload's (it is the same region); a phase's runtime and steady-state
window scale with `--scale` as a workload's runtime does. A phase's random writes get their own
seed (the workload's + the phase's number), so the measured run does not replay their offsets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator, model_validator

from fslab.core.toml_errors import FieldError
from fslab.core.units import parse_duration
from fslab.fio.jobs import SHORTEST_STEADY_WINDOW, JobFile, fio_seconds, single_job, steadystate_problem
from fslab.fio.output import PRECONDITION_PHASE, PRECONDITION_TOOL, read_precondition, steady_states
from fslab.fio.section import BlockSize, fio_allows
from fslab.fio.values import block_size, ms_text
from fslab.model import UNKNOWN_LENGTH_TIMEOUT, RawOutput
from fslab.model.findings import Finding
from fslab.workloads.tables import Building, Duration, Table, checked

# What a precondition writes with: sequentially, or at random offsets.
WRITE_MODES = ("write", "randwrite")
# The workload's options that say how much a job does, beside its timing (which the layout leaves
# out): a phase says it itself (loops, runtime) or writes the whole region, once.
_AMOUNT = ("loops", "io_size", "number_ios")
STEADY_OPTIONS = ("steadystate", "steadystate_duration", "steadystate_ramp_time")


class PreconditionPhase(Table):
    """One phase of a precondition: what differs from the layout's sequential fill."""

    rw: str
    bs: BlockSize | None = None
    iodepth: int | None = Field(None, ge=1, le=65536)
    numjobs: int | None = Field(None, ge=1, le=1024)  # only where the workload's jobs share one file
    loops: int | None = Field(None, ge=1, le=1000)  # times over the region (default once)
    runtime: Duration | None = None  # for so long, over and over the region (until steady, with steadystate)
    steadystate: Annotated[str, checked(fio_allows("steadystate"))] | None = None
    steadystate_duration: Duration | None = None
    steadystate_ramp_time: Duration | None = None

    @field_validator("rw")
    @classmethod
    def _writes(cls, value: str) -> str:
        if value not in WRITE_MODES:
            raise ValueError(f'a precondition phase writes: rw = "write" (sequential) or "randwrite", not {value!r}')
        return value

    @model_validator(mode="after")
    def _consistent(self) -> PreconditionPhase:
        if self.loops is not None and self.runtime is not None:
            raise FieldError("loops", "a phase runs loops times over the region or for runtime, not both: keep one")
        if (self.steadystate is None) != (self.steadystate_duration is None):
            given, missing = (
                ("steadystate", "steadystate_duration")
                if self.steadystate is not None
                else ("steadystate_duration", "steadystate")
            )
            raise FieldError(
                given,
                f'{given} goes with {missing}: the criterion (steadystate = "iops_slope:0.3%") '
                'and the window it must hold for (steadystate_duration = "5m")',
            )
        if self.steadystate_ramp_time is not None and self.steadystate is None:
            raise FieldError(
                "steadystate_ramp_time", "steadystate_ramp_time goes with steadystate and steadystate_duration"
            )
        return self


def _parse_precondition(value: Any) -> Any:
    """ "fill", the shorthand for one sequential pass; a list of phases as it is (pydantic reads it)."""
    if isinstance(value, str):
        if value != "fill":
            raise ValueError(
                'precondition is "fill" (the region written sequentially once) '
                f'or a list of phases [{{ rw = "write", … }}, …], not {value!r}'
            )
        return [{"rw": "write"}]
    if isinstance(value, list) and not value:
        raise ValueError(
            "precondition = [] preconditions nothing: leave it out, "
            'or give it phases ("fill", or [{ rw = "write", … }, …])'
        )
    return value


# A workload's `precondition` field: "fill", or its phases.
PreconditionField = Annotated[list[PreconditionPhase], BeforeValidator(_parse_precondition)]


@dataclass(frozen=True)
class Precondition:
    """A workload's precondition (model.Tool's part, fio.FioJob.precondition): each phase's job,
    every option checked, on the workload's own files or region."""

    phases: tuple[JobFile, ...]

    def spec(self) -> list[dict[str, str | None]]:
        """As stored with the workload: each phase's fio options (what the summary describes)."""
        return [dict(job.jobs()[0]) for job in self.phases]

    def known_seconds(self) -> float:
        """How long its time-bound phases may run, together (steady state may end them sooner)."""
        return sum(fio_seconds(job.jobs()[0].get("runtime") or "0") for job in self.phases)

    def unbounded(self) -> bool:
        """Whether a phase runs until it has written its region (its time unknown)."""
        return any(not job.jobs()[0].get("runtime") for job in self.phases)

    def timeout(self) -> float:
        """What it adds to a run's time-out: twice its time-bound phases' runtime, as a workload's
        (tables.run_timeout), and the hour fslab gives a run of unknown length when a phase is
        bound by size."""
        return 2 * self.known_seconds() + (UNKNOWN_LENGTH_TIMEOUT if self.unbounded() else 0.0)


def precondition(
    name: str, phases: list[PreconditionPhase], layout: dict[str, str], building: Building, *, shared_file: bool
) -> Precondition:
    """The phases of workload `name` as jobs: each the `layout` job's options (fio.layout_options:
    the workload's files or region, written sequentially) with what the phase changes, its times ×
    the study's time scale. A phase's numjobs is refused unless the workload's jobs share one file
    (each job's own file is the region it writes); a phase's steady state that fio could never
    judge is refused (fio_jobs.steadystate_problem)."""
    jobs = []
    for number, phase in enumerate(phases, start=1):
        at = (*building.table, "precondition", number - 1)
        if phase.numjobs is not None and not shared_file:
            building.refuse(
                (*at, "numjobs"),
                "the workload's jobs each write a file of their own, "
                "which the phase must write: leave numjobs out (the phase runs the workload's "
                f"{layout.get('numjobs', '1')} job(s)), or give the workload shared_file = true",
            )
        options = {k: v for k, v in layout.items() if k not in _AMOUNT and k not in STEADY_OPTIONS}
        options |= {"rw": phase.rw} | {
            k: str(v)
            for k, v in (
                ("bs", phase.bs and block_size(phase.bs)),
                ("iodepth", phase.iodepth),
                ("numjobs", phase.numjobs),
                ("loops", phase.loops),
            )
            if v is not None
        }
        if "randseed" in options:  # its own random offsets: not the measured run's
            options["randseed"] = str(int(options["randseed"]) + number)
        if phase.runtime is not None:
            options |= {"time_based": "1", "runtime": ms_text(parse_duration(phase.runtime) * building.time_scale)}
        if phase.steadystate is not None:
            window = {k: ms_text(parse_duration(v)) for k in STEADY_OPTIONS[1:] if (v := getattr(phase, k)) is not None}
            options |= {"steadystate": phase.steadystate} | scaled_steadystate(window, building.time_scale)
        job = single_job(name, options)
        if problem := steadystate_problem(job):
            building.refuse(at, problem)
        jobs.append(job)
    return Precondition(tuple(jobs))


def scaled_steadystate(options: dict[str, str], time_scale: float) -> dict[str, str]:
    """fio options (checked, as fio writes them) with their steady-state window and ramp ×
    `time_scale`, in whole ms, the window no shorter than fio can judge (SHORTEST_STEADY_WINDOW);
    the others as they are."""
    if time_scale == 1.0:
        return options
    scaled = dict(options)
    for key, least in (("steadystate_duration", SHORTEST_STEADY_WINDOW), ("steadystate_ramp_time", 0.0)):
        if key in scaled:
            scaled[key] = ms_text(max(least, fio_seconds(scaled[key]) * time_scale))
    return scaled


# ---- what a run's outputs say of steady state (pure) ------------------------------------------------


def not_steady(outputs: list[RawOutput]) -> list[Finding]:
    """A note for each part of a run whose steady state fio judged and did not find: the measured
    run (its figures are of a device or filesystem still changing), a precondition phase (the
    measured run began before it settled). Outputs fio_output cannot read are left to the parse,
    which says why."""
    found = []
    for output in outputs:
        try:
            if output.tool == "fio":
                states = steady_states(output.text)
                where = "the measured run"
            elif output.tool == PRECONDITION_TOOL:
                states = steady_states(read_precondition(output.text)[1])
                where = f"precondition phase {output.phase.removeprefix(PRECONDITION_PHASE)}"
            else:
                continue
        except (ValueError, KeyError, TypeError):
            continue
        for state in states:
            if not state.attained:
                kind = "not_steady" if output.tool == "fio" else f"{output.phase}_not_steady"
                then = (
                    "its figures are of a target still changing"
                    if output.tool == "fio"
                    else "the measured run began on a target still changing"
                )
                found.append(
                    Finding(
                        kind,
                        f"{where} never reached steady state ({state.setting} over "
                        f"{state.window_s} s) in its {state.seconds:.0f} s: {then}",
                        implausible=False,
                    )
                )
    return found
