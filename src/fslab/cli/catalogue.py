"""What fslab can do, as `fslab list` shows it: built-in studies and workloads, workload kinds,
scenarios, filesystems, layers and device sources, each with the options a study may give them,
and the monitors that watch every run and the report formats fslab writes.

Every record is read from the registry or allow-list the study file is checked against (the
guard's own lists, never a copy), so what `fslab list` shows is what a study may say. Pure: data
in, records and table rows out; the CLI prints them (report/console.print_table) or as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field as dataclass_field, fields, replace

from pydantic import BaseModel

from fslab import monitors, workloads
from fslab.core.errors import FslabError
from fslab.core.toml_errors import did_you_mean, unknown
from fslab.core.units import parse_duration
from fslab.devices.layers import LAYERS
from fslab.devices.source import SOURCES
from fslab.filesystems import FILESYSTEMS
from fslab.fio import FIO_DEFAULTS
from fslab.model.options import accepted_values
from fslab.report.formats import REPORT_FILES, TABLE_FORMS, report_files, table_forms
from fslab.scenarios.kind import ScenarioSection
from fslab.scenarios.phases import BUILTIN_SCENARIOS, BuiltinScenario, Phase
from fslab.study import builtin_studies
from fslab.workloads.builtin import BUILTIN_WORKLOADS, WORKLOAD_SETS
from fslab.workloads.tables import nested_table


class UnknownSection(FslabError):
    """`fslab list WORD` where WORD names no section and nothing listed."""


@dataclass(frozen=True)
class Accepted:
    """One option the guard accepts, and the form it checks its value against."""

    name: str  # as a study writes it: "-b", "-E stride", "noatime", "recordsize"
    value: str  # "a power of two from 1024 to 65536 …", "no value"


@dataclass(frozen=True)
class Options:
    """The options one study field gives one tool, every one its allow-list accepts."""

    field: str  # the study's field: "mkfs_options", "properties", "layer_options", "options"
    tool: str  # what they reach: "mkfs.ext4", "zfs create -o"
    accepted: list[Accepted]
    refused: list[Accepted] = dataclass_field(
        default_factory=list
    )  # options the tool has that the guard refuses, and why (fio's)


@dataclass(frozen=True)
class Named:
    name: str
    description: str


@dataclass(frozen=True)
class BuiltinWorkload:
    """A built-in fio workload: its fixed pattern, and how long it runs or how much it writes."""

    name: str
    pattern: dict[str, str]  # fio's parameters, as fixed for it
    runtime: str | None  # None: it runs until `size` is written
    size: str | None  # what a size-based one writes
    defaulted: bool  # runtime (or size) is the study's [fio] table's, else fslab's (shown)


@dataclass(frozen=True)
class WorkloadSet:
    name: str
    workloads: list[str]


@dataclass(frozen=True)
class WorkloadKindEntry:
    name: str  # [[workload]] kind = …
    fields: list[str]  # the fields its table takes (a scenario's phases' as phase.field)
    options: list[Options]
    swept: list[str]  # the fields a list of values sweeps: a workload for each value


@dataclass(frozen=True)
class ScenarioPhase:
    name: str
    runs: str  # "fio rw=write bs=1m …", "sync", "drop_caches"
    measured: bool
    snapshot_every: float | None  # seconds, with the scenario's default
    extents: bool  # the file's extents counted after it


@dataclass(frozen=True)
class ScenarioEntry:
    name: str  # [[workload]] kind = "scenario", scenario = …
    phases: list[ScenarioPhase]


@dataclass(frozen=True)
class FilesystemEntry:
    name: str  # a target's filesystem = …
    own_fields: list[str]  # target fields only it takes
    options: list[Options]


@dataclass(frozen=True)
class LayerEntry:
    name: str  # a target's layers = […]
    kernel_feature: str
    options: list[Options]


@dataclass(frozen=True)
class MonitorEntry:
    name: str
    values: list[str]  # what it reports, each with its column in the monitors' table where it has one
    turned_on: str = "always"  # or by `--trace NAME`
    help: str = ""  # what it finds
    cost: str = ""  # what it costs a run while the workload runs (bench/monitors.py)


@dataclass(frozen=True)
class FormatEntry:
    name: str  # a report file's name, or an export form's
    written_by: str  # "fslab summary", "fslab export --format csv"


@dataclass(frozen=True)
class Catalogue:
    """Everything `fslab list` shows, a section per field (`fslab list SECTION`; --json: these keys)."""

    studies: list[Named]
    workloads: list[BuiltinWorkload]
    sets: list[WorkloadSet]
    kinds: list[WorkloadKindEntry]
    scenarios: list[ScenarioEntry]
    filesystems: list[FilesystemEntry]
    layers: list[LayerEntry]
    sources: list[Named]
    monitors: list[MonitorEntry]
    formats: list[FormatEntry]

    def as_json(self) -> dict[str, list[dict]]:
        """The sections that have entries, as plain data (stable keys: the records' fields)."""
        return {
            f.name: [asdict(entry) for entry in getattr(self, f.name)] for f in fields(self) if getattr(self, f.name)
        }

    def narrowed(self, word: str) -> Catalogue:
        """One section (`filesystems`), or every entry named `word` (`zfs`) in its section."""
        sections = [f.name for f in fields(self)]
        if word in sections:
            return replace(self, **{name: [] for name in sections if name != word})
        kept = {name: [entry for entry in getattr(self, name) if entry.name == word] for name in sections}
        if not any(kept.values()):
            names = [entry.name for name in sections for entry in getattr(self, name)]
            raise UnknownSection(
                f"{unknown('section', word, sections)}; or a name `fslab list` shows{did_you_mean(word, names)}"
            )
        return replace(self, **kept)


def catalogue() -> Catalogue:
    """Everything fslab can do, from its registries and allow-lists."""
    return Catalogue(
        studies=[Named(name, description) for name, description in builtin_studies().items()],
        workloads=[_builtin_workload(name, pattern) for name, pattern in BUILTIN_WORKLOADS.items()],
        sets=[WorkloadSet(name, list(members)) for name, members in WORKLOAD_SETS.items()],
        kinds=[_kind(found) for found in workloads.kinds()],
        scenarios=[_scenario(scenario) for scenario in BUILTIN_SCENARIOS.values()],
        filesystems=[_filesystem(kind) for kind in FILESYSTEMS],
        layers=[
            LayerEntry(
                name,
                layer.kernel_feature,
                [_options("layer_options", layer.options.tool, accepted_values(layer.options.options))],
            )
            for name, layer in LAYERS.items()
        ],
        sources=[Named(name, kind.source.chosen_by) for name, kind in SOURCES.items()],
        monitors=[
            MonitorEntry(
                kind.name,
                [f"{f.name} ({f.column})" if f.column else f.name for f in kind.figures],
                f"--trace {kind.trace}" if kind.trace else "always",
                kind.help,
                kind.cost or monitors.NOT_MEASURED,
            )
            for kind in monitors.kinds()
        ],
        formats=[FormatEntry(f.name, "fslab summary") for f in report_files()]
        + [FormatEntry(name, f"fslab export --format {name}") for name in table_forms()],
    )


def from_outside() -> list[str]:
    """What this fslab is extended with from outside it (installed packages' plugins), each as
    "filesystem ext2": `fslab doctor` says so."""
    registries = (
        FILESYSTEMS,
        LAYERS,
        SOURCES,
        workloads.KINDS,
        BUILTIN_SCENARIOS,
        monitors.MONITORS,
        REPORT_FILES,
        TABLE_FORMS,
    )
    return [f"{registry.what} {name}" for registry in registries for name in registry.added()]


def _options(field: str, tool: str, accepted: Mapping[str, str], refused: Mapping[str, str] | None = None) -> Options:
    return Options(
        field,
        tool,
        [Accepted(name, value) for name, value in accepted.items()],
        [Accepted(name, why) for name, why in (refused or {}).items()],
    )


def _builtin_workload(name: str, pattern: Mapping[str, object]) -> BuiltinWorkload:
    runtime = str(pattern.get("runtime", FIO_DEFAULTS["runtime"]))
    fixed = {key: str(value) for key, value in pattern.items() if key != "runtime"}
    if parse_duration(runtime) == 0:  # fio runs until it has written its size
        return BuiltinWorkload(name, fixed, None, str(FIO_DEFAULTS["size"]), defaulted=True)
    return BuiltinWorkload(name, fixed, runtime, None, defaulted="runtime" not in pattern)


def _kind(found: workloads.Registered) -> WorkloadKindEntry:
    name, kind, model = found.name, found.kind, found.section
    options = (
        [_options("options", name, kind.accepted_options, getattr(kind, "refused_options", None))]
        if kind.accepted_options
        else []
    )
    fields = _fields(model)
    return WorkloadKindEntry(
        name, sorted(fields, key=lambda f: f not in ("name", "kind")), options, list(getattr(model, "swept_fields", ()))
    )  # name and kind first, the rest as declared


def _fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    """A study table's fields; a list of tables (a scenario's phase, a precondition's) field by
    field, after the field itself where it says what else it takes (its description)."""
    found = []
    for name, info in model.model_fields.items():
        table = nested_table(info.annotation)
        found += [f"{prefix}{name} ({info.description})"] if table and info.description else []
        found += _fields(table, f"{prefix}{name}.") if table else [f"{prefix}{name}"]
    return found


def _scenario(scenario: BuiltinScenario) -> ScenarioEntry:
    runtime = parse_duration(ScenarioSection.model_fields["runtime"].default)
    return ScenarioEntry(scenario.name, [_phase(p) for p in scenario.phases(runtime, None)])


def _phase(phase: Phase) -> ScenarioPhase:
    runs = " ".join(
        [phase.action, *(f"{k}={v}" for k, v in phase.options.items())]
        + ([f"{phase.seconds:g}s"] if phase.action == "sleep" else [])
    )
    return ScenarioPhase(phase.name, runs, phase.measured, phase.snapshot_every, phase.extents)


def _filesystem(kind: str) -> FilesystemEntry:
    fs = FILESYSTEMS[kind]
    options = []
    if fs.accepted_mkfs_options is not None:
        options.append(
            _options("mkfs_options", fs.accepted_mkfs_options.tool, accepted_values(fs.accepted_mkfs_options.options))
        )
    if fs.accepted_mount_options is not None:
        options.append(
            _options("mount_options", f"mount -t {kind} -o", accepted_values(fs.accepted_mount_options.keys))
        )
    options += [
        _options(field, tool, accepted_values(allowed.keys))
        for field, (tool, allowed) in fs.accepted_properties.items()
    ]
    return FilesystemEntry(kind, list(fs.own_fields), options)


# ---- as the console shows it ------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """One table of `fslab list`, for report/console.print_table."""

    title: str
    columns: list[str]
    rows: list[list[str]]


def tables(c: Catalogue) -> list[Table]:
    """The catalogue's tables, in its sections' order; a section without entries has none."""
    found = []
    if c.studies:
        found.append(
            Table(
                "built-in studies (fslab run NAME)",
                ["study", "description"],
                [[s.name, s.description] for s in c.studies],
            )
        )
    if c.workloads:
        rows = [[w.name, " ".join(f"{k}={v}" for k, v in w.pattern.items()), _length(w)] for w in c.workloads]
        found.append(
            Table(
                "built-in fio workloads ([study] workloads = [NAME]; * the study's [fio] runtime or size, else this)",
                ["workload", "fio pattern", "runs"],
                rows,
            )
        )
    if c.sets:
        found.append(
            Table(
                "workload sets ([study] workloads = [SET])",
                ["set", "workloads"],
                [[s.name, ", ".join(s.workloads)] for s in c.sets],
            )
        )
    if c.kinds:
        rows = [[k.name, ", ".join(k.fields), ", ".join(k.swept) or "–"] for k in c.kinds]
        found.append(Table("workload kinds ([[workload]] kind = NAME)", ["kind", "fields", "a list sweeps"], rows))
    for k in c.kinds:
        found += [t for o in k.options for t in _options_table(f"{k.name} workload", o)]
    if c.scenarios:
        rows = [
            [s.name if i == 0 else "", p.name, p.runs + _phase_notes(p)]
            for s in c.scenarios
            for i, p in enumerate(s.phases)
        ]
        found.append(
            Table(
                'built-in scenarios ([[workload]] kind = "scenario", scenario = NAME)',
                ["scenario", "phase", "runs"],
                rows,
            )
        )
    if c.filesystems:
        rows = [
            [f.name, ", ".join(o.field for o in f.options) or "none", ", ".join(f.own_fields) or "–"]
            for f in c.filesystems
        ]
        found.append(
            Table(
                "filesystems ([[target]] filesystem = NAME; raw: the device itself, no filesystem)",
                ["filesystem", "options", "fields of its own"],
                rows,
            )
        )
    for f in c.filesystems:
        found += [t for o in f.options for t in _options_table(f.name, o)]
    if c.layers:
        found.append(
            Table(
                "layers ([[target]] layers = [NAME, …], bottom first)",
                ["layer", "kernel needs"],
                [[layer.name, layer.kernel_feature] for layer in c.layers],
            )
        )
    for layer in c.layers:
        found += [t for o in layer.options for t in _options_table(f"{layer.name} layer", o)]
    if c.sources:
        found.append(
            Table(
                "device sources (where a target's devices come from)",
                ["source", "chosen by"],
                [[s.name, s.description] for s in c.sources],
            )
        )
    if c.monitors:
        found.append(
            Table(
                "monitors (watch measured windows: always, or with `fslab run --trace NAME`; costs: while the "
                "workload runs)",
                ["monitor", "on", "finds", "costs"],
                [[m.name, m.turned_on, m.help, m.cost] for m in c.monitors],
            )
        )
        always = [m.name for m in c.monitors if m.turned_on == "always"]
        found.append(
            Table(
                "monitoring levels (what a run pays while the workload runs; bench/monitors.py, docs/monitors.md)",
                ["level", "monitors", "costs"],
                [["always-on", ", ".join(always), monitors.ALWAYS_ON_COST]]
                + [
                    [f"trace-{m.turned_on.removeprefix('--trace ')}", f"always-on + {m.name}", m.cost]
                    for m in c.monitors
                    if m.turned_on != "always"
                ],
            )
        )
        found.append(
            Table(
                "monitors' values (their column in the summary)",
                ["monitor", "values"],
                [[m.name, ", ".join(m.values)] for m in c.monitors],
            )
        )
    if c.formats:
        found.append(Table("report formats", ["format", "written by"], [[f.name, f.written_by] for f in c.formats]))
    return found


def _length(w: BuiltinWorkload) -> str:
    said = f"until {w.size} written" if w.runtime is None else w.runtime
    return f"{said} *" if w.defaulted else said


def _phase_notes(p: ScenarioPhase) -> str:
    notes = [
        *(["not measured"] if not p.measured else []),
        *([f"a snapshot every {p.snapshot_every:g}s"] if p.snapshot_every else []),
        *(["extents counted after"] if p.extents else []),
    ]
    return f" ({'; '.join(notes)})" if notes else ""


def _options_table(owner: str, options: Options) -> list[Table]:
    accepted = Table(
        f"{owner}: {options.field} → {options.tool}", ["option", "value"], [[a.name, a.value] for a in options.accepted]
    )
    refused = Table(
        f"{owner}: {options.tool} options fslab refuses",
        ["option", "why"],
        [[r.name, r.value] for r in options.refused],
    )
    return [accepted, refused] if options.refused else [accepted]
