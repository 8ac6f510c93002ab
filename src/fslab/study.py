"""Study files: TOML → validated model (study_file.py) → targets, workloads and cells.

A value given as a list in a [[target]] table is a sweep: the target expands to one target
per value (several lists: every combination), each with a readable name. Errors name the
file, the line and the field, and say what is allowed.
"""

from __future__ import annotations

import itertools
import shlex
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fslab.errors import FslabError
from fslab.filesystems.zfs import expected_available, zvol_size
from fslab.study_file import PropertyValue, StudyFile, StudySection, TargetSection, WorkloadSection, allowed_fields, as_list
from fslab.toml_errors import describe_error, locate, unknown
from fslab.units import format_duration, format_size, parse_duration, parse_size
from fslab.workloads.builtin import BUILTIN_WORKLOADS, WORKLOAD_SETS
from fslab.workloads.fio import READING_MODES, reads_data

# fslab's defaults for every fio workload, overridden by a study's [fio] table, then by the workload.
FIO_DEFAULTS: dict[str, Any] = {
    "bs": "4k",
    "iodepth": 1,
    "numjobs": 1,
    "size": "1GiB",
    "runtime": "10s",
    "ramp_time": "0s",
    "direct": True,
    "ioengine": "libaio",
    "randseed": 24301,
}


class StudyError(FslabError):
    """A study file that cannot be run, with where and why."""


def image_names(target_name: str, devices: int) -> tuple[str, ...]:
    """The names of a target's own loop images: its name, or name-1, name-2, … for several."""
    return (target_name,) if devices == 1 else tuple(f"{target_name}-{i}" for i in range(1, devices + 1))


@dataclass(frozen=True)
class Target:
    name: str
    filesystem: str
    mkfs_options: tuple[str, ...]
    mount_options: str
    image_size: int  # of each device's image
    image_fill: str  # "full": written once before its first run; "sparse": left sparse
    devices: int = 1
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
    images: tuple[str, ...] = ()  # names of its devices: its loop images, or the user's device paths (a raw baseline shares its target's)

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
        return {
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
        }


@dataclass(frozen=True)
class Workload:
    name: str
    fio_options: dict[str, str]  # fio option → value, in job-file order; empty for a job file
    job_file: str | None  # the user's job file text, run unchanged but for the target location
    seconds: float  # expected duration (runtime + ramp), for progress and time-outs; 0 = unknown
    reads: bool  # needs its data laid out before the measured run
    direct: bool
    bytes_per_job: int  # 0 when unknown (job files)
    numjobs: int

    def spec(self) -> dict[str, Any]:
        return {"fio_options": self.fio_options, "job_file": self.job_file, "direct": self.direct}


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

    @property
    def cells(self) -> list[Cell]:
        return [Cell(t, w) for t in self.targets for w in self.workloads]


def builtin_studies() -> dict[str, str]:
    """Built-in study name → its description."""
    found = {}
    for entry in sorted(resources.files("fslab.studies").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            data = tomllib.loads(entry.read_text())
            found[entry.name.removesuffix(".toml")] = data.get("study", {}).get("description", "")
    return found


def load_study(name_or_path: str | Path, *, scale: float = 1.0) -> Study:
    """A study from a file path or a built-in study's name."""
    path = Path(name_or_path)
    if path.is_file():
        return parse_study(path.read_text(), str(path), base_dir=path.parent, scale=scale)
    builtin = resources.files("fslab.studies") / f"{name_or_path}.toml"
    if builtin.is_file():
        return parse_study(builtin.read_text(), f"built-in study '{name_or_path}'", base_dir=Path.cwd(), scale=scale)
    raise StudyError(
        f"no study file '{name_or_path}' and no built-in study of that name; built-in studies: {', '.join(builtin_studies())}"
    )


def parse_study(text: str, filename: str, *, base_dir: Path, scale: float = 1.0) -> Study:
    if scale <= 0:
        raise StudyError(f"--scale must be above 0, not {scale}")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise StudyError(f"{filename}: not valid TOML: {exc}") from exc
    try:
        model = StudyFile.model_validate(data)
    except ValidationError as exc:
        raise StudyError("\n".join(describe_error(error, text, filename, allowed_fields) for error in exc.errors())) from exc

    targets = [t for section in model.target for t in _expand_target(section, model.study, scale)]
    _require_unique([t.name for t in targets], "target", filename)
    if model.study.baseline is not None and model.study.baseline not in {t.name for t in targets}:
        raise StudyError(f"{filename}:{locate(text, ('study', 'baseline'))}: study.baseline: {unknown('target', model.study.baseline, [t.name for t in targets])}")
    workloads = _workloads(model, base_dir, scale, filename)
    _require_unique([w.name for w in workloads], "workload", filename)
    if not workloads:
        raise StudyError(f"{filename}: the study runs no workload: list built-in ones in [study] workloads, or add [[workload]] tables")
    _check_space(targets, workloads, filename)
    return Study(
        name=model.study.name,
        description=model.study.description,
        repetitions=model.study.repetitions,
        warmup=model.study.warmup,
        baseline=model.study.baseline,
        seed=model.study.seed,
        targets=targets,
        workloads=workloads,
        source=text,
        path=filename,
        scale=scale,
    )


def _scaled(size: int, scale: float) -> int:
    """A size times --scale, kept a whole number of MiB (at least one) when scaled."""
    if scale == 1.0:
        return size
    return max(1, round(size * scale / 2**20)) * 2**20


def _expand_target(section: TargetSection, study: StudySection, scale: float) -> list[Target]:
    dimensions = {
        "filesystem": as_list(section.filesystem),
        "mkfs_options": as_list(section.mkfs_options),
        "mount_options": as_list(section.mount_options),
        "image_size": as_list(section.image_size or study.image_size),
        **{f"property:{name}": as_list(value) for name, value in section.properties.items()},
    }
    swept = [key for key, values in dimensions.items() if len(values) > 1]
    targets = []
    for combination in itertools.product(*dimensions.values()):
        values = dict(zip(dimensions, combination))
        labels = [_label(key, values[key]) for key in swept if not (key == "filesystem" and section.name is None)]
        base = section.name or values["filesystem"]
        target = Target(
            name=f"{base}[{', '.join(labels)}]" if labels else base,
            filesystem=values["filesystem"],
            mkfs_options=tuple(shlex.split(values["mkfs_options"])),
            mount_options=values["mount_options"],
            image_size=_scaled(parse_size(values["image_size"]), scale),
            image_fill=study.image_fill,
            devices=section.count,
            vdev=section.vdev or ("mirror" if values["filesystem"] == "zfs" and section.count > 1 else None),
            pool_options={k: _option_text(v) for k, v in section.pool_options.items()},
            properties={k.removeprefix("property:"): _option_text(v) for k, v in values.items() if k.startswith("property:")},
            nocow=section.nocow,
            layers=tuple(section.layers),
            layer_options={layer: tuple(shlex.split(args)) for layer, args in section.layer_options.items()},
            zvol=section.zvol,
            arc_max=parse_size(section.arc_max) if section.arc_max else None,
            named=tuple(section.named),
            zram=section.zram,
            blkdiscard=section.blkdiscard,
        )
        targets.append(target)
        if section.raw_baseline:
            targets += raw_baselines(target)
    return targets


def raw_baselines(target: Target) -> list[Target]:
    """A raw target on each of the target's own devices (its images, the very devices of the user's
    it names, or a zram device like its own): what its devices deliver without it."""
    names = [f"{target.name}/raw"] if len(target.images) == 1 else [f"{target.name}/raw-{i}" for i in range(1, len(target.images) + 1)]
    return [
        Target(
            name=name, filesystem="raw", mkfs_options=(), mount_options="", image_size=target.image_size, image_fill=target.image_fill,
            named=(image,) if target.named else (), zram=target.zram, blkdiscard=target.blkdiscard, images=(image,),
        )
        for name, image in zip(names, target.images)
    ]


def _label(key: str, value: Any) -> str:
    if key.startswith("property:"):
        return f"{key.removeprefix('property:')}={_option_text(value)}"
    return str(value) or "defaults"


def _option_text(value: PropertyValue) -> str:
    """How zfs and zpool expect a value: on/off for booleans, the rest as written."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _workloads(model: StudyFile, base_dir: Path, scale: float, filename: str) -> list[Workload]:
    defaults = {**FIO_DEFAULTS, **model.fio.model_dump(exclude_none=True, exclude={"options"})}
    shared_options = model.fio.options
    names = [n for entry in model.study.workloads for n in WORKLOAD_SETS.get(entry, [entry])]
    workloads = [_fio_workload(n, {**defaults, **BUILTIN_WORKLOADS[n]}, shared_options, scale) for n in names]
    for section in model.workload:
        if section.job_file:
            workloads.append(_job_file_workload(section, base_dir, filename))
        else:
            own = section.model_dump(exclude_none=True, exclude={"name", "job_file", "options"})
            workloads.append(_fio_workload(section.name, {**defaults, **own}, {**shared_options, **section.options}, scale))
    return workloads


def _fio_workload(name: str, settings: dict[str, Any], extra: dict[str, Any], scale: float) -> Workload:
    size = _scaled(parse_size(settings["size"]), scale)
    runtime = parse_duration(settings["runtime"]) * scale
    ramp = parse_duration(settings["ramp_time"]) * scale
    options = {
        "rw": settings["rw"],
        "bs": settings["bs"],
        "iodepth": settings["iodepth"],
        "numjobs": settings["numjobs"],
        "size": size,
        "ioengine": settings["ioengine"],
        "direct": int(settings["direct"]),
        "randseed": settings["randseed"],
    }
    if "rwmixread" in settings:
        options["rwmixread"] = settings["rwmixread"]
    if runtime > 0:
        options |= {"time_based": 1, "runtime": f"{round(runtime * 1000)}ms"}
    if ramp > 0:
        options["ramp_time"] = f"{round(ramp * 1000)}ms"
    options |= {key: int(value) if isinstance(value, bool) else value for key, value in extra.items()}
    return Workload(
        name=name,
        fio_options={key: str(value) for key, value in options.items()},
        job_file=None,
        seconds=runtime + ramp,
        reads=settings["rw"] in READING_MODES,
        direct=bool(settings["direct"]),
        bytes_per_job=size,
        numjobs=settings["numjobs"],
    )


def _job_file_workload(section: WorkloadSection, base_dir: Path, filename: str) -> Workload:
    path = (base_dir / section.job_file).resolve()
    try:
        text = path.read_text()
    except OSError as exc:
        raise StudyError(f"{filename}: workload '{section.name}': cannot read job_file {path}: {exc.strerror}") from exc
    return Workload(
        name=section.name,
        fio_options={},
        job_file=text,
        seconds=0.0,
        reads=reads_data(text),
        direct="direct=1" in text.replace(" ", ""),
        bytes_per_job=0,
        numjobs=1,
    )


def _check_space(targets: list[Target], workloads: list[Workload], filename: str) -> None:
    """Refuse, before anything is formatted, a workload whose files cannot fit on a target's image."""
    for target in (t for t in targets if not t.named):  # a device of the user's: its size is known when the study runs
        for workload in workloads:
            # On a filesystem each fio job has its own file; on a block device all jobs share the region.
            block_device = target.filesystem == "raw" or target.zvol
            jobs = 1 if block_device else workload.numjobs
            needed = workload.bytes_per_job * jobs
            if target.zvol:
                usable = zvol_size(expected_available(target.image_size))
            else:
                usable = target.image_size * (1.0 if target.filesystem == "raw" else 0.9)
            if needed > usable:
                where = f"a volume of about {format_size(usable)} on an image of {format_size(target.image_size)}" if target.zvol else f"an image of {format_size(target.image_size)}"
                raise StudyError(
                    f"{filename}: workload '{workload.name}' needs {jobs} × {format_size(workload.bytes_per_job)} "
                    f"but target '{target.name}' has {where}; raise image_size or lower the workload's size"
                )


def _require_unique(names: list[str], what: str, filename: str) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise StudyError(f"{filename}: two {what}s are named '{name}'; give each a distinct name")
        seen.add(name)


def describe_study(study: Study, repetitions: int | None = None) -> str:
    """One line for a progress header: cells, runs and the expected measured time."""
    repetitions = repetitions or study.repetitions
    runs = len(study.cells) * repetitions
    seconds = sum(w.seconds for w in study.workloads) * len(study.targets) * repetitions
    return f"{len(study.targets)} targets × {len(study.workloads)} workloads × {repetitions} = {runs} runs, about {format_duration(seconds)} of measurement"
