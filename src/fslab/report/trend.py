"""A study's history as text, the same in the console (`fslab history STUDY`) and on the trend page
(trend_page.py): each series' table, each flagged step's line, and the method. Pure."""

from __future__ import annotations

from fslab.report.formatting import fmt_mean_ci, fmt_p, metric_label
from fslab.statistics.history import History, Series, Step

SERIES_COLUMNS = [
    "started (UTC)",
    "study run",
    "kernel",
    "fslab",
    "n",
    "mean ± 95% CI",
    "step",
    "95% CI",
    "p (BH)",
    "verdict",
]
SERIES_RIGHT = [False, True, False, False, True, True, True, True, True, False]


def series_title(series: Series) -> str:
    key = series.key
    return f"{key.workload} · {key.target} · {metric_label(key.metric)} — host {key.host}"


def series_rows(series: Series) -> list[list[str]]:
    """A row per study run: when, which, on what kernel and fslab, its mean and interval, and the
    step from the study run before (none on the first)."""
    steps = {step.newer.study_run: step for step in series.steps}
    rows = []
    for point in series.points:
        step = steps.get(point.study_run)
        rows.append([
            f"{point.started_at:%Y-%m-%d %H:%M}", str(point.study_run), point.kernel, point.fslab_version,
            str(point.summary.n), fmt_mean_ci(point.summary),
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
    interval = "–" if c.interval is None else "{:.3f}–{:.3f}".format(*c.interval)
    return [f"×{c.ratio:.3f}", interval, fmt_p(c.p_adjusted), c.verdict]


def step_line(step: Step, what: str = "") -> str:
    """A flagged step (or a drift: `what`) in one line: where, from which study run to which, the
    ratio with its interval, the adjusted p, and whether it is a regression."""
    c, key = step.comparison, step.key
    interval = "" if c.interval is None else " ({:.3f}–{:.3f})".format(*c.interval)
    verdict = f"{c.verdict}, a regression" if step.regression else c.verdict
    return (
        f"{key.workload} · {key.target} · {metric_label(key.metric)} on {key.host}: "
        f"{what}study run {step.older.study_run} → {step.newer.study_run} "
        f"(kernel {step.older.kernel} → {step.newer.kernel}, fslab "
        f"{step.older.fslab_version} → {step.newer.fslab_version}): "
        f"×{c.ratio:.3f}{interval}, p (BH) {fmt_p(c.p_adjusted)}: {verdict}"
    )


def flagged_lines(h: History) -> list[tuple[str, bool]]:
    """Each flagged step's line, then each drift's, with whether it is a regression."""
    return [(step_line(s), s.regression) for s in h.flagged] + [
        (step_line(d, "drift over "), d.regression) for d in h.drifts
    ]


def method_line(h: History) -> str:
    return (
        "Each step compares a study run's runs with the study run's "
        "before it on the same host, as two cells are compared: ratio of "
        "geometric means with its 95 % Welch interval on the log values; "
        "a step is a change only when its Benjamini–Hochberg-adjusted p "
        f"(over the {h.family_size} tests of this history) is below "
        f"0.05 and the ratio is beyond the {h.threshold:.0%} threshold. "
        "A drift: the latest study run against the first (tested in the same family) is a change while no step is. "
        "Unlike a band of mean ± 1.96 sd of single runs, the interval narrows with the runs behind each mean."
    )
