"""Where results live: the database (db.py), its schema and migrations (schema.py), the records
it stores (records.py) and which database --db names (location.py)."""

from fslab.results.db import ResultsDB
from fslab.results.location import reports_dir, resolve_location
from fslab.results.records import RunRecord

__all__ = ["ResultsDB", "RunRecord", "reports_dir", "resolve_location"]
