"""Which fslab made a study run (fslab.version): its release and its source's hash, so that two
checkouts at different commits — or one with changes — never record the same version, as they all
recorded "0.1.0"; and a fleet of mixed fslabs, with rows of before that say "0.1.0", compared by it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

import fslab
from fslab import __version__, version
from fslab.fleet import versions
from fslab.fleet.roster import Worker
from fslab.model import Host
from fslab.results import ResultsDB
from fslab.results.schema import SCHEMA_VERSION

PACKAGE = Path(fslab.__file__).parent


def checkout(where: Path, change: str | None = None) -> Path:
    """A copy of this fslab's package (for PYTHONPATH), `change` appended to one of its modules."""
    shutil.copytree(PACKAGE, where / "fslab", ignore=shutil.ignore_patterns("__pycache__"))
    if change is not None:
        with (where / "fslab" / "fio" / "jobs.py").open("a") as module:
            module.write(change)
    return where


def version_of(top: Path) -> str:
    """The version the fslab at `top` records, as a process of it says."""
    env = {**os.environ, "PYTHONPATH": str(top)}
    code = "import fslab; print(fslab.__file__, fslab.version())"
    said = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    where, found = said.stdout.split()
    assert Path(where).is_relative_to(top), "the copy's fslab, not this one"
    return found


def test_two_checkouts_that_differ_record_two_versions(tmp_path):
    same = version_of(checkout(tmp_path / "a"))
    changed = version_of(checkout(tmp_path / "b", "\n# a commit more\n"))
    assert same.startswith(f"{__version__}+") and changed.startswith(f"{__version__}+")
    assert changed != same, "a change to the source is another version"
    assert version() == same, "the same source, wherever it lies, compiled or not: the same version"
    assert len(same) <= 40, "it fits study_runs.fslab_version and fleet_workers.fslab_version"


def test_a_study_run_records_it_in_its_environment_and_its_row(tmp_path):
    from fslab.running import environment
    from fslab.study import parse_study
    from test_exit_codes import STUDY

    collected = environment.collect(tmp_path)
    assert collected["fslab"] == version()
    db = ResultsDB(str(tmp_path / "r.db"))
    study_run = db.begin_study_run(parse_study(STUDY, "gate.toml", base_dir=tmp_path), 1, collected, {}, {}, None)
    stored = db.study_run(study_run)
    assert stored["fslab_version"] == stored["environment"]["fslab"] == version()


def worker(name: str, fslab_version: str | None) -> Worker:
    return Worker(name, [], Host(name, "id", "6.1", "cpu", 2, 1 << 30), datetime(2026, 11, 1), None, 60.0,
                  fslab_version, SCHEMA_VERSION)  # fmt: skip


def test_a_fleet_of_mixed_fslabs_with_rows_of_before_compares_by_the_whole_version(tmp_path):
    """A study run queued by an fslab of before (its row: "0.1.0") is refused by a worker of
    today's, naming both: "0.1.0" tells no source, so none of today's can say it runs that code;
    a worker registered as "0.1.0" is named among those that will refuse a unit queued now."""
    db = ResultsDB(str(tmp_path / "r.db"))
    versions.check_runnable(db.engine, "r.db", 1, version())  # made by this very fslab: runnable
    with pytest.raises(versions.UnitRefused) as refused:
        versions.check_runnable(db.engine, "r.db", 1, __version__)
    assert str(refused.value) == (
        f"study run 1 was made by fslab {__version__}, and this worker runs fslab {version()} "
        f"(schema {SCHEMA_VERSION}): run a worker of fslab {__version__} on this host, or the study again"
    )
    said = versions.refusers([worker("old", __version__), worker("new", version())])
    assert said == [
        f"worker old runs fslab {__version__} (schema {SCHEMA_VERSION}), and this is fslab {version()} "
        f"(schema {SCHEMA_VERSION}): it will refuse its unit, which waits for a worker of fslab {version()} "
        '(docs/fleet.md, "Upgrading a fleet")'
    ]


def pathlib_source_hash(package: Path) -> str:
    """source_hash as it was first written (Path.rglob, Paths sorted): what it must still give."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(path.relative_to(package).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def test_the_source_hash_is_the_one_recorded_before(tmp_path):
    """The same hash as before for this package and for a tree whose order as Paths is not its
    order as text ("a/b" before "a-b": a study run's recorded version would change), with compiled
    files and __pycache__ at any depth left out, and a change to any file seen."""
    tree = tmp_path / "pkg"
    for name, text in {
        "a/b.py": "1", "a-b.py": "2", "a.py": "3", "__pycache__/x.py": "4", "m.pyc": "5",
        "d/__pycache__/y.py": "6", "d/e/f.txt": "7", "d/templates/page.html": "8",
    }.items():  # fmt: skip
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    assert fslab.source_hash(tree) == pathlib_source_hash(tree)
    assert fslab.source_hash(PACKAGE) == pathlib_source_hash(PACKAGE)
    before = fslab.source_hash(tree)
    (tree / "__pycache__" / "x.py").write_text("changed")
    (tree / "m.pyc").write_text("changed")
    assert fslab.source_hash(tree) == before, "compiled files are not the source"
    (tree / "d" / "e" / "f.txt").write_text("changed")
    assert fslab.source_hash(tree) != before
