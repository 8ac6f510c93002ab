"""Where results live: the database (db.py), its schema and migrations (schema.py), the records
it stores (records.py) and which database --db names (location.py).

Importing the package loads neither SQLAlchemy nor the records: a command that opens no database
(fslab --help, cleanup, doctor) still names where one is (location.py). ResultsDB and RunRecord
load their modules when first asked for."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from fslab.results.location import reports_dir, resolve_location

if TYPE_CHECKING:
    from fslab.model.records import RunRecord
    from fslab.results.db import ResultsDB

__all__ = ["ResultsDB", "RunRecord", "reports_dir", "resolve_location"]
_LOADED_WHEN_ASKED = {"ResultsDB": "fslab.results.db", "RunRecord": "fslab.model.records"}


def __getattr__(name: str) -> Any:
    if name in _LOADED_WHEN_ASKED:
        return getattr(importlib.import_module(_LOADED_WHEN_ASKED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
