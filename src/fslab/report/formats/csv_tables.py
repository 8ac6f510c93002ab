"""`fslab export --format csv` (the default): each table as CSV, a missing value left empty."""

from __future__ import annotations

from fslab.report.formats import TABLE_FORMS, TableForm
from fslab.report.tables import csv_text


def csv_bytes(columns: dict[str, type], rows: list[list]) -> bytes:
    return csv_text(list(columns), rows).encode()


TABLE_FORMS.add(TableForm("csv", suffix="csv", encode=csv_bytes), own=True)
