"""What a study run answers: each target against a baseline, per workload and metric, with
Benjamini–Hochberg over all of them; a ranking per workload; two study runs cell by cell.

Pure: takes samples grouped by cell, returns comparisons. stats.py does the arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from fslab.errors import FslabError
from fslab.stats import Comparison, adjust_family, compare, rank, runs_needed
from fslab.study import image_names
from fslab.workloads.fio import DIRECTIONS

# Compared for every cell and direction: throughput, and the tail latency seed 003 cares about.
COMPARED = ("iops", "lat_p99_us")
Samples = dict[tuple[str, str], dict[str, list[float]]]  # (workload, target) → metric → values in run order


class AnalysisError(FslabError):
    pass


@dataclass(frozen=True)
class Row:
    workload: str
    target: str  # the target compared (in `compare`: the same target in the newer study run)
    baseline: str  # the target it is compared with (in `compare`: the older study run)
    metric: str
    comparison: Comparison


@dataclass(frozen=True)
class Analysis:
    baselines: dict[str, str]  # workload → baseline target
    rows: list[Row]
    rankings: dict[tuple[str, str], list[list[str]]]  # (workload, IOPS metric) → tiers, best first
    runs_needed: dict[str, int | None]  # workload → runs per cell for a ratio within ±precision
    threshold: float
    precision: float

    def rows_of(self, workload: str) -> list[Row]:
        return [r for r in self.rows if r.workload == workload]


def primary_metrics(metrics: dict[str, list[float]]) -> list[str]:
    """What decides a cell's precision and its rank: IOPS in each direction it has."""
    return [f"{d}_iops" for d in DIRECTIONS if f"{d}_iops" in metrics]


def compared_metrics(metrics: dict[str, list[float]]) -> list[str]:
    return [f"{d}_{m}" for d in DIRECTIONS for m in COMPARED if f"{d}_{m}" in metrics]


def analyse(
    samples: Samples,
    higher_is_better: dict[str, bool],
    targets: list[str],
    workloads: list[str],
    *,
    baseline: str | None = None,
    threshold: float = 0.03,
    precision: float | None = None,
) -> Analysis:
    """Every target against the baseline target of each workload (default: the study's first)."""
    if baseline is not None and baseline not in targets:
        raise AnalysisError(f"no target '{baseline}' in this study run; its targets: {', '.join(targets)}")
    precision = threshold if precision is None else precision
    rows, baselines, rankings, needed = [], {}, {}, {}
    for workload in workloads:
        present = [t for t in targets if (workload, t) in samples]
        if not present:
            continue
        base = baseline if baseline in present else present[0]
        baselines[workload] = base
        for target in present:
            for metric in compared_metrics(samples[(workload, target)]) if target != base else []:
                a, b = samples[(workload, base)].get(metric), samples[(workload, target)][metric]
                if a and _positive(a + b):
                    rows.append(Row(workload, target, base, metric, compare(a, b, higher_is_better[metric], threshold)))
        primary = {
            metric: {t: samples[(workload, t)][metric] for t in present if metric in samples[(workload, t)]}
            for metric in dict.fromkeys(m for t in present for m in primary_metrics(samples[(workload, t)]))
        }
        for metric, cells in primary.items():
            if len(cells) > 1:
                rankings[(workload, metric)] = rank(cells, True, threshold)
        needed[workload] = runs_needed([values for cells in primary.values() for values in cells.values()], precision)
    return Analysis(baselines, _corrected(rows, threshold), rankings, needed, threshold, precision)


def compare_study_runs(
    older: Samples, newer: Samples, higher_is_better: dict[str, bool], *, threshold: float = 0.03
) -> list[Row]:
    """Every cell present in both study runs: newer against older, BH over all of them."""
    rows = []
    for (workload, target), metrics in older.items():
        if (workload, target) not in newer:
            continue
        for metric in compared_metrics(metrics):
            a, b = metrics[metric], newer[(workload, target)].get(metric)
            if b and _positive(a + b):
                rows.append(Row(workload, target, target, metric, compare(a, b, higher_is_better[metric], threshold)))
    return _corrected(rows, threshold)


def _corrected(rows: list[Row], threshold: float) -> list[Row]:
    """The rows with Benjamini–Hochberg over all of them, and their verdicts again."""
    adjusted = adjust_family([r.comparison for r in rows], threshold)
    return [replace(r, comparison=c) for r, c in zip(rows, adjusted)]


def regressions(rows: list[Row], regression: float) -> list[Row]:
    """Rows significantly slower (after correction) by more than the regression threshold."""
    return [r for r in rows if r.comparison.verdict == "slower" and abs(r.comparison.ratio - 1) > regression]


# A target measured this far above the raw devices under it is flagged, not believed.
BEYOND_RAW = 1.5


def raw_references(targets: list[dict]) -> dict[str, list[str]]:
    """Target → the raw targets whose IOPS, added up, are what its devices deliver bare.

    A target's own raw baselines (raw targets on its images) when the study measured them,
    else the study's first plain raw target once per device. Plain raw targets get none.
    """
    def images(t: dict) -> list[str]:  # targets stored before images were are named from their devices
        return t["spec"].get("images") or list(image_names(t["name"], t["spec"].get("devices", 1)))

    raws = [t for t in targets if t["filesystem"] == "raw" and not t["spec"].get("layers")]
    by_image = {images(t)[0]: t["name"] for t in raws}
    plain = next((t["name"] for t in raws if images(t)[0] == t["name"]), None)
    references = {}
    for t in targets:
        if t in raws:
            continue
        own = [by_image.get(image) for image in images(t)]
        if all(own):
            references[t["name"]] = own
        elif plain:
            references[t["name"]] = [plain] * len(own)
    return references


def beyond_raw(samples: Samples, references: dict[str, list[str]], factor: float = BEYOND_RAW) -> dict[tuple[str, str], dict[str, float]]:
    """(workload, target) → IOPS metric → its median over the raw devices' summed medians,
    where that exceeds `factor`: a cache, compression or a copy-on-write layout answered."""
    found: dict[tuple[str, str], dict[str, float]] = {}
    for (workload, target), metrics in samples.items():
        raws = [samples.get((workload, raw), {}) for raw in references.get(target, [])]
        for metric in primary_metrics(metrics) if raws else []:
            if not all(raw.get(metric) for raw in raws):
                continue
            ceiling = sum(float(np.median(raw[metric])) for raw in raws)
            ratio = float(np.median(metrics[metric])) / ceiling if ceiling > 0 else 0.0
            if ratio > factor:
                found.setdefault((workload, target), {})[metric] = ratio
    return found


def ranking_line(tiers: list[list[str]]) -> str:
    """"ext4 > xfs = raw > btrfs": '>' detectably better, '=' no detectable difference."""
    return " > ".join(" = ".join(tier) for tier in tiers)


def _positive(values: list[float]) -> bool:
    return all(v > 0 for v in values)
