"""The plain records a study is made of, whatever reads, runs, stores or reports it: its targets,
workloads and cells (`Study`), the machine a run ran on (`Host`), what a workload of a kind runs
(`Tool`), a tool's raw output (`RawOutput`) and the metrics parsed from it (`Metric`, declared by
`MetricKind`, with the roles `Roles` reads). Every module takes them from here; this module depends
on nothing of fslab but names, units and errors, so any module may import it.

Metrics: named numbers with a unit, a direction and a role, whatever tool measured them. A
workload kind declares the metrics it reports (`MetricKind`: unit, direction, and whether a
metric is *primary* — it decides a cell's precision, its rank and when adaptive runs stop — or
*compared* — every pair of targets is compared on it); its parser turns raw output into
`Metric`s with `MetricKind.of`. A kind also declares each metric's *resolution*: the step its
tool prints it to (sysbench's latencies 0.01 ms), below which runs cannot differ; statistics
never claim an interval narrower than it (statistics/stats.py). A study may name its own primary
metrics instead of its kinds' headline ones (`[study] primary`: `Workload.primary`), flagged so as
each run is stored (`with_primary`). Every metric is stored with its role (results/), and
statistics, plans and reports read the role from what is stored (`Roles`), never from a metric's
name: a cell whose only metric is `elapsed_s` (lower is better) is summarised, compared and ranked
as one with IOPS is.

A metric of one phase of a multi-phase workload carries the phase's name; it is keyed
"<phase>.<name>" (`after.read_mb_s`) wherever samples are grouped.

Pure: no I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol, overload

from fslab.core.names import image_names

# A run's time-out when its length is unknown (a size-based job, a job file): only a hang is caught.
UNKNOWN_LENGTH_TIMEOUT = 3600.0


# How a ZFS target's scaling note begins where the engines' least ARC cap kept arc_max above its
# share of the data at --scale (filesystems/zfs.py, Zfs.scaled): read back from stored targets
# (report/arc_share.py) by what must not load the filesystems.
ARC_FLOOR_NOTE = "ARC cap "


def arc_caches_data(properties: Mapping[str, Any]) -> bool:
    """Whether a ZFS dataset's ARC holds its files' data: not with primarycache=metadata or none,
    whatever the ARC's size (filesystems/zfs.py's scaling note, report/arc_share.py's)."""
    return str(properties.get("primarycache", "all")) == "all"


# How a target skipped because its runs failed alike is said (running/systematic.py's Skip): read back from
# a stored study run (report/sections.py, running/resume.py) by what must not load the running side.
FAILED_ALIKE = "its runs failed alike"

# The filesystems' own fields a Target has an attribute of (see Target).
FILESYSTEM_ATTRIBUTES = ("vdev", "pool_options", "properties", "nocow", "zvol", "arc_max")


@dataclass(frozen=True)
class Target:
    name: str
    filesystem: str
    mkfs_options: tuple[str, ...]
    mount_options: str
    image_size: int  # of each device's image
    image_fill: str  # "full": written once before its first run; "sparse": left sparse
    devices: int = 1
    # ZFS's fields and Btrfs's (their modules declare them: Filesystem.fields) have attributes of
    # their own (FILESYSTEM_ATTRIBUTES), in every stored spec as they were before filesystems
    # declared their fields, so that stored targets compare equal; any other filesystem's are in
    # `filesystem_fields`.
    vdev: str | None = None
    pool_options: dict[str, str] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)
    nocow: bool = False
    layers: tuple[str, ...] = ()
    layer_options: dict[str, tuple[str, ...]] = field(default_factory=dict)
    zvol: bool = False
    arc_max: int | None = None  # bytes
    named: tuple[str, ...] = ()  # the user's devices, by path as the study names them
    zram: bool = False  # fresh zram devices of image_size for every run
    blkdiscard: bool | None = None  # discard the devices whole before each run (None: the source's default)
    images: tuple[
        str, ...
    ] = ()  # names of its devices: its loop images, or the user's device paths (a raw baseline shares its target's)
    # the target it is compared with; its own name when others are compared with it (see _expand_target,
    # resolve_baselines)
    baseline: str | None = None
    scaling_changed: tuple[str, ...] = ()  # what --scale changed in it that fslab could not keep (Filesystem.scaled)
    filesystem_fields: dict[str, Any] = field(default_factory=dict)  # its filesystem's own fields but those above
    ceiling: bool = (
        False  # a raw reference fslab added (model/ceiling.py): figures are held against it, it is never ranked
    )
    raw_baseline_of: str | None = (
        None  # the target whose devices it measures bare (raw_baseline = true): skipped with it
    )

    def __post_init__(self) -> None:
        if self.named:
            object.__setattr__(self, "devices", len(self.named))
        if not self.images:
            object.__setattr__(self, "images", self.named or image_names(self.name, self.devices))

    @property
    def on_images(self) -> bool:
        """Whether the target's devices are loop images in fslab's work directory."""
        return not self.named and not self.zram

    def spec(self) -> dict[str, Any]:
        return (
            {
                "filesystem": self.filesystem,
                "mkfs_options": list(self.mkfs_options),
                "mount_options": self.mount_options,
                "image_size": self.image_size,
                "image_fill": self.image_fill,
                "devices": self.devices,
                "vdev": self.vdev,
                "pool_options": self.pool_options,
                "properties": self.properties,
                "nocow": self.nocow,
                "layers": list(self.layers),
                "layer_options": {layer: list(args) for layer, args in self.layer_options.items()},
                "zvol": self.zvol,
                "arc_max": self.arc_max,
                "named": list(self.named),
                "zram": self.zram,
                "blkdiscard": self.blkdiscard,
                "images": list(self.images),
                "baseline": self.baseline,
                "scaling_changed": list(self.scaling_changed),
            }
            | (
                {"filesystem_fields": self.filesystem_fields}
                if self.filesystem_fields
                else {}  # absent: as stored before
            )
            | ({"ceiling": True} if self.ceiling else {})
        )  # absent: a target of the study's own


class TargetsByName:
    """The targets a workload's `targets` entries name — each its own name, or its sweep's (ext4
    names ext4[noatime] and ext4[noatime]/raw) — found without comparing every entry with every
    target: a study of thousands of targets and workloads is expanded in time proportional to
    its cells, not to targets × workloads."""

    def __init__(self, targets: list[Target]) -> None:
        self.targets = targets
        self._named: dict[str, list[int]] = {}  # an entry → the indices of the targets it names
        for index, target in enumerate(targets):
            # its name, and each part before a '[' (its sweep's name: ext4 for ext4[noatime])
            named_as = {target.name, *(target.name[:at] for at, char in enumerate(target.name) if char == "[")}
            for entry in named_as:
                self._named.setdefault(entry, []).append(index)

    def names(self, entry: str) -> bool:
        return entry in self._named

    def running(self, workload: Workload) -> list[int]:
        """The indices of the targets `workload` runs on, in the study's order."""
        if not workload.targets:
            return list(range(len(self.targets)))
        return sorted({index for entry in dict.fromkeys(workload.targets) for index in self._named.get(entry, ())})


@overload
def study_cells(targets: list[Target], workloads: list[Workload]) -> list[Cell]: ...


@overload
def study_cells(targets: list[Target], workloads: list[Workload], limit: int) -> list[Cell] | None: ...


def study_cells(targets: list[Target], workloads: list[Workload], limit: int | None = None) -> list[Cell] | None:
    """Every target × each workload that runs on it, target by target; None when there would be
    more than `limit`, found before they are all made. A ceiling target (a raw reference fslab
    added) runs every workload a raw device can run (`on_a_block_device`), whichever targets it names."""
    by_name = TargetsByName([t for t in targets if not t.ceiling])
    study_targets = [i for i, t in enumerate(targets) if not t.ceiling]
    ceilings = [i for i, t in enumerate(targets) if t.ceiling]
    runs: list[list[Workload]] = [[] for _ in targets]
    count = 0
    for workload in workloads:
        on = [study_targets[i] for i in by_name.running(workload)] + (ceilings if on_a_block_device(workload) else [])
        count += len(on)
        if limit is not None and count > limit:
            return None
        for index in on:
            runs[index].append(workload)
    return [Cell(target, workload) for target, on in zip(targets, runs) for workload in on]


def on_a_block_device(workload: Workload) -> bool:
    """Whether a workload runs on a bare device (a raw target): it needs no filesystem's directory
    and takes no snapshots. Only fio's jobs do; every other kind works in files."""
    return not workload.tool.needs_directory and not workload.tool.takes_snapshots


@dataclass(frozen=True)
class Workload:
    """What runs on each target: `tool` holds what its kind runs (Tool: a FioJob,
    SysbenchOptions, DdOptions, …), every value checked; the rest is what fslab needs of any kind."""

    name: str
    tool: Tool
    seconds: float  # expected duration, for progress and time-outs; 0 = unknown
    direct: bool  # whether it bypasses the page cache
    timeout: float = UNKNOWN_LENGTH_TIMEOUT  # seconds a run may take, fslab's work around the tool included
    memory_limit: int | None = None  # bytes of memory its measured run may hold, page cache included (core/cgroups.py)
    targets: tuple[str, ...] = ()  # the targets it runs on, by name or by a sweep's name (none: every target)
    compare_with: str | None = None  # the workload compared with it on each target both ran on (study/__init__.py)
    # the metrics the study names primary in it ([study] primary), by key; none: its kind's headline
    # metrics (MetricKind.primary). Read from the study file again on a resume: not in its spec.
    primary: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """The workload kind that runs it (workloads.KINDS)."""
        return self.tool.kind

    def spec(self) -> dict[str, Any]:
        """As stored with the study run (a fio workload's as before kinds existed)."""
        limit = (
            {"memory_limit": self.memory_limit} if self.memory_limit is not None else {}
        )  # absent: as before limits existed
        on = {"targets": list(self.targets)} if self.targets else {}
        paired = {"compare_with": self.compare_with} if self.compare_with is not None else {}
        kind = {} if self.kind == "fio" else {"kind": self.kind}
        return self.tool.spec() | {"direct": self.direct} | kind | limit | on | paired


@dataclass(frozen=True)
class Cell:
    target: Target
    workload: Workload

    @property
    def key(self) -> tuple[str, str]:
        """(workload, target): how samples and results are keyed everywhere."""
        return (self.workload.name, self.target.name)


@dataclass(frozen=True)
class Study:
    name: str
    description: str
    repetitions: int
    warmup: int  # runs per cell before the measured ones, stored but left out of statistics
    baseline: str | None  # the target others are compared with (default: the first)
    seed: int | None
    targets: list[Target]
    workloads: list[Workload]
    source: str  # the study file's text, stored with every study run
    path: str
    scale: float
    scale_sizes_only: bool = False  # --scale-sizes-only: sizes scaled, runtimes as the study says
    no_ceiling: bool = (
        False  # --no-ceiling: no raw reference added where the study has no raw target (model/ceiling.py)
    )
    traces: tuple[str, ...] = ()  # --trace: the opt-in monitors every run is watched with too (monitors.traces)
    redo_disturbed: bool = False  # --redo-disturbed: a disturbed run is set aside and run again (running/runner.py)
    cell: tuple[str, str] | None = None  # (target, workload): the study cut to this one cell (only)

    @functools.cached_property
    def cells(self) -> list[Cell]:
        return study_cells(self.targets, self.workloads)

    def only(self, target: str, workload: str) -> Study:
        """The study cut to one cell (`fslab bisect`'s, and its guest's `fslab run --lab-cell`): no
        baseline, no raw reference added; a name the study lacks leaves it no cell."""
        return replace(
            self,
            targets=[t for t in self.targets if t.name == target],
            workloads=[w for w in self.workloads if w.name == workload],
            baseline=None,
            no_ceiling=True,
            cell=(target, workload),
        )

    def without(self, names: set[str]) -> Study:
        """The study without these targets (skipped: this machine cannot run them). Every other
        target keeps the baseline the study gave it: one compared with a skipped target is
        compared with none, never with a substitute (the summary says why)."""
        if not names:
            return self
        return replace(self, targets=[t for t in self.targets if t.name not in names])


class Tool(Protocol):
    """What a workload of one kind runs, every value checked when the study was read. A tool whose
    metrics come in phases also says which (`metric_phases`: a scenario's), else they are of one."""

    kind: ClassVar[str]  # the WorkloadKind that runs it

    @property
    def needs_directory(self) -> bool:
        """Works in a filesystem's directory: refused on a raw target (a kind's, or one workload's)."""
        ...

    @property
    def takes_snapshots(self) -> bool:
        """Whether it snapshots the target: refused where the target's filesystem has none."""
        ...

    def spec(self) -> dict[str, Any]:
        """As stored with the study run (workloads.spec): a resumed study compares it."""
        ...

    def data_pattern(self) -> str:
        """What it writes, in the words stored with every run (runs.data_pattern)."""
        ...

    def bytes_needed(self, block_device: bool) -> int:
        """The room its files take on a target (0: unknown), `block_device` when it has no filesystem."""
        ...

    def measured_seconds(self) -> float:
        """How long its measured window lasts (0: as long as the work takes)."""
        ...


@dataclass(frozen=True)
class Host:
    """A machine runs ran on: its name in a fleet (a worker's `--name`, else the machine's host
    name) and what tells one machine from another in a report (environment.host reads them)."""

    name: str
    machine_id: str | None  # /etc/machine-id: the same name on another machine is another host
    kernel: str
    cpu_model: str
    cpu_count: int
    memory_bytes: int
    # Since version 19, the kernel lab (lab/): how the machine ran its kernel. "host": this machine's
    # own kernel on bare metal; "kvm" or "tcg": a lab VM booted from a Debian kernel package, "tcg"
    # emulated and never a performance result (statistics compare speed only within one `vm`).
    accelerator: str = "host"
    kernel_package: str | None = None  # the Debian package version the kernel came from (a lab VM's)
    kernel_config_sha256: str | None = None  # of the kernel's config file (/boot/config-RELEASE)
    qemu_version: str | None = None
    disk_cache: str | None = None  # the VM's virtio-blk disks: QEMU's cache= and aio=
    disk_aio: str | None = None

    @property
    def emulated(self) -> bool:
        """Its figures of speed are not performance results (software emulation of the CPU)."""
        return self.accelerator == "tcg"

    @property
    def vm(self) -> tuple[object, ...]:
        """What must match for two hosts' speed figures to be compared: bare metal with bare metal,
        a VM with a VM of the same accelerator, CPU, size, QEMU and disk settings."""
        if self.accelerator == "host":
            return ("host",)
        return (self.accelerator, self.cpu_model, self.cpu_count, self.memory_bytes, self.qemu_version,
                self.disk_cache, self.disk_aio)  # fmt: skip


@dataclass(frozen=True)
class RawOutput:
    """One tool's output of one phase of a run, stored as it came (results: run_outputs)."""

    phase: str  # "" for a workload of one phase
    tool: str  # "fio", "sysbench", …
    text: str


PHASE_SEPARATOR = "."


def qualified(phase: str, name: str) -> str:
    """How a metric is keyed in samples: its name, after its phase's when it has one."""
    return f"{phase}{PHASE_SEPARATOR}{name}" if phase else name


def unqualified(key: str) -> str:
    """The metric's own name, without its phase."""
    return key.rpartition(PHASE_SEPARATOR)[2]


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    unit: str
    higher_is_better: bool
    primary: bool = False  # decides precision, rank and adaptive stopping
    compared: bool = False  # compared between every pair of targets
    phase: str = ""  # the scenario phase that measured it; "" for a workload of one phase

    @property
    def key(self) -> str:
        return qualified(self.phase, self.name)


def with_primary(metrics: list[Metric], primary: Collection[str]) -> list[Metric]:
    """A run's metrics as stored: those the study names primary (`primary`, by key) flagged primary,
    and compared — a primary metric is one of the main comparisons —, and no other; as they are
    (its kind's headline metrics) when the study names none of them, or none the run reported (a
    read-only fio job's write_iops)."""
    if not any(m.key in primary for m in metrics):
        return metrics
    return [replace(m, primary=m.key in primary, compared=m.compared or m.key in primary) for m in metrics]


def metric_phases(tool: Tool) -> tuple[str, ...]:
    """The phases a workload's metrics are keyed under (`qualified`): a tool of several phases says
    which (its `metric_phases`: a scenario's measured phases); any other's are of one phase ("")."""
    return tuple(getattr(tool, "metric_phases", ("",)))


# A metric's timing classes (MetricKind.timing, monitors' Figure.timing), the most comparable last.
TIMINGS = ("speed", "dependent", "independent")


@dataclass(frozen=True)
class MetricKind:
    """What a metric is, declared by the workload kind that reports it."""

    unit: str
    higher_is_better: bool
    primary: bool = False
    compared: bool = False
    # The step the tool prints it to, in its unit (0.01 for a latency printed in ms to two
    # decimals); 0: finer than any spread between runs (sysbench's events/s: a count ÷ a time).
    resolution: float = 0.0
    # How it depends on the machine's timing (statistics/timing.py; TIMINGS): "speed" (bandwidth,
    # IOPS, latency, CPU, durations) is compared only between hosts of one `Host.vm`, never emulated;
    # "dependent" (write amplification, extents) only within one accelerator; "independent" (what a
    # fixed workload makes the kernel do: the buffered share of direct I/O, space used) across all.
    timing: str = "speed"

    def of(self, name: str, value: float, phase: str = "") -> Metric:
        return Metric(name, value, self.unit, self.higher_is_better, self.primary, self.compared, phase)


@dataclass(frozen=True)
class Roles:
    """Which metrics (workload, key) are primary and which compared, as stored with them: per
    workload, since kinds share names (dd's write_mb_s is primary, fio's is not). Both are read in
    name order, so a report lists them the same way however they were stored."""

    primary: frozenset[tuple[str, str]] = frozenset()
    compared: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def of(cls, workload: str, metrics: Iterable[Metric]) -> Roles:
        return cls.flagged((workload, m.key, m.primary, m.compared) for m in metrics)

    @classmethod
    def flagged(cls, rows: Iterable[tuple[str, str, bool, bool]]) -> Roles:
        """From (workload, key, primary, compared) rows: metrics as the database stores them."""
        found = list(rows)
        return cls(
            frozenset((w, key) for w, key, primary, _ in found if primary),
            frozenset((w, key) for w, key, _, compared in found if compared),
        )

    @classmethod
    def declared(cls, keys: Iterable[tuple[str, str]], kinds: Mapping[str, MetricKind]) -> Roles:
        """The roles `kinds` declare for these (workload, key) (each looked up by its own name,
        without its phase): for samples that come without stored roles."""
        found = [(key, kinds.get(unqualified(key[1]))) for key in keys]
        return cls(
            frozenset(k for k, kind in found if kind and kind.primary),
            frozenset(k for k, kind in found if kind and kind.compared),
        )

    def __or__(self, other: Roles) -> Roles:
        return Roles(self.primary | other.primary, self.compared | other.compared)

    def primary_in(self, workload: str, metrics: Iterable[str]) -> list[str]:
        """The primary metrics among a cell's of `workload`, in name order."""
        return sorted(m for m in metrics if (workload, m) in self.primary)

    def compared_in(self, workload: str, metrics: Iterable[str]) -> list[str]:
        return sorted(m for m in metrics if (workload, m) in self.compared)
