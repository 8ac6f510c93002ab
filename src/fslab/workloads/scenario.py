"""Scenarios: several phases on one target, sharing one file, each measured or only preparing
(seed 001's copy-on-write ageing, seed 002's write/rewrite/read/reread).

A phase is a fio job on the scenario's file, or an action: `sync`, `drop_caches`, `sleep`. A fio
phase may also take a snapshot every `snapshot_every` seconds while it runs (Btrfs subvolume
snapshot, ZFS snapshot; the target's filesystem's own `snapshot`), and count the file's extents
after it (filefrag). A measured phase's metrics are stored under its name: `after.read_mb_s`,
`before.extents`, `overwrite.snapshots`; an unmeasured one leaves nothing but its effect.

Every fio phase's options pass the same allow-list as a workload's (study_file.fio_options);
fslab sets the file (`filename`, named by fslab from the workload's name), its size, and the data
the scenario writes (workloads/data.py) on every phase. Built-in scenarios (BUILTIN) are phases
written here, their sizes and time taken from the study's table.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from fslab.errors import Refused
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.base import Provisioned
from fslab.findings import Finding
from fslab.guard.fio_jobs import JobFile, measured_seconds, parse_only, render, single_job
from fslab.guard.names import file_name, snapshot_name
from fslab.journal import Journal
from fslab.metrics import Metric, MetricKind
from fslab.monitors.extents import extent_counts, parse_filefrag
from fslab.system import sync_and_drop_caches, run
from fslab.workloads.base import Measured, RawOutput, StudyScope, directory_of, tool_of
from fslab.workloads.data import DataPattern
from fslab.workloads.fio import FIXED_OPTIONS, METRICS as FIO_METRICS, parse_metrics, run_fio

if TYPE_CHECKING:
    from fslab.study import Workload
    from fslab.workdir import Workdir

ACTIONS = ("fio", "sync", "drop_caches", "sleep")

# What every fio phase runs unless it says otherwise: direct I/O through libaio, a fixed seed.
PHASE_DEFAULTS = {"ioengine": "libaio", "direct": "1", "randseed": "24301"}


@dataclass(frozen=True)
class Phase:
    """One step of a scenario, every value checked."""

    name: str
    action: str  # one of ACTIONS
    measured: bool = True
    options: dict[str, str] = field(default_factory=dict)  # fio's, checked (action "fio")
    seconds: float = 0.0  # action "sleep"
    snapshot_every: float | None = None  # seconds between snapshots while the phase runs
    extents: bool = False  # count the file's extents after the phase

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "action": self.action, "measured": self.measured, "options": self.options,
                "seconds": self.seconds, "snapshot_every": self.snapshot_every, "extents": self.extents}  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    """A scenario workload (workloads.base.Tool): its phases over one file of `size` bytes."""

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
        return {"builtin": self.builtin, "file": self.file, "size": self.size, "data": self.data.describe(), "phases": [p.spec() for p in self.phases]}

    def data_pattern(self) -> str:
        return self.data.describe()

    def bytes_needed(self, block_device: bool) -> int:
        return self.size

    def measured_seconds(self) -> float:
        return sum(self.phase_seconds(p) for p in self.phases if p.measured)

    def phase_seconds(self, phase: Phase) -> float:
        """How long a phase lasts: a sleep's seconds, a fio phase's runtime as fio reads it (its
        job's measured_seconds); 0 when it lasts as long as its work takes."""
        if phase.action == "sleep":
            return phase.seconds
        return measured_seconds(self.job(phase)) if phase.action == "fio" else 0.0

    def job(self, phase: Phase) -> JobFile:
        """A fio phase's checked job: the scenario's file and size, the phase's options, fslab's own."""
        return single_job(phase.name, PHASE_DEFAULTS | phase.options | {"filename": self.file, "size": str(self.size)})


# ---- built-in scenarios ------------------------------------------------------------------------

SEQ_WRITE = {"rw": "write", "bs": "1m", "iodepth": "8"}
SEQ_READ = {"rw": "read", "bs": "1m", "iodepth": "8"}


def cow_ageing(runtime: float, snapshot_every: float | None = None) -> tuple[Phase, ...]:
    """Seed 001's in-place writes: one file written sequentially (1 MiB, QD8), read (before),
    overwritten at random in 4 KiB blocks at QD32 for `runtime` seconds, read again (after), its
    extents counted before and after. Copy-on-write scatters what was one extent."""
    settle = (Phase("settle", "sync", measured=False), Phase("drop", "drop_caches", measured=False))
    overwrite = {"rw": "randwrite", "bs": "4k", "iodepth": "32", "time_based": "1", "runtime": f"{round(runtime * 1000)}ms"}
    return (
        Phase("write", "fio", options=SEQ_WRITE | {"end_fsync": "1"}),
        *settle,
        Phase("before", "fio", options=SEQ_READ, extents=True),
        Phase("overwrite", "fio", options=overwrite | {"end_fsync": "1"}, snapshot_every=snapshot_every),
        *(replace(p, name=f"{p.name}-2") for p in settle),
        Phase("after", "fio", options=SEQ_READ, extents=True),
    )


def write_rewrite_read_reread() -> tuple[Phase, ...]:
    """Seed 002's iozone-like pass, buffered: write the file, write it again over itself, read it
    after dropping caches, read it again (the page cache answers the reread, as iozone's does)."""
    buffered = {"bs": "1m", "iodepth": "1", "direct": "0", "ioengine": "psync"}
    return (
        Phase("write", "fio", options=buffered | {"rw": "write", "end_fsync": "1"}),
        Phase("rewrite", "fio", options=buffered | {"rw": "write", "end_fsync": "1"}),
        Phase("drop", "drop_caches", measured=False),
        Phase("read", "fio", options=buffered | {"rw": "read"}),
        Phase("reread", "fio", options=buffered | {"rw": "read"}),
    )


SNAPSHOT_EVERY = 0.33  # seconds: seed 001's "about three snapshots a second"
BUILTIN = ("cow-ageing", "snapshots-under-load", "write-rewrite-read-reread")


def builtin_phases(name: str, runtime: float, snapshot_every: float | None) -> tuple[Phase, ...]:
    if name == "cow-ageing":
        return cow_ageing(runtime)
    if name == "snapshots-under-load":
        return cow_ageing(runtime, snapshot_every or SNAPSHOT_EVERY)
    if name == "write-rewrite-read-reread":
        return write_rewrite_read_reread()
    raise ValueError(f"no built-in scenario {name!r}; built-in: {', '.join(BUILTIN)}")


def scenario(name: str, phases: tuple[Phase, ...], size: int, data: DataPattern, builtin: str | None = None) -> Scenario:
    """A scenario over the file fslab names after the workload; ValueError when phases repeat a name."""
    names = [p.name for p in phases]
    if len(set(names)) < len(names):
        raise ValueError(f"phase names must differ: {', '.join(sorted({n for n in names if names.count(n) > 1}))} repeated")
    if not any(p.measured for p in phases):
        raise ValueError("no phase is measured: mark at least one measured = true")
    for p in phases:
        if p.action == "fio" and "rw" not in p.options:
            raise ValueError(f"phase '{p.name}' runs fio: give its rw")
        if p.action != "fio" and (p.options or p.snapshot_every or p.extents):
            raise ValueError(f"phase '{p.name}' is a {p.action}: fio options, snapshot_every and extents belong to fio phases")
    return Scenario(phases, file_name(name), size, data, builtin)


# ---- the workload kind ------------------------------------------------------------------------

METRICS: dict[str, MetricKind] = FIO_METRICS | {
    "extents": MetricKind("extents", False, compared=True),  # fewer is better: what copy-on-write ageing scatters
    "snapshots": MetricKind("snapshots", True),  # taken while the phase ran
}


class Scenarios:
    """Scenarios behind the workload protocol: every phase runs in `run`, in order, each measured
    one inside `measured(phase)`; outputs are fio's JSON, filefrag's lines and the snapshots taken,
    one per measured phase and tool."""

    name = "scenario"
    metrics = METRICS

    def problems(self, workloads: list[Workload], workdir: Workdir) -> list[str]:
        somewhere = workdir.mounts / "check"
        problems = []
        for workload in workloads:
            s = tool_of(workload, Scenario)
            for phase in (p for p in s.phases if p.action == "fio"):
                try:
                    parse_only(self._job_text(s, phase, somewhere), where=f"workload '{workload.name}' phase '{phase.name}'")
                except Refused as exc:
                    problems.append(str(exc))
        return problems

    def _job_text(self, s: Scenario, phase: Phase, directory: Path) -> str:
        return render(s.job(phase), directory=directory, device=None, fixed=FIXED_OPTIONS | s.data.fio_options())

    def command(self, workload: Workload, ready: Provisioned) -> str:
        s = tool_of(workload, Scenario)
        parts = []
        for p in s.phases:
            head = f"# phase {p.name}: {p.action}" + ("" if p.measured else " (not measured)")
            head += f", a snapshot every {p.snapshot_every:g} s" if p.snapshot_every else ""
            head += ", then the file's extents" if p.extents else ""
            body = self._job_text(s, p, directory_of(ready, self.name)) if p.action == "fio" else (f"sleep {p.seconds:g}" if p.action == "sleep" else p.action)
            parts.append(f"{head}\n{body}")
        return "\n".join(parts)

    def prepare(self, journal: Journal, workload: Workload, ready: Provisioned, scratch: Path, scope: StudyScope) -> None:
        pass  # a scenario's preparing phases are its own, unmeasured, in `run`

    def run(self, journal: Journal, workload: Workload, ready: Provisioned, command: str, scratch: Path, scope: StudyScope, measured: Measured) -> list[RawOutput]:
        s = tool_of(workload, Scenario)
        directory = directory_of(ready, self.name)
        outputs: list[RawOutput] = []
        taken = 0
        for phase in s.phases:
            with measured(phase.name) if phase.measured else _unwatched():
                if phase.action == "fio":
                    job = scratch / f"{file_name(phase.name)}.fio"
                    job.write_text(self._job_text(s, phase, directory))
                    with _snapshots(ready, phase.snapshot_every, taken) as snapshots:
                        text = run_fio(journal, job)
                    taken += len(snapshots)
                    if phase.measured:
                        outputs.append(RawOutput(phase.name, "fio", text))
                        if phase.snapshot_every:
                            outputs.append(RawOutput(phase.name, "snapshots", "\n".join(snapshots) + "\n"))
                elif phase.action == "sync":
                    run(["sync"])
                elif phase.action == "drop_caches":
                    sync_and_drop_caches()
                elif phase.action == "sleep":
                    time.sleep(phase.seconds)
            if phase.extents and phase.measured:
                counts = extent_counts([directory / s.file])
                outputs.append(RawOutput(phase.name, "filefrag", "".join(f"{path}: {n} extents found\n" for path, n in counts.items())))
        return outputs

    def parse(self, outputs: list[RawOutput]) -> list[Metric]:
        found: list[Metric] = []
        for output in outputs:
            if output.tool == "fio":
                found += [replace(m, phase=output.phase) for m in parse_metrics(output.text)]
            elif output.tool == "filefrag":
                found.append(METRICS["extents"].of("extents", sum(parse_filefrag(output.text).values()), output.phase))
            elif output.tool == "snapshots":
                found.append(METRICS["snapshots"].of("snapshots", len(output.text.split()), output.phase))
        return found

    def judge(self, workload: Workload, outputs: list[RawOutput]) -> list[Finding]:
        s = tool_of(workload, Scenario)
        found = []
        for output in (o for o in outputs if o.tool == "snapshots"):
            phase = next(p for p in s.phases if p.name == output.phase)
            taken = len(output.text.split())
            expected = s.phase_seconds(phase) / (phase.snapshot_every or 1)
            if expected >= 2 and taken < expected / 2:
                found.append(Finding("few_snapshots", f"{output.phase}: {taken} snapshots taken, not the ~{expected:.0f} asked (one every {phase.snapshot_every:g} s): each took longer", implausible=False))
        return found


@contextmanager
def _unwatched() -> Iterator[None]:
    yield


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
