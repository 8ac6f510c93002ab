"""The workload protocol: what a workload kind offers fslab, so that fio, sysbench, dd, rsync and
multi-phase scenarios each live in one module behind it (fio/workload.py is the first).

A run of a workload on a target (runner.execute) goes:

    problems(workloads, workdir)   before anything is attached or formatted, for the whole study:
                                   what the tool itself refuses (fio --parse-only, …)
    command(workload, ready)       the exact job file or command line of this run: recorded with
                                   it (runs.job_file), and what `run` runs
    prepare(…) → [RawOutput]       lays out what the measured run reads, preconditions the
                                   target; not measured (what outlives the run, in the study
                                   run's `scope`); the outputs a reader needs of it, if any
    — caches dropped —
    run(…) → [RawOutput]           the measured run, within the run's time limit: each tool's
                                   output of each phase, stored as it came (run_outputs)
    parse([RawOutput]) → [Metric]  pure: raw output in, metrics out (each with its phase, unit,
                                   direction and roles, from `metrics`)
    judge(workload, [RawOutput])   pure: what in the output cannot be taken as a plain result, or a
                                   reader must know (Finding); stored with the run, shown on its cell

`prepare` and `run` get the study run's `StudyScope`: what a kind keeps from one run to the next
and releases when the study run ends (rsync's source image, made once). Kinds are singletons
shared by every study run, so they keep nothing themselves.

`run` calls `measured(phase)` around each step it measures (a context manager yielding its
`Window`): the runner's monitors (CPU, device traffic, space) watch exactly those windows,
nothing it prepares. Each phase's outputs parse to READ_BYTES and WRITTEN_BYTES (when it moved
any): the bytes the monitors weigh the devices' traffic against (write amplification, reads
served by a cache); and to FSYNCS where the tool counts the fsyncs it issued (fio, sysbench),
which the devices' flushes are held against (an fsync that did not reach the device); and to IOS,
the reads and writes it completed, where the tool counts them. All must
cover the same interval: a step whose figures begin after it starts (fio's ramp) says when,
`Window.counted_from`, and the monitors count from there.

`report` is its report hook (offered.py): what its runs offer a report beyond their metrics — series
over time, latency distributions, what its cells' tables say —, as typed records the report draws whatever
kind offers them.

`metrics` declares every metric the kind reports (model.MetricKind): its primary ones decide a
cell's precision, its rank and when adaptive runs stop; its compared ones are compared between
every pair of targets. What a run wrote (`Workload.data`, a DataPattern) is recorded for every
kind alike.

What a workload of a kind runs is its `Tool` record (model/__init__.py: fio.FioJob, sysbench.SysbenchOptions, …):
every value checked when the study is read, held in `Workload.tool`.

Adding a kind: one module with a class meeting `WorkloadKind`, a record meeting `Tool`, its
[[workload]] table (a pydantic model from tables.py's parts, `kind = "<name>"`) and how a
`Workload` is built from it, ending with `KINDS.add(Registered(...))` (workloads/__init__.py); fslab's own
are found through its SHIPPED table. A [[workload]] table without `kind` is fio's, so every
existing study reads as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from fslab.model import Metric, MetricKind, RawOutput, Workload
from fslab.model.findings import Finding
from fslab.workloads.offered import KindReport

if TYPE_CHECKING:
    from fslab.core.journal import Journal
    from fslab.core.workdir import Workdir
    from fslab.filesystems.base import Provisioned


# The metrics, by name, in which every kind reports the bytes a measured phase read and wrote
# (unit B, neither primary nor compared), and a kind that counts them the fsyncs it issued (fsync(2)
# and fdatasync(2) calls: what the traffic monitor holds the devices' flushes against).
READ_BYTES = "read_bytes"
WRITTEN_BYTES = "write_bytes"
FSYNCS = "fsyncs"
# The I/Os a measured phase completed (reads and writes; fsyncs not among them), where the tool
# counts them (fio, sysbench): what --trace cpu divides the window's CPU by (CPU µs per I/O).
IOS = "ios"

T = TypeVar("T")


class ClientDirectory(Protocol):
    """Where each client host a workload names serves its tool, by host name: a fleet's roster, or
    the user's own mapping (--client). fio's clients are the ones today (fio/clients.py): what
    it answers is a fio.server.Endpoint."""

    def endpoint_of(self, host: str) -> Any: ...


class StudyScope:
    """What kinds keep for a whole study run, by key: made by the first run that asks, entered
    into the runner's study-run stack, so it is released with the targets' images when the study
    run ends (or is interrupted). What it makes must be journalled like anything else fslab
    attaches or mounts: a killed fslab leaves it to `fslab cleanup`."""

    def __init__(self, stack: ExitStack, clients: ClientDirectory | None = None):
        self._stack = stack
        self._kept: dict[str, Any] = {}
        self.clients = clients  # where the hosts a workload's `clients` names serve fio (fio/clients.py)

    def kept(self, key: str, make: Callable[[], AbstractContextManager[T]]) -> T:
        """What `make()` yields, made at the first call with `key` and the same thing after it.
        A `make` that fails keeps nothing: the next run tries again."""
        if key not in self._kept:
            self._kept[key] = self._stack.enter_context(make())
        return self._kept[key]


@dataclass
class Window:
    """One measured window, as the kind that runs it sees it: entered before its step starts; a
    step whose own figures begin later (fio counts nothing during its start-up and ramp_time)
    sets `counted_from` to that moment (time.monotonic()) before the window closes, and every
    monitor counts from it too."""

    counted_from: float | None = None


# Entered around each measured step of a run, named by its phase ("" for a workload of one).
Measured = Callable[[str], AbstractContextManager[Window]]


class WorkloadKind(Protocol):
    name: str  # as a study file names it: kind = "fio"

    # Read-only (a kind's own dict is one): every metric `parse` reports, by name.
    @property
    def metrics(self) -> Mapping[str, MetricKind]: ...

    # What a workload's `options` table may give the tool: name → the form of its value, from
    # the tool's own allow-list (guard.options.accepted_values); `fslab list` shows them.
    @property
    def accepted_options(self) -> Mapping[str, str]: ...

    # What its runs offer a report: series, distributions, cell notes (offered.py).
    @property
    def report(self) -> KindReport: ...

    def problems(self, workloads: list[Workload], workdir: Workdir) -> list[str]:
        """What is wrong with these workloads (all of this kind), found before anything is made."""
        ...

    def command(self, workload: Workload, ready: Provisioned) -> str:
        """The exact job file or command line this run runs, recorded with it."""
        ...

    def prepare(
        self, journal: Journal, workload: Workload, ready: Provisioned, scratch: Path, scope: StudyScope
    ) -> list[RawOutput]:
        """Lay out what the measured run reads (files, a region of the device), and bring the
        target to the state it is measured in (fio's precondition); not measured. Returns the
        outputs of what it ran that a reader may need (a precondition's: stored with the run's,
        each of a phase of its own, none of a measured one), usually none.
        `scratch`: a private directory for the run's side files, removed after it; `scope`: what
        outlives the run, until the study run ends."""
        ...

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
        """The measured run of `command` (what `command` returned), each measured step inside
        `measured(phase)`; every process journalled."""
        ...

    def parse(self, outputs: list[RawOutput]) -> list[Metric]:
        """The metrics in a run's raw outputs (pure; raises ValueError on output it cannot read)."""
        ...

    def judge(self, workload: Workload, outputs: list[RawOutput]) -> list[Finding]:
        """What a reader must know of this run's output, and what cannot be a plain result (pure)."""
        ...


def tool_of(workload: Workload, tool: type[T]) -> T:
    """The workload's Tool record, which is `tool`'s: a kind is given only workloads of its own
    (kind_of, by Workload.kind)."""
    assert isinstance(workload.tool, tool), f"workload '{workload.name}' is not {tool.kind}'s"  # type: ignore[attr-defined]
    return workload.tool


def directory_of(ready: Provisioned, kind: str) -> Path:
    """The target's directory, for a kind whose Tool `needs_directory`: such a workload on a raw
    target is refused when the study is read (study.cell_problem), so this never happens in a run."""
    if ready.directory is None:
        raise ValueError(f"{kind} works in a filesystem's directory, and this target is a raw device")
    return ready.directory
