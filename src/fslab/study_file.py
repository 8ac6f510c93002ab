"""The study file's tables as pydantic models: which fields each table has and what each
accepts. study.py turns a validated file into targets, workloads and cells."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from fslab.devices.layers import LAYERS
from fslab.filesystems import FILESYSTEMS
from fslab.guard.names import check_name
from fslab.toml_errors import unknown
from fslab.units import parse_duration, parse_size
from fslab.workloads.builtin import BUILTIN_WORKLOADS, WORKLOAD_SETS

FIO_RW_MODES = ("read", "write", "randread", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim", "trimwrite")


def _checked(parse: Any) -> AfterValidator:
    """A field kept as written, refused unless `parse` (which says what is wrong) accepts it."""

    def check(value: Any) -> Any:
        parse(value)
        return value

    return AfterValidator(check)


Name = Annotated[str, _checked(check_name)]  # becomes fio job names and, through file_name, file names
Size = Annotated[str, _checked(parse_size)]  # "4GiB", "512M", "10G"
Duration = Annotated[str | int | float, _checked(parse_duration)]  # "10s", "2m", seconds


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid")


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

    @field_validator("workloads")
    @classmethod
    def _known_workloads(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in BUILTIN_WORKLOADS and name not in WORKLOAD_SETS:
                raise ValueError(unknown("built-in workload", name, [*WORKLOAD_SETS, *BUILTIN_WORKLOADS]))
        return names


class FioSection(_Table):
    """fio parameters; the study's [fio] table sets them for every workload, a workload for itself."""

    bs: str | None = None
    iodepth: int | None = Field(None, ge=1)
    numjobs: int | None = Field(None, ge=1)
    size: Size | None = None
    runtime: Duration | None = None
    ramp_time: Duration | None = None
    direct: bool | None = None
    ioengine: str | None = None
    rwmixread: int | None = Field(None, ge=0, le=100)
    randseed: int | None = None
    options: dict[str, str | int | float | bool] = {}


class WorkloadSection(FioSection):
    name: Name
    rw: str | None = None
    job_file: str | None = None

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
        return self


PropertyValue = str | int | float | bool


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
    vdev: Literal["mirror", "stripe"] | None = None  # ZFS: how the devices form the pool (default: mirror)
    pool_options: dict[str, PropertyValue] = {}  # ZFS: zpool create -o (ashift, …)
    properties: dict[str, PropertyValue | list[PropertyValue]] = {}  # ZFS dataset properties; a list sweeps
    nocow: bool = False  # Btrfs: chattr +C on the workload's directory (per-file No_COW)
    layers: list[str] = []  # under the filesystem, bottom first: md-raid1, luks, lvm
    layer_options: dict[str, str] = {}  # layer → extra arguments for the command that creates it
    raw_baseline: bool = False  # also measure each of the target's images as a raw device
    zvol: bool = False  # ZFS: the workload runs on a volume (a block device), not a dataset
    arc_max: Size | None = None  # ZFS: cap on the ARC for the run

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
        if (self.properties or self.pool_options or self.vdev or self.zvol or self.arc_max) and kinds != {"zfs"}:
            raise ValueError("properties, pool_options, vdev, zvol and arc_max are for ZFS targets (filesystem = \"zfs\")")
        if self.nocow and kinds != {"btrfs"}:
            raise ValueError("nocow (chattr +C) is for Btrfs targets")
        for layer in self.layer_options:
            if layer not in self.layers:
                raise ValueError(f"layer_options names {layer}, which is not in this target's layers {self.layers}")
        md = self.layers[:1] == ["md-raid1"]
        if md and self.count < 2:
            raise ValueError("md-raid1 mirrors two or more devices: set devices = 2")
        if self.count > 1 and self.layers and not md:
            raise ValueError(f"{self.layers[0]} is built on one device: put md-raid1 below it, or set devices = 1")
        if self.count > 1 and not md and not kinds <= {"btrfs", "zfs"}:
            raise ValueError(
                f"{', '.join(sorted(kinds - {'btrfs', 'zfs'}))} uses one device; several devices need btrfs (with -d/-m profiles), zfs, "
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

    @field_validator("image_size")
    @classmethod
    def _sizes(cls, value: str | list[str] | None) -> str | list[str] | None:
        for size in as_list(value or []):
            parse_size(size)
        return value


class StudyFile(_Table):
    study: StudySection
    fio: FioSection = FioSection()
    target: list[TargetSection] = Field(min_length=1)
    workload: list[WorkloadSection] = []


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
    model = _TABLE_MODELS.get(str(loc[0]), StudyFile) if len(loc) > 1 else StudyFile
    return list(model.model_fields)


def as_list(value: Any) -> list:
    """A field's value as a list: a list sweeps, anything else is one value."""
    return value if isinstance(value, list) else [value]
