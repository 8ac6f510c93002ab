"""Filesystems are a registry: each is one module that registers itself with the target fields it
declares, loaded only when a study asks for it — and a toy filesystem added in one file
(toys/filesystem.py) is read from a study file, run by `fslab run` and shown by `fslab summary`."""

import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import write_study
from fslab.cli import app
from fslab.filesystems import FILESYSTEMS
from fslab.results import ResultsDB
from fslab.study import StudyError, parse_study


@pytest.fixture
def toy_registered(toys) -> None:  # noqa: ANN001
    """The toy registered for one test (conftest.toys)."""
    toys("filesystem")


def loaded_after(code: str) -> list[str]:
    """The filesystems' modules a fresh Python has imported after running `code`."""
    probe = f"{code}\nimport sys\nprint(' '.join(sorted(m for m in sys.modules if m.startswith('fslab.filesystems.'))))"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()


def test_the_registry_loads_a_filesystem_only_when_it_is_asked_for():
    assert loaded_after("from fslab.filesystems import FILESYSTEMS; kinds = list(FILESYSTEMS)") == [
        "fslab.filesystems.base",
    ]
    assert "fslab.filesystems.ext4" in loaded_after("from fslab.filesystems import FILESYSTEMS; FILESYSTEMS['ext4']")
    study = '[study]\nname = "s"\nworkloads = ["seq_read"]\n[[target]]\nfilesystem = "ext4"\n'
    loaded = loaded_after(
        "from pathlib import Path\nfrom fslab.study import parse_study\n"
        f"parse_study({study!r}, 's.toml', base_dir=Path('.'))"
    )
    assert {"fslab.filesystems.ext4"} <= set(loaded) and not {
        "fslab.filesystems.zfs",
        "fslab.filesystems.btrfs",
        "fslab.filesystems.xfs",
    } & set(loaded), loaded


def test_each_of_fslabs_filesystems_is_registered_by_the_module_its_table_names():
    assert {"ext4", "raw"} <= set(FILESYSTEMS.shipped)
    for kind, module in FILESYSTEMS.shipped.items():
        registered = FILESYSTEMS[kind]
        assert (
            registered.kind == kind
            and type(registered).__module__ == module == importlib.import_module(module).__name__
        )
    package = importlib.import_module("fslab.filesystems")
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"fslab.filesystems.{module.name}")
    assert sorted(FILESYSTEMS.registered) == sorted(FILESYSTEMS.shipped), (
        "every filesystem a module of fslab's registers is in the table"
    )


def test_a_filesystem_declares_its_own_target_fields_and_another_filesystems_are_refused(toy_registered):
    head = '[study]\nname = "s"\nworkloads = ["seq_read"]\nimage_size = "4GiB"\n\n[[target]]\n'

    def refusal(target: str) -> str:
        with pytest.raises(StudyError) as refused:
            parse_study(head + target, "s.toml", base_dir=Path("."))
        return str(refused.value)

    [target] = parse_study(head + 'filesystem = "ext2"\nreserved = 1\n', "s.toml", base_dir=Path(".")).targets
    assert target.filesystem_fields == {"reserved": 1} and target.spec()["filesystem_fields"] == {"reserved": 1}
    assert (
        refusal('filesystem = "ext2"\nreserved = 60\n')
        == "s.toml:8: target[0].reserved: Input should be less than or equal to 50"
    )
    assert refusal('filesystem = "ext4"\nreserved = 1\n') == "s.toml:6: target[0]: reserved is for ext2 targets"
    assert (
        refusal('filesystem = "ext2"\nnocow = true\n') == "s.toml:6: target[0]: nocow (chattr +C) is for Btrfs targets"
    )
    assert f"allowed: {', '.join(FILESYSTEMS.shipped)}, ext2" in refusal('filesystem = "ext3"\n'), "the toy last"
    assert re.search(
        r"unknown field 'reserve' \(did you mean 'reserved'\?\); "
        r"allowed: .*, arc_max, reserved \(in target\[0\]\.reserve\)",
        refusal('filesystem = "ext2"\nreserve = 1\n'),
    )
    [ext4] = parse_study(head + 'filesystem = "ext4"\n', "s.toml", base_dir=Path(".")).targets
    assert "filesystem_fields" not in ext4.spec(), "a target of fslab's own filesystems is stored as before"


TOY_STUDY = """\
[study]
name = "toy-filesystem"
repetitions = 1
image_size = "64MiB"
image_fill = "sparse"

[[target]]
filesystem = "ext2"
reserved = 1

[[workload]]
name = "write"
rw = "write"
size = "8MiB"
runtime = "1s"
"""


@pytest.mark.root
def test_a_toy_filesystem_registered_in_one_module_runs_end_to_end(toy_registered, workdir, tmp_path):
    """Study file → `fslab run` (the CLI app in this process, where the toy is registered) →
    stored → `fslab summary`: the toy made the target, with its own field applied."""
    db = tmp_path / "r.db"
    ran = CliRunner().invoke(
        app,
        ["run", str(write_study(tmp_path, TOY_STUDY)), "--no-ceiling", "--db", str(db), "--workdir", str(workdir.root)],
    )
    assert ran.exit_code == 0, ran.output
    results = ResultsDB(str(db))
    study_run = results.study_run()["id"]
    [target] = results.targets(study_run)
    assert target["filesystem"] == "ext2" and target["spec"]["filesystem_fields"] == {"reserved": 1}
    [run] = results.runs(study_run)
    assert run["mkfs_command"][:3] == ["mkfs.ext2", "-F", "-q"], run["mkfs_command"]
    blocks, reserved = (
        int(re.search(rf"^{name}:\s+(\d+)$", run["fs_details"], re.M).group(1))
        for name in ("Block count", "Reserved block count")
    )
    assert reserved == blocks // 100, f"tune2fs -m 1 applied: {run['fs_details']}"
    assert results.sample_groups(study_run).values[("write", "ext2")]["write_iops"][0] > 0

    summary = CliRunner().invoke(app, ["summary", "--db", str(db)])
    assert summary.exit_code == 0, summary.output
    assert "reserved=1%" in summary.output and "ext2" in summary.output
