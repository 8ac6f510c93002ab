"""A study's history as text, the same in the console (`fslab history STUDY`) and on the trend page
(trend_page.py): each series' table, each flagged step's line, and the method. Pure."""

from __future__ import annotations

from fslab.report.formatting import fmt_interval, fmt_mean_ci, fmt_ratio, interval_title, metric_label, verdict_phrase
from fslab.statistics.history import History, Series, Step
from fslab.statistics.stats import level_text

SERIES_RIGHT = [False, True, False, False, False, True, True, True, True, False, False]


def series_columns(h: History) -> list[str]:
    """The columns of a series' table: the step's interval titled with its confidence, the history's."""
    return [
        "started (UTC)", "study run", "kernel", "accelerator", "fslab", "n", "mean ± 95% CI",
        "step", f"step {interval_title(h.level)}", "verdict", "why",
    ]  # fmt: skip


def series_title(series: Series) -> str:
    key = series.key
    return f"{key.workload} · {key.target} · {metric_label(key.metric)} — host {key.host}"


def series_rows(series: Series) -> list[list[str]]:
    """A row per study run: when, which, on what kernel (run how: its host's accelerator) and fslab,
    its mean and interval, and the step from the study run before (none on the first)."""
    steps = {step.newer.study_run: step for step in series.steps}
    rows = []
    for point in series.points:
        step = steps.get(point.study_run)
        rows.append([
            f"{point.started_at:%Y-%m-%d %H:%M}", str(point.study_run), point.kernel, point.accelerator,
            point.fslab_version, str(point.summary.n), fmt_mean_ci(point.summary),
            *(_step_cells(step) if step is not None else ["–", "–", "–", "–"]),
        ])  # fmt: skip
    return rows


def row_classes(series: Series) -> list[str]:
    """Each row's class on the page: the verdict of the step into it, where it is a change."""
    steps = {step.newer.study_run: step for step in series.steps}
    return [
        steps[p.study_run].comparison.verdict if p.study_run in steps and steps[p.study_run].change else ""
        for p in series.points
    ]


def _step_cells(step: Step) -> list[str]:
    c = step.comparison
    return [f"×{fmt_ratio(c.ratio)}", fmt_interval(c), c.verdict, c.reason]


def step_line(step: Step, what: str = "") -> str:
    """A flagged step (or a drift: `what`) in one line: where, from which study run to which, its
    verdict as every output words it (formatting.verdict_phrase), and whether it is a regression."""
    key = step.key
    return (
        f"{key.workload} · {key.target} · {metric_label(key.metric)} on {key.host}: "
        f"{what}study run {step.older.study_run} → {step.newer.study_run} "
        f"(kernel {step.older.kernel} → {step.newer.kernel}, fslab "
        f"{step.older.fslab_version} → {step.newer.fslab_version}): "
        f"{verdict_phrase(step.comparison)}{', a regression' if step.regression else ''}"
    )


def flagged_lines(h: History) -> list[tuple[str, bool]]:
    """Each flagged step's line, then each drift's, with whether it is a regression."""
    return [(step_line(s), s.regression) for s in h.flagged] + [
        (step_line(d, "drift over "), d.regression) for d in h.drifts
    ]


def method_line(h: History) -> str:
    margin = f"±{h.threshold * 100:g} %"
    return (
        "Each step compares a study run's runs with the study run's "
        "before it on the same host, as two cells are compared: ratio of "
        "geometric means with its Welch interval on the log values, drawn at "
        f"{level_text(h.level)} — 95 % adjusted for the false coverage rate over the {h.family_size} "
        "tests of this history (Benjamini–Yekutieli). Each verdict is read from that interval: equivalent "
        f"when it lies within {margin}; faster or slower when it excludes 1 and the ratio lies beyond {margin}; "
        "undecided otherwise, with why. A step is a change only when decided faster or slower. "
        "A drift: the latest study run against the first (tested in the same family) is a change while no step is. "
        "Unlike a band of mean ± 1.96 sd of single runs, the interval narrows with the runs behind each mean."
    )
