"""`fslab export --format csv` (the default): each table as CSV, a missing value left empty."""

from __future__ import annotations

from fslab.report.formats import table_form
from fslab.report.tables import csv_text


@table_form("csv", suffix="csv")
def csv_bytes(columns: dict[str, type], rows: list[list]) -> bytes:
    return csv_text(list(columns), rows).encode()
