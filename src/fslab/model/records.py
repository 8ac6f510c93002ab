"""The records the results database stores and gives back: a run as the runner stores it
(RunRecord, its RunFailure), a run as a resumed study run needs it again (StoredRun), a run's
metrics in long format (RunMetric) and a study run's samples as the statistics read them
(SampleGroups). Plain data: no database in sight."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from fslab.model import Metric, RawOutput, Roles
from fslab.model.findings import Finding


@dataclass(frozen=True)
class Histogram:
    """A distribution an opt-in monitor counted over one measured window (`--trace block`): at one
    device, of one direction (read, write, other), of one kind (request_bytes, device_time_ns,
    queue_depth); each bucket [low, high) in the kind's unit, and how many fell in it."""

    device: str  # the kernel's name of a device under the target (loop0, zram1, sdb)
    direction: str
    kind: str
    buckets: tuple[tuple[float, float, int], ...]
    phase: str = ""  # its window's, set by the runner


class StoredHistogram(NamedTuple):
    """A histogram as stored with its run (ResultsDB.histograms): which run, and the Histogram's fields."""

    run_id: int
    target: str
    workload: str
    repetition: int
    phase: str
    device: str
    direction: str
    kind: str
    buckets: tuple[tuple[float, float, int], ...]


@dataclass
class RunFailure:
    """What a failed run leaves for diagnosis, besides its one-line error."""

    phase: str  # provision, layout, drop_caches, workload, parse or teardown: under way when it failed
    traceback: str
    argv: list[str] | None = None  # the command that failed, when a command did
    exit_status: int | None = None  # negative: killed by that signal (-9 at a time-out)
    stderr_tail: str | None = None  # the last STDERR_LINES lines it wrote to stderr
    missing_tool: str | None = None  # a tool the run found missing from PATH (its command's 127, or fslab's own check)


STDERR_LINES = 40

# A failed run's status once a systematic failure stopped its study run (fslab.running.systematic): it
# failed by the study run's cause, not its cell's; no reader counts it, and a resume runs it again.
SUPERSEDED = "superseded"

IMPORTED = "imported"  # the key of a study run's settings that says what `fslab import` read (results/importer.py)


def imported_from(study_run: dict[str, Any]) -> dict[str, Any] | None:
    """What an imported study run records of its import (files, skipped, when), None for one fslab ran."""
    return (study_run.get("settings") or {}).get(IMPORTED)


@dataclass(frozen=True)
class OptionsApplied:
    """What a run's filesystem made of the options its target asked for, judged by the filesystem
    from the run's read-back (Filesystem.options_applied) when the run is stored: a report reads it
    without the filesystem's code."""

    requested: str  # the options asked for, as the report shows them
    not_in_effect: list[str]  # those the read-back contradicts
    compresses: bool  # whether what was made compresses what is written


@dataclass
class RunRecord:
    """Everything stored about one run, whatever its outcome."""

    target: str
    workload: str
    repetition: int
    warmup: bool
    block: int
    position: int
    started_at: datetime
    finished_at: datetime
    status: str
    buffered: bool
    error: str | None = None
    job_file: str | None = None
    outputs: list[RawOutput] = field(default_factory=list)  # each tool's output of each phase, as it came
    device: str | None = None
    image_size: int | None = None
    direct_io_loop: bool | None = None
    mkfs_command: list[str] | None = None
    mount_options_requested: str | None = None
    mount_options_effective: str | None = None
    fs_details: str | None = None
    data_pattern: str | None = None
    device_facts: list[dict[str, Any]] | None = None  # DeviceFacts of each device under the target
    timings: dict[str, float] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    failure: RunFailure | None = None
    notes: list[Finding] = field(default_factory=list)  # what its kind and monitors found of it
    memory_limit: int | None = None  # bytes its measured run could hold, page cache included (None: no limit)
    source: dict[str, Any] | None = None  # an imported run's origin: its file, fio version, host (None: fslab ran it)
    options_applied: OptionsApplied | None = None  # None: an imported run (fslab did not make its filesystem)
    host: str | None = None  # the host it ran on (its name: ResultsDB.record_host keeps its facts)
    histograms: list[Histogram] = field(default_factory=list)  # what `--trace` monitors counted (schema 17)
    redone: bool = False  # disturbed, and run again (--redo-disturbed): stored, left out of the statistics
    boot_id: str | None = None  # the boot it ran in (schema 19; None: imported)


@dataclass(frozen=True)
class StoredRun:
    """A run as the planner needs it again when a study run is resumed."""

    target: str
    workload: str
    repetition: int
    warmup: bool
    ok: bool
    started_at: datetime
    finished_at: datetime
    metrics: dict[str, float]  # by key: "<phase>.<name>", or the name alone
    roles: Roles = Roles()

    @property
    def key(self) -> RunKey:
        return (self.target, self.workload, self.repetition, self.warmup)


class RunMetric(NamedTuple):
    """One metric of one run, in long format (`fslab export`, runs.csv): a run that stored no
    metric (a failed run) is one row with no phase, metric, value or unit. A named tuple: a study
    run has tens of thousands, and a frozen dataclass takes ten times as long to make."""

    study_run: int
    run_id: int
    target: str
    workload: str
    repetition: int
    block: int
    warmup: bool
    status: str
    phase: str | None
    metric: str | None
    value: float | None
    unit: str | None


RunKey = tuple[str, str, int, bool]  # target, workload, repetition, warm-up: one run of a study run


@dataclass
class SampleGroups:
    """A study run's samples grouped by cell, with each metric's unit, direction and roles; a
    metric is keyed "<phase>.<name>", or by its name alone."""

    values: dict[tuple[str, str], dict[str, list[float]]]  # (workload, target) → metric → values in run order
    units: dict[str, str]
    higher_is_better: dict[str, bool]
    roles: Roles = Roles()
    kinds: dict[str, str] = field(
        default_factory=dict
    )  # workload → its kind ("fio", "sysbench", …): what printed its figures, and so their resolution
    # (workload, target) → metric → the interleaved block each of its values ran in, as `values`:
    # what pairs two cells' runs within blocks (stats.SamplePair.blocks)
    blocks: dict[tuple[str, str], dict[str, list[int]]] = field(default_factory=dict)


def measured(run: Mapping[str, Any]) -> bool:
    """Whether a stored run (a row of ResultsDB.runs) is of those the statistics count: successful,
    neither a warm-up nor a disturbed run run again (redone)."""
    return run["status"] == "ok" and not run["warmup"] and not run.get("redone")


def now() -> datetime:
    """The time as every record holds it: UTC, without a time zone (as the database stores it)."""
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class Records:
    """A filesystem that writes a file's data in whole records (ZFS: its recordsize), so that a
    commit writes whole again every record a write touched: the records' size, and how many
    times its devices honestly hold each byte written — each copy its devices keep (the copies
    property × every device under it, as a mirror's legs would) × 2 for its intent log, which a
    sync write reaches before its transaction group (monitors/traffic.py judges what is beyond;
    Filesystem.records gives it)."""

    size: int
    copies: int
