"""Statistics, above the results: samples in, figures out — intervals and tests (stats.py), what a
study run's samples say (analysis.py), what the raw devices under a target say of its figures
(raw_reference.py), and a study's history across study runs (history.py, history_reading.py)."""
