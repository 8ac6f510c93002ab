"""`fslab import` with fio's histogram logs beside the JSON (tests/fixtures/import/hist, see its
README; and the logs of fslab's own log options, tests/fixtures/fio/hist): each run keeps its
jobs' logs as a measured run keeps them, and the report draws its latency over time; a log that
cannot be attached is skipped, saying why, never read through a link."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from conftest import FIXTURES, fslab_in_process
from fslab.fio.hist import HIST_TOOL, Bins, latency_over_time, read_fio_log
from fslab.report.charts import study_charts
from fslab.report.details import run_details
from fslab.report.summary import summarize_study_run
from fslab.results import ResultsDB
from fslab.results.importer import import_files

PBENCH = FIXTURES / "import" / "hist" / "ext4"  # fio-result.json, fio_clat_hist.1.log, fio_clat_hist.2.log


def copied(tmp_path: Path, name: str = "ext4") -> Path:
    shutil.copytree(PBENCH, tmp_path / name)
    return tmp_path / name


def hist_of(run) -> str | None:
    return next((o.text for o in run.outputs if o.tool == HIST_TOOL), None)


def test_a_runs_logs_are_kept_with_it_as_fio_wrote_them(tmp_path):
    directory = copied(tmp_path)
    imported = import_files("disks", [tmp_path])
    assert imported.skipped == [] and imported.files == [str(directory / "fio-result.json")], (
        "the logs are the run's, not files skipped"
    )
    [run] = imported.runs
    assert run.source["histogram_logs"] == [
        str(directory / "fio_clat_hist.1.log"),
        str(directory / "fio_clat_hist.2.log"),
    ]
    found = {t.direction: t for t in latency_over_time(hist_of(run))}
    bins = Bins.of_width(928, 1)  # the job's log_hist_coarseness=1
    for code, direction in enumerate(("read", "write")):
        t = found[direction]
        assert t.window_ms == 250 and t.bins == bins and t.ends_s[0] == 0.25, "fio's own clock: ms from the job's start"
        logged = np.zeros(bins.count, dtype=np.int64)
        for name in ("fio_clat_hist.1.log", "fio_clat_hist.2.log"):
            for line in read_fio_log((directory / name).read_text())[1]:
                if line.direction == code:
                    for index, n in line.bins.items():
                        logged[index] += n
        assert (t.counts.sum(axis=0) == logged).all() and logged.sum() > 0, "every bin of both jobs, as fio counted it"


def test_an_imported_runs_report_draws_its_latency_over_time(tmp_path):
    copied(tmp_path)
    db = tmp_path / "fslab.db"
    done = fslab_in_process("import", str(tmp_path / "ext4" / "fio-result.json"), "--db", str(db))
    assert done.returncode == 0, done.stdout + done.stderr
    results = ResultsDB(str(db))
    s = summarize_study_run(results, 1)
    details = run_details(results, s)
    assert {(t.workload, t.target, t.latency.direction) for t in details.latency_traces} == {
        ("mix", "ext4", "read"),
        ("mix", "ext4", "write"),
    }
    names = {c.name for c in study_charts(s, details)}
    assert {"mix-read-latency-heatmap", "mix-read-latency-over-time", "mix-write-latency-heatmap"} <= names


def test_logs_on_another_clock_count_from_a_window_before_their_first():
    """fslab's own log options (tests/fixtures/fio/hist): log_alternate_epoch, the monotonic clock."""
    [run] = import_files("mine", [FIXTURES / "fio" / "hist" / "randrw-2jobs-hist.json"]).runs
    assert [Path(p).name for p in run.source["histogram_logs"]] == ["fslab_clat_hist.1.log", "fslab_clat_hist.2.log"]
    for t in latency_over_time(hist_of(run)):
        assert t.window_ms == 100 and t.ends_s[0] == 0.1 and t.ends_s[-1] <= 2.1, (
            "the run's 2 s, not the machine's uptime"
        )


def test_a_log_that_cannot_be_attached_is_skipped_saying_why(tmp_path):
    directory = copied(tmp_path)
    (directory / "fio_clat_hist.2.log").write_text("not, a, log\n")
    imported = import_files("disks", [directory])
    assert [s.path for s in imported.skipped] == [
        str(directory / "fio_clat_hist.1.log"),
        str(directory / "fio_clat_hist.2.log"),
    ], "a job's logs together or not at all"
    for skipped in imported.skipped:
        assert skipped.why.startswith(
            f"fio's histogram log of job 'mix' in {directory / 'fio-result.json'}, "
            "not attached: fio_clat_hist.2.log: line 1 is not"
        )
    assert len(imported.runs) == 1 and hist_of(imported.runs[0]) is None, "the run imported, without logs"
    done = fslab_in_process("import", str(directory), "--db", str(tmp_path / "fslab.db"))
    assert done.returncode == 1 and "fio_clat_hist" in done.stderr and "Traceback" not in done.stderr


def test_a_log_is_never_read_through_a_symbolic_link(tmp_path):
    directory = copied(tmp_path)
    secret = tmp_path / "secret"
    secret.write_text((directory / "fio_clat_hist.2.log").read_text())
    (directory / "fio_clat_hist.2.log").unlink()
    (directory / "fio_clat_hist.2.log").symlink_to(secret)
    imported = import_files("disks", [directory / "fio-result.json"])
    assert any(s.path.endswith("fio_clat_hist.2.log") and "not a regular file" in s.why for s in imported.skipped)
    assert hist_of(imported.runs[0]) is None


def test_a_prefix_two_jobs_share_and_a_job_without_windows_attach_nothing(tmp_path):
    directory = copied(tmp_path)
    document = json.loads((directory / "fio-result.json").read_text())
    other = json.loads(json.dumps(document["jobs"][1]))
    other["jobname"] = "other"
    document["jobs"].append(other)  # a second job name, its write_hist_log the same (a [global] option)
    (directory / "fio-result.json").write_text(json.dumps(document))
    imported = import_files("disks", [directory])
    assert {s.path for s in imported.skipped} == {
        str(directory / "fio_clat_hist.1.log"),
        str(directory / "fio_clat_hist.2.log"),
    }
    assert all("which jobs mix, other of" in s.why for s in imported.skipped)
    assert [hist_of(r) for r in imported.runs] == [None, None]
    del document["jobs"][2]
    document["global options"].pop("log_hist_msec")
    (directory / "fio-result.json").write_text(json.dumps(document))
    imported = import_files("disks", [directory])
    assert imported.skipped and all("sets no log_hist_msec" in s.why for s in imported.skipped)
