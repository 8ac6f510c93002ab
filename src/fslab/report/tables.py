"""The tables every format builds on: a study run's summary (one row per cell and metric, with
all its statistics), its comparisons (one row each: verdict, why, ratio and the interval the
verdict is read from) and its runs (one row per run and metric: long format), their columns typed
for pandas; and the plain CSV and JSON they are written as."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from typing import TYPE_CHECKING

from fslab.model.records import RunMetric, StoredHistogram
from fslab.report.summary import StudySummary
from fslab.statistics.stats import Comparison, Summary

if TYPE_CHECKING:
    from fslab.statistics.explain import Clause, Explanation

STAT_FIELDS = [
    "n",
    "mean",
    "median",
    "stdev",
    "cv",
    "minimum",
    "maximum",
    "ci_low",
    "ci_high",
    "needs_runs",
]  # needs_runs: the interval is not worth reading until then

# The tables for pandas, each column with its type (Parquet keeps it; CSV leaves a missing value empty).
SUMMARY_COLUMNS: dict[str, type] = {
    "study_run": int, "workload": str, "target": str, "metric": str, "unit": str,
    "n": int, "mean": float, "median": float, "stdev": float, "cv": float, "minimum": float, "maximum": float,
    "ci_low": float, "ci_high": float, "needs_runs": int,
    "warnings": str,
}  # fmt: skip
RUN_COLUMNS: dict[str, type] = {  # results.records.RunMetric's fields, in order
    "study_run": int, "run_id": int, "target": str, "workload": str, "repetition": int, "block": int, "warmup": bool,
    "status": str,
    "phase": str, "metric": str, "value": float, "unit": str,
}  # fmt: skip


# Where a study run ran on kernels (`fslab run --kernel`, its settings' "lab"), each table has these
# beside the column naming the target: the kernel the row's runs ran on (its host's: a lab VM's
# release, or this machine's) and whether they ran emulated (TCG: figures of speed that are no
# performance result). Other study runs' tables are as they were.
KERNEL_COLUMNS: dict[str, type] = {"kernel": str, "emulated": bool}


def on_kernels(s: StudySummary) -> bool:
    return bool((s.study_run.get("settings") or {}).get("lab"))


def _with_kernel(columns: dict[str, type], after: str) -> dict[str, type]:
    """`columns` with KERNEL_COLUMNS after the column `after`."""
    names = list(columns)
    at = names.index(after) + 1
    return {n: columns[n] for n in names[:at]} | KERNEL_COLUMNS | {n: columns[n] for n in names[at:]}


def _kernel_cells(rows: list[list], columns: dict[str, type], after: str, kernel_of: list[tuple]) -> list[list]:
    at = list(columns).index(after) + 1
    return [[*row[:at], *kernel, *row[at:]] for row, kernel in zip(rows, kernel_of, strict=True)]


def summary_table(s: StudySummary) -> tuple[dict[str, type], list[list]]:
    """The summary table (summary.csv, `fslab export`'s summary): its columns and rows."""
    rows = summary_rows(s)
    if not on_kernels(s):
        return SUMMARY_COLUMNS, rows
    kernels = [(cell.kernel, cell.emulated) for cell in s.cells for _ in cell.metrics]
    return _with_kernel(SUMMARY_COLUMNS, "target"), _kernel_cells(rows, SUMMARY_COLUMNS, "target", kernels)


def comparison_table(s: StudySummary) -> tuple[dict[str, type], list[list]]:
    """The comparisons table (comparisons.csv, `fslab export`'s comparisons): its columns and
    rows; on kernels, the kernel of the target compared (its baseline's is the same: a comparison
    between kernels is `fslab compare --kernels`'s)."""
    rows = comparison_table_rows(s)
    if not on_kernels(s):
        return COMPARISON_COLUMNS, rows
    cells = {(c.workload, c.target): (c.kernel, c.emulated) for c in s.cells}
    kernels = [cells.get((r.workload, r.target), (None, None)) for r in [*s.analysis.rows, *s.analysis.between]]
    return _with_kernel(COMPARISON_COLUMNS, "baseline"), _kernel_cells(rows, COMPARISON_COLUMNS, "baseline", kernels)


def run_table(s: StudySummary, stored: list[RunMetric]) -> tuple[dict[str, type], list[list]]:
    """The runs table (runs.csv, `fslab export`'s runs) of `stored` (ResultsDB.run_metrics): its
    columns and rows; on kernels, each run's kernel is its host's."""
    rows = run_rows(stored)
    if not on_kernels(s):
        return RUN_COLUMNS, rows
    facts = {h.name: (h.kernel, h.emulated) for h in s.host_facts}
    host_of = {r["id"]: r.get("host") for r in s.runs}
    kernels = [facts.get(host_of.get(m.run_id) or "", (None, None)) for m in stored]
    return _with_kernel(RUN_COLUMNS, "target"), _kernel_cells(rows, RUN_COLUMNS, "target", kernels)


def published(figure: Summary | Comparison) -> dict:
    """A figure's fields as every output prints them: its interval only where the tables print
    it (stats.printed_interval; needs_runs says when it will be), else none."""
    # Its fields are numbers, text and a tuple of text: read, never changed: no copy (asdict's deep
    # copy took a 2,000-run summary.json 0.02 s).
    fields = vars(figure)
    return fields if figure.interval is not None else fields | {"ci_low": None, "ci_high": None}


# comparisons.csv and `fslab export`'s comparisons table: a row per comparison of the family's shown
# (each target against its baseline, each workload against the one it is paired with), its verdict —
# one of stats.VERDICTS — read from the interval [ci_low, ci_high] at `level` beside it.
COMPARISON_COLUMNS: dict[str, type] = {
    "study_run": int, "workload": str, "baseline_workload": str, "target": str, "baseline": str, "metric": str,
    "verdict": str, "reason": str, "ratio": float, "ci_low": float, "ci_high": float, "level": float,
    "threshold": float, "higher_is_better": bool, "n_baseline": int, "n_other": int, "paired_blocks": int,
    "p_value": float, "p_adjusted": float, "mann_whitney_p": float,
}  # fmt: skip


def comparison_record(c: Comparison) -> dict:
    """A comparison as the files give it: its verdict (one of stats.VERDICTS) and why, the ratio,
    the interval the verdict is read from as [low, high] (None: no interval) at its `level`, then
    every other field; a number that is not finite (a ratio to a value of 0) as None (JSON's null)."""
    own = {f.name: getattr(c, f.name) for f in dataclasses.fields(c)}  # its fields, not what it worked out (vars)
    found = {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in own.items()}
    if found["withheld"] is None:  # said only of a comparison that may not be made (stats.withhold)
        del found["withheld"]
    interval = None if c.interval is None else [c.interval[0], c.interval[1]]
    return {"verdict": c.verdict, "reason": c.reason, "ratio": found["ratio"], "interval": interval} | found


def explanation_record(e: Explanation | None) -> dict | None:
    """A decided verdict's explanation as the files give it (None beside any other verdict): its
    sentence, and each clause that fired, most telling first — the rule, the metric it read, its
    words, the decided difference (a ratio, or for a share a difference of means in its own
    unit ÷ the rule's) with the interval it was decided from, and the strength it is ranked by."""
    if e is None:
        return None
    return {
        "sentence": e.sentence,
        "clauses": [
            {
                "rule": c.rule,
                "metric": c.key,
                "says": c.says,
                "scale": c.scale,
                "value": c.difference if c.difference is not None else c.comparison.ratio,
                "interval": None if c.comparison.interval is None else _scaled(c, c.comparison.interval),
                "level": c.comparison.level,
                "strength": c.strength,
            }
            for c in e.clauses
        ],
        "rules_measured": e.measured,
    }


def _scaled(c: Clause, interval: tuple[float, float]) -> list[float]:
    """A clause's interval as its value is given: a DIFFERENCE rule's back from exp(·) to a difference."""
    return [math.log(x) for x in interval] if c.difference is not None else list(interval)


def comparison_table_rows(s: StudySummary) -> list[list]:
    """Every comparison a summary shows, one row each (COMPARISON_COLUMNS): the six columns that
    name it, then its record's (comparison_record) fields of the same names."""
    return [
        [
            s.study_run["id"],
            r.workload,
            r.baseline_workload or "",
            r.target,
            r.baseline,
            r.metric,
            *(record[f] for f in list(COMPARISON_COLUMNS)[6:]),
        ]  # fmt: skip
        for r in [*s.analysis.rows, *s.analysis.between]
        for record in (comparison_record(r.comparison),)
    ]


def summary_rows(s: StudySummary) -> list[list]:
    """Every metric of every cell, one row each, with all its statistics (SUMMARY_COLUMNS)."""
    return [
        [
            s.study_run["id"],
            cell.workload,
            cell.target,
            name,
            s.metric_units[name],
            *[fields[f] for f in STAT_FIELDS],
            "; ".join([*stats.warnings, *cell.notes]),
        ]
        for cell in s.cells
        for name, stats in cell.metrics.items()
        for fields in (published(stats),)
    ]


# `fslab export`'s histograms table (`--trace block`): a row per bucket of each run's histograms,
# [bucket_low, bucket_high) in the kind's unit (request_bytes: bytes; device_time_ns: ns;
# queue_depth: requests in flight, count = samples).
HISTOGRAM_COLUMNS: dict[str, type] = {
    "study_run": int, "run_id": int, "target": str, "workload": str, "repetition": int, "phase": str,
    "device": str, "direction": str, "kind": str, "bucket_low": float, "bucket_high": float, "count": int,
}  # fmt: skip


def histogram_rows(study_run: int, stored: list[StoredHistogram]) -> list[list]:
    """Every bucket of every stored histogram, one row each (HISTOGRAM_COLUMNS)."""
    return [
        [study_run, h.run_id, h.target, h.workload, h.repetition, h.phase, h.device, h.direction, h.kind, lo, hi, n]
        for h in stored
        for lo, hi, n in h.buckets
    ]


def run_rows(stored: list[RunMetric]) -> list[list]:
    """Every run, failed runs and warm-ups too, one row per metric (RUN_COLUMNS): long format."""
    return [list(m) for m in stored]


def csv_text(columns: list[str], rows: list[list]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    writer.writerows(rows)
    return buffer.getvalue()


def study_run_record(s: StudySummary) -> dict:
    return plain({k: v for k, v in s.study_run.items() if k != "study_source"})


def plain(record: dict) -> dict:
    """A stored record fit for JSON: times as ISO 8601."""
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in record.items()}


def json_text(document: dict) -> str:
    """A JSON document with each of its keys, and each element of its lists, on a line of its
    own: readable line by line, and written by json's C encoder (an indented document is written
    by its pure-Python one: seconds for a few thousand runs)."""
    return json_opening(document) + "\n}\n"


def json_opening(document: dict) -> str:
    """json_text's document but its closing brace: a document's first keys open it as they open any
    document beginning with them."""

    def value(v: object) -> str:
        if isinstance(v, list) and v:
            return "[" + ",".join("\n  " + json.dumps(item, default=str) for item in v) + "\n]"
        return json.dumps(v, default=str)

    return "{" + ",".join(f"\n{json.dumps(key)}: {value(v)}" for key, v in document.items())
