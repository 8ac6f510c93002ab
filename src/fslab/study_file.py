"""The study file's tables as pydantic models: which fields each table has and what each
accepts. study.py turns a validated file into targets, workloads and cells."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, ModelWrapValidatorHandler, PrivateAttr, Tag, ValidationInfo, field_validator, model_validator

from fslab.cgroups import SMALLEST_LIMIT
from fslab.devices.layers import LAYERS
from fslab.filesystems import FILESYSTEMS, Filesystem
from fslab.filesystems.base import TargetFields
from fslab.guard.fio_jobs import ALIASES, option_problem, option_text
from fslab.guard.names import check_name
from fslab.guard.options import check_arguments
from fslab.toml_errors import FieldError, unknown
from fslab.units import Bandwidth, format_size, parse_duration, parse_size
from fslab.workloads.builtin import BUILTIN_WORKLOADS, WORKLOAD_SETS
from fslab.workloads.dd import DdOptions, dd_options
from fslab.workloads.scenario import BUILTIN as BUILTIN_SCENARIOS
from fslab.workloads import rsync
from fslab.workloads.sysbench import SysbenchOptions, sysbench_options

FIO_RW_MODES = ("read", "write", "randread", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim", "trimwrite")


def _checked(parse: Any) -> AfterValidator:
    """A field kept as written, refused unless `parse` (which says what is wrong) accepts it."""

    def check(value: Any) -> Any:
        parse(value)
        return value

    return AfterValidator(check)


def _fio_allows(option: str) -> Any:
    """A check for a field that becomes fio option `option`: its value through fio's allow-list."""

    def check(value: Any) -> None:
        problem = option_problem(option, option_text(value))
        if problem:
            raise ValueError(problem)

    return check


def fio_options(options: dict[str, Any]) -> dict[str, str]:
    """A study's fio option table, each option through the allow-list (ValueError says which and
    why), under fio's main names, with values as fio writes them."""
    checked = {}
    for name, value in options.items():
        _fio_allows(name)(value)
        checked[ALIASES.get(name, name)] = option_text(value)
    return checked


Name = Annotated[str, _checked(check_name)]  # becomes fio job names and, through file_name, file names
Size = Annotated[str, _checked(parse_size)]  # "4GiB", "512M", "10G"
Duration = Annotated[str | int | float, _checked(parse_duration)]  # "10s", "2m", seconds


def _positive_duration(value: str | int | float) -> float:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(f"a time-out must be above zero, not {value!r}")
    return seconds


Timeout = Annotated[str | int | float, _checked(_positive_duration)]


def _data(value: Any) -> None:
    """A workload's `data`: "random", "zeros" or { compressible = N }."""
    if value in ("random", "zeros"):
        return
    percent = value.get("compressible") if isinstance(value, dict) and set(value) == {"compressible"} else None
    if isinstance(percent, int) and not isinstance(percent, bool) and 1 <= percent <= 99:
        return
    raise ValueError(
        f'data is "random", "zeros" or {{ compressible = N }} (N: the percentage of every 4 KiB fio fills with zeros, 1 to 99), not {value!r}'
    )


Data = Annotated[str | dict[str, Any], _checked(_data)]


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _memory_limit(value: str) -> None:
    if parse_size(value) < SMALLEST_LIMIT:
        raise ValueError(f"a memory limit below {format_size(SMALLEST_LIMIT)} leaves the tool itself too little to run, not {value!r}")


class _WorkloadLimits(_Table):
    """What fslab sets around any workload, whatever its kind: the fields every workload table
    (and [fio]) has once, from here."""

    # The measured run in a cgroup with this much memory (cgroups.py), so the page cache cannot
    # hold what a buffered workload reads: refused on direct I/O, which the cache never answers.
    memory_limit: Annotated[str, _checked(_memory_limit)] | None = None


class StudySection(_Table):
    name: Name
    description: str = ""
    repetitions: int = Field(3, ge=1, le=1000)
    warmup: int = Field(0, ge=0, le=100)
    baseline: str | None = None
    workloads: list[str] = []
    image_size: Size = "4GiB"
    image_fill: Literal["full", "sparse"] = "full"
    seed: int | None = None
    units: Bandwidth = Bandwidth.MB  # bandwidth in summaries (fslab summary --units overrides)

    @field_validator("workloads")
    @classmethod
    def _known_workloads(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in BUILTIN_WORKLOADS and name not in WORKLOAD_SETS:
                raise ValueError(unknown("built-in workload", name, [*WORKLOAD_SETS, *BUILTIN_WORKLOADS]))
        return names


class FioSection(_WorkloadLimits):
    """fio parameters; the study's [fio] table sets them for every workload, a workload for itself."""

    bs: Annotated[str, _checked(_fio_allows("bs"))] | None = None
    iodepth: int | None = Field(None, ge=1, le=65536)
    numjobs: int | None = Field(None, ge=1, le=1024)
    size: Size | None = None
    runtime: Duration | None = None
    ramp_time: Duration | None = None
    direct: bool | None = None
    ioengine: Annotated[str, _checked(_fio_allows("ioengine"))] | None = None
    rwmixread: int | None = Field(None, ge=0, le=100)
    randseed: int | None = Field(None, ge=0)
    timeout: Timeout | None = None  # fslab's, not fio's: a run still going after it is killed and failed
    data: Data | None = None  # what is written: "random" (fslab's default), "zeros" or { compressible = N } (workloads/data.py)
    options: dict[str, str | int | float | bool] = {}  # any other fio option on the allow-list (guard/fio_jobs.py)

    @field_validator("options")
    @classmethod
    def _allowed_options(cls, options: dict[str, Any]) -> dict[str, str]:
        return fio_options(options)


class _OnTargets(_Table):
    """What every [[workload]] table may say, whatever its kind."""

    targets: list[str] = []  # the targets it runs on, by name or a sweep's name (default: every target)


# A workload's fields that set what a job file sets itself (fslab's own timeout and memory_limit aside).
_SET_BESIDE_JOB_FILE = tuple(name for name in [*FioSection.model_fields, "shared_file"] if name not in ("timeout", "memory_limit"))


class WorkloadSection(FioSection, _OnTargets):
    name: Name
    kind: Literal["fio"] = "fio"
    rw: str | None = None
    job_file: str | None = None
    shared_file: bool = False  # all numjobs jobs work on one file (fio filename=), laid out once

    @field_validator("rw")
    @classmethod
    def _rw(cls, value: str | None) -> str | None:
        if value is not None and value not in FIO_RW_MODES:
            raise ValueError(unknown("rw mode", value, FIO_RW_MODES))
        return value

    @model_validator(mode="after")
    def _pattern_or_file(self) -> WorkloadSection:
        if (self.rw is None) == (self.job_file is None):
            raise ValueError("a workload needs either rw (fio parameters) or job_file (your own fio job file), not both")
        beside = [name for name in _SET_BESIDE_JOB_FILE if name in self.model_fields_set] if self.job_file is not None else []
        if self.job_file is not None and beside:
            raise ValueError(f"{', '.join(beside)} beside a job_file would be ignored: put them in the job file")
        return self


class TargetSection(_Table):
    name: Name | None = None
    filesystem: str | list[str]
    mkfs_options: str | list[str] = ""
    mount_options: str | list[str] = ""
    image_size: str | list[str] | None = None
    devices: int | list[str] = 1  # a count of loop images (Btrfs raid profiles, a ZFS mirror), or the user's devices by path
    device: str | None = None  # one device of the user's, by path (confirmed with --destroy-data)
    zram: bool = False  # the devices are zram devices fslab makes (image_size each): a RAM-backed ceiling
    blkdiscard: bool | None = None  # discard each device whole before each run (default: SSDs and zram)
    layers: list[str] = []  # under the filesystem, bottom first: md-raid1, luks, lvm
    layer_options: dict[str, str] = {}  # layer → extra arguments for the command that creates it
    raw_baseline: bool = False  # also measure each of the target's images as a raw device
    baseline: str | None = None  # the target this one is compared with (default: a sweep's first value, else the study's)
    # Beside these, the fields its filesystem declares (Filesystem.fields: ZFS's properties, …),
    # checked by that filesystem's model (_filesystem_fields).
    _own: TargetFields | None = PrivateAttr(None)

    @property
    def own(self) -> TargetFields | None:
        """Its filesystem's own fields, checked; None when it names no filesystem of any (or several)."""
        return self._own

    @model_validator(mode="wrap")
    @classmethod
    def _filesystem_fields(cls, data: Any, handler: ModelWrapValidatorHandler[TargetSection]) -> TargetSection:
        """The fields a filesystem declares (its module's model checks them, an error pointing at
        the field) on a target of that filesystem alone; one of another filesystem's, given a
        value, is refused saying whose it is; any other field is unknown (pydantic's own error)."""
        if not isinstance(data, dict):
            return handler(data)
        owners = _owners([name for name in data if name not in cls.model_fields], as_list(data.get("filesystem")))
        section = handler({name: value for name, value in data.items() if name not in owners})
        kinds = set(as_list(section.filesystem))
        given: dict[str, dict[str, Any]] = {}  # filesystem → its fields given, in the registry's order
        for name, fs in owners.items():
            given.setdefault(fs.kind, {})[name] = data[name]
        refused = []
        for kind, fields in given.items():
            filesystem = FILESYSTEMS[kind]
            checked = filesystem.fields.model_validate(fields)  # type: ignore[union-attr]  # an owner has fields
            if kinds != {kind} and any(getattr(checked, name) for name in fields):
                refused.append(filesystem.own_fields_refusal)
        if refused:
            raise ValueError("; ".join(refused))
        kind = next(iter(kinds)) if len(kinds) == 1 else None
        own = FILESYSTEMS[kind].fields if kind else None
        section._own = own.model_validate(given.get(kind, {})) if own else None  # type: ignore[arg-type]
        return section

    @field_validator("layers")
    @classmethod
    def _layers(cls, value: list[str]) -> list[str]:
        for layer in value:
            if layer not in LAYERS:
                raise ValueError(unknown("layer", layer, list(LAYERS)))
        if len(set(value)) < len(value):
            raise ValueError("each layer can appear once")
        if "md-raid1" in value[1:]:
            raise ValueError("md-raid1 goes first (bottom): it is built on the target's devices themselves")
        return value

    @field_validator("devices")
    @classmethod
    def _devices(cls, value: int | list[str]) -> int | list[str]:
        if isinstance(value, int) and not 1 <= value <= 8:
            raise ValueError("a target has 1 to 8 devices")
        if isinstance(value, list):
            if not 1 <= len(value) <= 8:
                raise ValueError("a target names 1 to 8 devices")
            if len(set(value)) < len(value):
                raise ValueError("each device can appear once")
            for path in value:
                check_device_path(path)
        return value

    @field_validator("device")
    @classmethod
    def _device(cls, value: str | None) -> str | None:
        return value if value is None else check_device_path(value)

    @property
    def named(self) -> list[str]:
        """The user's devices the target names (none: loop images or zram)."""
        return [self.device] if self.device else self.devices if isinstance(self.devices, list) else []

    @property
    def count(self) -> int:
        return len(self.named) or int(self.devices)  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _one_way_to_name_devices(self) -> TargetSection:
        if self.device and self.devices != 1:
            raise ValueError("name the target's devices once: device = \"/dev/…\" or devices = [\"/dev/…\", …]")
        if self.zram and self.named:
            raise ValueError("zram = true makes fslab's own zram devices: it names no device of yours (set devices to a count)")
        return self

    @model_validator(mode="after")
    def _fits_filesystem(self) -> TargetSection:
        kinds = set(as_list(self.filesystem))
        for layer in self.layer_options:
            if layer not in self.layers:
                raise ValueError(f"layer_options names {layer}, which is not in this target's layers {self.layers}")
        md = self.layers[:1] == ["md-raid1"]
        if md and self.count < 2:
            raise ValueError("md-raid1 mirrors two or more devices: set devices = 2")
        if self.count > 1 and self.layers and not md:
            raise ValueError(f"{self.layers[0]} is built on one device: put md-raid1 below it, or set devices = 1")
        single = sorted(kind for kind in kinds if not FILESYSTEMS[kind].spans_devices)
        if self.count > 1 and not md and single:
            raise ValueError(
                f"{', '.join(single)} uses one device; several devices need btrfs (with -d/-m profiles), zfs, "
                'or layers = ["md-raid1"] beneath'
            )
        return self

    @field_validator("filesystem")
    @classmethod
    def _kinds(cls, value: str | list[str]) -> str | list[str]:
        for kind in as_list(value):
            if kind not in FILESYSTEMS:
                raise ValueError(unknown("filesystem", kind, list(FILESYSTEMS)))
        return value

    # Options reach the tools only through the allow-lists (guard/options.py), checked here for
    # each filesystem of the target and each value of a sweep; every refusal is reported.
    @field_validator("mkfs_options")
    @classmethod
    def _mkfs_options(cls, value: str | list[str], info: ValidationInfo) -> str | list[str]:
        _all_accepted(partial(FILESYSTEMS[kind].check_mkfs_options, options) for kind in _kinds_of(info) for options in as_list(value))
        return value

    @field_validator("mount_options")
    @classmethod
    def _mount_options(cls, value: str | list[str], info: ValidationInfo) -> str | list[str]:
        _all_accepted(partial(FILESYSTEMS[kind].check_mount_options, options) for kind in _kinds_of(info) for options in as_list(value))
        return value

    @field_validator("layer_options")
    @classmethod
    def _layer_options(cls, value: dict[str, str]) -> dict[str, str]:
        for layer in value:
            if layer not in LAYERS:
                raise ValueError(unknown("layer", layer, list(LAYERS)))
        _all_accepted(partial(_check_layer_options, layer, arguments) for layer, arguments in value.items())
        return value

    @field_validator("image_size")
    @classmethod
    def _sizes(cls, value: str | list[str] | None) -> str | list[str] | None:
        for size in as_list(value or []):
            parse_size(size)
        return value


ToolOption = str | int | float | bool


class _ToolWorkloadSection(_OnTargets, _WorkloadLimits):
    """A workload run by a tool other than fio: its options by the tool's own names, each
    checked by the tool's allow-list (its module's `…_options`)."""

    name: Name
    data: Literal["random", "zeros"] | None = None  # what it writes (default: random)
    timeout: Timeout | None = None  # fslab's: a run still going after it is killed and failed
    options: dict[str, ToolOption] = {}

    def checked(self) -> Any:
        """The tool's record of these options (raises OptionRefused, a ValueError, saying why)."""
        raise NotImplementedError

    @model_validator(mode="after")
    def _allowed_options(self) -> _ToolWorkloadSection:
        try:
            self.checked()
        except ValueError as exc:
            raise FieldError("options" if self.options else "data", str(exc)) from None
        return self


class SysbenchSection(_ToolWorkloadSection):
    """sysbench fileio (workloads/sysbench.py); defaults: seed 000's mail server."""

    kind: Literal["sysbench"]

    def checked(self) -> SysbenchOptions:
        return sysbench_options(self.options, data=self.data or "random")


class DdSection(_ToolWorkloadSection):
    """dd's write then read of one file (workloads/dd.py); defaults: seed 000's 1 GiB, 1 MiB blocks, direct."""

    kind: Literal["dd"]

    def checked(self) -> DdOptions:
        return dd_options(self.options, data=self.data or "random")  # type: ignore[arg-type]


class RsyncSection(_ToolWorkloadSection):
    """rsync ingestion of generated photos from a source image of their own (workloads/rsync.py);
    defaults: seed 003's 20 GiB of 17–28 MiB files. `files` or `total`, not both."""

    kind: Literal["rsync"]
    data: str | None = None  # type: ignore[assignment]  # only "random": refused with why, not by pydantic's literal
    files: int | None = Field(None, ge=1, le=rsync.MAX_FILES)  # how many files (before --scale)
    total: Size | None = None  # or: as many files as it takes to reach this size
    seed: int = rsync.DEFAULT_SEED  # the set's sizes and contents are drawn from it

    # Checked here too, by rsync's own checks, so that a refusal points at its own field, not at `options`.
    @field_validator("data")
    @classmethod
    def _random_only(cls, value: str | None) -> str | None:
        if value is not None:
            rsync.check_data(value)
        return value

    @field_validator("total")
    @classmethod
    def _files_or_total(cls, value: str | None, info: ValidationInfo) -> str | None:
        rsync.check_files_or_total(info.data.get("files"), value)
        return value

    def checked(self) -> rsync.RsyncIngest:
        total = parse_size(self.total) if self.total is not None else None
        return rsync.rsync_ingest(self.options, files=self.files, total=total, seed=self.seed, data=self.data or "random")


class PhaseSection(_Table):
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
                "(action = \"sync\" | \"drop_caches\" | \"sleep\"), one of them" + (f", not {' and '.join(given)}" if given else "")
            )
        if (self.action == "sleep") != (self.seconds is not None):
            raise ValueError("seconds goes with action = \"sleep\", and a sleep needs it")
        return self

    @property
    def tool(self) -> str | None:
        """The tool a tool phase runs (its table's key: "sysbench", "dd"); None for fio and actions."""
        return "sysbench" if self.sysbench is not None else "dd" if self.dd is not None else None

    def checked(self, data: str) -> SysbenchOptions | DdOptions | None:
        """A tool phase's record, writing `data` (the scenario's: "random" or "zeros"), through the
        tool's allow-list as a workload of its kind (raises OptionRefused saying why); None for
        any other phase. The scenario's data is known only once the study is read (study.py)."""
        if self.sysbench is not None:
            return sysbench_options(self.sysbench, data=data)
        return None if self.dd is None else dd_options(self.dd, data=data)  # type: ignore[arg-type]


class ScenarioSection(_OnTargets, _WorkloadLimits):
    """Several phases on one target, sharing one file (workloads/scenario.py): a built-in
    `scenario`, or its own `phase` tables."""

    name: Name
    kind: Literal["scenario"]
    scenario: Literal[BUILTIN_SCENARIOS] | None = None  # type: ignore[valid-type]  (the names of workloads/scenario.py's)
    size: Size = "1GiB"  # the file's
    runtime: Duration = "60s"  # a built-in scenario's timed phase (cow-ageing's overwrites)
    snapshot_every: Duration | None = None  # snapshots-under-load: seconds between snapshots (default 0.33)
    data: Data | None = None  # what every phase writes: "random" (default), "zeros" or { compressible = N }
    timeout: Timeout | None = None
    phase: list[PhaseSection] = []

    @model_validator(mode="after")
    def _builtin_or_phases(self) -> ScenarioSection:
        if (self.scenario is None) == (not self.phase):
            raise ValueError("a scenario is a built-in one (scenario = \"cow-ageing\", …) or its own [[workload.phase]] tables, one of them")
        if self.snapshot_every is not None and self.scenario not in (None, "snapshots-under-load"):
            raise FieldError("snapshot_every", f"{self.scenario} takes no snapshots: snapshots-under-load does")
        return self


# Each [[workload]] table's model, by its `kind` (absent: fio).
WORKLOAD_KINDS: dict[str, type[BaseModel]] = {"fio": WorkloadSection, "sysbench": SysbenchSection, "dd": DdSection, "rsync": RsyncSection, "scenario": ScenarioSection}


def _kind_of_table(table: Any) -> str:
    kind = table.get("kind", "fio") if isinstance(table, dict) else getattr(table, "kind", "fio")
    return kind if kind in WORKLOAD_KINDS else "unknown"


class _UnknownKind(BaseModel):
    """A [[workload]] table of a kind fslab has not: refused at its `kind`, and nothing else said."""

    model_config = ConfigDict(extra="allow")
    kind: Any

    @model_validator(mode="after")
    def _refuse(self) -> _UnknownKind:
        raise FieldError("kind", unknown("workload kind", str(self.kind), WORKLOAD_KINDS))


WorkloadTable = Annotated[
    Annotated[WorkloadSection, Tag("fio")]
    | Annotated[SysbenchSection, Tag("sysbench")]
    | Annotated[DdSection, Tag("dd")]
    | Annotated[RsyncSection, Tag("rsync")]
    | Annotated[ScenarioSection, Tag("scenario")]
    | Annotated[_UnknownKind, Tag("unknown")],
    Discriminator(_kind_of_table),
]


def untagged(loc: tuple) -> tuple:
    """An error's location without the kind pydantic puts in it: ("workload", 0, "dd", "options")
    → ("workload", 0, "options")."""
    if len(loc) > 2 and loc[0] == "workload" and (loc[2] in WORKLOAD_KINDS or loc[2] == "unknown"):
        return (*loc[:2], *loc[3:])
    return loc


class StudyFile(_Table):
    study: StudySection
    fio: FioSection = FioSection()
    target: list[TargetSection] = Field(min_length=1)
    workload: list[WorkloadTable] = []


# The model of each table, to list the fields allowed where an unknown one is met.
_TABLE_MODELS: dict[str, type[BaseModel]] = {
    "study": StudySection,
    "fio": FioSection,
    "target": TargetSection,
    "workload": WorkloadSection,
}


def check_device_path(path: str) -> str:
    """A device path as a study may name it: absolute, under /dev (symlinks such as
    /dev/disk/by-id/… are resolved when the study runs), plain text. Whether it is a block device
    of the user's, confirmed on the command line, is checked then (guard/block_devices.py)."""
    if not path.startswith("/dev/") or ".." in path.split("/") or any(ord(c) < 32 or ord(c) == 127 for c in path) or len(path) > 1024:
        raise ValueError(f"{path!r} is not a device path: give an absolute /dev path such as /dev/sdb or /dev/disk/by-id/…")
    return path


def allowed_fields(loc: tuple) -> list[str]:
    """The fields of the table an error's location (as pydantic gives it, kind and all) is in."""
    if len(loc) > 3 and loc[0] == "workload" and loc[2] in WORKLOAD_KINDS:
        return list(WORKLOAD_KINDS[str(loc[2])].model_fields)
    if len(loc) > 1 and loc[0] == "target":  # every target's fields, then each filesystem's own
        return list(dict.fromkeys([*TargetSection.model_fields, *(name for fs in FILESYSTEMS.values() for name in fs.own_fields)]))
    model = _TABLE_MODELS.get(str(loc[0]), StudyFile) if len(loc) > 1 else StudyFile
    return list(model.model_fields)


def _all_accepted(checks: Iterable[Callable[[], Any]]) -> None:
    """Run every check (one per filesystem and value of a sweep) and refuse with every problem
    found, not only the first."""
    problems: list[str] = []
    for check in checks:
        try:
            check()
        except ValueError as exc:
            problems += [str(exc)] if str(exc) not in problems else []
    if problems:
        raise ValueError("; ".join(problems))


def _owners(names: list[str], kinds: list[Any]) -> dict[str, Filesystem]:
    """The filesystem that declares each of these fields, among the target's own filesystems
    (`kinds`, as written) when they declare them all, else among all: found without loading
    any other filesystem when the fields are the target's."""
    if not names:
        return {}
    named = [FILESYSTEMS[kind] for kind in dict.fromkeys(kinds) if isinstance(kind, str) and kind in FILESYSTEMS]
    declared = {name for fs in named for name in fs.own_fields}
    candidates = named if declared.issuperset(names) else list(FILESYSTEMS.values())
    return {name: fs for fs in candidates for name in fs.own_fields if name in names}


def _check_layer_options(layer: str, arguments: str) -> None:
    try:
        check_arguments(LAYERS[layer].options, arguments)
    except ValueError as exc:
        raise ValueError(f"{layer}: {exc}") from None


def _kinds_of(info: ValidationInfo) -> list[str]:
    """The target's filesystems, once they are known to be valid (else: none to check against)."""
    return as_list(info.data["filesystem"]) if "filesystem" in info.data else []


def as_list(value: Any) -> list:
    """A field's value as a list: a list sweeps, anything else is one value."""
    return value if isinstance(value, list) else [value]
