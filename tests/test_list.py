"""`fslab list`: everything fslab can do, read from the registries and allow-lists the study file
is checked against, so that adding a kind, scenario, filesystem, layer or option cannot leave it out."""

import dataclasses
import inspect
import json
import pkgutil
import typing
from importlib import import_module

import pytest
from rich.cells import cell_len

from conftest import fslab_in_process
from fslab import devices as devices_package, monitors
from fslab.cli.catalogue import Catalogue
from fslab.core.units import parse_duration
from fslab.devices.layers import LAYERS
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.zfs import DATASET_PROPERTIES, POOL_OPTIONS
from fslab.fio import options as fio_options
from fslab.fio.workload import FIO_DEFAULTS
from fslab.model.options import Suboptions
from fslab.report.console import CONSOLE_WIDTH
from fslab.report.formats import report_files, table_forms
from fslab.scenarios.kind import BUILTIN, ScenarioSection
from fslab.scenarios.phases import BUILTIN_SCENARIOS
from fslab.study import builtin_studies
from fslab.workloads import SHIPPED as KINDS, registered
from fslab.workloads.builtin import BUILTIN_WORKLOADS, WORKLOAD_SETS
from fslab.workloads.dd import DD_OPTIONS
from fslab.workloads.rsync import RSYNC_OPTIONS
from fslab.workloads.sysbench import SYSBENCH_OPTIONS

SECTIONS = [f.name for f in dataclasses.fields(Catalogue)]  # each the catalogue reads from a registry or allow-list


def _names(options) -> set[str]:
    """An allow-list's option names as a study writes them, a list of suboptions key by key."""
    return {f"{name} {key}" for name, kind in options.items() if isinstance(kind, Suboptions) for key in kind.keys} | {
        name for name, kind in options.items() if not isinstance(kind, Suboptions)
    }


def _filesystem_options(kind: str) -> dict[str, set[str]]:
    """Each study field of a filesystem's options → every name its allow-list accepts."""
    fs = FILESYSTEMS[kind]
    found = {}
    if fs.accepted_mkfs_options:
        found["mkfs_options"] = _names(fs.accepted_mkfs_options.options)
    if fs.accepted_mount_options:
        found["mount_options"] = set(fs.accepted_mount_options.keys)
    if kind == "zfs":  # the lists study_file checks pool_options and properties against
        found |= {"pool_options": set(POOL_OPTIONS.keys), "properties": set(DATASET_PROPERTIES.keys)}
    return found


# Each workload kind's `options` table → the allow-list it is checked against.
KIND_OPTIONS = {
    "fio": set(),  # fio's own table (conftest: 3.33's), read in the test: fio_accepted
    "sysbench": {name.removeprefix("--") for name in SYSBENCH_OPTIONS.options},
    "dd": set(DD_OPTIONS),
    "rsync": set(RSYNC_OPTIONS),
    "scenario": set(),  # its phases take fio's, sysbench's and dd's
}


def fio_accepted() -> set[str]:
    """Every spelling of every option of fio's table that the guard does not refuse whatever its value."""
    return {name for name in fio_options.table().spellings if name not in fio_options.refused_options()}


def _first_column(output: str) -> set[str]:
    """What begins each line of the tables printed (columns are two spaces apart)."""
    return {line.split("  ")[0].strip() for line in output.splitlines() if line.strip()}


@pytest.fixture(scope="module")
def listed() -> str:
    result = fslab_in_process("list")
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def as_json() -> dict:
    result = fslab_in_process("list", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def narrowed(word: str) -> str:
    result = fslab_in_process("list", word)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_every_registered_name_is_listed(listed, as_json):
    registries = {
        "studies": builtin_studies(),
        "workloads": BUILTIN_WORKLOADS,
        "sets": WORKLOAD_SETS,
        "kinds": KINDS,
        "scenarios": BUILTIN_SCENARIOS,
        "filesystems": FILESYSTEMS,
        "layers": LAYERS,
        "monitors": [kind.name for kind in monitors.kinds()],
        "formats": [*(f.name for f in report_files()), *table_forms()],
    }
    assert all(registered(kind).name == kind for kind in KINDS), (
        "every kind fslab ships joins the registry under its name"
    )
    shown = _first_column(listed)
    for section, names in registries.items():
        assert set(names) <= shown, f"{section}: {set(names) - shown} not in `fslab list`"
        assert [entry["name"] for entry in as_json[section]] == list(names), section


def test_every_accepted_option_is_listed_with_its_owner(as_json):
    by_name = {
        section: {entry["name"]: entry for entry in as_json[section]} for section in ("filesystems", "layers", "kinds")
    }
    expected = {
        "filesystems": {kind: _filesystem_options(kind) for kind in FILESYSTEMS},
        "layers": {name: {"layer_options": set(_names(layer.options.options))} for name, layer in LAYERS.items()},
        "kinds": {
            name: {"options": names} if names else {}
            for name, names in (KIND_OPTIONS | {"fio": fio_accepted()}).items()
        },
    }
    assert set(KIND_OPTIONS) == set(KINDS)
    for section, owners in expected.items():
        for owner, fields in owners.items():
            in_json = {o["field"]: {a["name"] for a in o["accepted"]} for o in by_name[section][owner]["options"]}
            assert in_json == fields, f"{section} {owner}: --json lists exactly what the guard accepts"
            shown = _first_column(narrowed(owner))
            for field, names in fields.items():
                assert names <= shown, f"`fslab list {owner}` leaves out {field} {sorted(names - shown)}"
    assert all(a["value"] for o in by_name["filesystems"]["ext4"]["options"] for a in o["accepted"]), (
        "each with its value's form"
    )


def test_scenarios_are_listed_with_their_phases(as_json):
    assert typing.get_args(ScenarioSection.model_fields["scenario"].annotation)[0] == typing.Literal[BUILTIN], (
        "the study file takes the scenarios fslab has"
    )
    for entry in as_json["scenarios"]:
        assert [p["name"] for p in entry["phases"]] == [
            p.name for p in BUILTIN_SCENARIOS[entry["name"]].phases(60.0, None)
        ]
    overwrite = next(
        p
        for s in as_json["scenarios"]
        if s["name"] == "snapshots-under-load"
        for p in s["phases"]
        if p["name"] == "overwrite"
    )
    assert overwrite["snapshot_every"] and overwrite["runs"].startswith("fio rw=randwrite")
    assert "a snapshot every 0.33s" in " ".join(narrowed("snapshots-under-load").split())


def test_a_size_based_workload_shows_its_size_not_a_zero_runtime(as_json):
    size_based = [
        name
        for name, pattern in BUILTIN_WORKLOADS.items()
        if parse_duration(pattern.get("runtime", FIO_DEFAULTS["runtime"])) == 0
    ]
    assert size_based, "the NAS backups run until their size is written"
    records = {w["name"]: w for w in as_json["workloads"]}
    for name in size_based:
        line = next(line for line in narrowed(name).splitlines() if line.startswith(name + " "))
        assert f"until {FIO_DEFAULTS['size']} written" in line and "0s" not in line, line
        assert records[name]["runtime"] is None and records[name]["size"] == FIO_DEFAULTS["size"]
    assert records["video_read"]["runtime"] == "45s" and not records["video_read"]["defaulted"]


def test_device_sources_are_every_source_fslab_has(as_json):
    sources = {
        obj
        for info in pkgutil.iter_modules(devices_package.__path__)
        for _, obj in inspect.getmembers(import_module(f"fslab.devices.{info.name}"), inspect.isclass)
        if hasattr(obj, "discards_by_default")
        and hasattr(obj, "attach")
        and obj.__module__.startswith("fslab.devices.")
        and not getattr(obj, "_is_protocol", False)
    }
    assert len(sources) == 3
    listed = {entry["description"] for entry in as_json["sources"]}
    assert {source.chosen_by for source in sources} == listed


def test_the_console_fits_its_width_and_json_has_every_section(listed, as_json):
    assert list(as_json) == SECTIONS
    too_wide = [line for line in listed.splitlines() if cell_len(line.rstrip()) > CONSOLE_WIDTH]
    assert not too_wide, too_wide[:3]


def test_a_section_narrows_the_list_and_an_unknown_one_is_refused():
    result = fslab_in_process("list", "--json", "filesystems")
    assert result.returncode == 0 and list(json.loads(result.stdout)) == ["filesystems"]
    zfs = json.loads(fslab_in_process("list", "--json", "zfs").stdout)
    assert [f["name"] for f in zfs["filesystems"]] == ["zfs"] and list(zfs) == ["filesystems"]
    assert "zfs: properties → zfs create -o" in narrowed("zfs") and "mkfs.ext4" not in narrowed("zfs")
    refused = fslab_in_process("list", "zfz")
    assert refused.returncode == 2 and "did you mean 'zfs'?" in refused.stderr and "Traceback" not in refused.stderr


def test_each_built_in_scenario_joins_from_its_own_module_and_a_plugins_stays_out_of_the_schema():
    from fslab.core.registry import scoped
    from fslab.scenarios.phases import BuiltinScenario

    modules = [BUILTIN_SCENARIOS[name].phases.__module__ for name in BUILTIN]
    assert all(m.startswith("fslab.scenarios.builtin.") for m in modules) and len(set(modules)) == len(modules), modules
    with scoped():
        BUILTIN_SCENARIOS.add(BuiltinScenario("toy", lambda runtime, every: ()))
        assert "toy" in BUILTIN_SCENARIOS and BUILTIN_SCENARIOS.own() == list(BUILTIN), (
            "fslab's own names alone, as the study file's `scenario` takes them"
        )


def test_each_monitor_is_listed_with_when_it_is_on_what_it_finds_and_costs_and_each_level_with_its_cost():
    """`fslab list` shows every monitor — always on, or the `--trace` that turns it on — with its
    help line and its cost (an opt-in one not yet measured says so), and a row per level: always-on
    (every monitor without a trace) with their measured cost together, and trace-NAME per opt-in
    monitor. Fails where a help line or a cost is dropped, a trace is shown as always on, or a
    level is missing."""
    from fslab.core.registry import scoped
    from fslab.monitors.base import MONITORS, MonitorKind

    with scoped():
        MONITORS.add(MonitorKind("toytrace", 99, (), lambda watched: None, trace="toy", help="what a toy finds"))
        result = fslab_in_process("list", "--json", "monitors")
        text = narrowed("monitors")
        always = [kind.name for kind in monitors.kinds() if not kind.trace]
    assert result.returncode == 0, result.stderr
    listed = {m["name"]: m for m in json.loads(result.stdout)["monitors"]}
    assert (listed["toytrace"]["turned_on"], listed["toytrace"]["help"]) == ("--trace toy", "what a toy finds")
    assert listed["toytrace"]["cost"] == monitors.NOT_MEASURED
    for name in always:
        assert listed[name]["turned_on"] == "always" and listed[name]["help"] == MONITORS[name].help != "", name
        assert listed[name]["cost"] not in ("", monitors.NOT_MEASURED), f"{name}: its cost measured and stated"
    rows = {line.split("  ")[0].strip(): line for line in text.splitlines()}
    assert ", ".join(always) in rows["always-on"] and monitors.ALWAYS_ON_COST.split(",")[0] in rows["always-on"]
    assert "always-on + toytrace" in rows["trace-toy"] and "not measured yet" in rows["trace-toy"]
