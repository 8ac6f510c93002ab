"""comparisons.csv: every comparison a summary shows, one row each — its verdict (faster, slower,
equivalent or undecided), why, and the ratio with the interval the verdict is read from (for pandas)."""

from __future__ import annotations

from fslab.report.formats import REPORT_FILES, ReportFile, Source, made_of_current
from fslab.report.summary import StudySummary
from fslab.report.tables import comparison_table, csv_text


def comparisons_csv(source: Source) -> str:
    return to_comparisons_csv(source.summary)


def to_comparisons_csv(s: StudySummary) -> str:
    columns, rows = comparison_table(s)
    return csv_text(list(columns), rows)


REPORT_FILES.add(
    ReportFile("comparisons.csv", order=35, render=comparisons_csv, current=made_of_current, made_of=True), own=True
)
