"""The report files of a study run: Markdown to read, CSV and JSON to process further — the
summary (summary.*) and every run as stored (runs.*) — and `fslab export`'s tables."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from dataclasses import asdict
from enum import Enum
from pathlib import Path

from fslab import __version__
from fslab.guard.identity import open_own
from fslab.guard.names import file_name
from fslab.report.output import own_folder, write_all
from fslab.report.parquet import parquet_bytes
from fslab.results import ResultsDB
from fslab.results.db import RunMetric
from fslab.stats import Comparison, Summary
from fslab.report.summary import (
    COMPARISON_COLUMNS,
    TARGET_COLUMNS,
    StudySummary,
    comparison_groups,
    comparison_rows,
    header_lines,
    method_line,
    monitor_table,
    overview_table,
    ranking_lines,
    skipped_lines,
    target_rows,
    workload_table,
    workload_title,
)


def _table(columns: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)] + ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]


OVERVIEW_SAID = (
    "One row per target, fio workload and direction, laid out as Table IV of Wu & Guo (2026; the built-in study "
    "`wu-guo-2026` runs it): IOPS, bandwidth and latencies are medians over the cell's runs (latency: fio's total "
    "latency, each run's mean and percentiles); n counts the runs; the intervals are the 95 % Student-t intervals "
    "of the mean. The tables per workload below add the spread, P99.9 latency, warnings and the comparisons."
)


def to_markdown(s: StudySummary) -> str:
    out = [f"# {s.study_run['study']} — study run {s.study_run['id']}", "", *[line + "  " for line in header_lines(s)], method_line(s), ""]
    out += ["## Targets", ""]
    out += _table(TARGET_COLUMNS, target_rows(s))
    skipped = skipped_lines(s)
    if skipped:
        out += ["", "## Skipped targets", "", skipped[0], "", *[f"- {line}" for line in skipped[1:]]]
    overview = overview_table(s)
    if overview:
        out += ["", "## fio results", "", OVERVIEW_SAID, ""]
        out += _table(*overview)
    for workload in s.workloads:
        out += ["", f"## {workload_title(s, workload)}", ""]
        out += _table(*workload_table(s, workload))
        monitored = monitor_table(s, workload)
        if monitored:
            out += ["", "Measured beside it (monitors, medians):", ""]
            out += _table(*monitored)
        for baseline, rows in comparison_groups(s.analysis.rows_of(workload)):
            out += ["", f"Compared with **{baseline}**:", ""]
            out += _table(COMPARISON_COLUMNS, comparison_rows(rows))
        out += [""] + [line + "  " for line in ranking_lines(s, workload)]
    if s.failures:
        out += ["", "## Failed runs", ""]
        out += _table(["target", "workload", "repetition", "phase", "error"], [[f.target, f.workload, str(f.repetition), f.phase, f.error] for f in s.failures])
    return "\n".join(out) + "\n"


STAT_FIELDS = ["n", "mean", "median", "stdev", "cv", "minimum", "maximum", "ci_low", "ci_high", "needs_runs"]  # needs_runs: the interval is not worth reading until then

# The tables for pandas, each column with its type (Parquet keeps it; CSV leaves a missing value empty).
SUMMARY_COLUMNS: dict[str, type] = {
    "study_run": int, "workload": str, "target": str, "metric": str, "unit": str,
    "n": int, "mean": float, "median": float, "stdev": float, "cv": float, "minimum": float, "maximum": float, "ci_low": float, "ci_high": float, "needs_runs": int,
    "warnings": str,
}  # fmt: skip
RUN_COLUMNS: dict[str, type] = {  # results.db.RunMetric's fields, in order
    "study_run": int, "run_id": int, "target": str, "workload": str, "repetition": int, "block": int, "warmup": bool, "status": str,
    "phase": str, "metric": str, "value": float, "unit": str,
}  # fmt: skip


def published(figure: Summary | Comparison) -> dict:
    """A figure's fields as every output prints them: its interval only where the tables print
    it (stats.printed_interval; needs_runs says when it will be), else none."""
    fields = vars(figure) if isinstance(figure, Summary) else asdict(figure)  # a Summary's are plain: no deep copy
    return fields if figure.interval is not None else fields | {"ci_low": None, "ci_high": None}


def summary_rows(s: StudySummary) -> list[list]:
    """Every metric of every cell, one row each, with all its statistics (SUMMARY_COLUMNS)."""
    return [
        [s.study_run["id"], cell.workload, cell.target, name, s.metric_units[name], *[published(stats)[f] for f in STAT_FIELDS], "; ".join([*stats.warnings, *cell.notes])]
        for cell in s.cells
        for name, stats in cell.metrics.items()
    ]


def run_rows(stored: list[RunMetric]) -> list[list]:
    """Every run, failed runs and warm-ups too, one row per metric (RUN_COLUMNS): long format."""
    return [list(m) for m in stored]


def to_csv(s: StudySummary) -> str:
    return _csv(list(SUMMARY_COLUMNS), summary_rows(s))


def runs_csv(stored: list[RunMetric]) -> str:
    return _csv(list(RUN_COLUMNS), run_rows(stored))


def _csv(columns: list[str], rows: list[list]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    writer.writerows(rows)
    return buffer.getvalue()


def runs_json(s: StudySummary, runs: list[dict], stored: list[RunMetric]) -> str:
    """Every run with all that is stored of it (`runs`: ResultsDB.runs) but its tools' raw output
    (in the database: run_outputs), and its metrics (`stored`: ResultsDB.run_metrics); opened by
    what it holds (_runs_held)."""
    metrics: dict[int, list[dict]] = {}
    for m in stored:
        if m.metric is not None:
            metrics.setdefault(m.run_id, []).append({"phase": m.phase, "name": m.metric, "value": m.value, "unit": m.unit})
    return _json(_runs_held(s) | {"runs": [_plain(run) | {"metrics": metrics.get(run["id"], [])} for run in runs]})


def _runs_held(s: StudySummary) -> dict:
    """What runs.json opens with: the fslab that wrote it, the study run as stored, how many runs
    it had and the last one's id. Runs are only ever added to a study run, never changed, so
    runs files that open with this hold what would be written again."""
    return {"fslab": __version__, "study_run": _study_run(s), "runs_count": len(s.runs), "last_run_id": max((r["id"] for r in s.runs), default=None)}


def _runs_files_current(folder: Path, s: StudySummary) -> bool:
    """Whether runs.json (and runs.csv beside it, written with it) in `folder` hold these very runs."""
    expected = (_json_opening(_runs_held(s)) + ",").encode()
    try:
        fd = open_own(folder / "runs.json", os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        opening = f.read(len(expected))
    return opening == expected and (folder / "runs.csv").is_file() and not (folder / "runs.csv").is_symlink()


def _study_run(s: StudySummary) -> dict:
    return _plain({k: v for k, v in s.study_run.items() if k != "study_source"})


def _plain(record: dict) -> dict:
    """A stored record fit for JSON: times as ISO 8601."""
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in record.items()}


def to_json(s: StudySummary) -> str:
    document = {
        "study_run": _study_run(s),
        "targets": s.targets,
        "cells": [
            {"workload": c.workload, "target": c.target, "failed_runs": c.failed, "metrics": {m: {"unit": s.metric_units[m], **published(v)} for m, v in c.metrics.items()}}
            | ({"notes": c.notes, "implausible": c.implausible} if c.notes else {})
            for c in s.cells
        ],
        "comparisons": [{"workload": r.workload, "target": r.target, "baseline": r.baseline, "metric": r.metric, **published(r.comparison)} for r in s.analysis.rows],
        "rankings": [{"workload": w, "metric": m, "order": r.order, "tiers": r.tiers, "letters": r.letters} for (w, m), r in s.analysis.rankings.items()],
        "family": {"corrected": "Benjamini–Hochberg", "comparisons": s.analysis.family_size, "of": "every pair of targets per workload and compared metric"},
        "threshold": s.analysis.threshold,
        "bandwidth_unit": s.units.value,
        "skipped": [asdict(u) for u in s.skipped],
        "cached_reference": [asdict(c) for c in s.cached_reference],
        "failures": [asdict(f) for f in s.failures],
    }
    return _json(document)


def _json(document: dict) -> str:
    """A JSON document with each of its keys, and each element of its lists, on a line of its
    own: readable line by line, and written by json's C encoder (an indented document is written
    by its pure-Python one: seconds for a few thousand runs)."""
    return _json_opening(document) + "\n}\n"


def _json_opening(document: dict) -> str:
    """_json's document but its closing brace: a document's first keys open it as they open any
    document beginning with them."""

    def value(v: object) -> str:
        if isinstance(v, list) and v:
            return "[" + ",".join("\n  " + json.dumps(item, default=str) for item in v) + "\n]"
        return json.dumps(v, default=str)

    return "{" + ",".join(f"\n{json.dumps(key)}: {value(v)}" for key, v in document.items())


def report_folder(s: StudySummary, directory: Path) -> Path:
    """Where a study run's report files go: a folder named after it in `directory`."""
    return directory / file_name(f"{s.study_run['study']}-{s.study_run['id']}")


REPORT_FILES = ("summary.md", "summary.csv", "summary.json", "runs.csv", "runs.json")


def write_reports(db: ResultsDB, s: StudySummary, directory: Path) -> list[Path]:
    """summary.md, summary.csv and summary.json in the study run's folder, and runs.csv and
    runs.json (every run and metric, read from `db`) unless those there hold these very runs
    already (a summary asked for again, with other options, has nothing new for them: a study
    run of thousands of runs spares a third of a second). The paths of all five."""
    folder = report_folder(s, directory)
    files = {"summary.md": to_markdown(s), "summary.csv": to_csv(s), "summary.json": to_json(s)}
    own_folder(directory)
    own_folder(folder)
    if not _runs_files_current(folder, s):
        stored = db.run_metrics(s.study_run["id"])
        files |= {"runs.csv": runs_csv(stored), "runs.json": runs_json(s, db.runs(s.study_run["id"]), stored)}
    write_all(folder, files)
    return [folder / name for name in REPORT_FILES]


class TableFormat(Enum):
    CSV = "csv"
    PARQUET = "parquet"  # needs pyarrow (the `parquet` extra)


def export_tables(db: ResultsDB, s: StudySummary, folder: Path, form: TableFormat = TableFormat.CSV) -> list[Path]:
    """`fslab export`: runs.csv (every run, long format) and summary.csv (every cell's
    statistics) in `folder`, for pandas; or the same as .parquet."""
    tables = {"runs": (RUN_COLUMNS, run_rows(db.run_metrics(s.study_run["id"]))), "summary": (SUMMARY_COLUMNS, summary_rows(s))}
    if form is TableFormat.PARQUET:
        written = {f"{name}.parquet": parquet_bytes(columns, rows) for name, (columns, rows) in tables.items()}
    else:
        written = {f"{name}.csv": _csv(list(columns), rows).encode() for name, (columns, rows) in tables.items()}
    own_folder(folder.parent)
    return write_all(folder, written)
