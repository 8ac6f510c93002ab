"""The summary of a study run: per workload, targets as rows, recomputed from the stored samples.

One model (`StudySummary`) feeds every format: the console table, Markdown, CSV and JSON.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fslab.results import ResultsDB
from fslab.stats import Summary, summarize
from fslab.units import format_size
from fslab.workloads.fio import PERCENTILES

DIRECTIONS = ("read", "write")


@dataclass
class CellSummary:
    workload: str
    target: str
    failed: int
    metrics: dict[str, Summary]  # metric name → statistics over the cell's successful runs
    units: dict[str, str]

    def directions(self) -> list[str]:
        return [d for d in DIRECTIONS if f"{d}_iops" in self.metrics]


@dataclass
class StudySummary:
    study_run: dict
    targets: list[dict]
    workloads: list[str]
    cells: list[CellSummary]
    failures: list[dict] = field(default_factory=list)  # target, workload, repetition, error
    effective_mount_options: dict[str, str] = field(default_factory=dict)
    buffered: set[str] = field(default_factory=set)  # workloads run through the page cache

    def cells_of(self, workload: str) -> list[CellSummary]:
        return [c for c in self.cells if c.workload == workload]


def summarize_study_run(db: ResultsDB, study_run_id: int) -> StudySummary:
    study_run = db.study_run(study_run_id)
    targets = db.targets(study_run_id)
    runs = db.runs(study_run_id)
    values: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    units: dict[str, str] = {}
    for sample in db.samples(study_run_id):
        values[(sample["workload"], sample["target"])][sample["name"]].append(sample["value"])
        units[sample["name"]] = sample["unit"]
    workloads = [w["name"] for w in db.workloads(study_run_id)]
    failed = Counter((r["workload"], r["target"]) for r in runs if r["status"] != "ok")
    cells = [
        CellSummary(w, t["name"], failed[(w, t["name"])], {m: summarize(v) for m, v in values[(w, t["name"])].items()}, units)
        for w in workloads
        for t in targets
        if (w, t["name"]) in values or failed[(w, t["name"])]
    ]
    mounts: dict[str, Counter] = defaultdict(Counter)
    for r in runs:
        if r["mount_options_effective"]:
            mounts[r["target"]][r["mount_options_effective"]] += 1
    return StudySummary(
        study_run=study_run,
        targets=targets,
        workloads=workloads,
        cells=cells,
        failures=[{k: r[k] for k in ("target", "workload", "repetition", "error")} for r in runs if r["status"] != "ok"],
        effective_mount_options={t: " | ".join(c) for t, c in mounts.items()},
        buffered={r["workload"] for r in runs if r["buffered"]},
    )


# --- number formatting ----------------------------------------------------------------------


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "–"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def fmt_latency(us: float | None) -> str:
    if us is None:
        return "–"
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} µs"


def fmt_mean_ci(s: Summary | None) -> str:
    """The mean and its 95 % interval's half-width relative to it: "56,123 ± 1.2%"."""
    if s is None:
        return "–"
    if s.ci_half_width is None or not s.mean:
        return fmt(s.mean)
    return f"{fmt(s.mean)} ± {s.ci_half_width / abs(s.mean) * 100:.1f}%"


def fmt_cv(s: Summary | None) -> str:
    return "–" if s is None or s.cv is None else f"{s.cv * 100:.1f}%"


# --- table rows, shared by the console and Markdown -----------------------------------------

COLUMNS = ["target", "dir", "n", "IOPS median", "IOPS mean ± 95% CI", "IOPS CV", "MB/s median", "MB/s mean ± 95% CI", "MB/s CV"] + [
    f"lat {p.replace('_', '.')}" for p in PERCENTILES
]


def table_rows(cell: CellSummary) -> list[list[str]]:
    rows = []
    for d in cell.directions():
        iops, mb = cell.metrics.get(f"{d}_iops"), cell.metrics.get(f"{d}_mb_s")
        latencies = [fmt_latency(cell.metrics[f"{d}_lat_{p}_us"].median) if f"{d}_lat_{p}_us" in cell.metrics else "–" for p in PERCENTILES]
        n = f"{iops.n}" + (f" ({cell.failed} failed)" if cell.failed else "")
        rows.append([cell.target, d, n, fmt(iops.median), fmt_mean_ci(iops), fmt_cv(iops), fmt(mb.median), fmt_mean_ci(mb), fmt_cv(mb), *latencies])
    if not rows:
        rows.append([cell.target, "–", f"0 ({cell.failed} failed)", *["–"] * (len(COLUMNS) - 3)])
    return rows


def header_lines(s: StudySummary) -> list[str]:
    sr, env = s.study_run, s.study_run["environment"]
    tools = env.get("tools", {})
    images = env.get("image_directory", {})
    return [
        f"Study **{sr['study']}**, study run {sr['id']} ({sr['status']}), started {sr['started_at']:%Y-%m-%d %H:%M:%S} UTC, "
        f"{sr['repetitions']} runs per cell in interleaved blocks (order seed {sr['plan_seed']}), scale {sr['scale']:g}.",
        f"Machine: {env.get('distribution')}, kernel {env.get('kernel')}, {env.get('cpu_model')} × {env.get('cpu_count')}, "
        f"{format_size(env.get('memory_bytes', 0))} memory; {tools.get('fio')}; loop images on {images.get('fstype')} ({images.get('source')}).",
        "Latency is fio's completion latency (clat), the median over runs of each run's percentile. "
        "mean ± x% is the mean with the half-width of its 95 % Student-t interval; CV is stdev/mean over runs.",
    ]


def to_markdown(s: StudySummary) -> str:
    out = [f"# {s.study_run['study']} — study run {s.study_run['id']}", "", *[line + "  " for line in header_lines(s)], ""]
    out += ["## Targets", "", "| target | filesystem | mkfs options | mount options (requested) | mount options (effective) | tool |", "|---|---|---|---|---|---|"]
    for t in s.targets:
        spec = t["spec"]
        out.append(
            f"| {t['name']} | {t['filesystem']} | {' '.join(spec['mkfs_options']) or '–'} | {spec['mount_options'] or 'defaults'} "
            f"| {s.effective_mount_options.get(t['name'], '–')} | {t['tool_version'] or '–'} |"
        )
    for workload in s.workloads:
        io_mode = "buffered I/O" if workload in s.buffered else "direct I/O"
        out += ["", f"## {workload} ({io_mode})", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        out += ["| " + " | ".join(row) + " |" for cell in s.cells_of(workload) for row in table_rows(cell)]
    if s.failures:
        out += ["", "## Failed runs", "", "| target | workload | repetition | error |", "|---|---|---|---|"]
        out += [f"| {f['target']} | {f['workload']} | {f['repetition']} | {(f['error'] or '').replace('|', '/')} |" for f in s.failures]
    return "\n".join(out) + "\n"


STAT_FIELDS = ["n", "mean", "median", "stdev", "cv", "minimum", "maximum", "ci_low", "ci_high"]


def to_csv(s: StudySummary) -> str:
    """Every metric of every cell, one row each, with all its statistics."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["study_run", "workload", "target", "metric", "unit", *STAT_FIELDS])
    for cell in s.cells:
        for name, stats in cell.metrics.items():
            writer.writerow([s.study_run["id"], cell.workload, cell.target, name, cell.units[name], *[getattr(stats, f) for f in STAT_FIELDS]])
    return buffer.getvalue()


def to_json(s: StudySummary) -> str:
    sr = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in s.study_run.items() if k != "study_source"}
    document = {
        "study_run": sr,
        "targets": s.targets,
        "cells": [
            {"workload": c.workload, "target": c.target, "failed_runs": c.failed, "metrics": {m: {"unit": c.units[m], **asdict(v)} for m, v in c.metrics.items()}}
            for c in s.cells
        ],
        "failures": s.failures,
    }
    return json.dumps(document, indent=2, default=str)


def write_reports(s: StudySummary, directory: Path) -> list[Path]:
    """summary.md, summary.csv and summary.json in a folder named after the study run."""
    folder = directory / f"{s.study_run['study']}-{s.study_run['id']}"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in (("summary.md", to_markdown(s)), ("summary.csv", to_csv(s)), ("summary.json", to_json(s))):
        (folder / name).write_text(text)
        written.append(folder / name)
    return written
