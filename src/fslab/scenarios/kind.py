"""Scenarios: several phases on one target, sharing one file, each measured or only preparing
(seed 001's copy-on-write ageing, seed 002's write/rewrite/read/reread).

A phase is a fio job on the scenario's file, a tool run (sysbench fileio, dd), or an action:
`sync`, `drop_caches`, `sleep`. A fio phase may also take a snapshot every `snapshot_every`
seconds while it runs (Btrfs subvolume snapshot, ZFS snapshot; the target's filesystem's own
`snapshot`), and count the file's extents after it (filefrag). A measured phase's metrics are
stored under its name: `after.read_mb_s`, `before.extents`, `overwrite.snapshots`; an unmeasured
one leaves nothing but its effect.

Every fio phase's options pass the same allow-list as a workload's (study_file.fio_options);
fslab sets the file (`filename`, named by fslab from the workload's name), its size, and the data
the scenario writes (workloads/data.py) on every phase. Built-in scenarios (BUILTIN_SCENARIOS) are phases
written in scenarios/builtin/, one module each, their sizes and time taken from the study's table.

A tool phase holds the tool's own checked record (a sysbench or dd workload's, writing the
scenario's data, random or zeros) and runs through the tool's own kind (PHASE_TOOLS), prepared
unmeasured, as a workload named after the scenario and the phase (`mix-sanity`: dd's file); its
files stay for the phases after it. Its metrics are stored under the phase's name
(`mail.events_per_s`, `sanity.write_mb_s`) with the roles its tool gives them; each step the tool
measures is a window and a stored output named after the phase (`sanity.write`, `sanity.read`;
sysbench's one step: `mail`), which is why a tool phase's name holds no '.' and no other phase is
named under it: every key stays unambiguous, every window distinct.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import field_validator, model_validator

from fslab.core.errors import Refused
from fslab.core.journal import Journal
from fslab.core.names import file_name, snapshot_name
from fslab.core.system import run, sync_and_drop_caches
from fslab.core.toml_errors import FieldError
from fslab.core.units import parse_duration, parse_size, scaled_size
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.base import Provisioned
from fslab.fio import (
    FIXED_OPTIONS,
    NO_PREALLOCATION,
    JobFile,
    direct as job_is_direct,
    fio_options,
    fio_seconds,
    log_options,
    measured_seconds,
    ms_text,
    parse_all,
    parse_metrics,
    preallocation_of,
    render,
    run_measured,
    single_job,
)
from fslab.model import PHASE_SEPARATOR, Metric, RawOutput, Workload
from fslab.model.findings import Finding
from fslab.monitors.extents import extent_counts, parse_filefrag
from fslab.scenarios.metrics import METRICS
from fslab.scenarios.phases import BUILTIN_SCENARIOS, Phase
from fslab.scenarios.report import SCENARIO_REPORT
from fslab.workloads import KINDS, Registered
from fslab.workloads.base import Measured, StudyScope, Window, WorkloadKind, directory_of, tool_of
from fslab.workloads.data import DataPattern
from fslab.workloads.dd import DD, DdOptions, dd_options
from fslab.workloads.sysbench import SYSBENCH, SysbenchOptions, sysbench_options
from fslab.workloads.tables import (
    Building,
    Data,
    Duration,
    Name,
    OnTargets,
    Size,
    Table,
    Timeout,
    ToolOption,
    WorkloadLimits,
    run_timeout,
)

if TYPE_CHECKING:
    from fslab.core.workdir import Workdir

# The tools a phase may run, each through its own kind, by the name that is the phase's action
# (and its outputs' tool).
PHASE_TOOLS: dict[str, WorkloadKind] = {SYSBENCH.name: SYSBENCH, DD.name: DD}

# What every fio phase runs unless it says otherwise: direct I/O through libaio, a fixed seed,
# the file not preallocated (fio.NO_PREALLOCATION).
PHASE_DEFAULTS = {"ioengine": "libaio", "direct": "1", "randseed": "24301", **NO_PREALLOCATION}


@dataclass(frozen=True)
class Scenario:
    """A scenario workload (model.Tool): its phases over one file of `size` bytes."""

    kind: ClassVar[str] = "scenario"
    needs_directory: ClassVar[bool] = True  # its file lives in the target's filesystem

    phases: tuple[Phase, ...]
    file: str  # the file's name in the target's directory (guard.names.file_name)
    size: int
    data: DataPattern = DataPattern()
    builtin: str | None = None  # the built-in scenario it was written from

    @property
    def takes_snapshots(self) -> bool:
        """Whether it takes snapshots: refused on a target whose filesystem has none."""
        return any(p.snapshot_every for p in self.phases)

    def spec(self) -> dict[str, Any]:
        return {
            "builtin": self.builtin, "file": self.file, "size": self.size, "data": self.data.describe(),
            "phases": [p.spec() for p in self.phases],
            "preallocation": preallocation_of(
                options for p in self.phases if p.action == "fio" for options in self.job(p).jobs()
            ),
        }  # fmt: skip

    def data_pattern(self) -> str:
        """The scenario's data, as its fio phases write it, then as each tool phase's tool does."""
        fio = self.data.describe() if any(p.action == "fio" for p in self.phases) else self.data.kind
        return "; ".join([fio, *(f"phase {p.name}: {p.tool.data_pattern()}" for p in self.phases if p.tool)])

    def bytes_needed(self, block_device: bool) -> int:
        """The file, and every tool phase's files: they stay for the phases after it."""
        return self.size + sum(p.tool.bytes_needed(block_device) for p in self.phases if p.tool)

    def measured_seconds(self) -> float:
        return sum(self.phase_seconds(p) for p in self.phases if p.measured)

    @property
    def metric_phases(self) -> tuple[str, ...]:
        """The phases its metrics are keyed under (model.metric_phases): its measured ones."""
        return tuple(p.name for p in self.phases if p.measured)

    @property
    def direct(self) -> bool:
        """Whether every phase that reads or writes bypasses the page cache: a fio phase as its
        job says (as a fio workload's is read), a tool phase as its tool's record says."""
        return all(
            p.tool.direct if p.tool else job_is_direct(self.job(p)) for p in self.phases if p.tool or p.action == "fio"
        )

    def phase_seconds(self, phase: Phase) -> float:
        """How long a phase lasts: a sleep's seconds, a fio phase's runtime as fio reads it (its
        job's measured_seconds), a tool phase's as its tool's workload's (sysbench's time); 0 when
        it lasts as long as its work takes."""
        if phase.action == "sleep":
            return phase.seconds
        if phase.tool:
            return phase.tool.measured_seconds()
        return measured_seconds(self.job(phase)) if phase.action == "fio" else 0.0

    def job(self, phase: Phase) -> JobFile:
        """A fio phase's checked job: the scenario's file and size, the phase's options, fslab's own."""
        return single_job(phase.name, PHASE_DEFAULTS | phase.options | {"filename": self.file, "size": str(self.size)})


# The built-in scenarios' names (fslab's own, scenarios/builtin/), as a study's `scenario` accepts them.
BUILTIN = tuple(BUILTIN_SCENARIOS.own())


def tool_data(phase: str, tool: str, data: DataPattern) -> str:
    """What a tool phase writes: the scenario's data, "random" or "zeros"; ValueError naming the
    phase for any other (sysbench and dd cannot write fio's compressible buffers)."""
    if data.kind not in ("random", "zeros"):
        raise ValueError(
            f"phase '{phase}' runs {tool}, which writes random bytes or "
            f"zeros and cannot write the scenario's data, {data.describe()}; "
            f'give the workload data = "random" or "zeros", or make \'{phase}\' a fio phase'
        )
    return data.kind


def scenario(
    name: str, phases: tuple[Phase, ...], size: int, data: DataPattern, builtin: str | None = None
) -> Scenario:
    """A scenario over the file fslab names after the workload; ValueError naming the phase that
    cannot be one of it (a repeated name, fio's options on another phase, a tool phase's name)."""
    names = [p.name for p in phases]
    if len(set(names)) < len(names):
        raise ValueError(
            f"phase names must differ: {', '.join(sorted({n for n in names if names.count(n) > 1}))} repeated"
        )
    if not any(p.measured for p in phases):
        raise ValueError("no phase is measured: mark at least one measured = true")
    for p in phases:
        if (p.tool.kind if p.tool else None) != (p.action if p.action in PHASE_TOOLS else None):
            raise ValueError(
                f"phase '{p.name}' runs {p.action} and holds "
                f"{f'a {p.tool.kind} record' if p.tool else 'no tool record'}: "
                "a tool phase holds its own tool's, and only it"
            )
        if p.action == "fio" and "rw" not in p.options:
            raise ValueError(f"phase '{p.name}' runs fio: give its rw")
        if p.action != "fio" and (p.options or p.snapshot_every or p.extents):
            files = (
                f" (extents count the scenario's file, not {p.action}'s files); make them a phase of their own"
                if p.tool
                else ""
            )
            raise ValueError(
                f"phase '{p.name}' {'runs' if p.tool else 'is a'} {p.action}: fio "
                f"options, snapshot_every and extents belong to fio phases{files}"
            )
        if p.tool and p.tool.data != tool_data(p.name, p.action, data):
            raise ValueError(
                f"phase '{p.name}' runs {p.action} writing {p.tool.data} data, and the scenario writes {data.kind}"
            )
        if p.tool and PHASE_SEPARATOR in p.name:
            raise ValueError(
                f"phase '{p.name}' runs {p.action}: its name holds no '{PHASE_SEPARATOR}', "
                f"which fslab puts between it and the tool's steps ({p.name}.write)"
            )
        if p.tool and (under := [n for n in names if n.startswith(p.name + PHASE_SEPARATOR)]):
            raise ValueError(
                f"phase '{under[0]}' is named as a step of phase '{p.name}', which "
                f"runs {p.action} (its steps are '{p.name}.<step>'): rename it"
            )
    return Scenario(phases, file_name(name), size, data, builtin)


# ---- the workload kind ------------------------------------------------------------------------


class Scenarios:
    """Scenarios behind the workload protocol: every phase runs in `run`, in order, each measured
    one inside `measured(phase)`, a tool phase through its tool's kind (`_run_tool`); outputs are
    fio's JSON and logs, filefrag's lines, the snapshots taken and the tools' reports, one per measured
    phase (or tool step) and tool."""

    name = "scenario"
    metrics = METRICS
    report = SCENARIO_REPORT
    accepted_options: Mapping[str, str] = {}  # none of its own: its phases' are fio's, sysbench's and dd's

    def problems(self, workloads: list[Workload], workdir: Workdir) -> list[str]:
        somewhere = workdir.mounts / "check"
        scenarios = [(workload.name, tool_of(workload, Scenario)) for workload in workloads]
        jobs = [
            (self._job_text(s, phase, somewhere), f"workload '{name}' phase '{phase.name}'")
            for name, s in scenarios
            for phase in s.phases
            if phase.action == "fio"
        ]
        problems = parse_all(jobs, directory=somewhere)
        for workload in workloads:
            s = tool_of(workload, Scenario)
            for phase in (p for p in s.phases if p.tool):
                problems += PHASE_TOOLS[phase.action].problems([_phase_workload(workload, phase)], workdir)
        return problems

    def _job_text(self, s: Scenario, phase: Phase, directory: Path) -> str:
        """A fio phase's job file; a measured one's logs its throughput over time too."""
        logs = log_options(s.phase_seconds(phase)) if phase.measured else {}
        return render(s.job(phase), directory=directory, device=None, fixed=FIXED_OPTIONS | s.data.fio_options() | logs)

    def command(self, workload: Workload, ready: Provisioned) -> str:
        s = tool_of(workload, Scenario)
        parts = []
        for p in s.phases:
            head = f"# phase {p.name}: {p.action}" + ("" if p.measured else " (not measured)")
            head += f", a snapshot every {p.snapshot_every:g} s" if p.snapshot_every else ""
            head += ", then the file's extents" if p.extents else ""
            if p.action == "fio":
                body = self._job_text(s, p, directory_of(ready, self.name))
            elif p.tool:
                body = PHASE_TOOLS[p.action].command(_phase_workload(workload, p), ready)
            else:
                body = f"sleep {p.seconds:g}" if p.action == "sleep" else p.action
            parts.append(f"{head}\n{body}")
        return "\n".join(parts)

    def prepare(
        self, journal: Journal, workload: Workload, ready: Provisioned, scratch: Path, scope: StudyScope
    ) -> list[RawOutput]:
        return []  # a scenario's preparing phases are its own, unmeasured, in `run`

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
        s = tool_of(workload, Scenario)
        directory = directory_of(ready, self.name)
        outputs: list[RawOutput] = []
        taken = 0
        for phase in s.phases:
            if phase.tool:
                outputs += self._run_tool(journal, workload, phase, ready, scratch, scope, measured)
                continue
            with measured(phase.name) if phase.measured else nullcontext(Window()) as window:
                if phase.action == "fio":
                    job = scratch / f"{file_name(phase.name)}.fio"
                    job.write_text(self._job_text(s, phase, directory))
                    with _snapshots(ready, phase.snapshot_every, taken) as snapshots:
                        text, logs = run_measured(
                            journal, job, phase.name, s.phase_seconds(phase), window, directory=directory
                        )
                    taken += len(snapshots)
                    if phase.measured:
                        outputs += [RawOutput(phase.name, "fio", text), *logs]
                        if phase.snapshot_every:
                            outputs.append(RawOutput(phase.name, "snapshots", "\n".join(snapshots) + "\n"))
                elif phase.action == "sync":
                    run(["sync"])
                elif phase.action == "drop_caches":
                    sync_and_drop_caches()
                    # zfs-fuse's ARC, which drop_caches leaves
                    FILESYSTEMS[ready.filesystem].empty_cache(journal, ready)
                elif phase.action == "sleep":
                    time.sleep(phase.seconds)
            if phase.extents and phase.measured:
                counts = extent_counts([directory / s.file], ready.filesystem)
                outputs.append(
                    RawOutput(
                        phase.name, "filefrag", "".join(extents.line(str(path)) for path, extents in counts.items())
                    )
                )
        return outputs

    def _run_tool(
        self,
        journal: Journal,
        workload: Workload,
        phase: Phase,
        ready: Provisioned,
        scratch: Path,
        scope: StudyScope,
        measured: Measured,
    ) -> list[RawOutput]:
        """A tool phase, as its tool's kind runs a workload: prepared (not measured), then run,
        each step the tool measures in a window named after the phase (`sanity.write`), its
        outputs named alike."""
        kind, own = PHASE_TOOLS[phase.action], _phase_workload(workload, phase)
        kind.prepare(journal, own, ready, scratch, scope)

        def window(step: str) -> AbstractContextManager[Window]:
            return measured(_step_name(phase.name, step)) if phase.measured else nullcontext(Window())

        found = kind.run(journal, own, ready, kind.command(own, ready), scratch, scope, window)
        return [replace(o, phase=_step_name(phase.name, o.phase)) for o in found] if phase.measured else []

    def parse(self, outputs: list[RawOutput]) -> list[Metric]:
        found: list[Metric] = []
        for output in outputs:
            if output.tool in PHASE_TOOLS:
                phase, own = _as_tool_named(output)
                found += [replace(m, phase=_step_name(phase, m.phase)) for m in PHASE_TOOLS[output.tool].parse([own])]
            elif output.tool == "fio":
                found += [replace(m, phase=output.phase) for m in parse_metrics(output.text)]
            elif output.tool == "filefrag":
                counts = [e.count for e in parse_filefrag(output.text).values()]
                if None not in counts:  # a count that cannot be measured is absent, never 0 (judge says why)
                    found.append(
                        METRICS["extents"].of("extents", sum(c for c in counts if c is not None), output.phase)
                    )
            elif output.tool == "snapshots":
                found.append(METRICS["snapshots"].of("snapshots", len(output.text.split()), output.phase))
        return found

    def judge(self, workload: Workload, outputs: list[RawOutput]) -> list[Finding]:
        s = tool_of(workload, Scenario)
        found = [
            Finding(
                "extents_not_measurable", f"{output.phase}: extents not measurable {extents.why}", implausible=False
            )
            for output in outputs if output.tool == "filefrag"
            for extents in parse_filefrag(output.text).values() if extents.count is None
        ]  # fmt: skip
        for output in (o for o in outputs if o.tool == "snapshots"):
            phase = next(p for p in s.phases if p.name == output.phase)
            taken = len(output.text.split())
            expected = s.phase_seconds(phase) / (phase.snapshot_every or 1)
            if expected >= 2 and taken < expected / 2:
                found.append(
                    Finding(
                        "few_snapshots",
                        f"{output.phase}: {taken} snapshots taken, not the ~{expected:.0f} "
                        f"asked (one every {phase.snapshot_every:g} s): each took longer",
                        implausible=False,
                    )
                )
        for phase in (p for p in s.phases if p.tool):
            own = [
                o
                for name, o in map(_as_tool_named, (o for o in outputs if o.tool == phase.action))
                if name == phase.name
            ]
            if own:  # what its tool's kind finds in them, said of the phase
                found += [
                    replace(f, says=f"{phase.name}: {f.says}")
                    for f in PHASE_TOOLS[phase.action].judge(_phase_workload(workload, phase), own)
                ]
        return found


def _phase_workload(workload: Workload, phase: Phase) -> Workload:
    """The workload a tool phase's kind is given: the scenario's, running the phase's tool record,
    named after the scenario and the phase (dd names its file after it: `mix-sanity`)."""
    if phase.tool is None:
        raise ValueError(f"phase '{phase.name}' runs no tool")
    return replace(workload, name=f"{workload.name}-{phase.name}", tool=phase.tool)


def _step_name(phase: str, step: str) -> str:
    """A tool's phase (its step: dd's `write`) as a scenario names it: after the tool phase's
    name (`sanity.write`); the tool's unnamed one (sysbench's run, any tool's metrics) is the
    tool phase itself (`mail`)."""
    return f"{phase}{PHASE_SEPARATOR}{step}" if step else phase


def _as_tool_named(output: RawOutput) -> tuple[str, RawOutput]:
    """A tool phase's stored output as its tool named it, and the phase it belongs to:
    `sanity.write` → phase `sanity`, dd's step `write` (a tool phase's name holds no '.')."""
    phase, _, step = output.phase.partition(PHASE_SEPARATOR)
    return phase, replace(output, phase=step)


@contextmanager
def _snapshots(ready: Provisioned, every: float | None, first: int) -> Iterator[list[str]]:
    """Snapshots of the target every `every` seconds while the block runs (none when None), by
    the target's filesystem, named by fslab; yields the list of those taken, filled as they are.
    A snapshot that fails ends the taking and fails the phase once the block is done."""
    taken: list[str] = []
    if not every:
        yield taken
        return
    filesystem = FILESYSTEMS[ready.filesystem]
    stop = threading.Event()
    failure: list[BaseException] = []

    def take() -> None:
        while not stop.wait(every):
            try:
                taken.append(filesystem.snapshot(ready, snapshot_name(first + len(taken) + 1)))
            except BaseException as exc:  # said once the phase is over
                failure.append(exc)
                return

    thread = threading.Thread(target=take, name="fslab-snapshots", daemon=True)
    thread.start()
    try:
        yield taken
    finally:
        stop.set()
        thread.join()
    if failure:
        raise failure[0]


SCENARIOS = Scenarios()


# ---- its table in a study file -----------------------------------------------------------------


class PhaseSection(Table):
    """One phase of a scenario: a fio job on the scenario's file, a tool run, or an action."""

    name: Name
    fio: dict[str, ToolOption] | None = None  # fio options (the allow-list's), on the scenario's file
    sysbench: dict[str, ToolOption] | None = None  # a sysbench workload's options, in the target's directory
    dd: dict[str, ToolOption] | None = None  # a dd workload's options, on a file of its own
    action: Literal["sync", "drop_caches", "sleep"] | None = None
    seconds: Duration | None = None  # sleep
    measured: bool = True  # its metrics stored under its name; false: it only prepares
    snapshot_every: Duration | None = None  # a snapshot of the target every so long while it runs (btrfs, zfs)
    extents: bool = False  # count the file's extents after it

    @field_validator("fio")
    @classmethod
    def _allowed_options(cls, options: dict[str, Any] | None) -> dict[str, str] | None:
        return None if options is None else fio_options(options)

    @model_validator(mode="after")
    def _one_thing(self) -> PhaseSection:
        given = [name for name in ("fio", "sysbench", "dd", "action") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                "a phase runs fio (fio = { rw = … }), sysbench (sysbench = { … }), dd (dd = { … }) or an action "
                '(action = "sync" | "drop_caches" | "sleep"), one of them'
                + (f", not {' and '.join(given)}" if given else "")
            )
        if (self.action == "sleep") != (self.seconds is not None):
            raise ValueError('seconds goes with action = "sleep", and a sleep needs it')
        return self

    @property
    def tool(self) -> str | None:
        """The tool a tool phase runs (its table's key: "sysbench", "dd"); None for fio and actions."""
        return "sysbench" if self.sysbench is not None else "dd" if self.dd is not None else None

    def checked(self, data: str) -> SysbenchOptions | DdOptions:
        """A tool phase's record, writing `data` (the scenario's: "random" or "zeros"), through the
        tool's allow-list as a workload of its kind (raises OptionRefused saying why); ValueError
        for any other phase. The scenario's data is known only once the study is read (study/__init__.py)."""
        if self.sysbench is not None:
            return sysbench_options(self.sysbench, data=data)
        if self.dd is None:
            raise ValueError(f"phase '{self.name}' runs no tool")
        return dd_options(self.dd, data=data)


class ScenarioSection(OnTargets, WorkloadLimits):
    """Several phases on one target, sharing one file (scenarios/kind.py): a built-in
    `scenario`, or its own `phase` tables."""

    name: Name
    kind: Literal["scenario"]
    scenario: Literal[BUILTIN] | None = None  # type: ignore[valid-type]  # the built-in scenarios' names
    size: Size = "1GiB"  # the file's
    runtime: Duration = "60s"  # a built-in scenario's timed phase (cow-ageing's overwrites)
    snapshot_every: Duration | None = None  # snapshots-under-load: seconds between snapshots (default 0.33)
    data: Data | None = None  # what every phase writes: "random" (default), "zeros" or { compressible = N }
    timeout: Timeout | None = None
    phase: list[PhaseSection] = []

    @model_validator(mode="after")
    def _builtin_or_phases(self) -> ScenarioSection:
        if (self.scenario is None) == (not self.phase):
            raise ValueError(
                'a scenario is a built-in one (scenario = "cow-ageing", '
                "…) or its own [[workload.phase]] tables, one of them"
            )
        if self.snapshot_every is not None and self.scenario not in (None, "snapshots-under-load"):
            raise FieldError("snapshot_every", f"{self.scenario} takes no snapshots: snapshots-under-load does")
        return self


def build(section: ScenarioSection, building: Building) -> Workload:
    """A scenario: a built-in one's phases, or the table's own; its file's size and its tool
    phases' sizes × `scale`, its timed phases × `time_scale`."""
    data = building.data if section.data is None else DataPattern.asked(section.data)
    if section.scenario:
        every = parse_duration(section.snapshot_every) if section.snapshot_every is not None else None
        phases = BUILTIN_SCENARIOS[section.scenario].phases(
            parse_duration(section.runtime) * building.time_scale, every
        )
    else:
        phases = tuple(_phase(p, data, building, (*building.table, "phase", i)) for i, p in enumerate(section.phase))
    try:
        made = scenario(
            section.name, phases, scaled_size(parse_size(section.size), building.scale), data, section.scenario
        )
    except (ValueError, Refused) as exc:
        building.refuse(building.table, str(exc))
    seconds = made.measured_seconds()
    return Workload(section.name, made, seconds, made.direct, run_timeout(seconds, section.timeout))


def _phase(section: PhaseSection, data: DataPattern, building: Building, table: tuple) -> Phase:
    """A phase of a scenario's own (its `table`); a tool phase's record checked, writing the
    scenario's `data` (refused at the phase's tool field), and scaled as a workload of its tool's is."""
    options = {name: str(value) for name, value in (section.fio or {}).items()}  # text once checked already
    if (
        "runtime" in options
    ):  # as a workload's: whole milliseconds, × time_scale, time based (its value is fio's: read as fio reads it)
        options |= {"runtime": ms_text(fio_seconds(options["runtime"]) * building.time_scale), "time_based": "1"}
    tool = None
    if section.tool:
        try:
            tool = section.checked(tool_data(section.name, section.tool, data)).scaled(
                building.scale, building.time_scale
            )
        except ValueError as exc:
            building.refuse((*table, section.tool), str(exc))
    return Phase(
        name=section.name, action=section.tool or section.action or "fio", measured=section.measured, options=options,
        seconds=parse_duration(section.seconds) * building.time_scale if section.seconds is not None else 0.0,
        snapshot_every=parse_duration(section.snapshot_every) if section.snapshot_every is not None else None,
        extents=section.extents,
        tool=tool,  # sysbench's or dd's, as section.tool says
    )  # fmt: skip


KINDS.add(
    Registered(SCENARIOS, section=ScenarioSection, build=build), own=True
)  # its phases' tools are their own kinds'
