"""A summary asked for again is printed as it was kept (report/kept.py) while nothing it is made
of changed and its report files are as written — the same output, nothing worked out again,
neither scipy nor numpy imported — and is worked out again, and its files written again, whenever anything did."""

from __future__ import annotations

import hashlib
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
from fslab.report.output import made_of_kept
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


def view_parts(folder: Path) -> tuple[bytes, bytes]:
    """The kept view's first line (its digest, its checksum) and the rest (the view, the files)."""
    head, _, body = (folder / VIEW).read_bytes().partition(b"\n")
    return head, body


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
        "a cell not text",
        "the view another's",
        "a report file rewritten, its time put back",
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
        head, _ = view_parts(folder)
        (folder / VIEW).write_bytes(head + b"\n" + b"not a view")
    elif change == "a cell not text":  # its digest and checksum right: only what it holds tells
        head, body = view_parts(folder)
        found = json.loads(body)
        next(section for section in found["view"]["sections"] if section["rows"])["rows"][0][0] = None
        forged = json.dumps(found).encode()
        said = json.loads(head) | {"sha256": hashlib.sha256(forged).hexdigest()}
        (folder / VIEW).write_bytes(json.dumps(said).encode() + b"\n" + forged)
    elif change == "the view another's":
        stood = os.stat(folder / VIEW)
        os.chown(folder / VIEW, 65534, 65534)
        os.chmod(folder / VIEW, 0o666)
        os.utime(folder / VIEW, ns=(stood.st_atime_ns, stood.st_mtime_ns))
    elif change == "a report file rewritten, its time put back":
        stood = os.stat(folder / "summary.md")
        with (folder / "summary.md").open("r+b") as f:
            f.write(b"mine")  # in place: the same inode and size
        os.utime(folder / "summary.md", ns=(stood.st_atime_ns, stood.st_mtime_ns))
    elif change == "a report file registered since":
        toys("report_format")  # as a module of fslab.report.formats joins (tests/toys/report_format.py)
    again = summary(db, *options)
    assert again.returncode == 0, again.stdout + again.stderr
    assert counted.calls == 1, f"{change}: worked out again"
    if change not in ("other options", "a run's status", "a report file registered since"):
        assert again.stdout == first.stdout, "the same summary, as worked out"
    if change != "a report file rewritten, its time put back":  # its own digest's record cannot tell (docs/reports.md)
        assert "mine" not in (folder / "summary.md").read_text()
    assert (folder / "summary.csv").is_file()
    assert "somebody's" not in (folder / "comparisons.csv").read_text()
    assert json.loads(view_parts(folder)[1])["view"]["sections"], "kept anew"
    assert (folder / "toy.txt").is_file() == (change == "a report file registered since")
    summary(db, *options)
    assert counted.calls == 1, f"{change}: kept anew, then printed as kept"


def test_a_symlink_at_the_kept_view_is_never_followed(stored, tmp_path, monkeypatch):
    db, study_run_id = stored
    assert summary(db).returncode == 0
    view = db.parent / "reports" / f"tables-{study_run_id}" / VIEW
    precious = tmp_path / "precious"
    precious.write_text("mine\n")
    view.unlink()
    view.symlink_to(precious)
    counted = Counted(monkeypatch)
    assert summary(db).returncode == 0 and counted.calls == 1, "not read through"
    assert precious.read_text() == "mine\n" and not view.is_symlink(), "not written through: replaced"


def test_a_symlinked_report_folder_is_refused_as_when_it_is_worked_out(stored):
    db, study_run_id = stored
    assert summary(db).returncode == 0
    folder = db.parent / "reports" / f"tables-{study_run_id}"
    elsewhere = db.parent / "elsewhere"
    folder.rename(elsewhere)  # the same files, inodes, times and attributes
    folder.symlink_to(elsewhere)
    again = summary(db)
    assert again.returncode == 2 and "symlink" in again.stderr, again.stdout[-500:] + again.stderr


def test_files_another_summary_wrote_meanwhile_are_written_again(stored, monkeypatch):
    """`fslab summary` and `fslab summary --threshold 10` at once: the second writes its files
    between the first's and the first's view; asked again as the first was, its summary is worked
    out again (its files keep the other's digest), never printed beside the other's files."""
    from fslab.report import kept

    db, study_run_id = stored
    original = kept.keep

    def keep_after_another(*args: object) -> None:
        monkeypatch.setattr(kept, "keep", original)
        assert summary(db, "--threshold", "10").returncode == 0
        original(*args)

    monkeypatch.setattr(kept, "keep", keep_after_another)
    first = summary(db)
    counted = Counted(monkeypatch)
    again = summary(db)
    assert counted.calls == 1 and again.stdout == first.stdout
    folder = db.parent / "reports" / f"tables-{study_run_id}"
    made_of = json.loads(view_parts(folder)[0])["made_of"].encode()
    assert made_of_kept(folder / "summary.md") == made_of, "summary.md is this asking's again, not the other's"


def test_the_digest_worked_out_and_the_one_read_from_the_database_agree(stored):
    """Two ways to one digest: a summary's (formats.Source, kept with its files) and the database's
    (kept.made_of_now, checked before anything is worked out); were they to differ, no view would
    ever be printed."""
    from fslab.report.formats import Source
    from fslab.report.kept import Asked, made_of_now
    from fslab.report.summary import summarize_study_run

    db, study_run_id = stored
    results = ResultsDB(str(db))
    row = results.study_run(study_run_id)
    assert row is not None
    for asked in ({}, {"threshold": 0.1}, {"baseline": "raw", "precision": 0.05}, {"pool_hosts": True}):
        worked_out = Source(results, summarize_study_run(results, study_run_id, **asked)).made_of
        assert worked_out == made_of_now(results, row, Asked.of(row, **asked)), asked


def test_a_report_file_gone_before_the_view_is_kept_keeps_no_view(stored, monkeypatch):
    """runs.csv keeps no digest of its own: gone as the view is kept (another's hand), the view is not
    kept, and the next summary works it out and writes it again."""
    from fslab.report import kept

    db, study_run_id = stored
    folder = db.parent / "reports" / f"tables-{study_run_id}"
    original = kept.keep

    def gone_first(*args: object) -> None:
        (folder / "runs.csv").unlink()
        original(*args)

    monkeypatch.setattr(kept, "keep", gone_first)
    assert summary(db).returncode == 0 and not (folder / VIEW).exists()
    monkeypatch.setattr(kept, "keep", original)
    counted = Counted(monkeypatch)
    assert summary(db).returncode == 0 and counted.calls == 1 and (folder / "runs.csv").is_file()
