"""A summary asked for again is printed as it was kept (report/kept.py) while nothing it is made
of changed and its report files are as written — the same output, nothing worked out again,
neither scipy nor numpy imported — and is worked out again, and its files written again, whenever anything did."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import fslab
from conftest import fslab_in_process
from fslab.report import summary as summary_module
from fslab.report.kept import VIEW
from fslab.report.output import MADE_OF
from fslab.results import ResultsDB
from synthetic import stored_study
from test_reports import REFUSED, STUDY

SRC = Path(__file__).parent.parent / "src"


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, int]:
    """A study run of ext4, raw and a target whose every run failed, stored; its database."""
    db = tmp_path / "fslab.db"
    failing = {"bad": (f"{' '.join(REFUSED.argv or [])}: exit status 32", REFUSED)}
    return db, stored_study(tmp_path, STUDY, ResultsDB(str(db)), scale={"raw": 1.0, "ext4": 0.93}, failing=failing)


class Counted:
    """summarize_study_run, counted: how many times a summary was worked out."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = summary_module.summarize_study_run

        def counted(*args: object, **kwargs: object) -> object:
            self.calls += 1
            return original(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(summary_module, "summarize_study_run", counted)


def summary(db: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return fslab_in_process("summary", "--db", str(db), *options)


def test_a_summary_asked_again_is_printed_as_kept_exactly_without_working_it_out(stored, monkeypatch):
    db, study_run_id = stored
    counted = Counted(monkeypatch)
    first = summary(db)
    assert first.returncode == 0 and "8 run(s) failed" in first.stdout, first.stdout + first.stderr
    assert counted.calls == 1
    folder = db.parent / "reports" / f"tables-{study_run_id}"
    assert (folder / VIEW).is_file() and VIEW not in first.stdout, "kept beside the files, never named as one"
    again = summary(db)
    assert counted.calls == 1, "printed as kept, not worked out again"
    assert (again.returncode, again.stdout, again.stderr) == (first.returncode, first.stdout, first.stderr)


def test_the_kept_summary_imports_neither_scipy_nor_numpy(stored):
    """What makes it quick: scipy and numpy are what a summary's start costs most (bench/report_scale.py)."""
    db, _ = stored
    assert summary(db).returncode == 0
    program = (
        "import sys\nfrom fslab.cli import main\nsys.argv = ['fslab', 'summary', '--db', sys.argv[1]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('imported:', sorted(m for m in ('scipy', 'numpy') if m in sys.modules))"
    )
    ran = subprocess.run(
        [sys.executable, "-c", program, str(db)],
        capture_output=True,
        text=True,
        env=os.environ | {"PYTHONPATH": str(SRC)},
        cwd=db.parent,
    )
    assert ran.returncode == 0 and "imported: []" in ran.stdout, ran.stdout[-2000:] + ran.stderr


def _status(db: Path, status: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET status = ? WHERE id = (SELECT max(id) FROM runs)", (status,))


@pytest.mark.parametrize(
    "change",
    [
        "other options",
        "a run's status",
        "another fslab",
        "a report file missing",
        "a report file edited",
        "a report file replaced",
        "the view edited",
        "the view unreadable",
        "a report file registered since",
    ],
)
def test_a_summary_is_worked_out_again_when_anything_it_is_made_of_changed(stored, monkeypatch, toys, change):
    db, study_run_id = stored
    first = summary(db)
    folder = db.parent / "reports" / f"tables-{study_run_id}"
    counted = Counted(monkeypatch)
    options: tuple[str, ...] = ()
    if change == "other options":
        options = ("--threshold", "10")
    elif change == "a run's status":
        _status(db, "superseded")  # as a systematic failure's runs are marked
    elif change == "another fslab":
        monkeypatch.setattr(fslab, "version", lambda: "99.0")
    elif change == "a report file missing":
        (folder / "summary.csv").unlink()
    elif change == "a report file edited":
        with (folder / "summary.md").open("a") as f:
            f.write("mine\n")
    elif change == "a report file replaced":
        (folder / "comparisons.csv").unlink()
        (folder / "comparisons.csv").write_text("somebody's\n")
    elif change == "the view edited":
        (folder / VIEW).write_text((folder / VIEW).read_text().replace("ext4", "EXT4"))
    elif change == "the view unreadable":
        stood = os.stat(folder / VIEW)
        kept_as = os.getxattr(folder / VIEW, MADE_OF).split()[0]
        (folder / VIEW).write_text("{" + " " * (stood.st_size - 1))  # its size, its digest, not JSON
        written = os.stat(folder / VIEW)
        os.setxattr(folder / VIEW, MADE_OF, kept_as + f" {written.st_size} {written.st_mtime_ns}".encode())
    elif change == "a report file registered since":
        toys("report_format")  # as a module of fslab.report.formats joins (tests/toys/report_format.py)
    again = summary(db, *options)
    assert again.returncode == 0, again.stdout + again.stderr
    assert counted.calls == 1, f"{change}: worked out again"
    if change not in ("other options", "a run's status", "a report file registered since"):
        assert again.stdout == first.stdout, "the same summary, as worked out"
    assert "mine" not in (folder / "summary.md").read_text() and (folder / "summary.csv").is_file()
    assert "somebody's" not in (folder / "comparisons.csv").read_text()
    assert json.loads((folder / VIEW).read_text())["view"]["sections"], "kept anew"
    assert (folder / "toy.txt").is_file() == (change == "a report file registered since")
    summary(db, *options)
    assert counted.calls == 1, f"{change}: kept anew, then printed as kept"


def test_a_symlink_at_the_kept_view_is_refused_not_followed(stored, tmp_path):
    db, study_run_id = stored
    assert summary(db).returncode == 0
    view = db.parent / "reports" / f"tables-{study_run_id}" / VIEW
    precious = tmp_path / "precious"
    precious.write_text("mine\n")
    view.unlink()
    view.symlink_to(precious)
    refused = summary(db)
    assert refused.returncode == 2 and "never through a symlink" in " ".join(refused.stderr.split()), (
        refused.stdout + refused.stderr
    )
    assert precious.read_text() == "mine\n"
