"""A judgement on one run, made by its workload kind from the tool's own numbers or by a monitor
from what it measured (pure): stored with the run (runs.notes) and shown on its cell."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """One judgement on a run: `implausible` ones mean its figures cannot be reported as plain
    results (they are flagged on the cell); the others are notes a reader needs. A `caveat` (a few
    words: "fsync did not reach the device") goes with the cell's figures wherever a report judges
    them — its rankings, comparisons, conclusions and charts —, not in its notes alone."""

    kind: str
    says: str
    implausible: bool
    caveat: str = ""


# Kinds a report treats apart from a cell's other notes:
DISTURBED = "disturbed"  # something else ran beside the run (monitors/pressure.py): counted in the summary
NOT_MEASURABLE = "not_measurable"  # a figure this machine cannot give, and why: said once per study run, not per cell
