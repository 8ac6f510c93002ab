"""The summary of a study run: per workload, targets as rows, and what the comparisons say,
recomputed from the stored samples every time.

One model (`StudySummary`) feeds every format: the console (console.py) and the files
(files.py: Markdown, CSV, JSON). The row builders here are shared by all of them.
"""

from __future__ import annotations

import math
import statistics
import tomllib
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from fslab.analysis import Analysis, Row, analyse, ranking_line, resolution_of
from fslab.checks import Unsupported, by_target
from fslab.filesystems import FILESYSTEMS
from fslab.filesystems.base import Filesystem
from fslab.importer import imported_from
from fslab.guard.fio_jobs import preallocates, stored_preallocation
from fslab.model import PHASE_SEPARATOR, qualified, unqualified
from fslab.monitors import METRICS as MONITOR_METRICS
from fslab.monitors.space import COMPRESSED_FROM
from fslab.raw_reference import BeyondRaw, CachedReference, beyond_raw, cached_references, raw_references
from fslab.results import ResultsDB
from fslab.results.db import SampleGroups
from fslab.stats import RUNS_NEEDED_LIMIT, Summary, summarize
from fslab.units import Bandwidth, format_size
from fslab.workloads.fio import DIRECTIONS, METRICS as FIO_METRICS, PERCENTILES


@dataclass
class CellSummary:
    workload: str
    target: str
    failed: int
    metrics: dict[str, Summary]  # metric name → statistics over the cell's successful runs
    primary: list[str] = field(default_factory=list)  # its primary metrics (stored with them), in name order
    notes: list[str] = field(default_factory=list)  # what was found of its runs (runs.notes), each once with how often
    implausible: bool = False  # a run's figures cannot be real: the cell is flagged, never a plain result

    def directions(self) -> list[str]:
        """The fio directions it has (a row each in fio's table)."""
        return [d for d in DIRECTIONS if f"{d}_iops" in self.metrics]


@dataclass(frozen=True)
class FailedRun:
    target: str
    workload: str
    repetition: int
    phase: str  # "" for a run stored before schema version 3
    error: str


@dataclass
class StudySummary:
    study_run: dict
    targets: list[dict]
    workloads: list[str]
    cells: list[CellSummary]
    analysis: Analysis
    failures: list[FailedRun] = field(default_factory=list)
    warmups: int = 0  # warm-up runs stored and left out of the statistics
    effective_mount_options: dict[str, str] = field(default_factory=dict)
    not_in_effect: dict[str, list[str]] = field(default_factory=dict)  # target → options asked for, not applied
    buffered: set[str] = field(default_factory=set)  # workloads run through the page cache
    data: dict[str, str] = field(default_factory=dict)  # workload → the data pattern its runs recorded
    preallocation: dict[str, str] = field(default_factory=dict)  # workload → fio's fallocate its jobs ran with (fio_jobs.preallocation)
    memory_limits: dict[str, int] = field(default_factory=dict)  # workload → the memory limit its runs recorded
    units: Bandwidth = Bandwidth.MB  # bandwidth as shown in the tables
    samples: SampleGroups = field(default_factory=lambda: SampleGroups({}, {}, {}))  # the stored samples the statistics are of
    skipped: list[Unsupported] = field(default_factory=list)  # targets --skip-unsupported left out, and why
    cached_reference: list[CachedReference] = field(default_factory=list)  # raw figures no disk could produce
    runs: list[dict] = field(default_factory=list)  # every run, failed and warm-up too, with what the summary reads of it (RUN_FACTS)

    def cells_of(self, workload: str) -> list[CellSummary]:
        return [c for c in self.cells if c.workload == workload]

    def judged_cells_of(self, workload: str) -> list[CellSummary]:
        """A workload's cells whose figures may be judged: those of a flagged cell (`implausible`)
        are in its table, marked, and in no comparison, ranking, conclusion or chart."""
        return [c for c in self.cells_of(workload) if not c.implausible]

    @property
    def flagged(self) -> set[tuple[str, str]]:
        """(workload, target) of every flagged cell: judged nowhere, `fslab compare` too."""
        return {(c.workload, c.target) for c in self.cells if c.implausible}

    def left_out(self, workload: str) -> list[str]:
        """The targets whose cell of a workload is flagged, and so left out of every judgement."""
        return [c.target for c in self.cells_of(workload) if c.implausible]

    @property
    def metric_units(self) -> dict[str, str]:
        """Metric key → its unit, as stored (the same in every cell)."""
        return self.samples.units


# What a summary reads of each run; the runs files and the page read all of it (ResultsDB.runs).
RUN_FACTS = (
    "id", "target", "workload", "repetition", "warmup", "status", "error", "failure", "notes",
    "data_pattern", "mount_options_effective", "fs_details", "buffered", "memory_limit",
)


def summarize_study_run(
    db: ResultsDB, study_run_id: int, *, baseline: str | None = None, threshold: float = 0.03, precision: float | None = None, units: Bandwidth | None = None
) -> StudySummary:
    """`units` (default: the study file's, else MB/s) is the bandwidth shown."""
    study_run = db.study_run(study_run_id)
    chosen = tomllib.loads(study_run["study_source"]).get("study", {})
    skipped = by_target(Unsupported(**u) for u in (study_run.get("settings") or {}).get("skipped", []))  # older study runs stored one per reason
    targets = db.targets(study_run_id)
    runs = db.runs(study_run_id, RUN_FACTS)
    groups = db.sample_groups(study_run_id)
    stored_workloads = db.workloads(study_run_id)
    workloads = [w["name"] for w in stored_workloads]
    failures = [FailedRun(r["target"], r["workload"], r["repetition"], (r["failure"] or {}).get("phase", ""), r["error"] or "") for r in runs if r["status"] != "ok"]
    failed = Counter((f.workload, f.target) for f in failures)
    found = _run_notes(runs)
    data = {r["workload"]: r["data_pattern"] for r in runs if r["data_pattern"]}
    preallocation = {w["name"]: recorded for w in stored_workloads if (recorded := stored_preallocation(w["spec"]))}
    flattered = _flattered(targets, runs, groups.values, preallocation)
    above = beyond_raw(groups.values, raw_references(targets), roles=groups.roles, higher_is_better=groups.higher_is_better)
    cells = [
        CellSummary(
            w, t["name"], failed[key], _cell_statistics(groups.values.get(key, {}), groups.higher_is_better, above.get(key, {}), lambda metric, w=w: resolution_of(groups.kinds, w, metric)),
            groups.roles.primary_in(w, groups.values.get(key, {})),
            [*found.get(key, ([], False))[0], *flattered.get(key, [])], found.get(key, ([], False))[1],
        )
        for w in workloads
        for t in targets
        if (key := (w, t["name"])) in groups.values or failed[key]
    ]
    mounts: dict[str, Counter] = defaultdict(Counter)
    not_in_effect: dict[str, set[str]] = defaultdict(set)
    specs = {t["name"]: t for t in targets}
    read_back = Counter((r["target"], r["mount_options_effective"], r["fs_details"] or "") for r in runs)  # the same for most runs of a target
    for (target, effective, details), count in read_back.items():
        if effective:
            mounts[target][effective] += count
        not_in_effect[target].update(_not_in_effect(specs[target], effective, details))
    flagged = {(c.workload, c.target) for c in cells if c.implausible}
    analysis = analyse(
        {key: metrics for key, metrics in groups.values.items() if key not in flagged}, groups.higher_is_better, [t["name"] for t in targets], workloads,
        baselines=stored_baselines(targets, chosen.get("baseline")), baseline=baseline, threshold=threshold, precision=precision, roles=groups.roles, kinds=groups.kinds,
    )
    return StudySummary(
        study_run=study_run,
        targets=targets,
        workloads=workloads,
        cells=cells,
        analysis=analysis,
        failures=failures,
        warmups=sum(1 for r in runs if r["warmup"]),
        effective_mount_options={t: " | ".join(c) for t, c in mounts.items()},
        not_in_effect={t: sorted(o) for t, o in not_in_effect.items() if o},
        buffered={r["workload"] for r in runs if r["buffered"]},
        data=data,
        preallocation=preallocation,
        memory_limits={r["workload"]: r["memory_limit"] for r in runs if r.get("memory_limit")},
        units=units or Bandwidth(chosen.get("units", Bandwidth.MB.value)),
        samples=groups,
        skipped=skipped,
        cached_reference=cached_references(groups.values, targets, {w["name"]: w["spec"].get("fio_options") or {} for w in stored_workloads}),
        runs=runs,
    )


def flagged_cells(db: ResultsDB, study_run_id: int) -> set[tuple[str, str]]:
    """(workload, target) of every cell of a study run a run's figures of which cannot be real:
    judged nowhere, as its summary judges them (`fslab compare` too)."""
    return {cell for cell, (_, implausible) in _run_notes(db.runs(study_run_id, RUN_FACTS)).items() if implausible}


def _run_notes(runs: list[dict]) -> dict[tuple[str, str], tuple[list[str], bool]]:
    """(workload, target) → what was found of its measured runs, each kind of finding once (as
    its first run said it) with how many runs it was found in, the implausible first; and
    whether any was implausible."""
    found: dict[tuple[str, str], dict[tuple[bool, str], list[str]]] = defaultdict(dict)
    totals: Counter = Counter()
    for r in runs:
        if r["status"] == "ok" and not r["warmup"]:
            cell = (r["workload"], r["target"])
            totals[cell] += 1
            said: dict[tuple[bool, str], str] = {}  # a run's notes of one kind (one per phase) count it once
            for note in r.get("notes") or []:
                said.setdefault((not note["implausible"], note["kind"]), note["says"])
            for kind, says in said.items():
                found[cell].setdefault(kind, []).append(says)
    return {
        cell: (
            [("IMPLAUSIBLE: " if not plausible else "") + f"{said[0]} ({len(said)} of {totals[cell]} runs)" for (plausible, _), said in sorted(notes.items())],
            any(not plausible for plausible, _ in notes),
        )
        for cell, notes in found.items()
    }


def _flattered(targets: list[dict], runs: list[dict], values: dict[tuple[str, str], dict[str, list[float]]], preallocation: dict[str, str]) -> dict[tuple[str, str], list[str]]:
    """(workload, target) → a note where a workload wrote zeros or compressible data to a target
    whose runs read back compression (what was made, not what was asked), saying what the
    compression monitor measured of its runs (the median, in the phase that compressed most): a
    ratio from COMPRESSED_FROM means the figures flatter it; a lower one, that they are those of
    uncompressed data (and why, where its files were preallocated); none, that they may."""
    filesystems = {t["name"]: filesystem_of(t) for t in targets}
    notes = {}
    for r in runs:
        cell = (r["workload"], r["target"])
        if cell in notes or not (r["data_pattern"] or "").startswith(("zeros", "compressible")):
            continue
        if (fs := filesystems[r["target"]]) is None or not fs.compresses(r["mount_options_effective"], r["fs_details"] or ""):
            continue
        wrote = f"it wrote {r['data_pattern'].split(' (')[0]} data to a compressing target"
        ratios = [statistics.median(v) for key, v in values.get(cell, {}).items() if unqualified(key) == "compression_ratio" and v]
        if not ratios:
            notes[cell] = [f"{wrote}, and no compression ratio was measured: the figures may flatter it, as real data would not"]
        elif (ratio := max(ratios)) >= COMPRESSED_FROM:
            notes[cell] = [f"{wrote}, which compressed it {ratio:.2f}×: the figures flatter it, as real data would not"]
        else:
            recorded = preallocation.get(r["workload"], "")
            why = f"its files were preallocated (fio fallocate={recorded}), and preallocated blocks are written in place, uncompressed; " if preallocates(recorded) else ""
            notes[cell] = [f"{wrote}, which stored it uncompressed ({ratio:.2f}×): {why}the figures are those of uncompressed data"]
    return notes


def filesystem_of(target: dict) -> Filesystem | None:
    """A stored target's filesystem, None for an imported one (fslab did not make it: importer.py)."""
    return FILESYSTEMS.get(target["filesystem"])


def stored_baselines(targets: list[dict], study_baseline: str | None) -> dict[str, str]:
    """Target → the target it is compared with, as stored in its spec when the study run began
    (its own name for a target others are compared with; a skipped target's name stays, so its
    comparisons are absent, not made with a substitute: analysis.compared_with). Targets stored
    before baselines were: the study file's baseline, else the first target."""
    names = [t["name"] for t in targets]
    default = study_baseline if study_baseline in names else names[0]
    stored = {t["name"]: t["spec"].get("baseline") for t in targets}
    return {name: default if base is None else base for name, base in stored.items()}


def _cell_statistics(
    metrics: dict[str, list[float]], higher_is_better: dict[str, bool], above_raw: dict[str, BeyondRaw], resolution: Callable[[str], float]
) -> dict[str, Summary]:
    """Each metric's statistics, its interval no narrower than the `resolution` its tool prints
    it to, warned where it is clearly beyond what the raw devices delivered."""
    out = {}
    for metric, values in metrics.items():
        stats = summarize(values, higher_is_better[metric], resolution(metric))
        if metric in above_raw:
            stats = replace(stats, warnings=(*stats.warnings, beyond_raw_note(above_raw[metric])))
        out[metric] = stats
    return out


def beyond_raw_note(found: BeyondRaw) -> str:
    """An observation with its possible causes, never a cause stated as fact."""
    c = found.comparison
    against = "its raw devices" if found.reference is None else f"the most its raw devices delivered in this study ({found.reference})"
    return (
        f"measured {c.ratio:.1f}× (95 % CI {c.ci_low:.1f}–{c.ci_high:.1f}×) {against}: "
        "a cache, compression or a copy-on-write layout may have answered, not the device"
    )


def _not_in_effect(target: dict, effective: str | None, fs_details: str) -> list[str]:
    """What a target asked for that a run's read-back (mount options, the filesystem's own
    description) contradicts: its filesystem's module knows which defaults go unreported and
    which shown option contradicts which."""
    spec = target["spec"]
    fs = filesystem_of(target)
    if fs is None:
        return []
    return fs.not_in_effect(spec["mount_options"], spec.get("properties") or {}, effective, fs_details)


def target_rows(s: StudySummary) -> list[list[str]]:
    """The targets as built: options requested and effective, what was not applied, the tool or engine."""
    rows = []
    for t in s.targets:
        spec, fs = t["spec"], filesystem_of(t)
        if fs is None:  # imported: known by name and by the fio that measured it
            rows.append([t["name"], "–", "–", "–", "–", "–", "–", t["tool_version"] or "–"])
            continue
        asked = fs.requested_options(spec)
        rows.append([
            t["name"], t["filesystem"], " → ".join([str(spec.get("devices", 1)), *spec.get("layers", [])]), " ".join(spec["mkfs_options"]) or "–", asked,
            s.effective_mount_options.get(t["name"], "–"), ", ".join(s.not_in_effect.get(t["name"], [])) or "–", t["tool_version"] or "–",
        ])
    return rows


TARGET_COLUMNS = ["target", "filesystem", "devices → layers", "mkfs options", "requested", "mount options (effective)", "NOT in effect", "tool / engine"]


# --- number formatting ----------------------------------------------------------------------


def fmt(value: float | None, digits: int = 1) -> str:
    """A figure as every table prints it: no decimals from 100 on, else `digits` of them, and
    two significant digits where those would be too few (0.04 s is "0.040", never "0.0")."""
    if value is None:
        return "–"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if 0 < abs(value) < 10**-digits:
        return f"{value:,.{1 - math.floor(math.log10(abs(value)))}f}"
    return f"{value:,.{digits}f}"


def fmt_latency(us: float | None) -> str:
    if us is None:
        return "–"
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} µs"


def runs_text(needed: int) -> str:
    """What a figure from too few runs prints instead of itself (stats.figure_needs)."""
    return f"needs {'≥' if needed >= RUNS_NEEDED_LIMIT else ''}{needed} runs"


def fmt_mean_ci(s: Summary | None) -> str:
    """The mean and its 95 % interval's half-width relative to it: "56,123 ± 1.2%"."""
    if s is None:
        return "–"
    if s.needs_runs is not None:
        return f"{fmt(s.mean)} (interval {runs_text(s.needs_runs)})"
    if s.interval is None or not s.mean:
        return fmt(s.mean)
    return f"{fmt(s.mean)} ± {s.ci_half_width / abs(s.mean) * 100:.1f}%"


def fmt_cv(s: Summary | None) -> str:
    return "–" if s is None or s.cv is None else f"{s.cv * 100:.1f}%"


# --- table rows, shared by the console and Markdown -----------------------------------------

COLUMNS = ["target", "dir", "n", "IOPS median", "IOPS mean ± 95% CI", "IOPS CV", "MB/s median", "MB/s mean ± 95% CI", "MB/s CV"] + [
    f"lat {p.replace('_', '.')}" for p in PERCENTILES
] + ["notes"]


def table_columns(units: Bandwidth, columns: list[str] = COLUMNS) -> list[str]:
    """Columns (fio's table's unless named) with the bandwidth columns titled in the unit shown."""
    return [c.replace("MB/s", units.value) for c in columns]


# A workload whose cells hold no fio direction (a tool reporting elapsed_s, events_per_s, …): a
# row per metric, its primary metrics first.
METRIC_COLUMNS = ["target", "metric", "n", "median", "mean ± 95% CI", "CV", "unit", "notes"]


def workload_table(s: StudySummary, workload: str) -> tuple[list[str], list[list[str]]]:
    """A workload's table, columns and rows: fio's (IOPS, bandwidth, latency per direction), or a
    row per metric where its cells hold no fio direction."""
    cells = s.cells_of(workload)
    if any(c.directions() for c in cells) or not any(c.metrics for c in cells):
        return table_columns(s.units), [row for cell in cells for row in table_rows(cell, s.units)]
    return METRIC_COLUMNS, [row for cell in cells for row in metric_rows(cell, s.metric_units, s.units)]


def shown(metric: str, units: Bandwidth = Bandwidth.MB) -> bool:
    """Whether a row-per-metric table shows a metric: not a monitor's (they have their own table);
    of fio's (a scenario phase's), only what fio's own table shows — IOPS, bandwidth in the unit
    shown, p99 latency; every other metric. The files (CSV, JSON) keep them all."""
    own = unqualified(metric)
    if own in MONITOR_METRICS:
        return False
    return own not in FIO_METRICS or own.partition("_")[2] in ("iops", units.metric, "lat_p99_us")


def metric_rows(cell: CellSummary, metric_units: dict[str, str], units: Bandwidth = Bandwidth.MB) -> list[list[str]]:
    rows = []
    for name in [m for m in [*cell.primary, *sorted(m for m in cell.metrics if m not in cell.primary)] if shown(m, units)]:
        stats = cell.metrics[name]
        rows.append([cell.target, name, runs_count(cell, stats), flagged(cell, fmt(stats.median)), fmt_mean_ci(stats), fmt_cv(stats), metric_units.get(name, ""), "; ".join([*stats.warnings, *(cell.notes if not rows else [])])])
    return rows or [[cell.target, "–", f"0 ({cell.failed} failed)", *["–"] * (len(METRIC_COLUMNS) - 3)]]


def table_rows(cell: CellSummary, units: Bandwidth = Bandwidth.MB) -> list[list[str]]:
    rows = []
    for d in cell.directions():
        iops, mb = cell.metrics.get(f"{d}_iops"), cell.metrics.get(f"{d}_{units.metric}")
        latencies = [fmt_latency(cell.metrics[f"{d}_lat_{p}_us"].median) if f"{d}_lat_{p}_us" in cell.metrics else "–" for p in PERCENTILES]
        notes = "; ".join([*iops.warnings, *submission_note(cell, d), *(cell.notes if not rows else [])])
        rows.append([cell.target, d, runs_count(cell, iops), flagged(cell, fmt(iops.median)), fmt_mean_ci(iops), fmt_cv(iops), fmt(mb.median), fmt_mean_ci(mb), fmt_cv(mb), *latencies, notes])
    if not rows:
        rows.append([cell.target, "–", f"0 ({cell.failed} failed)", *["–"] * (len(COLUMNS) - 3)])
    return rows


def runs_count(cell: CellSummary, stats: Summary) -> str:
    """A figure's n, with the cell's failed runs beside it: "5", "4 (1 failed)"."""
    return f"{stats.n}" + (f" ({cell.failed} failed)" if cell.failed else "")


# Seed 000's Table IV (Wu & Guo 2026), one row per target, fio workload and direction — IOPS,
# bandwidth, average and P50/P95/P99 total latency — with n and the 95 % intervals it lacked.
# Every figure is the median over the cell's runs (of each run's mean or percentile), as in the
# workload tables; the intervals are of the mean.
OVERVIEW_COLUMNS = ["target", "workload", "dir", "IOPS", "MB/s", "avg latency", "P50", "P95", "P99", "n", "IOPS mean ± 95% CI", "MB/s mean ± 95% CI"]


def overview_table(s: StudySummary) -> tuple[list[str], list[list[str]]] | None:
    """Every fio figure of the study run in Table IV's layout, targets first as the seed orders
    them, workloads in the study's order (a cell whose every run failed: a row saying so); None
    when no workload is fio's."""
    cells = {(c.target, c.workload): c for c in s.cells}
    fio = [w for w in s.workloads if any(c.directions() for c in s.cells_of(w))]
    rows = []
    for target in s.targets:
        for workload in fio:
            cell = cells.get((target["name"], workload))
            if cell is None:
                continue
            if not cell.directions():
                rows.append([cell.target, workload, "–", *["–"] * 6, f"0 ({cell.failed} failed)", "–", "–"])
            for d in cell.directions():
                iops, bandwidth = cell.metrics[f"{d}_iops"], cell.metrics.get(f"{d}_{s.units.metric}")
                latencies = [fmt_latency(_median(cell, f"{d}_lat_{stat}_us")) for stat in ("mean", "p50", "p95", "p99")]
                figures = [flagged(cell, fmt(iops.median)), fmt(_median(cell, f"{d}_{s.units.metric}")), *latencies]
                rows.append([cell.target, workload, d, *figures, runs_count(cell, iops), fmt_mean_ci(iops), fmt_mean_ci(bandwidth)])
    return (table_columns(s.units, OVERVIEW_COLUMNS), rows) if rows else None


def _median(cell: CellSummary, metric: str) -> float | None:
    stats = cell.metrics.get(metric)
    return None if stats is None else stats.median


def is_monitored(key: str) -> bool:
    """Whether a cell's metric is a monitor's (what the run cost), not its workload's."""
    return unqualified(key) in MONITOR_METRICS


# What the monitors measured in a workload's windows (monitors/): a row per cell and measured
# phase, each figure the median over the cell's runs. Only where some cell has them: results
# stored before the runner ran monitors show no such table. The devices' bytes are counted
# through the sync of the filesystem that ends each window, "synced in" how long it took ("–":
# runs stored before, counted to the workload's end).
MONITOR_COLUMNS = ["target", "phase", "CPU busy %", "CPU peak %", "user %", "system %", "iowait %", "device read", "device written", "write ampl.", "synced in", "space used", "compression"]
_MONITOR_FIGURES = [
    ("host_cpu_busy_pct", "pct"), ("host_cpu_busy_peak_pct", "pct"), ("host_cpu_user_pct", "pct"), ("host_cpu_system_pct", "pct"),
    ("host_cpu_iowait_pct", "pct"), ("device_read_bytes", "size"), ("device_written_bytes", "size"), ("write_amplification", "ratio"),
    ("sync_seconds", "seconds"), ("space_used_bytes", "size"), ("compression_ratio", "ratio"),
]  # fmt: skip


def monitor_table(s: StudySummary, workload: str) -> tuple[list[str], list[list[str]]] | None:
    """The monitors' table of a workload, or None when none of its cells has their figures."""
    rows = [row for cell in s.cells_of(workload) for row in monitor_rows(cell)]
    return (MONITOR_COLUMNS, rows) if rows else None


def monitor_rows(cell: CellSummary) -> list[list[str]]:
    phases = dict.fromkeys(key.rpartition(PHASE_SEPARATOR)[0] for key in cell.metrics if is_monitored(key))
    rows = []
    for phase in phases:
        figures = []
        for name, shape in _MONITOR_FIGURES:
            stats = cell.metrics.get(qualified(phase, name))
            figures.append(_monitor_figure(stats.median, shape) if stats else "–")
        rows.append([cell.target, phase or "–", *figures])
    return rows


def _monitor_figure(value: float, shape: str) -> str:
    if shape == "size":
        return format_size(int(value))
    if shape == "seconds":
        return f"{fmt(value, 2)} s"
    return fmt(value) if shape == "pct" else f"{fmt(value, 2)}×"


def flagged(cell: CellSummary, figure: str) -> str:
    """A figure of a cell whose runs reported what cannot be real, marked so it is never read as a plain result."""
    return f"⚠ {figure}" if cell.implausible else figure


def submission_note(cell: CellSummary, direction: str) -> list[str]:
    """A note when submission (slat) is more than half of an I/O's total latency: the I/O is done
    inside its submission (a buffered write, a synchronous filesystem path), so clat alone says
    nearly nothing."""
    slat, total = cell.metrics.get(f"{direction}_slat_mean_us"), cell.metrics.get(f"{direction}_lat_mean_us")
    if slat is None or total is None or not total.mean or slat.mean <= total.mean / 2:
        return []
    return [
        f"{direction}: submission takes {fmt_latency(slat.mean)} of {fmt_latency(total.mean)} per I/O "
        "(slat dominates: the I/O is done while it is submitted; clat alone would understate the wait)"
    ]


def metric_label(metric: str) -> str:
    """"read_iops" → "read IOPS", "write_lat_p99_us" → "write p99 latency", "after.read_iops" →
    "after: read IOPS"; a metric that is not fio's per direction, as named ("elapsed_s")."""
    phase, _, own = metric.rpartition(".")
    direction, _, name = own.partition("_")
    label = f"{direction} " + {"iops": "IOPS", "lat_p99_us": "p99 latency", "mb_s": "MB/s", "mib_s": "MiB/s"}.get(name, name) if direction in DIRECTIONS else own
    return f"{phase}: {label}" if phase else label


def fmt_p(p: float | None) -> str:
    return "–" if p is None else ("<0.0001" if p < 1e-4 else f"{p:.4f}")


COMPARISON_COLUMNS = ["target", "metric", "ratio", "95% CI", "p (BH)", "Mann–Whitney p", "verdict", "detectable"]


def comparison_rows(rows: list[Row]) -> list[list[str]]:
    """Each comparison: ratio to the baseline (for latency, below 1 is faster), interval, verdict.
    An interval from too few runs (stats.figure_needs) is not printed: the runs it needs are."""
    out = []
    for r in rows:
        c = r.comparison
        interval = "–" if c.interval is None else "{:.3f}–{:.3f}".format(*c.interval)
        detectable = "–" if c.detectable_change is None else f"±{c.detectable_change:.1%}"
        if c.needs_runs is not None:
            interval = detectable = runs_text(c.needs_runs)
        out.append([r.target, metric_label(r.metric), f"{c.ratio:.3f}", interval, fmt_p(c.p_adjusted), fmt_p(c.mann_whitney_p), c.verdict, detectable])
    return out


def comparison_groups(rows: list[Row]) -> list[tuple[str, list[Row]]]:
    """A workload's rows grouped by the baseline they are compared with, in the order met."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(r.baseline, []).append(r)
    return list(groups.items())


def workload_title(s: StudySummary, workload: str) -> str:
    """"seq_write (direct I/O; data: random)": how it reached the device and what it wrote, in
    short (the whole record is stored with every run); "files preallocated" where its files
    were, unlike fslab's default (fio.NO_PREALLOCATION)."""
    data, limit, recorded = s.data.get(workload), s.memory_limits.get(workload), s.preallocation.get(workload, "")
    io = ("buffered I/O" if workload in s.buffered else "direct I/O") + (f", memory ≤ {format_size(limit)}" if limit else "")
    parts = [io, *([f"data: {data.split(' (')[0]}"] if data else []), *([f"files preallocated (fio fallocate={recorded})"] if preallocates(recorded) else [])]
    return f"{workload} ({'; '.join(parts)})"


def compare_left_out_line(left_out: Sequence[tuple[str, str]]) -> str | None:
    """What a comparison of two study runs leaves out ((workload, target) flagged in either), and why."""
    if not left_out:
        return None
    cells = "; ".join(f"{target} · {workload}" for workload, target in left_out)
    return f"Left out of the comparison: {cells} — a run's figures cannot be real in either study run (IMPLAUSIBLE in its summary)."


def left_out_line(s: StudySummary, workload: str) -> str | None:
    """What a workload's comparisons, rankings, conclusions and charts leave out, and why."""
    flagged = s.left_out(workload)
    if not flagged:
        return None
    return (
        f"Left out of the comparisons, rankings, conclusions and charts: {', '.join(flagged)} — "
        "its runs reported figures that cannot be real (⚠ and IMPLAUSIBLE in the table), so nothing is judged from them."
    )


def ranking_lines(s: StudySummary, workload: str) -> list[str]:
    lines = [line for line in [left_out_line(s, workload)] if line]
    lines += [f"Ranking by {metric_label(metric)}: {ranking_line(ranking)}" for (w, metric), ranking in s.analysis.rankings.items() if w == workload]
    needed = s.analysis.runs_needed.get(workload)
    if needed is not None:
        lines.append(f"Runs per cell for a ratio within ±{s.analysis.precision:.0%} at 95 %: {needed}")
    return lines


def method_line(s: StudySummary) -> str:
    return (
        "Every pair of targets is compared, per workload and metric: the ratio of geometric means with a 95 % Welch "
        "interval on the log values. A verdict says faster or slower only when the Benjamini–Hochberg-adjusted p is below 0.05 "
        f"and the change exceeds {s.analysis.threshold:.0%}; "
        + (
            f"one family of {s.analysis.family_size} comparison{'s' if s.analysis.family_size != 1 else ''} (all pairs of this study run) "
            "was corrected, and both the tables (each target against its baseline) and the rankings are read from it. "
            if s.analysis.family_size
            else "no pair of this study run could be compared (a comparison needs two cells of at least 2 runs each, neither flagged). "
        )
        + "'detectable' is the smallest change these runs would detect (80 % power); a figure from too few runs says how many it needs. "
        "Ranking: '>' detectably better, '=' not told apart; where that cannot be said exactly, letters: targets sharing one are not told apart."
    )


def repetitions_line(s: StudySummary) -> str:
    settings = s.study_run.get("settings") or {}
    warmup = f", after {s.warmups} warm-up run(s) left out of the statistics" if s.warmups else ""
    if settings.get("target_ci") is None:
        return f"{s.study_run['repetitions']} runs per cell{warmup}."
    outcome = s.study_run.get("outcome") or {}
    short = {cell: o for cell, o in outcome.items() if o["status"] != "converged"}
    line = (
        f"Adaptive: runs added block by block until each cell's 95 % interval was within ±{settings['target_ci']:.1%} "
        f"(at most {settings['max_runs']} runs per cell{', time budget ' + str(settings['time_budget']) + ' s' if settings.get('time_budget') else ''}){warmup}; "
        f"{len(outcome) - len(short)} of {len(outcome)} cells converged."
    )
    if short:
        widths = (f"±{o['half_width']:.1%}" if o["half_width"] is not None else "no interval" for o in short.values())
        line += " Not converged: " + "; ".join(f"{cell} ({width} after {o['runs']} runs, {o['status']})" for (cell, o), width in zip(short.items(), widths)) + "."
    return line


def scale_text(s: StudySummary) -> str:
    """"scale 0.1", or "scale 0.1 (sizes only)" when --scale-sizes-only kept the runtimes."""
    sizes_only = (s.study_run.get("settings") or {}).get("scale_sizes_only")
    return f"scale {s.study_run['scale']:g}" + (" (sizes only)" if sizes_only else "")


def skipped_lines(s: StudySummary) -> list[str]:
    """The targets --skip-unsupported left out, each once with what this machine lacks for it,
    and the targets that were to be compared with it and so are compared with none."""
    if not s.skipped:
        return []
    compared = {r.target for r in s.analysis.rows} | {s.analysis.override}  # with --baseline they are compared all the same
    waiting: dict[str, list[str]] = defaultdict(list)
    for t in s.targets:
        if t["name"] not in compared:
            waiting[t["spec"].get("baseline")].append(t["name"])
    lines = [f"Skipped: {len(s.skipped)} target(s) this machine cannot run (--skip-unsupported):"]
    for u in s.skipped:
        orphans = waiting.get(u.target)
        lines.append(
            f"{u.target}: {u.why}"
            + (
                f" — it is the baseline of {', '.join(orphans)}, so they are compared with none rather than with a substitute "
                "(the rankings still order them; --baseline TARGET compares every target with one that ran)"
                if orphans else ""
            )
        )
    return lines


def header_lines(s: StudySummary) -> list[str]:
    sr, env = s.study_run, s.study_run["environment"]
    tools = env.get("tools", {})
    images = env.get("image_directory", {})
    imported = imported_from(sr)
    if imported:
        lines = [
            (
                f"Study **{sr['study']}**, study run {sr['id']}, **imported from {len(imported['files'])} file(s)** of fio's JSON ({tools.get('fio')}) "
                f"on {imported['at'][:19].replace('T', ' ')} UTC, measured from {sr['started_at']:%Y-%m-%d %H:%M:%S} to {sr['finished_at']:%Y-%m-%d %H:%M:%S} UTC; "
                f"bandwidth in {s.units.describe()}. "
                + ("One run per cell, one per file." if sr["repetitions"] == 1 else f"Up to {sr['repetitions']} runs per cell, one per file, in the order the files came.")
            ),
            "fslab did not run these: it knows each target by name and by fio's output alone (not its machine, filesystem or options); each fio job name is a workload, or one per set of options where its files ran it with different ones (named by those options).",
        ]
    else:
        lines = [
            (
                f"Study **{sr['study']}**, study run {sr['id']} ({sr['status']}), started {sr['started_at']:%Y-%m-%d %H:%M:%S} UTC, "
                f"runs in interleaved blocks (order seed {sr['plan_seed']}), {scale_text(s)}; bandwidth in {s.units.describe()}. {repetitions_line(s)}"
            ),
            (
                f"Machine: {env.get('distribution')}, kernel {env.get('kernel')}, {env.get('cpu_model')} × {env.get('cpu_count')}, "
                f"{format_size(env.get('memory_bytes', 0))} memory; {tools.get('fio')}; loop images on {images.get('fstype')} ({images.get('source')})."
            ),
        ]
    return lines + [
        (
            "Latency is fio's total latency per I/O (submission + completion: slat + clat, what the application waits), "
            "the median over runs of each run's percentile; clat and slat are stored as their own metrics. "
            "mean ± x% is the mean with the half-width of its 95 % Student-t interval; CV is stdev/mean over runs."
        ),
    ] + scaling_lines(s) + cached_reference_lines(s)


def scaling_lines(s: StudySummary) -> list[str]:
    """Said once: what --scale changed in the targets that fslab could not keep as at full size
    (Filesystem.scaled), each change with the targets it concerns."""
    targets_of: dict[str, list[str]] = defaultdict(list)
    for t in s.targets:
        for change in t["spec"].get("scaling_changed") or ():
            targets_of[change].append(t["name"])
    if not targets_of:
        return []
    return [f"**Scaling changed the setup** ({scale_text(s)}): " + "; ".join(f"{', '.join(names)}: {change}" for change, names in targets_of.items()) + "."]


def cached_reference_lines(s: StudySummary) -> list[str]:
    """Said once each: a raw reference no disk could produce means a cache answered; one whose
    sequential writes outrun its reads, that a volatile cache acknowledged its writes."""
    lines = []
    for writes_only, heading, figures in ((False, "The raw reference is cached", "Absolute figures"), (True, "The raw reference's writes are cached", "Absolute write figures")):
        found = [c for c in s.cached_reference if c.writes_only == writes_only]
        if found:
            first, more = found[0], len(found) - 1
            lines.append(
                f"**{heading}**: {first.target} · {first.workload} {first.finding}, and {first.limit}"
                + (f" ({more} more such figure{'s' if more > 1 else ''})" if more else "")
                + f". {figures} here are not disk figures; ratios measured in one study run are."
            )
    return lines


