"""The study file's tables as pydantic models: which fields each table has and what each
accepts. study/__init__.py turns a validated file into targets, workloads and cells."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from functools import partial
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    Tag,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from fslab import workloads
from fslab.core.toml_errors import FieldError, unknown
from fslab.core.units import Bandwidth, parse_size
from fslab.devices.layers import LAYERS
from fslab.filesystems import FILESYSTEMS, Filesystem
from fslab.filesystems.base import TargetFields
from fslab.fio import FioSection
from fslab.model.options import check_arguments
from fslab.workloads.builtin import BUILTIN_WORKLOADS, WORKLOAD_SETS
from fslab.workloads.tables import Name, Size, Table, nested_table

# The most metrics a study may name primary: far more than main comparisons are (a few), and few
# enough that checking them against every workload of the largest study stays instant.
MAX_PRIMARY = 100


class StudySection(Table):
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
    # The study's primary metrics, each "<metric>" or "<workload>:<metric>", the metric keyed as in
    # samples ("fill.write_mb_s"); None: each kind's headline metrics. Checked against the
    # workloads once they are built (study/__init__.py, _with_primaries).
    primary: list[str] | None = None

    @field_validator("workloads")
    @classmethod
    def _known_workloads(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in BUILTIN_WORKLOADS and name not in WORKLOAD_SETS:
                raise ValueError(unknown("built-in workload", name, [*WORKLOAD_SETS, *BUILTIN_WORKLOADS]))
        return names

    @field_validator("primary", mode="before")
    @classmethod
    def _primary_listed(cls, value: Any) -> Any:
        if value is not None and (not isinstance(value, list) or not all(isinstance(e, str) for e in value)):
            raise ValueError(f'a list of metrics\' names in quotes, as primary = ["read_iops"]; not {value!r:.60}')
        return value

    @field_validator("primary")
    @classmethod
    def _primary_entries(cls, entries: list[str] | None) -> list[str] | None:
        if entries is None:
            return None
        if not entries:
            raise ValueError("name at least one metric, or leave primary out: each workload kind's headline metrics")
        if len(entries) > MAX_PRIMARY:
            raise ValueError(f"name at most {MAX_PRIMARY} metrics, not {len(entries):,}: a study's main comparisons")
        for entry in entries:
            scope, colon, key = entry.rpartition(":")
            if not key or (colon and not scope) or entry != entry.strip():
                raise ValueError(
                    f'{entry!r} names no metric: write a metric as the summary keys it ("read_iops", a '
                    f'scenario phase\'s "fill.write_mb_s"), or a workload\'s alone ("mail:lat_p95_ms")'
                )
        if len(set(entries)) < len(entries):
            raise ValueError("each metric can appear once")
        return entries

    def primary_entries(self) -> list[tuple[str | None, str]]:
        """`primary` as (workload or None: every workload, metric key) pairs; none when not given."""
        return [(scope or None, key) for scope, _, key in (e.rpartition(":") for e in self.primary or [])]


class TargetSection(Table):
    name: Name | None = None
    filesystem: str | list[str]
    mkfs_options: str | list[str] = ""
    mount_options: str | list[str] = ""
    image_size: str | list[str] | None = None
    devices: int | list[str] = (
        1  # a count of loop images (Btrfs raid profiles, a ZFS mirror), or the user's devices by path
    )
    device: str | None = None  # one device of the user's, by path (confirmed with --destroy-data)
    zram: bool = False  # the devices are zram devices fslab makes (image_size each): a RAM-backed ceiling
    blkdiscard: bool | None = None  # discard each device whole before each run (default: SSDs and zram)
    layers: list[str] = []  # under the filesystem, bottom first: md-raid1, luks, lvm
    layer_options: dict[str, str] = {}  # layer → extra arguments for the command that creates it
    raw_baseline: bool = False  # also measure each of the target's images as a raw device
    baseline: str | None = (
        None  # the target this one is compared with (default: a sweep's first value, else the study's)
    )
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
        section._own = None
        if len(kinds) == 1:  # a target of one filesystem: its own fields
            (alone,) = kinds
            own = FILESYSTEMS[alone].fields if alone else None
            section._own = own.model_validate(given.get(alone, {})) if own else None
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
            raise ValueError('name the target\'s devices once: device = "/dev/…" or devices = ["/dev/…", …]')
        if self.zram and self.named:
            raise ValueError(
                "zram = true makes fslab's own zram devices: it names no device of yours (set devices to a count)"
            )
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
            spanning = ", ".join(
                f"{kind} ({fs.spans_devices_with})" if fs.spans_devices_with else kind
                for kind, fs in FILESYSTEMS.items()
                if fs.spans_devices
            )
            raise ValueError(
                f"{', '.join(single)} uses one device; several devices need {spanning}, "
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

    # Options reach the tools only through the allow-lists (model/options.py), checked here for
    # each filesystem of the target and each value of a sweep; every refusal is reported.
    @field_validator("mkfs_options")
    @classmethod
    def _mkfs_options(cls, value: str | list[str], info: ValidationInfo) -> str | list[str]:
        _all_accepted(
            partial(FILESYSTEMS[kind].check_mkfs_options, options)
            for kind in _kinds_of(info)
            for options in as_list(value)
        )
        return value

    @field_validator("mount_options")
    @classmethod
    def _mount_options(cls, value: str | list[str], info: ValidationInfo) -> str | list[str]:
        _all_accepted(
            partial(FILESYSTEMS[kind].check_mount_options, options)
            for kind in _kinds_of(info)
            for options in as_list(value)
        )
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


def _kind_of_table(kinds: frozenset[str]) -> Callable[[Any], str]:
    """The tag of a [[workload]] table: its kind (absent: fio), or "unknown" when not one of `kinds`."""

    def kind_of(table: Any) -> str:
        kind = table.get("kind", "fio") if isinstance(table, dict) else getattr(table, "kind", "fio")
        return kind if kind in kinds else "unknown"

    return kind_of


class _UnknownKind(BaseModel):
    """A [[workload]] table of a kind fslab has not: refused at its `kind`, and nothing else said."""

    model_config = ConfigDict(extra="allow")
    kind: Any

    @model_validator(mode="after")
    def _refuse(self) -> _UnknownKind:
        raise FieldError("kind", unknown("workload kind", str(self.kind), workloads.names()))


def _is_kind(name: Any) -> bool:
    return isinstance(name, str) and workloads.registered(name) is not None


def untagged(loc: tuple) -> tuple:
    """An error's location without the kind pydantic puts in it: ("workload", 0, "dd", "options")
    → ("workload", 0, "options")."""
    if len(loc) > 2 and loc[0] == "workload" and (loc[2] == "unknown" or _is_kind(loc[2])):
        return (*loc[:2], *loc[3:])
    return loc


class StudyFile(Table):
    """A study file. Its [[workload]] tables are each read by its kind's own model (`kind`, absent:
    fio), as study_file_model makes it for the kinds a file names."""

    study: StudySection
    fio: FioSection = FioSection()
    target: list[TargetSection] = Field(min_length=1)
    workload: list[Any] = []


def study_file_model(data: dict) -> type[StudyFile]:
    """The model of this study file (TOML as read): StudyFile, its [[workload]] tables each read by
    its kind's model (the registry's: only the kinds it names are loaded)."""
    tables = data.get("workload") if isinstance(data, dict) else None
    named = (
        {table.get("kind", "fio") for table in tables if isinstance(table, dict)} if isinstance(tables, list) else set()
    )
    return _with_kinds(frozenset(kind for kind in named if _is_kind(kind)))


@functools.cache
def _with_kinds(kinds: frozenset[str]) -> type[StudyFile]:
    sections = [Annotated[workloads.KINDS[kind].section, Tag(kind)] for kind in sorted(kinds)]
    # Union of a tuple built at run time: no `X | Y` spelling exists for it.
    choices = Union[tuple([*sections, Annotated[_UnknownKind, Tag("unknown")]])]  # type: ignore[valid-type]  # noqa: UP007
    table = Annotated[choices, Discriminator(_kind_of_table(kinds))]  # type: ignore[valid-type]
    return create_model("StudyFile", __base__=StudyFile, workload=(list[table], []))


# The model of each table, to list the fields allowed where an unknown one is met.
_TABLE_MODELS: dict[str, type[BaseModel]] = {
    "study": StudySection,
    "fio": FioSection,
    "target": TargetSection,
}


def check_device_path(path: str) -> str:
    """A device path as a study may name it: absolute, under /dev (symlinks such as
    /dev/disk/by-id/… are resolved when the study runs), plain text. Whether it is a block device
    of the user's, confirmed on the command line, is checked then (core/block_devices.py)."""
    if (
        not path.startswith("/dev/")
        or ".." in path.split("/")
        or any(ord(c) < 32 or ord(c) == 127 for c in path)
        or len(path) > 1024
    ):
        raise ValueError(
            f"{path!r} is not a device path: give an absolute /dev path such as /dev/sdb or /dev/disk/by-id/…"
        )
    return path


def allowed_fields(loc: tuple) -> list[str]:
    """The fields of the table an error's location (as pydantic gives it, kind and all) is in."""
    if len(loc) > 1 and loc[0] == "workload":
        tagged = len(loc) > 3 and _is_kind(loc[2])
        table = workloads.KINDS[str(loc[2]) if tagged else "fio"].section
        for part in loc[3 if tagged else 2 : -1]:  # down to a table within it (a scenario's phase, a precondition's)
            inner = (
                nested_table(table.model_fields[part].annotation)
                if isinstance(part, str) and part in table.model_fields
                else None
            )
            table = inner or table
        return list(table.model_fields)
    if len(loc) > 1 and loc[0] == "target":  # every target's fields, then each filesystem's own
        return list(
            dict.fromkeys(
                [*TargetSection.model_fields, *(name for fs in FILESYSTEMS.values() for name in fs.own_fields)]
            )
        )
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
