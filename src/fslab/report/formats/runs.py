"""runs.csv and runs.json: every run as stored, failed runs and warm-ups too, with its metrics
(long format in the CSV) — written again only when the runs changed (`runs_files_current`):
a summary asked for again, with other options, has nothing new for them, and a study run of
thousands of runs spares a third of a second."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fslab import version
from fslab.core.identity import open_own
from fslab.model.records import RunMetric
from fslab.report.formats import REPORT_FILES, ReportFile, Source
from fslab.report.summary import StudySummary
from fslab.report.tables import csv_text, json_opening, json_text, plain, run_table, study_run_record


def runs_files_current(folder: Path, source: Source) -> bool:
    """Whether runs.json (and runs.csv beside it, written with it) in `folder` hold these very runs."""
    s = source.summary
    expected = (json_opening(_runs_held(s)) + ",").encode()
    try:
        fd = open_own(folder / "runs.json", os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        opening = f.read(len(expected))
    return opening == expected and (folder / "runs.csv").is_file() and not (folder / "runs.csv").is_symlink()


def runs_csv_file(source: Source) -> str:
    return runs_csv(source.summary, source.run_metrics)


def runs_json_file(source: Source) -> str:
    return runs_json(source.summary, source.runs, source.run_metrics)


def runs_csv(s: StudySummary, stored: list[RunMetric]) -> str:
    columns, rows = run_table(s, stored)
    return csv_text(list(columns), rows)


def runs_json(s: StudySummary, runs: list[dict], stored: list[RunMetric]) -> str:
    """Every run with all that is stored of it (`runs`: ResultsDB.runs) but its tools' raw output
    (in the database: run_outputs), and its metrics (`stored`: ResultsDB.run_metrics); opened by
    what it holds (_runs_held)."""
    metrics: dict[int, list[dict]] = {}
    for m in stored:
        if m.metric is not None:
            metrics.setdefault(m.run_id, []).append(
                {"phase": m.phase, "name": m.metric, "value": m.value, "unit": m.unit}
            )
    return json_text(_runs_held(s) | {"runs": [plain(run) | {"metrics": metrics.get(run["id"], [])} for run in runs]})


def _runs_held(s: StudySummary) -> dict:
    """What runs.json opens with: the fslab that wrote it, the study run as stored, how many runs
    it had and the last one's id. Runs are only ever added to a study run, never changed, so
    runs files that open with this hold what would be written again."""
    return {
        "fslab": version(),
        "study_run": study_run_record(s),
        "runs_count": len(s.runs),
        "last_run_id": max((r["id"] for r in s.runs), default=None),
    }


REPORT_FILES.add(ReportFile("runs.csv", order=40, render=runs_csv_file, current=runs_files_current), own=True)
REPORT_FILES.add(ReportFile("runs.json", order=50, render=runs_json_file, current=runs_files_current), own=True)
