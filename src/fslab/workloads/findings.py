"""A judgement on one run's output, made by the tool's module from its own numbers (pure)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """One judgement on a run: `implausible` ones mean its figures cannot be reported as plain
    results (they are flagged on the cell); the others are notes a reader needs."""

    kind: str
    says: str
    implausible: bool
