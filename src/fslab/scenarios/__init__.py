"""Multi-phase scenarios: a workload kind whose phases are fio jobs, dd and sysbench runs (kind.py),
above the kinds it drives; its metrics declared apart (metrics.py), light for reading stored runs."""
