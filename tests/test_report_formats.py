"""Report formats are a registry: each format is a module that registers itself, and `fslab
summary` and `fslab export` write whatever the registry holds — a toy format added in one file
(toys/report_format.py) included, on a stored database (no root, no device)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import fslab_in_process
from fslab.report import formats
from fslab.report.formats.summary_csv import to_csv
from fslab.report.kept import VIEW
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB
from synthetic import study_run_of

FIXTURES = Path(__file__).parent / "fixtures"
TOY = Path(__file__).parent / "toys" / "report_format.py"


@pytest.fixture
def stored_db(tmp_path: Path) -> Path:
    db = tmp_path / "fslab.db"
    shutil.copy(FIXTURES / "schema-v7.db", db)  # ext4 and raw, two runs each, read as stored
    return db


@pytest.fixture
def toy_registered(toys) -> None:  # noqa: ANN001
    """The toy registered for one test (conftest.toys)."""
    toys("report_format")


def newest_summary(db: Path):
    results = ResultsDB(str(db))
    return summarize_study_run(results, study_run_of(results)["id"])


def test_the_built_in_formats_join_the_registry_from_their_own_modules():
    files, forms = formats.report_files(), formats.table_forms()
    for form in [*(f.render for f in files), *(f.encode for f in forms.values())]:
        assert form.__module__.startswith("fslab.report.formats."), f"{form.__name__} joins from its own module"
    assert [f.name for f in files][:3] == ["summary.md", "summary.csv", "summary.json"], "in their order"
    assert {"comparisons.csv", "runs.csv", "runs.json"} <= {f.name for f in files} and {"csv", "parquet"} <= set(forms)
    with pytest.raises(formats.UnknownFormat, match=f"'xlsx' is not one of {', '.join(map(repr, forms))}$"):
        formats.table_form_named("xlsx")


def test_fslab_summary_writes_a_toy_report_file_registered_in_one_module(stored_db, toy_registered):
    result = fslab_in_process("summary", "--db", str(stored_db))
    assert result.returncode == 0, result.stdout + result.stderr
    written = sorted(stored_db.parent.rglob("toy.txt"))
    assert len(written) == 1, f"toy.txt written once, beside the other report files: {result.stdout + result.stderr}"
    assert sorted(p.name for p in written[0].parent.iterdir()) == sorted(
        [*(f.name for f in formats.report_files()), VIEW]
    )
    s = newest_summary(stored_db)
    assert written[0].read_text() == "".join(f"{c.target} · {c.workload}: {len(c.metrics)} metrics\n" for c in s.cells)
    assert written[0].read_text().count("\n") == len(s.cells) > 0


def test_fslab_export_writes_its_tables_in_a_toy_form_registered_in_one_module(stored_db, toy_registered, tmp_path):
    out = tmp_path / "exported"
    result = fslab_in_process("export", "--db", str(stored_db), "-o", str(out), "--format", "toy")
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["comparisons.toy", "runs.toy", "summary.toy"]
    lines = (out / "summary.toy").read_text().splitlines()
    as_csv = to_csv(newest_summary(stored_db)).splitlines()
    assert len(lines) == len(as_csv) - 1, "a row per cell and metric, as summary.csv has (but its header)"
    assert lines[0].split("\t")[:4] == [
        f"study_run={as_csv[1].split(',')[0]}",
        *[f"{k}={v}" for k, v in zip(("workload", "target", "metric"), as_csv[1].split(",")[1:4])],
    ]


def test_an_unknown_export_format_is_refused_naming_those_there_are(stored_db, tmp_path):
    result = fslab_in_process("export", "--db", str(stored_db), "-o", str(tmp_path / "out"), "--format", "toy")
    assert result.returncode == 2, "the toy is registered only where a test registers it"
    forms = ", ".join(map(repr, formats.table_forms()))
    assert f"'toy' is not one of {forms}" in result.stderr and not (tmp_path / "out").exists()


@pytest.mark.slow  # a Python of its own: the entry points are read at its start
def test_an_installed_package_adds_a_format_through_its_entry_point(stored_db, tmp_path):
    """A format from outside fslab: a package installed in fslab's Python names its module under
    the entry-point group fslab.plugins (here a distribution's metadata on the path, as pip leaves
    it), and fslab imports it when the registry is first read — in a process of its own."""
    site = tmp_path / "site"
    (site / "toy_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "toy_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: toy-plugin\nVersion: 1.0\n"
    )
    (site / "toy_plugin-1.0.dist-info" / "entry_points.txt").write_text("[fslab.plugins]\ntoy = toy_format\n")
    shutil.copy(TOY, site / "toy_format.py")
    code = "import sys; from fslab.report import formats; print(sorted(formats.table_forms()))"
    found = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == str(sorted([*formats.table_forms(), "toy"]))
    (site / "toy_format.py").write_text("raise RuntimeError('broken on purpose')\n")
    broken = subprocess.run(
        [sys.executable, "-m", "fslab", "export", "--db", str(stored_db), "-o", str(tmp_path / "out")],
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
    )
    assert (
        broken.returncode != 0
        and "the fslab plugin 'toy' (toy_format, entry point group fslab.plugins) cannot be imported: broken on purpose"
        in broken.stderr
    )
    assert "Traceback" not in broken.stderr
