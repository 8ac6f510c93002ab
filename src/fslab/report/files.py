"""The report files of a study run: Markdown to read, CSV and JSON to process further."""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import asdict
from pathlib import Path

from fslab.errors import Refused
from fslab.guard.identity import open_own
from fslab.guard.names import file_name
from fslab.report.summary import (
    COMPARISON_COLUMNS,
    TARGET_COLUMNS,
    StudySummary,
    comparison_groups,
    comparison_rows,
    header_lines,
    method_line,
    monitor_table,
    ranking_lines,
    skipped_lines,
    target_rows,
    workload_table,
    workload_title,
)


def _table(columns: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)] + ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]


def to_markdown(s: StudySummary) -> str:
    out = [f"# {s.study_run['study']} — study run {s.study_run['id']}", "", *[line + "  " for line in header_lines(s)], method_line(s), ""]
    out += ["## Targets", ""]
    out += _table(TARGET_COLUMNS, target_rows(s))
    skipped = skipped_lines(s)
    if skipped:
        out += ["", "## Skipped targets", "", skipped[0], "", *[f"- {line}" for line in skipped[1:]]]
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


def to_csv(s: StudySummary) -> str:
    """Every metric of every cell, one row each, with all its statistics."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["study_run", "workload", "target", "metric", "unit", *STAT_FIELDS, "warnings"])
    for cell in s.cells:
        for name, stats in cell.metrics.items():
            writer.writerow([s.study_run["id"], cell.workload, cell.target, name, s.metric_units[name], *[getattr(stats, f) for f in STAT_FIELDS], "; ".join([*stats.warnings, *cell.notes])])
    return buffer.getvalue()


def to_json(s: StudySummary) -> str:
    sr = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in s.study_run.items() if k != "study_source"}
    document = {
        "study_run": sr,
        "targets": s.targets,
        "cells": [
            {"workload": c.workload, "target": c.target, "failed_runs": c.failed, "metrics": {m: {"unit": s.metric_units[m], **asdict(v)} for m, v in c.metrics.items()}}
            | ({"notes": c.notes, "implausible": c.implausible} if c.notes else {})
            for c in s.cells
        ],
        "comparisons": [{"workload": r.workload, "target": r.target, "baseline": r.baseline, "metric": r.metric, **asdict(r.comparison)} for r in s.analysis.rows],
        "rankings": [{"workload": w, "metric": m, "order": r.order, "tiers": r.tiers, "letters": r.letters} for (w, m), r in s.analysis.rankings.items()],
        "family": {"corrected": "Benjamini–Hochberg", "comparisons": s.analysis.family_size, "of": "every pair of targets per workload and compared metric"},
        "threshold": s.analysis.threshold,
        "bandwidth_unit": s.units.value,
        "skipped": [asdict(u) for u in s.skipped],
        "cached_reference": [asdict(c) for c in s.cached_reference],
        "failures": [asdict(f) for f in s.failures],
    }
    return json.dumps(document, indent=2, default=str)


def write_reports(s: StudySummary, directory: Path) -> list[Path]:
    """summary.md, summary.csv and summary.json in a folder named after the study run."""
    folder = directory / file_name(f"{s.study_run['study']}-{s.study_run['id']}")
    for made in (directory, folder):
        if made.is_symlink():
            raise Refused(f"{made} is a symlink: fslab writes its reports into a directory, never through a symlink")
        made.mkdir(exist_ok=True)
    written = []
    for name, text in (("summary.md", to_markdown(s)), ("summary.csv", to_csv(s)), ("summary.json", to_json(s))):
        _write_own(folder / name, text)
        written.append(folder / name)
    return written


def _write_own(path: Path, text: str) -> None:
    """Write a report file, never through a symlink someone left at its name."""
    with os.fdopen(open_own(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), "w") as f:
        f.write(text)
