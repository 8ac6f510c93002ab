"""summary.csv: every metric of every cell, one row each, with all its statistics (for pandas)."""

from __future__ import annotations

from fslab.report.formats import REPORT_FILES, ReportFile, Source, made_of_current
from fslab.report.summary import StudySummary
from fslab.report.tables import csv_text, summary_table


def summary_csv(source: Source) -> str:
    return to_csv(source.summary)


def to_csv(s: StudySummary) -> str:
    columns, rows = summary_table(s)
    return csv_text(list(columns), rows)


REPORT_FILES.add(
    ReportFile("summary.csv", order=20, render=summary_csv, current=made_of_current, made_of=True), own=True
)
