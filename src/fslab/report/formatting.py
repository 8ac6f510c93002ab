"""How a figure is printed in every table and line of a report: the console's, the files', the
page's and the charts' tooltips alike."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from fslab.statistics.stats import (
    RUNS_NEEDED_LIMIT,
    UNDECIDED,
    Comparison,
    Summary,
    interval_text,
    level_text,
    ratio_text,
    verdict_reason,
)
from fslab.workloads.offered import DIRECTIONS

if TYPE_CHECKING:
    from fslab.statistics.explain import Explanation


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
    half = s.ci_half_width
    if s.interval is None or half is None or not s.mean:
        return fmt(s.mean)
    return f"{fmt(s.mean)} ± {half / abs(s.mean) * 100:.1f}%"


def fmt_cv(s: Summary | None) -> str:
    return "–" if s is None or s.cv is None else f"{s.cv * 100:.1f}%"


def metric_label(metric: str) -> str:
    """ "read_iops" → "read IOPS", "write_lat_p99_us" → "write p99 latency", "after.read_iops" →
    "after: read IOPS"; a metric that is not fio's per direction, as named ("elapsed_s")."""
    phase, _, own = metric.rpartition(".")
    direction, _, name = own.partition("_")
    label = (
        f"{direction} "
        + {"iops": "IOPS", "lat_p99_us": "p99 latency", "mb_s": "MB/s", "mib_s": "MiB/s"}.get(name, name)
        if direction in DIRECTIONS
        else own
    )
    return f"{phase}: {label}" if phase else label


def fmt_p(p: float | None) -> str:
    return "–" if p is None else ("<0.0001" if p < 1e-4 else f"{p:.4f}")


def fmt_ratio(x: float) -> str:
    """A ratio as the tables print it: three decimals, or three significant digits far from 1 (a
    two-run interval may reach 0.000012 or 4.3e+08); "∞" where a baseline of 0 leaves no bound."""
    if not math.isfinite(x):
        return "∞" if x > 0 else "–"
    return f"{x:.3f}" if 0.001 <= x < 1000 else f"{x:.3g}"


def fmt_interval(c: Comparison) -> str:
    """A comparison's interval as the tables print it ("–": none), the one its verdict is read from."""
    return "–" if c.interval is None else f"{fmt_ratio(c.interval[0])}–{fmt_ratio(c.interval[1])}"


def interval_title(level: float) -> str:
    """The title of a column of comparisons' intervals: their confidence, the family's ("99.2 % CI");
    the figure and its % kept together (a no-break space) where a console breaks a title in two."""
    return f"{level_text(level).replace(' ', NO_BREAK)} CI"


NO_BREAK = "\u00a0"


def verdict_phrase(c: Comparison) -> str:
    """A verdict as every output words it, the one wording: the word, the ratio, the interval it
    is read from at its confidence, why, and the metric's direction —
    "faster 1.31× (98.3 % CI 1.26–1.34×; beyond ±3 %; higher is better)"."""
    direction = "higher" if c.higher_is_better else "lower"
    if c.interval is None:
        return f"{c.verdict} {ratio_text(c.ratio)}× (no interval; {c.reason}; {direction} is better)"
    printed = f"{level_text(c.level)} CI {interval_text(c.interval)}"
    why = verdict_reason(c, printed) if c.verdict == UNDECIDED else f"{printed}; {c.reason}"  # said once
    return f"{c.verdict} {ratio_text(c.ratio)}× ({why}; {direction} is better)"


def explained_phrase(c: Comparison, explanation: Explanation | None) -> str:
    """verdict_phrase, and beside a decided verdict its explanation (fslab.statistics.explain):
    "slower 0.06× (…) — with 99 % of its direct writes through the page cache (ext4: 0 %)"."""
    return verdict_phrase(c) + explanation_tail(explanation)


def explanation_tail(explanation: Explanation | None) -> str:
    """ " — with …" where there is an explanation (a decided verdict's), else nothing."""
    return "" if explanation is None else f" — {explanation.sentence}"
