"""What a summary shows, and in which order, decided once: `sections(summary)` walks a study
run's summary into an ordered list of typed sections — a title, a table's columns and rows,
lines of text — that the console (console.py), Markdown (formats/markdown.py) and the page
(html.py) each render in their own way. The rows and lines are built here, from the model (summary.py), each figure
printed as formatting.py says.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from fslab.core.units import Bandwidth, format_size
from fslab.model import FAILED_ALIKE, PHASE_SEPARATOR, qualified, unqualified
from fslab.model.records import imported_from
from fslab.monitors import Figure, figures as monitor_figures, metric_names
from fslab.monitors.page_cache import DIRECT_IO_CAVEAT
from fslab.report.formatting import (
    explanation_tail,
    fmt,
    fmt_cv,
    fmt_interval,
    fmt_latency,
    fmt_mean_ci,
    fmt_p,
    fmt_ratio,
    interval_title,
    metric_label,
    runs_text,
)
from fslab.report.summary import CellSummary, StudySummary
from fslab.report.view import REASON_COLUMN, VERDICT_COLUMN, Section, SectionKind, SummaryView, table_columns
from fslab.statistics.analysis import Row, looks_of, ranking_line
from fslab.statistics.stats import CONFIDENCE, PAIRED_MIN_BLOCKS, RUNS_NEEDED_LIMIT, Summary, level_text
from fslab.statistics.timing import EMULATED, timing_of
from fslab.workloads import metrics_of, report_of
from fslab.workloads.offered import Percentiles

FAILURE_COLUMNS = ["target", "workload", "repetition", "phase", "error"]

OVERVIEW_SAID = (
    "One row per target, fio workload and direction, laid out as Table IV of Wu & Guo (2026; the built-in study "
    "`wu-guo-2026` runs it): IOPS, bandwidth and latencies are medians over the cell's runs (latency: fio's total "
    "latency, each run's mean and percentiles); n counts the runs; the intervals are the 95 % Student-t intervals "
    "of the mean. The tables per workload below add the spread, P99.9 latency, warnings and the comparisons."
)


def summary_view(s: StudySummary, shown: list[Section] | None = None) -> SummaryView:
    """All the console prints of the summary: its sections (`shown`, where the caller has them
    already), its main comparisons at a glance (forest.py), its units, its failed runs counted."""
    from fslab.report.forest import forest_lines, forest_of

    return SummaryView(sections(s) if shown is None else shown, forest_lines(forest_of(s)), s.units, len(s.failures))


def sections(s: StudySummary) -> list[Section]:
    """Everything a summary shows, in order: the introduction, the targets (and those skipped),
    the fio overview, then per workload its table, its monitors', its comparisons (one per
    baseline, its main comparisons first) and its rankings; the failed runs last. A section with nothing to show is left
    out, but a workload's rankings (whose absence a format may mark)."""
    out = [
        Section(SectionKind.INTRO, lines=[*header_lines(s), method_line(s), *kernel_lines(s)]),
        Section(SectionKind.TARGETS, "Targets", TARGET_COLUMNS, target_rows(s)),
    ]
    if skipped := skipped_lines(s):
        out.append(Section(SectionKind.SKIPPED, "Skipped targets", lines=skipped))
    if overview := overview_table(s):
        out.append(Section(SectionKind.OVERVIEW, "fio results", *overview, lines=[OVERVIEW_SAID]))
    for workload in s.workloads:
        out.append(
            Section(SectionKind.WORKLOAD, workload_title(s, workload), *workload_table(s, workload), workload=workload)
        )
        if monitored := monitor_table(s, workload):
            out.append(
                Section(SectionKind.MONITORS, "Measured beside it (monitors, medians)", *monitored, workload=workload)
            )
        caveats = s.caveats_of(workload)
        # the main comparisons (the primary metrics') lead each table: percentiles and CPU after them
        others = [r for r in s.analysis.rows_of(workload) if not s.analysis.is_main(r)]
        for baseline, compared in comparison_groups(s.analysis.main_rows(workload) + others):
            rows = comparison_rows(compared, caveats)
            named = with_caveats(baseline, caveats)
            out.append(
                Section(
                    SectionKind.COMPARISON,
                    "Compared with",
                    comparison_columns(compared),
                    rows,
                    named=named,
                    workload=workload,
                )
            )
        if between := s.analysis.between_of(workload):  # against the workload it is paired with, target by target
            rows, named = comparison_rows(between, caveats), between[0].baseline_workload or ""
            paired = Section(
                SectionKind.COMPARISON, BETWEEN_TITLE, comparison_columns(between), rows, named=named, workload=workload
            )
            out.append(paired)
        out.append(Section(SectionKind.RANKING, lines=ranking_lines(s, workload), workload=workload))
    if s.failures:
        out.append(
            Section(
                SectionKind.FAILURES,
                "Failed runs",
                FAILURE_COLUMNS,
                [[f.target, f.workload, str(f.repetition), f.phase, f.error] for f in s.failures],
            )
        )
    return out


def target_rows(s: StudySummary) -> list[list[str]]:
    """The targets as built: options requested and effective, what was not applied, the tool or engine."""
    rows = []
    for t in s.targets:
        spec = t["spec"]
        if not t["filesystem"]:  # imported: known by name and by the fio that measured it
            rows.append([t["name"], "–", "–", "–", "–", "–", "–", t["tool_version"] or "–"])
            continue
        asked = s.requested_options.get(t["name"], "–")
        rows.append(
            [
                t["name"],
                t["filesystem"],
                " → ".join([str(spec.get("devices", 1)), *spec.get("layers", [])]),
                " ".join(spec["mkfs_options"]) or "–",
                asked,
                s.effective_mount_options.get(t["name"], "–"),
                ", ".join(s.not_in_effect.get(t["name"], [])) or "–",
                t["tool_version"] or "–",
            ]
        )
    return rows


TARGET_COLUMNS = [
    "target",
    "filesystem",
    "devices → layers",
    "mkfs options",
    "requested",
    "mount options (effective)",
    "NOT in effect",
    "tool / engine",
]


# A workload whose cells hold directions (fio's: a row per direction), its latency percentiles
# after these, a column each, as its kind declares them (KindReport.percentiles), then its notes.
DIRECTION_COLUMNS = [
    "target",
    "dir",
    "n",
    "IOPS median",
    "IOPS mean ± 95% CI",
    "IOPS CV",
    "MB/s median",
    "MB/s mean ± 95% CI",
    "MB/s CV",
]


def direction_columns(percentiles: Sequence[Percentiles]) -> list[str]:
    """The columns of a table a row per direction: of its kind's first direction's percentiles."""
    names = next((list(p.metrics) for p in percentiles if p.direction), [])
    return [*DIRECTION_COLUMNS, *(f"lat {name.lower()}" for name in names), "notes"]


def kind_percentiles(s: StudySummary | None, workload: str) -> Sequence[Percentiles]:
    """The latency percentiles the workload's kind declares (one stored without a kind is fio's,
    as one read from a summary alone: `s` None)."""
    hook = report_of(s.samples.kinds.get(workload, "fio") if s else "fio")
    return hook.percentiles if hook else ()


# A workload whose cells hold no fio direction (a tool reporting elapsed_s, events_per_s, …): a
# row per metric, its primary metrics first.
METRIC_COLUMNS = ["target", "metric", "n", "median", "mean ± 95% CI", "CV", "unit", "notes"]


def workload_table(s: StudySummary, workload: str) -> tuple[list[str], list[list[str]]]:
    """A workload's table, columns and rows: fio's (IOPS, bandwidth, latency per direction), or a
    row per metric where its cells hold no fio direction."""
    cells = s.cells_of(workload)
    if any(c.directions() for c in cells) or not any(c.metrics for c in cells):
        percentiles = kind_percentiles(s, workload)
        return table_columns(s.units, direction_columns(percentiles)), [
            row for cell in cells for row in table_rows(cell, s.units, percentiles)
        ]
    return METRIC_COLUMNS, [row for cell in cells for row in metric_rows(cell, s.metric_units, s.units)]


def shown(metric: str, units: Bandwidth = Bandwidth.MB) -> bool:
    """Whether a row-per-metric table shows a metric: not a monitor's (they have their own table);
    of fio's (a scenario phase's), only what fio's own table shows — IOPS, bandwidth in the unit
    shown, p99 latency; every other metric. The files (CSV, JSON) keep them all."""
    own = unqualified(metric)
    if own in metric_names():
        return False
    return own not in metrics_of("fio") or own.partition("_")[2] in ("iops", units.metric, "lat_p99_us")


def metric_rows(cell: CellSummary, metric_units: dict[str, str], units: Bandwidth = Bandwidth.MB) -> list[list[str]]:
    rows: list[list[str]] = []
    for name in [
        m for m in [*cell.primary, *sorted(m for m in cell.metrics if m not in cell.primary)] if shown(m, units)
    ]:
        stats = cell.metrics[name]
        figure = flagged(cell, fmt(stats.median), name)
        rows.append(
            [
                cell.target,
                name,
                runs_count(cell, stats),
                figure,
                fmt_mean_ci(stats),
                fmt_cv(stats),
                metric_units.get(name, ""),
                "; ".join([*stats.warnings, *(cell.notes if not rows else [])]),
            ]
        )
    return rows or [[cell.target, "–", f"0 ({cell.failed} failed)", *["–"] * (len(METRIC_COLUMNS) - 3)]]


def table_rows(
    cell: CellSummary, units: Bandwidth = Bandwidth.MB, percentiles: Sequence[Percentiles] | None = None
) -> list[list[str]]:
    """A row per direction of the cell: IOPS, bandwidth, and each latency percentile its kind
    declares (`percentiles`; None: those of a workload stored without a kind)."""
    rows: list[list[str]] = []
    percentiles = kind_percentiles(None, cell.workload) if percentiles is None else percentiles
    columns = direction_columns(percentiles)
    for d in cell.directions():
        iops, mb = cell.metrics[f"{d}_iops"], cell.metrics[f"{d}_{units.metric}"]  # (a direction has both)
        declared = [p for p in percentiles if p.direction == d][:1]  # its kind's, if any
        latencies = [
            fmt_latency(cell.metrics[metric].median * p.to_us) if metric in cell.metrics else "–"
            for p in declared
            for metric in p.metrics.values()
        ]
        notes = "; ".join(
            [*iops.warnings, *submission_note(cell, d), *device_notes(cell, d), *(cell.notes if not rows else [])]
        )
        figure = flagged(cell, fmt(iops.median), f"{d}_iops")
        rows.append(
            [
                cell.target,
                d,
                runs_count(cell, iops),
                figure,
                fmt_mean_ci(iops),
                fmt_cv(iops),
                fmt(mb.median),
                fmt_mean_ci(mb),
                fmt_cv(mb),
                *latencies,
                notes,
            ]
        )
    if not rows:
        rows.append([cell.target, "–", f"0 ({cell.failed} failed)", *["–"] * (len(columns) - 3)])
    return rows


def runs_count(cell: CellSummary, stats: Summary) -> str:
    """A figure's n, with the cell's failed runs beside it: "5", "4 (1 failed)"."""
    return f"{stats.n}" + (f" ({cell.failed} failed)" if cell.failed else "")


# Seed 000's Table IV (Wu & Guo 2026), one row per target, fio workload and direction — IOPS,
# bandwidth, average and P50/P95/P99 total latency — with n and the 95 % intervals it lacked.
# Every figure is the median over the cell's runs (of each run's mean or percentile), as in the
# workload tables; the intervals are of the mean.
OVERVIEW_COLUMNS = [
    "target",
    "workload",
    "dir",
    "IOPS",
    "MB/s",
    "avg latency",
    "P50",
    "P95",
    "P99",
    "n",
    "IOPS mean ± 95% CI",
    "MB/s mean ± 95% CI",
]


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
                iops_figure = flagged(cell, fmt(iops.median), f"{d}_iops")
                figures = [iops_figure, fmt(_median(cell, f"{d}_{s.units.metric}")), *latencies]
                named = with_caveats(cell.target, {cell.target: cell.caveats})
                intervals = [fmt_mean_ci(iops), fmt_mean_ci(bandwidth)]
                rows.append([named, workload, d, *figures, runs_count(cell, iops), *intervals])
    return (table_columns(s.units, OVERVIEW_COLUMNS), rows) if rows else None


def _median(cell: CellSummary, metric: str) -> float | None:
    stats = cell.metrics.get(metric)
    return None if stats is None else stats.median


def is_monitored(key: str) -> bool:
    """Whether a cell's metric is a monitor's (what the run cost), not its workload's."""
    return unqualified(key) in metric_names()


# What the monitors measured in a workload's windows (monitors/): a row per cell and measured
# phase, each figure the median over the cell's runs, a column per figure its monitor shows
# (monitors.Figure). Only where some cell has them: results stored before the runner ran monitors
# show no such table. The devices' bytes are counted through the sync of the filesystem that
# ends each window, "synced in" how long it took ("–": runs stored before, counted to the
# workload's end).
def monitor_columns() -> list[str]:
    return ["target", "phase", *(f.column for f in _monitor_figures())]


def monitor_table(s: StudySummary, workload: str) -> tuple[list[str], list[list[str]]] | None:
    """The monitors' table of a workload, or None when none of its cells has their figures."""
    rows = [row for cell in s.cells_of(workload) for row in monitor_rows(cell)]
    return (monitor_columns(), rows) if rows else None


def monitor_rows(cell: CellSummary) -> list[list[str]]:
    phases = dict.fromkeys(key.rpartition(PHASE_SEPARATOR)[0] for key in cell.metrics if is_monitored(key))
    columns = _monitor_figures()
    rows = []
    for phase in phases:
        figures = []
        for figure in columns:
            stats = cell.metrics.get(qualified(phase, figure.name))
            shown = _monitor_figure(stats.median, figure.shape) if stats else "–"
            figures.append(
                f"{EMULATED_MARK} {shown}" if stats and cell.emulated and figure.timing == "speed" else shown
            )
        rows.append([cell.target, phase or "–", *figures])
    return rows


def _monitor_figures() -> list[Figure]:
    """The monitors' values the table has a column for, in order."""
    return [f for f in monitor_figures() if f.column]


def _monitor_figure(value: float, shape: str) -> str:
    if shape == "size":
        return format_size(int(value))
    if shape == "seconds":
        return f"{fmt(value, 2)} s"
    return fmt(value) if shape == "pct" else f"{fmt(value, 2)}×"


BUFFERED_MARK = "◐"  # half through the page cache: direct I/O that was not
EMULATED_MARK = "TCG"  # a figure of speed of an emulated host: not a performance result (timing.EMULATED)


def flagged(cell: CellSummary, figure: str, metric: str = "") -> str:
    """A figure of a cell whose runs reported what cannot be real, marked so it is never read as a
    plain result (⚠); one above its ceiling, the bare device's figure (▲, the note says by how much);
    one of direct I/O the filesystem put through the page cache (◐, the note says how much of it);
    a figure of speed of a cell that ran emulated (TCG, its notes say "emulated (TCG): not a performance result")."""
    marked = f"⚠ {figure}" if cell.implausible else f"▲ {figure}" if metric in cell.above_ceiling else figure
    marked = f"{BUFFERED_MARK} {marked}" if DIRECT_IO_CAVEAT in cell.caveats else marked
    return f"{EMULATED_MARK} {marked}" if cell.emulated and timing_of(metric) == "speed" else marked


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


def device_notes(cell: CellSummary, direction: str) -> list[str]:
    """What the devices saw of a direction, beside the workload's own figures, where `--trace
    block` counted it (monitors/block_trace.py): the workload's p99 latency and the devices' (a
    loop device's time includes its backing file on the host: said so), and the size of the
    workload's I/Os (its bandwidth ÷ IOPS) beside the devices' median request."""
    notes = []
    p99, device = _median(cell, f"{direction}_lat_p99_us"), _median(cell, f"block_device_time_p99_us_{direction}")
    if p99 is not None and device is not None:
        loop = " (loop: with the host's file)" if _median(cell, "block_device_time_includes_host_file") else ""
        notes.append(f"p99 {fmt_latency(p99)}, of which the device{loop} {fmt_latency(device)}")
    iops, bandwidth = _median(cell, f"{direction}_iops"), _median(cell, f"{direction}_mb_s")
    request = _median(cell, f"block_request_bytes_{direction}")
    if request is not None and iops and bandwidth is not None:
        moved = round(bandwidth * 1e6 / iops / 512) * 512  # bytes per I/O, to the sector
        verb = "wrote" if direction == "write" else "read"
        sizes = _spaced(format_size(moved)), _spaced(format_size(request))
        notes.append(f"the workload {verb} {sizes[0]}, the device saw {sizes[1]} requests")
    return notes


def _spaced(size: str) -> str:
    """ "4KiB" → "4 KiB", as a sentence writes it."""
    at = next((i for i, c in enumerate(size) if c.isalpha()), len(size))
    return f"{size[:at]} {size[at:]}"


BETWEEN_TITLE = "Compared on each target with workload"  # a workload against the one it is paired with (compare_with)


def comparison_columns(rows: list[Row]) -> list[str]:
    """The columns of a table of comparisons: the interval's titled with its confidence, the
    family's (all of one table's rows are of one family: stats.adjust_family)."""
    level = next((r.comparison.level for r in rows if r.comparison.interval is not None), CONFIDENCE)
    return [
        "target",
        "metric",
        "ratio",
        interval_title(level),
        VERDICT_COLUMN,
        REASON_COLUMN,
        "p (BH)",
        "Mann–Whitney p",
    ]


def comparison_rows(rows: list[Row], caveats: dict[str, list[str]] | None = None) -> list[list[str]]:
    """Each comparison: ratio to the baseline (for latency, below 1 is faster), the interval its
    verdict is read from, the verdict (one of stats.VERDICTS) and why; its target with the caveats
    its figures carry."""
    out = []
    for r in rows:
        c = r.comparison
        target = with_caveats(r.target, caveats or {})
        p_values = [fmt_p(c.p_adjusted), fmt_p(c.mann_whitney_p)]
        why = c.reason + explanation_tail(r.explanation)  # beside a decided verdict, what differed
        out.append([target, metric_label(r.metric), fmt_ratio(c.ratio), fmt_interval(c), c.verdict, why, *p_values])
    return out


def comparison_groups(rows: list[Row]) -> list[tuple[str, list[Row]]]:
    """A workload's rows grouped by the baseline they are compared with, in the order met."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(r.baseline, []).append(r)
    return list(groups.items())


def workload_title(s: StudySummary, workload: str) -> str:
    """ "seq_write (direct I/O; data: random)": how it reached the device and what it wrote, in
    short (the whole record is stored with every run); "files preallocated" where its files
    were, unlike fslab's default (fio.NO_PREALLOCATION)."""
    data, limit, preallocated = s.data.get(workload), s.memory_limits.get(workload), s.preallocation.get(workload)
    io = ("buffered I/O" if workload in s.buffered else "direct I/O") + (
        f", memory ≤ {format_size(limit)}" if limit else ""
    )
    parts = [
        io,
        *([f"data: {data.split(' (')[0]}"] if data else []),
        *([f"files preallocated ({preallocated})"] if preallocated else []),
    ]
    return f"{workload} ({'; '.join(parts)})"


def compare_left_out_line(left_out: Sequence[tuple[str, str]]) -> str | None:
    """What a comparison of two study runs leaves out ((workload, target) flagged in either), and why."""
    if not left_out:
        return None
    cells = "; ".join(f"{target} · {workload}" for workload, target in left_out)
    return (
        f"Left out of the comparison: {cells} — a run's figures cannot "
        "be real in either study run (IMPLAUSIBLE in its summary)."
    )


def left_out_line(s: StudySummary, workload: str) -> str | None:
    """What a workload's comparisons, rankings, conclusions and charts leave out, and why."""
    flagged = s.left_out(workload)
    if not flagged:
        return None
    return (
        f"Left out of the comparisons, rankings, conclusions and charts: {', '.join(flagged)} — "
        "its runs reported figures that cannot be real (⚠ and "
        "IMPLAUSIBLE in the table), so nothing is judged from them."
    )


def unpaired_line(s: StudySummary, workload: str) -> str | None:
    """Why a workload paired with another (compare_with) was compared with it on no target."""
    other = s.analysis.paired_with.get(workload)
    if other is None or s.analysis.between_of(workload):
        return None
    theirs = {c.target for c in s.judged_cells_of(other) if c.metrics}
    both = [c.target for c in s.judged_cells_of(workload) if c.metrics and c.target in theirs]
    why = "no target has unflagged figures of both"
    if both:
        why = f"no metric compared in both has figures on {', '.join(both)}"
    return f"Compared with workload {other} (compare_with) on no target: {why}."


def with_caveats(target: str, caveats: dict[str, list[str]]) -> str:
    """A target as a judgement names it: with the caveats its figures carry ("ext4 (fsync did not
    reach the device)"), so that it is never ranked or compared without them."""
    return f"{target} ({'; '.join(caveats[target])})" if caveats.get(target) else target


def ranking_lines(s: StudySummary, workload: str) -> list[str]:
    lines = [f"Its job file as fslab ran it: {s.rewritten[workload]}."] if workload in s.rewritten else []
    lines += [line for line in [left_out_line(s, workload), unpaired_line(s, workload)] if line]
    caveats = s.caveats_of(workload)
    named = lambda target: with_caveats(target, caveats)  # noqa: E731
    lines += [
        f"Ranking by {metric_label(metric)}{f' on {host}' if host is not None else ''}: {ranking_line(ranking, named)}"
        for (w, metric, host), ranking in s.analysis.rankings.items()
        if w == workload
    ]
    lines += [
        f"Not ranked by {metric_label(metric)}{f' on {host}' if host is not None else ''}: {why}"
        for (w, metric, host), why in s.analysis.unranked.items()
        if w == workload
    ]
    needed = s.analysis.runs_needed.get(workload)
    if needed is not None:
        lines.append(f"Runs per cell for a ratio within ±{s.analysis.precision:.0%} at 95 %: {needed}")
    return lines + ceiling_lines(s, workload)


def ceiling_lines(s: StudySummary, workload: str) -> list[str]:
    """A workload's ceiling — what the bare device did in it, where it was measured — and the
    targets above it; or why it has none."""
    lines = []
    for c in (c for c in s.ceilings if c.workload == workload):
        if c.figure is None:
            lines.append(f"{c.why[0].upper()}{c.why[1:]}.")
            continue
        f = c.figure
        interval = runs_text(f.needs_runs or 0)
        if f.interval:
            interval = f"95 % CI {fmt(f.interval[0])}–{fmt(f.interval[1])}"
        above = ", ".join(cell.target for cell in s.cells_of(workload) if c.metric in cell.above_ceiling)
        measured = f"{metric_label(c.metric or '')} {fmt(f.mean)} ({interval})"
        said = f"Ceiling ({c.source}: {c.target}, {f.n} run{'s' if f.n != 1 else ''}): {measured}"
        if above:
            said += f"; ▲ above it (the whole 95 % interval of target / ceiling above 1): {above}"
        lines.append(f"{said}.")
    return lines


def method_line(s: StudySummary) -> str:
    a, threshold = s.analysis, f"±{s.analysis.threshold * 100:g} %"
    looks = looks_of(s.study_run.get("settings") or {})
    looked = f" and split over the {looks} looks at which the study could have stopped adding runs" if looks > 1 else ""
    paired = sum(c.paired_blocks > 0 for c in [*a.pairs.values(), *(r.comparison for r in a.between)])
    return (
        "Every pair of targets is compared, per workload and metric: the ratio of geometric means with its interval "
        f"on the log values (Welch's; paired within the interleaved blocks where both ran once in {PAIRED_MIN_BLOCKS} "
        f"or more of the same blocks: {paired} of them); "
        + (
            f"one family of {a.family_size} comparison{'s' if a.family_size != 1 else ''} (all pairs of this study "
            f"run), every interval drawn at {level_text(a.level)}: 95 % adjusted for the family's false coverage "
            f"rate (Benjamini–Yekutieli){looked}. Both the tables (each target against its baseline) and the "
            "rankings are read from it. "
            if a.family_size
            else "no pair of this study run could be compared (a comparison needs two cells of at least 2 runs "
            "each, neither flagged). "
        )
        + (
            "A workload paired with another (compare_with) is compared with it on each target both ran on, "
            "in the same family. "
            if a.between
            else ""
        )
        + f"Each verdict is read from the interval printed beside it: equivalent when it lies within {threshold}; "
        f"faster or slower when it excludes 1 and the ratio lies beyond {threshold}; undecided otherwise, with why "
        "(too few runs, an interval across the threshold and the runs that would decide it, a value of 0). "
        "Ranking: '>' decided faster or slower, '=' not decided apart (equivalent or undecided); where that cannot "
        "be said exactly, letters: no verdict sets apart targets sharing one." + hosts_text(s)
    )


def compare_method_line(rows: list[Row], threshold: float) -> str:
    """How `fslab compare` judged its cells (the console's and the page's alike)."""
    level = next((r.comparison.level for r in rows if r.comparison.interval is not None), CONFIDENCE)
    margin = f"±{threshold * 100:g} %"
    return (
        f"Ratios of geometric means, newer against older, of every cell present in both, with Welch intervals on "
        f"the log values drawn at {level_text(level)} — 95 % adjusted for the false coverage rate over these "
        f"{len(rows)} comparison{'s' if len(rows) != 1 else ''} (Benjamini–Yekutieli). Each verdict is read from "
        f"the interval printed beside it: equivalent when it lies within {margin}; faster or slower when it "
        f"excludes 1 and the ratio lies beyond {margin}; undecided otherwise, with why."
    )


def hosts_text(s: StudySummary) -> str:
    """How the method treated the hosts the runs ran on: nothing to say of one."""
    hosts = s.hosts
    if hosts.per_host:
        return (
            f" The runs span {len(hosts.names)} hosts ({', '.join(hosts.names)}): "
            "each target on each host is a cell of its own "
            "('target @ host'), compared with and ranked among the "
            "targets of the same host only (--pool-hosts pools them)."
        )
    if hosts.pooling:
        spread = (s.study_run.get("settings") or {}).get("spread")
        why = (
            "the study run was spread over them (--spread: each planned run ran once, on one of them)"
            if spread
            else "--pool-hosts"
        )
        return (
            f" {hosts.pooling} hosts pooled ({', '.join(hosts.names)}; {why}), "
            "host treated as a block: each host's values of a workload and "
            "metric are divided by that host's geometric mean of them (all "
            "targets) before the comparisons, so what sets one host above "
            "another adds no spread; the tables show the pooled runs as measured."
        )
    return ""


def disturbance_text(s: StudySummary) -> str:
    """The runs something else disturbed (monitors/pressure.py), counted and flagged; those run
    again (--redo-disturbed), left out as warm-ups are."""
    said = f"; {s.disturbed} run(s) disturbed (counted; their cells' notes say by what)" if s.disturbed else ""
    if s.redone:
        said += f"; {s.redone} disturbed run(s) run again (--redo-disturbed), left out of the statistics"
    return said


def repetitions_line(s: StudySummary) -> str:
    settings = s.study_run.get("settings") or {}
    warmup = f", after {s.warmups} warm-up run(s) left out of the statistics" if s.warmups else ""
    warmup += disturbance_text(s)
    if settings.get("target_ci") is None and not settings.get("decide"):
        return f"{s.study_run['repetitions']} runs per cell{warmup}."
    outcome = s.study_run.get("outcome") or {}
    met = ("converged", "decided", "equivalent", "no comparison")  # running.plan's statuses of a cell done
    short = {cell: o for cell, o in outcome.items() if o["status"] not in met}
    budget = f", time budget {settings['time_budget']} s" if settings.get("time_budget") else ""
    goal = (
        "every main comparison (each target against its baseline on the primary metrics) was faster, slower "
        "or equivalent, or could not be by the last run"
        if settings.get("decide")
        else f"each cell's 95 % interval was within ±{settings['target_ci']:.1%} or its comparisons decided"
    )
    looks = looks_of(settings)
    counts = Counter(o["status"] for o in outcome.values())
    line = (
        f"Adaptive: runs added block by block until {goal} (at most {settings['max_runs']} runs per cell{budget}; "
        f"judged at up to {looks} looks, every interval widened to hold its error across them){warmup}; "
        f"{len(outcome)} cells: " + ", ".join(f"{n} {status}" for status, n in counts.most_common()) + "."
    )
    if short:
        widths = (f"±{o['half_width']:.1%}" if o["half_width"] is not None else "no interval" for o in short.values())
        line += (
            " Not done: "
            + "; ".join(
                f"{cell} ({width} after {o['runs']} runs, {_ended(o, settings['max_runs'])})"
                for (cell, o), width in zip(short.items(), widths)
            )
            + "."
        )
    return line


def _ended(outcome: dict, max_runs: int) -> str:
    """How an adaptive study run's cell ended, a futile one with the runs that would have decided it."""
    if outcome["status"] != "futile" or "would_decide" not in outcome:
        return outcome["status"]
    needed = outcome["would_decide"]
    runs = f"~{needed}" if needed is not None else f"more than {RUNS_NEEDED_LIMIT}"
    return f"undecided: {runs} runs would decide, over the budget of {max_runs}"


def scale_text(s: StudySummary) -> str:
    """ "scale 0.1", or "scale 0.1 (sizes only)" when --scale-sizes-only kept the runtimes."""
    sizes_only = (s.study_run.get("settings") or {}).get("scale_sizes_only")
    return f"scale {s.study_run['scale']:g}" + (" (sizes only)" if sizes_only else "")


def skipped_lines(s: StudySummary) -> list[str]:
    """The targets --skip-unsupported left out, each once with what this machine lacks for it (or
    skipped midway, their runs having failed alike: runner._Watched),
    and the targets that were to be compared with it and so are compared with none."""
    if not s.skipped:
        return []
    compared = {r.target for r in s.analysis.rows} | {
        s.analysis.override
    }  # with --baseline they are compared all the same
    waiting: dict[str, list[str]] = defaultdict(list)
    for t in s.targets:
        if t["name"] not in compared:
            waiting[t["spec"].get("baseline")].append(t["name"])
    midway = any(u.why.startswith(FAILED_ALIKE) for u in s.skipped)  # runner._Watched's
    which = "this machine cannot run" + (", or whose runs failed alike:" if midway else " (--skip-unsupported):")
    lines = [f"Skipped: {len(s.skipped)} target(s) {which}"]
    for u in s.skipped:
        orphans = waiting.get(u.target)
        lines.append(
            f"{u.target}: {u.why}"
            + (
                f" — it is the baseline of {', '.join(orphans)}, so they "
                "are compared with none rather than with a substitute "
                "(the rankings still order them; --baseline TARGET compares every target with one that ran)"
                if orphans
                else ""
            )
        )
    return lines


def kernel_lines(s: StudySummary) -> list[str]:
    """A study run over kernels (lab/study.py): each kernel's boots, how much its cells varied from
    boot to boot (the CV of the boot means, the CV within a boot beside it), and the kernels left out."""
    lab = (s.study_run.get("settings") or {}).get("lab")
    if not lab:
        return []
    boots_of: dict[str, set] = defaultdict(set)
    for r in s.runs:
        if r.get("host") is not None:
            boots_of[r["host"]].add(r.get("boot_id"))
    kernels = ", ".join(f"{h} ({len(b)} boot{'s' if len(b) != 1 else ''})" for h, b in sorted(boots_of.items()))
    lines = [
        f"Kernels: {kernels}; "
        "boots are the unit of replication between kernels: a kernel's samples are its boot means where it ran "
        "2 boots or more, and a speed verdict between kernels needs 2 boots each (--boots)."
    ]
    by_host: dict[str, list[str]] = defaultdict(list)
    for b in s.boot_spreads:
        within = f"{b.within_cv:.1%}" if b.within_cv is not None else "–"
        by_host[b.host].append(f"{b.target} · {b.workload} {b.metric} {b.between_cv:.1%} (within a boot {within})")
    lines += [f"Boot to boot on {host} (CV of the boot means): {'; '.join(said)}." for host, said in by_host.items()]
    lines += [  # its host: on a fleet, each worker's failure of one kernel is its own ("RELEASE@WORKER")
        f"Kernel {f['kernel']} left out at boot {f['boot']}"
        + (f" on host {f['host']}" if f.get("host") not in (None, f["kernel"]) else "")
        + f": {f['why']}."
        for f in lab.get("failed", [])
    ]
    return lines


def header_lines(s: StudySummary) -> list[str]:
    sr, env = s.study_run, s.study_run["environment"]
    tools = env.get("tools", {})
    images = env.get("image_directory", {})
    imported = imported_from(sr)
    if imported:
        lines = [
            (
                f"Study **{sr['study']}**, study run {sr['id']}, **imported from "
                f"{len(imported['files'])} file(s)** of fio's JSON ({tools.get('fio')}) "
                f"on {imported['at'][:19].replace('T', ' ')} UTC, measured from "
                f"{sr['started_at']:%Y-%m-%d %H:%M:%S} to {sr['finished_at']:%Y-%m-%d %H:%M:%S} UTC; "
                f"bandwidth in {s.units.describe()}. "
                + (
                    "One run per cell, one per file."
                    if sr["repetitions"] == 1
                    else f"Up to {sr['repetitions']} runs per cell, one per file, in the order the files came."
                )
            ),
            "fslab did not run these: it knows each target by name and by fio's output alone (not "
            "its machine, filesystem or options); each fio job name is a workload, or one per set "
            "of options where its files ran it with different ones (named by those options).",
        ]
    else:
        lines = [
            (
                f"Study **{sr['study']}**, study run {sr['id']} ({sr['status']}), "
                f"started {sr['started_at']:%Y-%m-%d %H:%M:%S} UTC, "
                f"runs in interleaved blocks (order seed {sr['plan_seed']}), "
                f"{scale_text(s)}; bandwidth in {s.units.describe()}. {repetitions_line(s)}"
            ),
            (
                f"Machine: {env.get('distribution')}, kernel {env.get('kernel')}, "
                f"{env.get('cpu_model')} × {env.get('cpu_count')}, "
                f"{format_size(env.get('memory_bytes', 0))} memory; {tools.get('fio')}; "
                f"loop images on {images.get('fstype')} ({images.get('source')})."
                + "".join(f" {why}." for why in s.not_measurable)
            ),
        ]
    return (
        lines
        + emulated_lines(s)
        + [
            (
                "Latency is fio's total latency per I/O (submission + "
                "completion: slat + clat, what the application waits), "
                "the median over runs of each run's percentile; clat and slat are stored as their own metrics. "
                "mean ± x% is the mean with the half-width of its 95 % Student-t interval; CV is stdev/mean over runs."
            ),
        ]
        + scaling_lines(s)
        + cached_reference_lines(s)
    )


def emulated_lines(s: StudySummary) -> list[str]:
    """Said once where some host ran its kernel emulated (TCG): what its figures are, and are not."""
    emulated = [h for h in s.host_facts if h.emulated]
    if not emulated:
        return []
    names = ", ".join(f"{h.name} (kernel {h.kernel})" for h in emulated)
    return [
        f"**{EMULATED[0].upper()}{EMULATED[1:]}**: {names} ran under QEMU's software emulation (TCG). Its "
        f"figures of speed (bandwidth, IOPS, latency, CPU, durations) are shown marked {EMULATED_MARK} and never "
        "compared, ranked or judged; figures independent of timing (the page-cache share of direct I/O, space "
        "used, compression) are compared with any host's, timing-dependent ones (write amplification, extents) "
        "only with a host of the same accelerator."
    ]


def scaling_lines(s: StudySummary) -> list[str]:
    """Said once: what --scale changed in the targets that fslab could not keep as at full size
    (Filesystem.scaled), each change with the targets it concerns."""
    targets_of: dict[str, list[str]] = defaultdict(list)
    for t in s.targets:
        for change in t["spec"].get("scaling_changed") or ():
            targets_of[change].append(t["name"])
    if not targets_of:
        return []
    return [
        f"**Scaling changed the setup** ({scale_text(s)}): "
        + "; ".join(f"{', '.join(names)}: {change}" for change, names in targets_of.items())
        + "."
    ]


def cached_reference_lines(s: StudySummary) -> list[str]:
    """Said once each: a raw reference no disk could produce means a cache answered; one whose
    sequential writes outrun its reads, that a volatile cache acknowledged its writes."""
    lines = []
    for writes_only, heading, figures in (
        (False, "The raw reference is cached", "Absolute figures"),
        (True, "The raw reference's writes are cached", "Absolute write figures"),
    ):
        found = [c for c in s.cached_reference if c.writes_only == writes_only]
        if found:
            first, more = found[0], len(found) - 1
            lines.append(
                f"**{heading}**: {first.target} · {first.workload} {first.finding}, and {first.limit}"
                + (f" ({more} more such figure{'s' if more > 1 else ''})" if more else "")
                + f". {figures} here are not disk figures; ratios measured in one study run are."
            )
    return lines
