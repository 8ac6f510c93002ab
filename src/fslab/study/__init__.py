"""Study files: TOML → validated model (study/file.py) → targets, workloads and cells.

A value given as a list in a [[target]] table is a sweep: the target expands to one target
per value (several lists: every combination), each with a readable name. Errors name the
file, the line and the field, and say what is allowed.
"""

from __future__ import annotations

import functools
import itertools
import math
import tomllib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError

from fslab import workloads as kinds
from fslab.core.cgroups import SMALLEST_LIMIT
from fslab.core.errors import FslabError
from fslab.core.names import swept_name
from fslab.core.toml_errors import FieldLines, describe_error, did_you_mean, field_path, unknown
from fslab.core.units import format_duration, format_size, parse_size, scaled_size
from fslab.filesystems import FILESYSTEMS, kinds_that
from fslab.filesystems.base import Room
from fslab.fio import workload as fio
from fslab.model import (
    FILESYSTEM_ATTRIBUTES,
    Cell,
    Study,
    Target,
    TargetsByName,
    Workload,
    metric_phases,
    qualified,
    study_cells,
    unqualified,
)
from fslab.model.ceiling import copies_per_block
from fslab.model.options import split_arguments
from fslab.study.file import StudyFile, StudySection, TargetSection, allowed_fields, as_list, study_file_model, untagged
from fslab.workloads.builtin import WORKLOAD_SETS
from fslab.workloads.tables import Building


class StudyError(FslabError):
    """A study file that cannot be run, with where and why."""


def builtin_studies() -> dict[str, str]:
    """Built-in study name → its description."""
    found = {}
    for entry in sorted(resources.files("fslab.studies").iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            data = tomllib.loads(entry.read_text())
            found[entry.name.removesuffix(".toml")] = data.get("study", {}).get("description", "")
    return found


def load_study(name_or_path: str | Path, *, scale: float = 1.0, scale_sizes_only: bool = False) -> Study:
    """A study from a file path or a built-in study's name."""
    path = Path(name_or_path)
    if path.is_file():
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise StudyError(
                f"{path}: cannot be read as a study file (TOML text): {getattr(exc, 'strerror', None) or exc}"
            ) from None
        return parse_study(text, str(path), base_dir=path.parent, scale=scale, scale_sizes_only=scale_sizes_only)
    builtin = resources.files("fslab.studies") / f"{name_or_path}.toml"
    if builtin.is_file():
        return parse_study(
            builtin.read_text(),
            f"built-in study '{name_or_path}'",
            base_dir=Path.cwd(),
            scale=scale,
            scale_sizes_only=scale_sizes_only,
        )
    raise StudyError(
        f"no study file '{name_or_path}' and no built-in study of "
        f"that name; built-in studies: {', '.join(builtin_studies())}"
    )


def parse_study(
    text: str, filename: str, *, base_dir: Path, scale: float = 1.0, scale_sizes_only: bool = False
) -> Study:
    """The study in `text`; `scale` multiplies image sizes, fio sizes and (unless
    `scale_sizes_only`) runtimes."""
    if scale <= 0:
        raise StudyError(f"--scale must be above 0, not {scale}")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise StudyError(f"{filename}: not valid TOML: {exc}") from exc
    where = _Where(text, filename)
    try:
        model = study_file_model(data).model_validate(data)
    except ValidationError as exc:
        where.refuse(exc.errors(), lambda error: describe_error(error, where.lines, filename, allowed_fields, untagged))

    _refuse_too_many_targets(model, where)
    _refuse_too_many_workloads(model, where)
    expanded = [
        (i, t, first)
        for i, section in enumerate(model.target)
        for t, first in _expand_target(section, model.study, scale)
    ]
    tables = [(i, t) for i, t, _ in expanded]
    targets = [t for _, t in tables]
    where.require_unique([(("target", i), t.name) for i, t in tables], "target")
    scaling = _Scaling(model, base_dir, scale, scale_sizes_only, where)
    scaling.refuse(_floor_problems(model, tables, scale, where))
    names = {t.name: None for t in targets}
    if model.study.baseline is not None and model.study.baseline not in names:
        raise StudyError(f"{where(('study', 'baseline'))}: {unknown('target', model.study.baseline, names)}")
    where.refuse(
        [i for i, section in enumerate(model.target) if section.baseline is not None and section.baseline not in names],
        lambda i: f"{where(('target', i, 'baseline'))}: {unknown('target', model.target[i].baseline, names)}",
    )
    targets = resolve_baselines(targets, model.study.baseline, {t.name: first for _, t, first in expanded if first})
    tabled = _workloads(model, base_dir, scale, 1.0 if scale_sizes_only else scale, where)
    if not tabled:
        raise StudyError(
            f"{filename}: the study runs no workload: list built-in "
            "ones in [study] workloads, or add [[workload]] tables"
        )
    workload_tables, workloads = [table for table, _ in tabled], [workload for _, workload in tabled]
    where.require_unique(list(zip(workload_tables, (w.name for w in workloads))), "workload")
    workloads = _with_primaries(model.study, _compared_with(model, tabled, where), where)
    by_name = TargetsByName(targets)
    where.refuse(
        [
            (wt, name)
            for wt, w in zip(workload_tables, workloads)
            for name in dict.fromkeys(w.targets)
            if not by_name.names(name)
        ],
        lambda found: f"{where((*found[0], 'targets'))}: {unknown('target', found[1], names)}",
    )
    cells = study_cells(targets, workloads, limit=MAX_CELLS)
    if cells is None:
        raise StudyError(
            f"{filename}: the study makes more than {MAX_CELLS:,} cells (each target × each workload that runs on it: "
            f"{len(targets):,} targets, {len(workloads):,} workloads), "
            "more than could ever be run: split it into several studies"
        )
    table_of = dict(zip((w.name for w in workloads), workload_tables))
    where.refuse(
        f"{where(table_of[c.workload.name])}: {problem}"
        for c in cells
        if (problem := cell_problem(c.target, c.workload))
    )
    # A workload too large for an image is reported where that image's size is written (the
    # target's image_size, else the study's), naming where the workload is.
    size_written = {t.name: _image_size_written(model, i) for i, t in tables}
    rooms = _rooms(targets)
    scaling.refuse(
        _outgrown(cells, rooms),
        lambda c: (  # only the problems listed are described: finding the size that would do takes a search
            f"{where(size_written[c.target.name] or table_of[c.workload.name])}: "
            + str(space_problem(c.target, c.workload, rooms[c.target.name], scaled=scale != 1.0))
            + (f" ({where.at(table_of[c.workload.name])})" if size_written[c.target.name] else "")
            + (f" (every size × --scale {scale:g})" if scale != 1.0 else "")
        ),
    )
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
        scale_sizes_only=scale_sizes_only,
    )


# A study makes at most this many targets, and this many cells: far more than could ever be run
# (at three runs of ten seconds a cell, 100,000 cells are a month of measurement), refused before
# they are made rather than filling memory.
MAX_CELLS = 100_000


def _dimensions(section: TargetSection, study: StudySection) -> dict[str, list[tuple[str, Any]]]:
    """A target table's values by field, a sweep's several, each with its label in a target's
    name; then its filesystem's own sweeps (Filesystem.swept: ZFS's properties)."""
    every_targets = {
        "filesystem": as_list(section.filesystem),
        "mkfs_options": as_list(section.mkfs_options),
        "mount_options": as_list(section.mount_options),
        "image_size": as_list(section.image_size or study.image_size),
    }
    own = (
        FILESYSTEMS[section.filesystem if isinstance(section.filesystem, str) else section.filesystem[0]].swept(
            section.own
        )
        if section.own
        else {}
    )
    return {key: [(str(value) or "defaults", value) for value in values] for key, values in every_targets.items()} | own


def _target_count(section: TargetSection, study: StudySection) -> int:
    """How many targets a table makes: one per combination of its sweeps' values, and its raw baselines."""
    return math.prod(len(values) for values in _dimensions(section, study).values()) * (
        1 + section.count * section.raw_baseline
    )


def _refuse_too_many_targets(model: StudyFile, where: _Where) -> None:
    counts = [_target_count(section, model.study) for section in model.target]
    sweeps = ", ".join(f"{where.at(('target', i))} makes {count:,}" for i, count in enumerate(counts) if count > 1)
    if sum(counts) > MAX_CELLS:
        raise StudyError(
            f"{where.filename}: the study's sweeps make {sum(counts):,} "
            f"targets ({sweeps}), more than the {MAX_CELLS:,} a study "
            "may have, and more than could ever be run: sweep fewer values, or split it into several studies"
        )


def _refuse_too_many_workloads(model: StudyFile, where: _Where) -> None:
    """Workload sweeps that make more workloads than a study may have cells (each runs on a
    target at least), refused before they are made."""
    counts = [section.sweep_size() for section in model.workload]
    if sum(counts) > MAX_CELLS:
        sweeps = ", ".join(
            f"{where.at(('workload', i))} makes {count:,}" for i, count in enumerate(counts) if count > 1
        )
        raise StudyError(
            f"{where.filename}: the study's workload sweeps make {sum(counts):,} "
            f"workloads ({sweeps}), more than the {MAX_CELLS:,} cells a study "
            "may have, and more than could ever be run: sweep fewer values, or split it into several studies"
        )


def _image_size_written(model: StudyFile, index: int) -> tuple | None:
    """Where the image size of target table `index` is written: its own image_size, else the
    study's; None when neither is (fslab's default)."""
    if model.target[index].image_size is not None:
        return ("target", index, "image_size")
    return ("study", "image_size") if "image_size" in model.study.model_fields_set else None


def _floor_problems(model: StudyFile, tables: list[tuple[int, Target]], scale: float, where: _Where) -> Iterator[str]:
    """Each image smaller than its filesystem's mkfs can format, reported where its size is
    written (the target's image_size, else the study's) and naming the target. A target on the
    user's devices is not checked here: their size is known only when the study runs."""
    for index, target in tables:
        floor = (
            None
            if target.named
            else FILESYSTEMS[target.filesystem].size_floor(list(target.mkfs_options), target.devices)
        )
        problem = floor and floor.problem(target.image_size)
        if not problem:
            continue
        at = _image_size_written(model, index) or ("target", index)
        own = model.target[index].image_size
        written = next(
            v for v in as_list(own or model.study.image_size) if scaled_size(parse_size(v), scale) == target.image_size
        )
        size = written + (f" × --scale {scale:g} = {format_size(target.image_size)}" if scale != 1.0 else "")
        whose = target.filesystem if at[0] == "target" else f"{target.filesystem}, {where.at(('target', index))}"
        yield f"{where(at)}: {size} is too small for target '{target.name}' ({whose}): {problem}"


def _expand_target(section: TargetSection, study: StudySection, scale: float) -> list[tuple[Target, str | None]]:
    """One target per combination of the table's swept values, each with the baseline its table
    names (else none yet) and its sweep's first value on the same filesystem when it is a later
    one (ext4[noatime] → ext4[defaults]; a sweep of filesystems alone makes no groups): both are
    weighed by resolve_baselines. A table's raw baselines come after its target, with neither."""
    dimensions = _dimensions(section, study)
    swept = [key for key, values in dimensions.items() if len(values) > 1]
    targets: list[tuple[Target, str | None]] = []
    first: dict[str, str] = {}  # filesystem → its sweep's first value
    for combination in itertools.product(*dimensions.values()):
        labelled = dict(zip(dimensions, combination))
        values = {key: value for key, (_, value) in labelled.items()}
        full_size = parse_size(values["image_size"])
        labels = [labelled[key][0] for key in swept if not (key == "filesystem" and section.name is None)]
        base = section.name or values["filesystem"]
        own = FILESYSTEMS[values["filesystem"]].target_values(section.own, values, section.count) if section.own else {}
        target = Target(
            name=swept_name(base, labels),
            filesystem=values["filesystem"],
            mkfs_options=tuple(split_arguments(values["mkfs_options"])),
            mount_options=values["mount_options"],
            image_size=scaled_size(full_size, scale),
            image_fill=study.image_fill,
            devices=section.count,
            layers=tuple(section.layers),
            layer_options={layer: tuple(split_arguments(args)) for layer, args in section.layer_options.items()},
            named=tuple(section.named),
            zram=section.zram,
            blkdiscard=section.blkdiscard,
            baseline=section.baseline,
            **{name: value for name, value in own.items() if name in FILESYSTEM_ATTRIBUTES},
            filesystem_fields={name: value for name, value in own.items() if name not in FILESYSTEM_ATTRIBUTES},
        )
        if scale != 1.0 and not target.named:  # the user's devices are not scaled
            target = FILESYSTEMS[target.filesystem].scaled(target, full_size, scale)
        targets.append((target, first.get(target.filesystem)))
        if any(key != "filesystem" for key in swept):
            first.setdefault(target.filesystem, target.name)
        if section.raw_baseline:
            targets += [(raw, None) for raw in raw_baselines(target)]
    return targets


def resolve_baselines(targets: list[Target], study_baseline: str | None, sweep_first: dict[str, str]) -> list[Target]:
    """Each target's baseline settled, to be stored with it (the one place this rule lives):
    1. the baseline its table names;
    2. else the study's baseline when that is a target of the same filesystem: the reference the
       study declared for it wins over an implicit one (btrfs-options: Btrfs with compression
       against default Btrfs, not against the sweep's first option);
    3. else its sweep's first value (`sweep_first`: target → it, for a sweep's later values):
       each filesystem against its own defaults, as seed 000 tuned them;
    4. else the study's baseline, else the first target.
    A target whose baseline is itself is compared with none."""
    filesystem = {t.name: t.filesystem for t in targets}
    default = study_baseline or targets[0].name

    def settled(target: Target) -> str:
        if target.baseline is not None:
            return target.baseline
        if study_baseline is not None and filesystem[study_baseline] == target.filesystem:
            return study_baseline
        return sweep_first.get(target.name, default)

    return [replace(t, baseline=settled(t)) for t in targets]


def raw_baselines(target: Target) -> list[Target]:
    """A raw target on each of the target's own devices (its images, the very devices of the user's
    it names, or a zram device like its own): what its devices deliver without it."""
    names = (
        [f"{target.name}/raw"]
        if len(target.images) == 1
        else [f"{target.name}/raw-{i}" for i in range(1, len(target.images) + 1)]
    )
    return [
        Target(
            name=name,
            filesystem="raw",
            mkfs_options=(),
            mount_options="",
            image_size=target.image_size,
            image_fill=target.image_fill,
            named=(image,) if target.named else (),
            zram=target.zram,
            blkdiscard=target.blkdiscard,
            images=(image,),
            raw_baseline_of=target.name,
        )
        for name, image in zip(names, target.images)
    ]


def _workloads(
    model: StudyFile, base_dir: Path, scale: float, time_scale: float, where: _Where
) -> list[tuple[tuple, Workload]]:
    """The built-in workloads [study] names, then each [[workload]] table built by its kind (one
    workload for each table its sweeps make, OnTargets.swept), each with the table it is of."""

    def refuse(table: tuple, why: str) -> NoReturn:
        raise StudyError(f"{where(table)}: {why}")

    study_data = fio.data_pattern(model.fio, None, refuse)  # what a workload writes unless it says

    def building(index: int) -> Building:
        return Building(index, scale, time_scale, base_dir, model.fio, study_data, where, refuse)

    names = [n for entry in model.study.workloads for n in WORKLOAD_SETS.get(entry, [entry])]
    workloads: list[tuple[tuple, Workload]] = [
        (
            ("study", "workloads"),
            _limited(
                fio.builtin_workload(n, building(-1)), model.fio.memory_limit, ("fio", "memory_limit"), scale, where
            ),
        )
        for n in names
    ]
    for index, section in enumerate(model.workload):
        # A fio workload takes the study's [fio] limit unless it sets its own; other kinds only their own.
        inherited = model.fio.memory_limit if section.kind == "fio" else None
        table = ("workload", index, "memory_limit") if section.memory_limit is not None else ("fio", "memory_limit")
        for one in section.swept():
            workload = kinds.KINDS[section.kind].build(one, building(index))  # validated: a kind there is
            workload = _limited(workload, section.memory_limit or inherited, table, scale, where)
            workloads.append(
                (
                    ("workload", index),
                    replace(workload, targets=tuple(section.targets)) if section.targets else workload,
                )
            )
    return workloads


def _compared_with(model: StudyFile, tabled: list[tuple[tuple, Workload]], where: _Where) -> list[Workload]:
    """The workloads, each with the workload its table's `compare_with` names, or refused there: it
    names another workload of the study — a built-in one, another table's, or one a sweep made
    (`mixed[iodepth=1]`). A swept table's workloads are each compared with the one named; where
    that one's table is swept too, each with the workload of the same sweep values."""
    names = {w.name for _, w in tabled}
    made: dict[str, list[str]] = {}  # a table's name → the workloads it made (itself, or its sweep's)
    for table, w in tabled:
        if table[0] == "workload":
            made.setdefault(model.workload[table[1]].name, []).append(w.name)
    settled, problems = [], []
    for table, w in tabled:
        section = model.workload[table[1]] if table[0] == "workload" else None
        asked = section.compare_with if section is not None else None
        if section is None or asked is None:
            settled.append(w)
            continue
        field, own = (*table, "compare_with"), section.name
        sweep = w.name[len(own) :]  # "[iodepth=1]", or "" when its table sweeps nothing
        if asked == own or asked in made[own]:
            problems.append(f"{where(field)}: '{asked}' is this workload itself: name another workload of the study")
        elif asked in names:
            settled.append(replace(w, compare_with=asked))
        elif asked in made and sweep and asked + sweep in made[asked]:
            settled.append(replace(w, compare_with=asked + sweep))
        elif asked in made:
            problems.append(
                f"{where(field)}: '{asked}' is swept ({', '.join(made[asked])}) and '{w.name}' has no workload of "
                f"the same values there: name one of its workloads, or sweep '{own}' over the same values"
            )
        else:
            problems.append(f"{where(field)}: {unknown('workload', asked, sorted(names - set(made[own])))}")
    where.refuse(problems)
    return settled


def _with_primaries(study: StudySection, workloads: list[Workload], where: _Where) -> list[Workload]:
    """Each workload with the metrics `[study] primary` names in it (Workload.primary): those of the
    entries for every workload, or for it (by its name, or its table's when a sweep made it), that
    it may report — its kind declares the metric, under a phase it has. An entry naming no workload
    of the study, or a metric none of the workloads it speaks of may report, is refused. Each
    workload is looked up by name and its metrics once per kind and phases: a study of thousands
    of workloads is read as fast without `primary` as with it."""
    entries = study.primary_entries()
    if not entries:
        return workloads
    at = where(("study", "primary"))
    named: dict[str, list[int]] = {}  # a workload's name, and its sweep's table's → the workloads'
    for index, w in enumerate(workloads):
        for name in dict.fromkeys((w.name, w.name.partition("[")[0])):
            named.setdefault(name, []).append(index)
    reportable = _Reportable()
    chosen: list[list[str]] = [[] for _ in workloads]
    problems = []
    for scope, key in entries:
        meant = range(len(workloads)) if scope is None else named.get(scope, [])
        if not meant:
            tables = dict.fromkeys(w.name.partition("[")[0] for w in workloads)
            problems.append(f'{at}: {unknown("workload", str(scope), tables)} (a workload\'s metric: "{scope}:{key}")')
        elif reporting := [i for i in meant if key in reportable(workloads[i])]:
            for i in reporting:
                chosen[i].append(key)
        else:
            problems.append(f"{at}: {reportable.refusal(key, scope, [workloads[i] for i in meant])}")
    where.refuse(problems)
    return [replace(w, primary=tuple(keys)) if keys else w for w, keys in zip(workloads, chosen)]


class _Reportable:
    """The metrics a workload may report, keyed as in samples (each of its phases'), as its kind
    declares them: found once per kind and phases."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, tuple[str, ...]], dict[str, bool]] = {}  # key → compared by default

    def __call__(self, workload: Workload) -> dict[str, bool]:
        of = (workload.kind, metric_phases(workload.tool))
        if of not in self._found:
            declared = kinds.metrics_of(workload.kind)
            self._found[of] = {qualified(p, name): kind.compared for p in of[1] for name, kind in declared.items()}
        return self._found[of]

    def refusal(self, key: str, scope: str | None, meant: list[Workload]) -> str:
        """Why `key` is no primary metric of the workloads `meant` (the study's, or `scope`'s), and
        what they do report."""
        whose = "no workload of the study reports" if scope is None else f"workload '{scope}' does not report"
        reported: dict[str, bool] = {}
        for w in {(w.kind, metric_phases(w.tool)): w for w in meant}.values():
            reported |= self(w)
        known = {unqualified(k) for k in reported} | set(kinds.declared_metrics())
        said = f"unknown metric '{key}'" if unqualified(key) not in known else f"{whose} '{key}'"
        by_phase = [k for k in reported if unqualified(k) == key and k != key]
        if by_phase:
            return f"{said}: a scenario's metrics are its phases', name it with its phase: {', '.join(by_phase[:6])}"
        compared = [k for k, by_default in reported.items() if by_default]
        shown = ", ".join(compared[:12]) + (", …" if len(compared) > 12 else "")
        return (
            f"{said}{did_you_mean(key, list(reported))}: name a metric as the summary keys it (a scenario "
            f"phase's after its phase: fill.write_mb_s); compared by default here: {shown}"
        )


def _limited(workload: Workload, asked: str | None, table: tuple, scale: float, where: _Where) -> Workload:
    """The workload with its memory limit (× --scale, like the files it limits the cache for);
    refused on direct I/O, which bypasses the page cache the limit is there to shrink: the
    limit would change nothing and yet be recorded as if it had."""
    if asked is None:
        return workload
    if workload.direct:
        raise StudyError(
            f'{where(table)}: memory_limit = "{asked}" limits the page '
            f"cache, and workload '{workload.name}' uses direct I/O, "
            "which bypasses it: drop the limit, or set it on the buffered workloads alone"
        )
    limit = scaled_size(parse_size(asked), scale)
    if limit < SMALLEST_LIMIT:
        raise StudyError(
            f'{where(table)}: memory_limit = "{asked}" × --scale {scale:g} is '
            f"{format_size(limit)}, below the {format_size(SMALLEST_LIMIT)} a tool needs to run"
        )
    return replace(workload, memory_limit=limit)


def cell_problem(target: Target, workload: Workload) -> str | None:
    """Why a workload cannot run on a target at all, whatever its size: it takes snapshots the
    target's filesystem has none of, or works in a directory a raw target has not."""
    filesystem = FILESYSTEMS[target.filesystem]
    if workload.tool.takes_snapshots and not filesystem.supports_snapshots:
        snapshotting = kinds_that(lambda fs: fs.supports_snapshots, last="or")
        return (
            f"workload '{workload.name}' takes snapshots, and target '{target.name}' "
            f"({target.filesystem}) has none: run it on {snapshotting} targets"
        )
    if workload.tool.needs_directory and filesystem.room(target).block_device:
        return (
            f"workload '{workload.name}' ({workload.kind}) works in a filesystem's directory, and "
            f"target '{target.name}' is a raw device: leave it out of this study (raw_baseline adds one)"
        )
    return None


def _outgrows(workload: Workload, room: Room) -> bool:
    return workload.tool.bytes_needed(room.block_device) > room.usable


def _rooms(targets: Iterable[Target]) -> dict[str, Room]:
    """What each target's filesystem leaves free (Filesystem.room), once a target, not once a cell;
    the user's devices are measured when the study runs."""
    return {t.name: FILESYSTEMS[t.filesystem].room(t) for t in targets if not t.named}


def _outgrown(cells: Iterable[Cell], rooms: dict[str, Room]) -> Iterator[Cell]:
    """The cells whose workload's files outgrow what their target's image leaves free."""
    return (c for c in cells if not c.target.named and _outgrows(c.workload, rooms[c.target.name]))


def space_problem(target: Target, workload: Workload, room: Room | None = None, *, scaled: bool = False) -> str | None:
    """Why a workload's files cannot fit in what the target's filesystem has free right after
    mkfs and mount (its model: Filesystem.room, unless given), refused before anything is
    formatted: with what it needs, what is free, and the image (or device) size that would do.
    `scaled`: --scale made the sizes, and the scale that fits is named beside (_Scaling), not
    a change to the study file."""
    room = room or FILESYSTEMS[target.filesystem].room(target)
    if not _outgrows(workload, room):
        return None
    needed = workload.tool.bytes_needed(room.block_device)
    kind = "a device" if target.named else "an image"
    free = (
        f"a volume of about {format_size(room.usable)}"
        if room.volume
        else f"{format_size(room.usable)} free"
        + ("" if room.block_device else f" after {target.filesystem}'s mkfs and mount")
    )
    fits = _size_that_fits(target, needed)
    change = "" if scaled else ": raise image_size, or lower the workload's size"
    fix = f"{kind} of {fits // 2**20}MiB would do{change}" if fits else "lower the workload's size"
    return (
        f"workload '{workload.name}' needs {format_size(needed)} but target "
        f"'{target.name}' has {free} on {kind} of {format_size(target.image_size)}; {fix}"
    )


def _size_that_fits(target: Target, needed: int) -> int | None:
    """A size of the target's images (whole MiB) whose room holds `needed` bytes: the first found
    growing by 1/64 at a time, narrowed down to the MiB. None past 1PiB."""

    def fits(size: int) -> bool:
        return FILESYSTEMS[target.filesystem].room(replace(target, image_size=size)).usable >= needed

    low = high = target.image_size // 2**20
    while not fits(high * 2**20):
        low, high = high, high + max(1, high // 64)
        if high > 2**30:
            return None
    while high - low > 1:  # low does not fit, high does
        middle = (low + high) // 2
        low, high = (low, middle) if fits(middle * 2**20) else (middle, high)
    return high * 2**20


@dataclass(frozen=True)
class _Scaling:
    """The size refusals --scale can cause (an image below what mkfs formats, a workload outgrowing
    its image), and the smallest scale that clears them all, named when the user chose a scale."""

    model: StudyFile
    base_dir: Path
    scale: float
    sizes_only: bool
    where: _Where

    def refuse(self, problems: Iterable[Any], describe: Callable[[Any], str] = str) -> None:
        try:
            self.where.refuse(problems, describe)
        except StudyError as exc:
            if self.scale == 1.0:
                raise
            raise StudyError(f"{exc}\n{self.hint()}") from None

    def hint(self) -> str:
        """The smallest scale at which the study fits, said after the problems --scale caused."""
        found = smallest_scale(self.fits, self.scale)
        if found is None:
            up_to = 1.0 if self.scale < 1 else self.scale * 1024
            fix = "raise image_size, or lower the workloads' sizes"
            return f"no scale from {self.scale:g} up to {up_to:g} makes every workload fit: {fix}"
        smallest, upper = found
        ragged = f" (sizes are rounded to whole MiB: some scales between it and {upper:g} do not)"
        fits = "is the smallest at which every image can be formatted and every workload fits"
        return f"--scale {smallest:g} {fits}{ragged if upper != smallest else ''}"

    def fits(self, scale: float) -> bool:
        """Whether the study at `scale` passes the same checks parse_study refuses by."""
        try:
            sections = enumerate(self.model.target)
            tables = [(i, t) for i, section in sections for t, _ in _expand_target(section, self.model.study, scale)]
            if next(_floor_problems(self.model, tables, scale, self.where), None):
                return False
            made = _workloads(self.model, self.base_dir, scale, 1.0 if self.sizes_only else scale, self.where)
        except FslabError:  # another floor at that scale (a memory limit too small): it does not fit either
            return False
        targets = [t for _, t in tables]
        cells = study_cells(targets, [w for _, w in made], limit=MAX_CELLS)
        return cells is not None and next(_outgrown(cells, _rooms(targets)), None) is None


def smallest_scale(fits: Callable[[float], bool], refused: float, digits: int = 3) -> tuple[float, float] | None:
    """The smallest scale of `digits` significant digits above `refused` at which `fits`, and the
    one from which on every scale tried fits: doubled until one fits (up to 1, or 1,024 times a
    refused scale above 1), bisected to the edge, then walked down from it. Each size is rounded to
    a whole MiB on its own, so near the edge a scale may fit where the next one up does not (seen
    over 2 % of wu-guo-2026's scale): the walk goes on until RAGGED_STEPS refused in a row. Every
    scale named was checked. None when none fits."""
    ceiling = 1.0 if refused < 1.0 else refused * 1024
    low, high = refused, refused
    while not fits(high := min(high * 2, ceiling)):
        if high >= ceiling:
            return None
        low = high
    while high / low > 1 + 10 ** -(digits + 1):
        middle = math.sqrt(low * high)
        low, high = (low, middle) if fits(middle) else (middle, high)
    exponent = math.floor(math.log10(low)) - digits + 1  # of the last significant digit

    def on_grid(whole: int) -> float:
        return round(whole * 10**exponent, -exponent)

    whole = math.floor(low / 10**exponent) + 1
    while not fits(on_grid(whole)):  # the first of that precision above the edge: at once, mostly
        if on_grid(whole) >= ceiling:
            return None
        whole += 1
    upper = smallest = whole
    refusals = 0
    while refusals < RAGGED_STEPS and on_grid(whole - 1) > refused:
        whole -= 1
        refusals = 0 if fits(on_grid(whole)) else refusals + 1
        smallest = whole if refusals == 0 else smallest
    return on_grid(smallest), on_grid(upper)


# Scales (of the precision named) refused in a row below the edge before the smallest is taken as found.
RAGGED_STEPS = 20


# A study file's problems are all listed up to this many; the rest are counted.
LISTED_PROBLEMS = 50


@dataclass(frozen=True)
class _Where:
    """Study-file errors, located: file:line: field."""

    text: str
    filename: str

    @functools.cached_property
    def lines(self) -> FieldLines:
        """The file's lines of tables and fields, read at the first error (a file without any is
        never read for them)."""
        return FieldLines(self.text)

    def __call__(self, table: tuple) -> str:
        line = self.lines.line(table)
        return f"{self.filename}:{line}: {field_path(table)}" if line else f"{self.filename}: {field_path(table)}"

    def at(self, table: tuple) -> str:
        """A table or field named within a message: "target[0], line 9"."""
        line = self.lines.line(table)
        return f"{field_path(table)}, line {line}" if line else field_path(table)

    def require_unique(self, named: list[tuple[tuple, str]], what: str) -> None:
        seen: set[str] = set()
        problems = []
        for table, name in named:
            if name in seen:
                problems.append(f"{self(table)}: two {what}s are named '{name}'; give each a distinct name")
            seen.add(name)
        self.refuse(problems)

    @staticmethod
    def refuse(problems: Iterable[Any], describe: Callable[[Any], str] = str) -> None:
        """Refuse the study when there are problems: the first LISTED_PROBLEMS described (each
        message once), the others only counted, so that a file with a problem in each of its
        thousands of tables is refused as fast as one with a few."""
        listed: dict[str, None] = {}
        more = 0
        for problem in problems:
            if len(listed) < LISTED_PROBLEMS:
                listed[describe(problem)] = None
            else:
                more += 1
        if listed:
            raise StudyError("\n".join([*listed, *([f"… and {more:,} more"] if more else [])]))


# A run measuring for less than this is mostly fslab's overhead and fio's ramp-up: warned of.
SHORT_RUN_FLOOR = 2.0  # seconds


def short_runs(study: Study) -> str | None:
    """A warning, before anything runs, naming the workloads whose measured window (runtime,
    ramp excluded) is below SHORT_RUN_FLOOR, and how to lengthen it; None when none is."""
    short = {w.name: seconds for w in study.workloads if 0 < (seconds := w.tool.measured_seconds()) < SHORT_RUN_FLOOR}
    if not short:
        return None
    listed = ", ".join(f"{name} ({format_duration(seconds)})" for name, seconds in short.items())
    fix = "raise their runtime in the study"
    if study.scale != 1.0 and not study.scale_sizes_only:
        fix = (
            f"--scale {study.scale:g} shortened them: add --scale-sizes-only "
            f"to keep the study's runtimes while sizes shrink, or {fix}"
        )
    return (
        f"{len(short)} workload(s) measure for less than {SHORT_RUN_FLOOR:g}s, where "
        f"fslab's overhead and fio's ramp-up weigh on the figures: {listed}; {fix}"
    )


def describe_study(study: Study, repetitions: int | None = None, skipped: Sequence[str] = ()) -> str:
    """One line for a progress header: cells, the runs that will be made (warm-ups apart) and the
    expected time in their workloads; `study` is the study as it will run, without the targets
    `skipped`, which are named; its ceiling (model/ceiling.py), said apart."""
    repetitions = repetitions or study.repetitions
    targets = [t for t in study.targets if not t.ceiling]
    own = [c for c in study.cells if not c.target.ceiling]
    ceiling = [c for c in study.cells if c.target.ceiling]
    each = repetitions * copies_per_block(repetitions)  # a ceiling's cell's runs
    runs, warmups = len(own) * repetitions + len(ceiling) * each, len(study.cells) * study.warmup
    seconds = sum(c.workload.seconds * (repetitions + study.warmup) for c in own)
    seconds += sum(c.workload.seconds * (each + study.warmup) for c in ceiling)
    # A workload may name the targets it runs on, so cells are counted, not targets × workloads.
    if len(own) == len(targets) * len(study.workloads):
        shape = f"{len(targets)} targets × {len(study.workloads)} workloads × {repetitions}"
    else:
        shape = f"{len(own)} cells ({len(targets)} targets, {len(study.workloads)} workloads, "
        shape += f"some on named targets only) × {repetitions}"
    if ceiling:
        shape += f" + a ceiling ({len(ceiling)} cells on a raw device × {each})"
    first = f" and {warmups} warm-up runs before them" if warmups else ""
    left_out = (
        f"; {len(skipped)} target(s) skipped, this machine cannot run them: {', '.join(skipped)}" if skipped else ""
    )
    return f"{shape} = {runs} runs{first}, about {format_duration(seconds)} of measurement{left_out}"
