"""summary.json: the whole summary — every cell's statistics, every comparison and ranking, what
was skipped, flagged and failed — for programs."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fslab.report.formats import REPORT_FILES, ReportFile, Source, made_of_current
from fslab.report.summary import StudySummary
from fslab.report.tables import comparison_record, explanation_record, json_text, published, study_run_record
from fslab.statistics.raw_reference import Ceiling
from fslab.statistics.stats import VERDICTS
from fslab.statistics.timing import EMULATED


def summary_json(source: Source) -> str:
    return to_json(source.summary)


def to_json(s: StudySummary) -> str:
    document: dict[str, Any] = {
        "study_run": study_run_record(s),
        "targets": s.targets,
        "cells": [
            {
                "workload": c.workload,
                "target": c.target,
                "failed_runs": c.failed,
                "metrics": {m: {"unit": s.metric_units[m], **published(v)} for m, v in c.metrics.items()},
            }
            | ({"notes": c.notes, "implausible": c.implausible} if c.notes else {})
            | ({"caveats": c.caveats} if c.caveats else {})
            | ({"withheld": c.withheld} if c.withheld else {})
            | ({"above_ceiling": c.above_ceiling} if c.above_ceiling else {})
            | ({"kernel": c.kernel} if c.kernel else {})
            | ({"emulated": True, "label": EMULATED} if c.emulated else {})
            for c in s.cells
        ],
        "comparisons": [
            {
                "workload": r.workload,
                "target": r.target,
                "baseline": r.baseline,
                "metric": r.metric,
                **comparison_record(r.comparison),
                "explanation": explanation_record(r.explanation),
            }
            for r in s.analysis.rows
        ],
        "rankings": [
            {
                "workload": w,
                "metric": m,
                **({"host": host} if host is not None else {}),
                "order": r.order,
                "tiers": r.tiers,
                "letters": r.letters,
            }
            for (w, m, host), r in s.analysis.rankings.items()
        ],
        **(
            {
                "unranked": [
                    {"workload": w, "metric": m, **({"host": host} if host is not None else {}), "why": why}
                    for (w, m, host), why in s.analysis.unranked.items()
                ]
            }
            if s.analysis.unranked
            else {}
        ),
        "family": {
            "corrected": "Benjamini–Hochberg adjusted p; intervals at the false coverage rate (Benjamini–Yekutieli)",
            "comparisons": s.analysis.family_size,
            "level": s.analysis.level,
            "of": "every pair of targets per workload and compared metric",
            "verdicts": list(VERDICTS),
        },
        "threshold": s.analysis.threshold,
        "bandwidth_unit": s.units.value,
        "skipped": [asdict(u) for u in s.skipped],
        "cached_reference": [asdict(c) for c in s.cached_reference],
        "ceiling": [ceiling_record(c, s.metric_units) for c in s.ceilings],
        "failures": [asdict(f) for f in s.failures],
    }
    if s.disturbed or s.redone:  # monitors/pressure.py's rule; absent where no run was disturbed
        document["disturbed"] = {"runs": s.disturbed, "redone": s.redone}
    if s.not_measurable:
        document["not_measurable"] = s.not_measurable
    if lab := (s.study_run.get("settings") or {}).get("lab"):  # a study run over kernels (lab/study.py)
        document["kernels"] = {
            "boots_asked": lab.get("boots"),
            "failed": lab.get("failed", []),
            "boot_spreads": [asdict(b) for b in s.boot_spreads],
        }
    if s.analysis.between:  # each workload against the one it is paired with (compare_with), per target; in the family
        document["family"]["of"] += ", and each workload paired with another (compare_with) per target and metric"
        document["workload_comparisons"] = [
            {"workload": r.workload, "baseline_workload": r.baseline_workload, "target": r.target, "metric": r.metric}
            | comparison_record(r.comparison)
            | {"explanation": explanation_record(r.explanation)}
            for r in s.analysis.between
        ]
    return json_text(document)


def ceiling_record(c: Ceiling, units: dict[str, str]) -> dict:
    """A workload's ceiling: the bare device's mean with its 95 % interval (none from too few
    runs), its unit and where it was measured (source: "raw target" or "raw reference"); or why none."""
    if c.figure is None:
        return {"workload": c.workload, "source": None, "why": c.why}
    figure = published(c.figure)
    interval = None if figure["ci_low"] is None else [figure["ci_low"], figure["ci_high"]]
    return {
        "workload": c.workload,
        "metric": c.metric,
        "value": c.figure.mean,
        "unit": units.get(c.metric or "", ""),
        "interval": interval,
        "n": c.figure.n,
        "source": c.source,
        "target": c.target,
    }


REPORT_FILES.add(
    ReportFile("summary.json", order=30, render=summary_json, current=made_of_current, made_of=True), own=True
)
