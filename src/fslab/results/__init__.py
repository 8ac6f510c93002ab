"""Where results live: the database schema, writes and queries."""

from fslab.results.db import ResultsDB, RunRecord, reports_dir, resolve_location

__all__ = ["ResultsDB", "RunRecord", "reports_dir", "resolve_location"]
