"""`fslab export --format parquet`: each table as Parquet, its columns typed, through pyarrow: an
optional extra (`pip install 'fslab[parquet]'`), imported only when asked for."""

from __future__ import annotations

from fslab.core.errors import FslabError
from fslab.report.formats import TABLE_FORMS, TableForm


class MissingExtra(FslabError):
    """An optional Python package the command needs is not installed."""


def parquet_bytes(columns: dict[str, type], rows: list[list]) -> bytes:
    """A Parquet file of `rows`, each column typed as `columns` says (a missing value: null)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtra(
            "Parquet needs pyarrow, which is not installed: pip install "
            "'fslab[parquet]' (or pyarrow), or export CSV (--format csv)"
        ) from None
    types: dict[type, pa.DataType] = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}
    schema = pa.schema([(name, types[kind]) for name, kind in columns.items()])
    table = pa.Table.from_pylist([dict(zip(columns, row)) for row in rows], schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


TABLE_FORMS.add(TableForm("parquet", suffix="parquet", encode=parquet_bytes), own=True)
