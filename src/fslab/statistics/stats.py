"""Statistics on raw samples. Pure functions: numbers in, numbers out (docs/statistics.md).

A cell is summarised by n, mean, median, stdev, CV, min, max and a 95 % Student-t interval,
with warnings that never drop data. Two cells are compared by the ratio of their geometric
means: Welch's t on the log values gives the interval, so a 10 % gain and a 10 % loss are
symmetric and a multiplicative noise model is respected.

A figure is known only as finely as its tool prints it (its `resolution`, MetricKind): every
value is taken as known to ± half of it, so no interval is narrower than that allows and no
difference within it is called significant — two runs printed alike by a tool that rounds to
0.01 ms have no spread of zero, only one below what it prints.

Student's t is scipy's (scipy.special) and the arrays numpy's, each imported inside the functions
that use it: a command that computes no interval (fslab --help, history, …) never loads scipy, and
one that only plans and runs a study (the runner imports this module: `fslab run --no-summary`, a
lab VM's, where an import costs a hundred times more) loads neither. The Mann–Whitney U test is
fslab's own (mann_whitney_two_sided_p says why).
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache, cached_property, lru_cache
from itertools import accumulate, groupby

CONFIDENCE = 0.95
CV_WARNING = 0.10
OUTLIER_Z = 14.8  # modified z-score (MAD scaled by 1.4826) above which a sample is flagged
FIRST_RUN_SLOWER = 0.10  # the first run this much worse than the median of the rest is flagged
MIN_RUNS = 3
OUTLIER_MIN_N = 5  # below this the MAD of a few nearly equal runs makes any third one an "outlier"
RANK_TEST_MIN_N = 7  # Mann–Whitney U only where both sides have at least this many runs
POWER = 0.80  # for the smallest detectable change
NORMAL_MAD = 0.6744897501960817  # the MAD of a standard normal distribution (its 0.75 quantile): MAD / this estimates σ
# A figure with an interval (a cell's mean ± x %, a ratio's interval, the detectable change) is
# printed only from this many runs per cell: below, t has at most 1 degree of freedom (12.7 × the
# standard error at 95 %) and two runs give intervals like 0.000–428246421.
INTERVAL_MIN_RUNS = 3
# ... and only while its interval is within ±100 % of the figure (for a ratio: its upper bound at
# most twice the ratio): wider, the number says nothing; the runs it needs are printed instead.
INTERVAL_MAX_HALF_WIDTH = 1.0


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    median: float
    stdev: float | None  # sample standard deviation (n-1); None with one sample
    cv: float | None  # stdev / mean
    minimum: float
    maximum: float
    ci_low: float | None  # 95 % Student-t interval for the mean
    ci_high: float | None
    warnings: tuple[str, ...] = ()
    needs_runs: int | None = (
        None  # runs per cell its interval needs before it is printed (figure_needs); None: it has them
    )

    @property
    def interval(self) -> tuple[float, float] | None:
        """The 95 % interval as every output prints or draws it: none from too few runs (figure_needs)."""
        if self.needs_runs is not None or self.ci_low is None or self.ci_high is None:
            return None
        return self.ci_low, self.ci_high

    @property
    def ci_half_width(self) -> float | None:
        return None if self.ci_low is None or self.ci_high is None else (self.ci_high - self.ci_low) / 2

    @property
    def relative_half_width(self) -> float | None:
        """The interval's half-width as a fraction of the mean (0.03 = ±3 %)."""
        half = self.ci_half_width
        return None if half is None or not self.mean else half / abs(self.mean)


def summarize(values: list[float], higher_is_better: bool = True, resolution: float = 0.0) -> Summary:
    """Descriptive statistics of one cell's samples, in run order, with warnings. `resolution`:
    the step its tool prints the values to; the interval is never narrower than it."""
    if not values:
        raise ValueError("no samples to summarize")
    floats = [float(v) for v in values]
    ordered = sorted(floats)
    n = len(floats)
    mean, variance = mean_and_variance(floats)
    if variance is None:  # one value
        warnings = _warnings(floats, None, higher_is_better, ordered)
        return Summary(
            n,
            mean,
            _middle(ordered),
            None,
            None,
            ordered[0],
            ordered[-1],
            None,
            None,
            warnings,
            figure_needs([values], None),
        )
    stdev = math.sqrt(variance)
    cv = stdev / mean if mean else None
    # Each value known to ± resolution / 2, so is their mean: the interval covers at least that.
    half = max(t_quantile((1 + CONFIDENCE) / 2, n - 1) * stdev / math.sqrt(n), resolution / 2)
    relative = half / abs(mean) if mean else None
    needs = figure_needs([values], relative)
    warnings = _warnings(floats, cv, higher_is_better, ordered)
    if resolution and ordered[-1] - ordered[0] < resolution:
        warnings += (f"runs within the {resolution:g} its tool prints: their spread is not resolved",)
    return Summary(
        n, mean, _middle(ordered), stdev, cv, ordered[0], ordered[-1], mean - half, mean + half, warnings, needs
    )


def mean_and_variance(values: list[float]) -> tuple[float, float | None]:
    """The mean and the sample variance (n − 1; None for one value), each from an exactly
    rounded sum (math.fsum). Plain Python: numpy's per-call overhead is ten times the work on a
    cell's ~10 runs, and a summary asks it of thousands of cells."""
    n = len(values)
    mean = math.fsum(values) / n
    return mean, (
        math.fsum([(x - mean) ** 2 for x in values]) / (n - 1) if n > 1 else None
    )  # a list: fsum reads it faster than a generator


def _variance(values: list[float]) -> float:
    """The sample variance of two values or more (mean_and_variance's)."""
    _, variance = mean_and_variance(values)
    if variance is None:
        raise ValueError("a variance needs two values or more")
    return variance


def median(values: list[float]) -> float:
    """The median as numpy.median gives it (the mean of the middle two as (a + b) / 2), at a tenth
    of its per-call cost on a cell's few runs."""
    return _middle(sorted(map(float, values)))


def _middle(ordered: list[float]) -> float:
    half = len(ordered) // 2
    return ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2


def figure_needs(samples: list[list[float]], half_width: float | None) -> int | None:
    """The one rule for printing a figure with an interval: None when the figure computed from
    `samples` (one cell, or the two cells of a comparison) may be printed, that is every cell has
    INTERVAL_MIN_RUNS runs and the interval's relative half-width (for a ratio: exp of its half-width
    on the log scale, minus 1) is within INTERVAL_MAX_HALF_WIDTH. Otherwise the runs per cell it
    needs to be printed: at least INTERVAL_MIN_RUNS, more when the spread seen so far keeps the
    interval wider than that (RUNS_NEEDED_LIMIT: that many or more)."""
    if (
        min(len(s) for s in samples) >= INTERVAL_MIN_RUNS
        and half_width is not None
        and half_width <= INTERVAL_MAX_HALF_WIDTH
    ):
        return None
    # Always more than it has: Welch's interval (fewer degrees of freedom when the spreads
    # differ) can stay too wide where the pooled estimate says enough.
    at_least = max(INTERVAL_MIN_RUNS, min(len(s) for s in samples) + 1)
    if _pooled_log_sd(samples) is None:
        return at_least
    return max(at_least, runs_needed(samples, INTERVAL_MAX_HALF_WIDTH) or RUNS_NEEDED_LIMIT)


def load_student_t_meanwhile() -> None:
    """Start loading scipy.special (Student's t) in a thread of its own, for a caller that reads
    a database before it computes an interval: the import (a fifth of a second of CPU) runs
    while the caller waits on the database's server (PostgreSQL's query time; SQLite too lets go
    of the interpreter as it reads), and whoever imports it next waits for this import to end,
    the import system's own lock (bench/pg_scale.py: `fslab summary` ~0.15 s sooner among a
    million runs). A failed import says nothing here: the caller's own import says why."""
    if "scipy.special" not in sys.modules:
        threading.Thread(target=_import_student_t, name="fslab-load-scipy").start()


def _import_student_t() -> None:
    with contextlib.suppress(ImportError):
        import scipy.special  # noqa: F401


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """Student's t quantile, the t with P(T ≤ t) = p, remembered: a summary asks it of the same
    few degrees of freedom (a cell's runs − 1) thousands of times."""
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def modified_z_scores(values: list[float], ordered: list[float] | None = None) -> list[float]:
    """(x − median) / (1.4826 · MAD); all zeros when the MAD is zero. The MAD scaled to estimate a
    normal σ (divided by NORMAL_MAD). `ordered`: the values as floats, sorted (summarize has them:
    nothing converted or sorted again for each of a summary's thousands of cells)."""
    floats = [float(v) for v in values] if ordered is None else values
    center = _middle(sorted(floats) if ordered is None else ordered)
    mad = _middle(sorted([abs(x - center) for x in floats])) / NORMAL_MAD
    return [0.0] * len(floats) if mad == 0 else [(x - center) / mad for x in floats]


def _warnings(values: list[float], cv: float | None, higher_is_better: bool, ordered: list[float]) -> tuple[str, ...]:
    """What a reader should know before trusting a cell's numbers (samples in run order, and
    sorted), from the samples and the CV summarize computed of them."""
    n = len(values)
    warnings = []
    if n < MIN_RUNS:
        warnings.append(f"only {n} run{'s' if n != 1 else ''}")
    if cv is not None and cv > CV_WARNING:
        warnings.append(f"CV {cv:.1%} above {CV_WARNING:.0%}")
    if n >= OUTLIER_MIN_N:
        outliers = [i for i, z in enumerate(modified_z_scores(values, ordered), 1) if abs(z) > OUTLIER_Z]
        if outliers:
            warnings.append(
                f"outlier run{'s' if len(outliers) > 1 else ''} "
                f"{', '.join(map(str, outliers))} (modified z > {OUTLIER_Z})"
            )
    rest = _middle(sorted(values[1:])) if n >= MIN_RUNS else 0.0  # floats already
    if rest:
        worse = (rest - values[0]) / rest if higher_is_better else (values[0] - rest) / rest
        if worse > FIRST_RUN_SLOWER:
            warnings.append(f"first run {worse:.0%} slower than the rest")
    return tuple(warnings)


# --- comparing two cells ---------------------------------------------------------------------

# The four verdicts, and no other word: read from the printed interval alone (decide).
FASTER, SLOWER, EQUIVALENT, UNDECIDED = "faster", "slower", "equivalent", "undecided"
VERDICTS = (FASTER, SLOWER, EQUIVALENT, UNDECIDED)
FALSE_RATE = 1 - CONFIDENCE  # q: the false coverage rate a family's intervals hold (Benjamini–Yekutieli)
# Compared on the ratios of their runs in the same interleaved block from this many blocks both
# ran in (fixed in advance: never chosen by which interval is narrower), Welch's otherwise.
PAIRED_MIN_BLOCKS = 5


@dataclass(frozen=True)
class Comparison:
    """B against baseline A, for one metric: the ratio of geometric means B/A (of the ratios within
    blocks, when paired) with its interval, and the verdict read from that very interval (decide).

    The interval is at `level`: 95 % for one comparison on its own (compare); a family's
    (adjust_family) are widened to hold the false coverage rate across it, and, for a study that
    looked at its runs as they came, across its looks."""

    n_baseline: int
    n_other: int
    ratio: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None  # Welch's (or the paired) t-test on the log values, two-sided
    higher_is_better: bool
    detectable_change: float | None  # the smallest ratio change these runs detect (80 % power), e.g. 0.05
    mann_whitney_p: float | None = None  # only where both sides have at least 7 runs
    p_adjusted: float | None = None  # after Benjamini–Hochberg over the family of comparisons
    threshold: float = 0.03  # the practical threshold, also the margin of "equivalent"
    log_se: float | None = None  # the standard error of the log ratio the interval is drawn with
    df: float | None = None  # its degrees of freedom
    level: float = CONFIDENCE  # the interval's confidence
    paired_blocks: int = 0  # the blocks it was paired in (0: Welch's, unpaired)
    zero_side: str | None = None  # "baseline", "other" or "both": a value of 0 or below there, so no ratio
    # why the two sides may not be compared at all (statistics/timing.py: an emulated host's speed,
    # hosts of different accelerators): undecided whatever the figures, out of the family (withhold)
    withheld: str | None = None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The interval every output prints or draws, and the verdict is read from."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return self.ci_low, self.ci_high

    @cached_property  # read by every output, thousands of times a summary: worked out once
    def verdict(self) -> str:
        if self.withheld is not None:
            return UNDECIDED
        return decide(self.ratio, self.interval, self.higher_is_better, self.threshold)

    @cached_property
    def reason(self) -> str:
        """Why the verdict, in a few words: what an undecided one lacks, a decided one's margin."""
        return verdict_reason(self)

    @property
    def differs(self) -> bool:
        return self.verdict in (FASTER, SLOWER)

    @property
    def decided(self) -> bool:
        return self.verdict != UNDECIDED

    @cached_property
    def runs_to_decide(self) -> int | None:
        """Runs per cell (blocks, when paired) that would decide it if the ratio and spread seen so
        far held; None when decided, when no spread is known, or when even RUNS_NEEDED_LIMIT would not."""
        return runs_to_decide(self)


def decide(ratio: float, interval: tuple[float, float] | None, higher_is_better: bool, threshold: float) -> str:
    """The one rule: *equivalent* when the interval lies inside ±threshold (on the log scale: from
    1/(1 + threshold) to 1 + threshold); *faster* or *slower* when it excludes 1 and the ratio lies
    beyond the threshold; *undecided* otherwise, and wherever there is no interval."""
    if interval is None:
        return UNDECIDED
    low, high = interval
    margin = math.log1p(threshold)
    if low > 0 and -margin < math.log(low) and math.log(high) < margin:  # low 0: a bound past a float's range
        return EQUIVALENT
    if (low > 1 or high < 1) and beyond(ratio, threshold):
        better = ratio > 1 if higher_is_better else ratio < 1
        return FASTER if better else SLOWER
    return UNDECIDED


def ratio_text(x: float) -> str:
    """A ratio as verdicts print it: two decimals, or two significant digits far from 1."""
    if not math.isfinite(x):
        return "∞" if x > 0 else "–"
    return f"{x:.2f}" if 0.01 <= x < 1000 else f"{x:.2g}"


def interval_text(interval: tuple[float, float]) -> str:
    return f"{ratio_text(interval[0])}–{ratio_text(interval[1])}×"


def level_text(level: float) -> str:
    """An interval's confidence: "95 %", or as many decimals as tell a family's from 100 ("99.88 %")."""
    percent = level * 100
    if abs(percent - round(percent)) < 1e-9:
        return f"{round(percent)} %"
    return f"{percent:.{max(1, math.ceil(-math.log10(1 - level)) - 1)}f} %"


def verdict_reason(c: Comparison, interval_said: str | None = None) -> str:
    """Comparison.reason; an undecided one names its interval as `interval_said` words it
    (default "interval 0.91–1.20×"; a phrase that gives its level: "95 % CI 0.91–1.20×")."""
    if c.withheld is not None:
        return c.withheld
    margin = f"±{c.threshold * 100:g} %"
    verdict = c.verdict
    if verdict == EQUIVALENT:
        return f"within {margin}"
    if verdict in (FASTER, SLOWER):
        return f"beyond {margin}"
    runs = min(c.n_baseline, c.n_other)
    if c.zero_side is not None:
        side = "both sides" if c.zero_side == "both" else f"the {c.zero_side}"
        return f"a value of 0 in {side}: no ratio"
    if c.interval is None and runs < 2:
        return f"{runs} run{'s' if runs != 1 else ''}: an interval needs 2"
    if c.interval is None:  # a value within half the step its tool prints of 0 (resolution_half_width)
        return "a value within its printed resolution of 0: no ratio within any bound"
    said = f"{interval_said or f'interval {interval_text(c.interval)}'} spans the threshold"
    if runs < INTERVAL_MIN_RUNS:
        said = f"{runs} runs: {said}"
    needed = c.runs_to_decide
    if needed is not None:
        return f"{said}: ~{needed} {'blocks' if c.paired_blocks else 'runs'} would decide"
    return said


def runs_to_decide(c: Comparison) -> int | None:
    """What verdict_reason promises: the runs per cell (paired: blocks) at which an interval of
    the same level and spread would decide, the ratio staying where it is — narrower than its
    distance from 1 when beyond the threshold, than its distance from the threshold within it."""
    if c.decided or c.log_se is None or not c.log_se or c.ratio <= 0:
        return None
    distance = abs(math.log(c.ratio))
    margin = math.log1p(c.threshold)
    wanted = distance if distance > margin else margin - distance
    if wanted <= 0:
        return None
    paired, quantile = c.paired_blocks, 1 - (1 - c.level) / 2
    spread = c.log_se * math.sqrt(paired) if paired else c.log_se / math.sqrt(1 / c.n_baseline + 1 / c.n_other)

    def width(n: int) -> float:  # paired: a one-sample t of n block ratios; else two cells of n runs
        if paired:
            return t_quantile(quantile, n - 1) * spread / math.sqrt(n)
        return t_quantile(quantile, 2 * n - 2) * spread * math.sqrt(2 / n)

    # always more than it has: Welch's interval (fewer degrees of freedom where the spreads differ)
    # stays wider than the pooled projection says
    runs = range(min(c.paired_blocks or c.n_baseline, c.paired_blocks or c.n_other) + 1, RUNS_NEEDED_LIMIT + 1)
    first = bisect_left(runs, True, key=lambda n: width(n) < wanted)
    return runs[first] if first < len(runs) else None


def withhold(c: Comparison, why: str) -> Comparison:
    """`c` as a comparison that may not be made (`why`): its ratio kept for what it shows, no
    interval, test or verdict — undecided, said why, and out of its family's correction (no p)."""
    return replace(
        c, withheld=why, ci_low=None, ci_high=None, p_value=None, p_adjusted=None, mann_whitney_p=None,
        detectable_change=None, log_se=None, df=None, paired_blocks=0,
    )  # fmt: skip


def inverted(c: Comparison) -> Comparison:
    """The same comparison read the other way round (A against B instead of B against A): the
    same test and p, the ratio and its interval inverted — so faster and slower swap."""
    swap = {"baseline": "other", "other": "baseline"}
    return replace(
        c,
        n_baseline=c.n_other,
        n_other=c.n_baseline,
        ratio=1 / c.ratio if c.ratio else math.inf,
        ci_low=None if c.ci_high is None else 1 / c.ci_high,
        ci_high=None if c.ci_low is None else 1 / c.ci_low,
        zero_side=swap.get(c.zero_side or "", c.zero_side),
    )


class _Logs:
    """Each side's logs worked out once, however many of compare_pairs' pairs it is in (a cell of
    a study run of ten targets is compared nine times per metric): the mean and variance of its
    values' logs, and the mean log of its values shifted by half a resolution step. Known by the
    list itself (its id), for one call, while the pairs hold them."""

    def __init__(self) -> None:
        self._moments: dict[int, tuple[float, float | None]] = {}
        self._shifted: dict[tuple[int, float], float] = {}

    def moments(self, values: list[float]) -> tuple[float, float | None]:
        found = self._moments.get(id(values))
        if found is None:
            found = self._moments[id(values)] = mean_and_variance([math.log(x) for x in values])
        return found

    def shifted_mean(self, values: list[float], d: float) -> float:
        found = self._shifted.get((id(values), d))
        if found is None:
            found = self._shifted[(id(values), d)] = math.fsum(math.log(x + d) for x in values) / len(values)
        return found


def log_welch(
    baseline: list[float], other: list[float], logs: _Logs | None = None
) -> tuple[float, float | None, float | None]:
    """Difference of mean logs (other − baseline), its standard error and Welch's degrees of
    freedom. `logs`: each side's logs worked out once, for every pair it is in (compare_pairs)."""
    logs = logs or _Logs()
    (mean_a, var_a), (mean_b, var_b) = logs.moments(baseline), logs.moments(other)
    diff = mean_b - mean_a
    if var_a is None or var_b is None:
        return diff, None, None
    n_a, n_b = len(baseline), len(other)
    va, vb = var_a / n_a, var_b / n_b
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, 0.0, float(n_a + n_b - 2)
    df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
    return diff, se, df


def block_pairs(pair: SamplePair) -> list[tuple[float, float]]:
    """(baseline, other) of each block both sides ran in once: what a paired comparison is of."""
    if pair.blocks is None:
        return []
    mine, theirs = pair.blocks
    counts_a, counts_b = Counter(mine), Counter(theirs)
    at_a, at_b = dict(zip(mine, pair.baseline)), dict(zip(theirs, pair.other))
    return [(at_a[b], at_b[b]) for b in sorted(at_a.keys() & at_b.keys()) if counts_a[b] == counts_b[b] == 1]


def log_paired(blocks: list[tuple[float, float]]) -> tuple[float, float | None, float | None]:
    """The mean log ratio within blocks, its standard error and degrees of freedom: the block's
    share of the drift (the machine slower in one block than the next) cancels out."""
    diffs = [math.log(b) - math.log(a) for a, b in blocks]
    mean, variance = mean_and_variance(diffs)
    if variance is None:
        return mean, None, None
    return mean, math.sqrt(variance / len(diffs)), float(len(diffs) - 1)


@dataclass(frozen=True)
class SamplePair:
    """Two cells to compare: `other` against `baseline`, in a metric whose direction is `higher_is_better`.
    `blocks`: the interleaved block each value ran in (baseline's, other's), when known: from
    PAIRED_MIN_BLOCKS blocks both ran in, the comparison is paired within them."""

    baseline: list[float]
    other: list[float]
    higher_is_better: bool = True
    resolution: float = 0.0  # the step the tool prints both sides' values to (MetricKind.resolution)
    blocks: tuple[list[int], list[int]] | None = None


def compare(
    baseline: list[float],
    other: list[float],
    higher_is_better: bool = True,
    threshold: float = 0.03,
    resolution: float = 0.0,
) -> Comparison:
    """Ratio other/baseline with its 95 % Welch interval on the log scale, and its verdict alone
    (not a family's: adjust_family)."""
    return compare_pairs([SamplePair(baseline, other, higher_is_better, resolution)], threshold)[0]


def compare_pairs(pairs: list[SamplePair], threshold: float = 0.03) -> list[Comparison]:
    """compare() of each pair, in order. Asked for together so that their t quantiles and p-values
    are computed together (_welch_t_figures): a study run compares a thousand pairs and more.
    A pair with a value of 0 or below has no ratio on the log scale: undecided, never equivalent."""
    logs = _Logs()
    found: list[Comparison | None] = [_zero_comparison(pair, threshold) for pair in pairs]
    ratioed = [(i, pair) for i, pair in enumerate(pairs) if found[i] is None]
    floors = [resolution_half_width(pair, logs) for _, pair in ratioed]
    blocked = [block_pairs(pair) for _, pair in ratioed]
    figures = [
        _resolved(
            log_paired(blocks) if len(blocks) >= PAIRED_MIN_BLOCKS else log_welch(pair.baseline, pair.other, logs),
            floor,
        )
        for (_, pair), blocks, floor in zip(ratioed, blocked, floors)
    ]
    t_figures = _welch_t_figures(figures, floors)
    rank_p = mann_whitney_p_values([pair for _, pair in ratioed])
    for (i, pair), w, t, p, blocks in zip(ratioed, figures, t_figures, rank_p, blocked):
        paired = len(blocks) if len(blocks) >= PAIRED_MIN_BLOCKS else 0
        found[i] = _compared(pair, w, t, p, threshold, paired)
    return [c for c in found if c is not None]


def _zero_comparison(pair: SamplePair, threshold: float) -> Comparison | None:
    """A pair with a value of 0 or below on a side: no ratio of geometric means, no interval; its
    ratio of plain means where the baseline's is above 0 (∞ where only the baseline's is 0)."""
    low_a, low_b = min(pair.baseline) <= 0, min(pair.other) <= 0
    if not (low_a or low_b):
        return None
    mean_a, mean_b = math.fsum(pair.baseline) / len(pair.baseline), math.fsum(pair.other) / len(pair.other)
    ratio = mean_b / mean_a if mean_a > 0 else (math.inf if mean_b > 0 else 1.0)
    side = "both" if low_a and low_b else "baseline" if low_a else "other"
    return Comparison(
        len(pair.baseline), len(pair.other), ratio, None, None, None, pair.higher_is_better, None,
        threshold=threshold, zero_side=side,
    )  # fmt: skip


def resolution_half_width(pair: SamplePair, logs: _Logs | None = None) -> float:
    """How far, on the log scale, the ratio of geometric means may lie from the one measured when
    every value is known only to ± resolution / 2: the larger side of the box from
    gm(other − h) / gm(baseline + h) to gm(other + h) / gm(baseline − h). 0 without a resolution;
    infinite when a value is within half a step of 0 (its ratio is unbounded). `logs`: as log_welch's."""
    logs = logs or _Logs()
    h = pair.resolution / 2
    if not h:
        return 0.0
    if min(pair.baseline + pair.other) <= h:
        return math.inf
    a, b = logs.moments(pair.baseline)[0], logs.moments(pair.other)[0]  # the mean logs
    a_low, a_high, b_low, b_high = (
        logs.shifted_mean(values, d)
        for values, d in ((pair.baseline, -h), (pair.baseline, h), (pair.other, -h), (pair.other, h))
    )
    diff = b - a
    return max(diff - (b_low - a_high), (b_high - a_low) - diff)


def _resolved(
    welch: tuple[float, float | None, float | None], floor: float
) -> tuple[float, float | None, float | None]:
    """log_welch's figures, with no standard error (no interval, no test) where a value lies
    within half its resolution of 0 (`floor`, resolution_half_width, infinite): a ratio to it is
    not known within any bound."""
    return (welch[0], None, None) if floor == math.inf else welch


def _welch_t_figures(
    welch: list[tuple[float, float | None, float | None]], floors: list[float]
) -> list[tuple[float, float, float, float, float] | None]:
    """For each log_welch (or log_paired) result with a standard error: the t quantiles of the
    interval and of the power at its degrees of freedom, the two-sided p of its t statistic (where
    the error is 0: NaN, unused), the standard error they are of — raised where the pair's
    resolution (`floors`: resolution_half_width) needs a wider interval, so that its interval
    covers the resolution's and a difference within it is not significant — and the degrees of
    freedom; None without. Computed for all pairs at once, over numpy arrays: pair by pair they
    would cost some 300 times more."""
    tested = [i for i, (_, se, _) in enumerate(welch) if se is not None]
    found: list[tuple[float, float, float, float, float] | None] = [None] * len(welch)
    if tested:
        import numpy as np
        from scipy.special import stdtr, stdtrit

        df = np.array([welch[i][2] for i in tested])
        interval, power = stdtrit(df, np.array([[(1 + CONFIDENCE) / 2], [POWER]])).tolist()
        se = [max(welch[i][1], floors[i] / t) for i, t in zip(tested, interval)]
        statistic = np.array([abs(welch[i][0]) / error if error else math.nan for i, error in zip(tested, se)])
        p = (2 * stdtr(df, -statistic)).tolist()  # P(|T| ≥ |t|)
        for i, figures in zip(tested, zip(interval, power, p, se, df.tolist())):
            found[i] = figures
    return found


def _compared(
    pair: SamplePair,
    welch: tuple[float, float | None, float | None],
    t_figures: tuple[float, float, float, float, float] | None,
    mann_whitney_p: float | None,
    threshold: float,
    paired_blocks: int,
) -> Comparison:
    diff, _, _ = welch
    ratio = math.exp(diff)
    low = high = p = detectable = se = df = None
    if t_figures is not None:  # there is a standard error
        t, t_power, t_p, se, df = t_figures
        if se == 0:
            low = high = ratio
            p = 0.0 if diff else 1.0
        else:
            low, high = math.exp(diff - t * se), math.exp(diff + t * se)
            p = t_p
        change = math.exp((t + t_power) * se) - 1
        half = math.exp(t * se) - 1
        # a figure like any other (figure_needs): from 3 runs a side, within ±100 %
        detectable = change if figure_needs([pair.baseline, pair.other], half) is None else None
    return Comparison(
        len(pair.baseline), len(pair.other), ratio, low, high, p, pair.higher_is_better, detectable,
        mann_whitney_p, p_adjusted=p, threshold=threshold, log_se=se, df=df, paired_blocks=paired_blocks,
    )  # fmt: skip


def mann_whitney_p_values(pairs: list[SamplePair]) -> list[float | None]:
    """Each pair's two-sided Mann–Whitney U p-value (other against baseline) where both sides have
    RANK_TEST_MIN_N runs or more, else None."""
    return [
        mann_whitney_two_sided_p(p.other, p.baseline) if min(len(p.other), len(p.baseline)) >= RANK_TEST_MIN_N else None
        for p in pairs
    ]


# Own code, not scipy.stats.mannwhitneyu: importing scipy.stats takes a second, as long as a whole
# summary of 2,000 runs may (issue 11); tests/test_stats.py checks it against scipy's.
# scipy's rule (method "auto"): the exact null distribution when a side has at most this many values
# and none is tied.
RANK_EXACT_MAX_N = 8


def mann_whitney_two_sided_p(x: list[float], y: list[float]) -> float:
    """The two-sided p-value of the Mann–Whitney U test of x against y, as scipy's mannwhitneyu
    gives it (method "auto", with the continuity correction): U = max(U₁, U₂) from average
    ranks; with a side of at most 8 values and no ties the exact null distribution (2 · P(U ≥ u)),
    else the normal approximation with the tie correction (2 · sf(z), z = (U − mn/2 − ½)/σ); at
    most 1. NaN where a value is NaN."""
    n1, n2 = len(x), len(y)
    if not n1 or not n2:
        raise ValueError("the Mann–Whitney test needs values on both sides")
    values = [float(v) for v in (*x, *y)]
    if any(map(math.isnan, values)):
        return math.nan
    n = n1 + n2
    ordered = sorted(values)
    # Each value's rank, doubled (an average rank is a multiple of ½), and Σ (t³ − t) over groups of t tied values.
    doubled_rank = dict(zip(ordered, range(2, 2 * n + 1, 2)))
    tie_term = 0
    if len(doubled_rank) < n:
        doubled_rank = {}
        for value, group in groupby(enumerate(ordered, 1), key=lambda ranked: ranked[1]):
            ranks = [rank for rank, _ in group]
            doubled_rank[value] = ranks[0] + ranks[-1]
            tie_term += len(ranks) ** 3 - len(ranks)
    u1 = (sum(map(doubled_rank.__getitem__, values[:n1])) - n1 * (n1 + 1)) / 2
    u = max(u1, n1 * n2 - u1)
    if min(n1, n2) <= RANK_EXACT_MAX_N and not tie_term:
        cumulative = _u_cumulative_counts(min(n1, n2), max(n1, n2))
        return min(1.0, 2 * cumulative[n1 * n2 - int(u)] / cumulative[-1])
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))  # scipy's arithmetic, step by step
    if sigma == 0:  # every value the same: U = mn/2
        return 1.0
    z = (u - n1 * n2 / 2 - 0.5) / sigma
    return min(1.0, math.erfc(z / math.sqrt(2)))  # 2 · P(Z > z)


@cache
def _u_cumulative_counts(m: int, n: int) -> tuple[int, ...]:
    """Exact cumulative counts of U = 0..mn over the C(m+n, m) orderings of m against n untied
    values: U's counts are the coefficients of the Gaussian binomial coefficient
    [m+n choose m]_q = Π_{i=1..m} (1 − q^(n+i)) / (1 − q^i), multiplied and divided out factor by
    factor in integers, truncated at q^mn."""
    top = m * n
    counts = [1] + [0] * top
    for i in range(1, m + 1):
        for k in range(top, n + i - 1, -1):
            counts[k] -= counts[k - n - i]
        for k in range(i, top + 1):
            counts[k] += counts[k - i]
    return tuple(accumulate(counts))


def beyond(ratio: float, threshold: float) -> bool:
    """Whether a ratio is a change of more than `threshold`, symmetric on the log scale: beyond
    1.03 or below 1/1.03 at 3 %, so a throughput that falls and the latency that rises with it
    weigh the same."""
    return abs(math.log(ratio)) > math.log1p(threshold)


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """Adjusted p-values controlling the false discovery rate over one family of tests."""
    if not p_values:
        return []
    import numpy as np

    p = np.asarray(p_values, dtype=float)
    m = len(p)
    order = np.argsort(p)
    ranked = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return [float(x) for x in out]


def family_level(p_values: list[float], looks: int = 1) -> float:
    """The confidence of a family's intervals (Benjamini & Yekutieli 2005, false coverage rate):
    R of its m tests reject "no difference" under Benjamini–Hochberg at q = FALSE_RATE, and every
    interval is drawn at 1 − max(R, 1)·q/m — so the ones that exclude 1 are exactly the ones BH
    rejects, and the expected share of intervals missing their ratio among those selected stays
    under q. A study that looked at its runs as they came (`looks`: how many times it could have
    stopped) splits that error among its looks (Bonferroni): valid whichever look it stopped at."""
    m = len(p_values)
    if not m:
        return CONFIDENCE
    rejected = sum(q <= FALSE_RATE for q in benjamini_hochberg(p_values))
    return 1 - max(rejected, 1) * FALSE_RATE / m / max(looks, 1)


def adjust_family(comparisons: list[Comparison], threshold: float, looks: int = 1) -> list[Comparison]:
    """Benjamini–Hochberg's adjusted p of every comparison that has a p-value, and every interval
    drawn at the family's level (family_level): the verdicts, read from the intervals, follow."""
    tested = [i for i, c in enumerate(comparisons) if c.p_value is not None]
    p_values = [comparisons[i].p_value or 0.0 for i in tested]
    level = family_level(p_values, looks)
    untested = set(range(len(comparisons))) - set(tested)
    result = [replace(c, threshold=threshold) if i in untested else c for i, c in enumerate(comparisons)]
    if not tested:
        return result
    import numpy as np
    from scipy.special import stdtrit

    widths = stdtrit(np.array([comparisons[i].df for i in tested], dtype=float), 1 - (1 - level) / 2).tolist()
    for i, q, t in zip(tested, benjamini_hochberg(p_values), widths):
        c = comparisons[i]
        se, log_ratio = c.log_se or 0.0, math.log(c.ratio)
        result[i] = replace(
            c, p_adjusted=q, level=level, threshold=threshold,
            ci_low=_exp(log_ratio - t * se), ci_high=_exp(log_ratio + t * se),
        )  # fmt: skip
    return result


def _exp(x: float) -> float:
    """exp, ∞ past a float's range: a family's interval at 2 runs a side (t of 1 degree of freedom
    at 1 − 0.05/m/looks) may reach 10^400."""
    return math.exp(x) if x < 709 else math.inf


def geometric_mean(values: list[float]) -> float:
    return math.exp(math.fsum(map(math.log, values)) / len(values))


def _pooled_log_sd(samples: list[list[float]]) -> float | None:
    """The runs' spread on the log scale, pooled over cells; a cell with a value of 0 or below
    (a read workload's device writes) has no logarithm and no part in it."""
    logs = [[math.log(x) for x in s] for s in samples if len(s) >= 2 and min(s) > 0]
    if not logs:
        return None
    return math.sqrt(sum(_variance(x) * (len(x) - 1) for x in logs) / sum(len(x) - 1 for x in logs))


def _half_width(pooled_log_sd: float, runs: int) -> float:
    return t_quantile((1 + CONFIDENCE) / 2, 2 * runs - 2) * pooled_log_sd * math.sqrt(2 / runs)


def projected_half_width(samples: list[list[float]], runs: int) -> float:
    """The half-width (log scale) of a ratio's 95 % interval with `runs` per cell, at the
    pooled spread seen so far."""
    return _half_width(_pooled_log_sd(samples) or 0.0, runs)


RUNS_NEEDED_LIMIT = 1000


def runs_needed(samples: list[list[float]], precision: float, max_runs: int = RUNS_NEEDED_LIMIT) -> int | None:
    """Runs per cell for a 95 % interval of the ratio within ±precision (log scale), from the
    pooled spread of the cells' log values; None when there is no spread to go on."""
    pooled = _pooled_log_sd(samples)
    if pooled is None:
        return None
    target = math.log1p(precision)
    # The half-width falls as runs grow (t's quantile and √(2/n) both do): bisect for the first that reaches the target.
    runs = range(2, max_runs + 1)
    first = bisect_left(runs, True, key=lambda n: _half_width(pooled, n) <= target)
    return runs[first] if first < len(runs) else None


@dataclass(frozen=True)
class Ranking:
    """Targets best first, read from one family of pairwise verdicts (`differs`), never ordering
    what those verdicts do not tell apart.

    `letters` is a compact letter display: two targets share a letter exactly when their
    comparison found no detectable difference. `tiers` is the same in '>' and '=' when that
    notation can say it exactly — every pair within a tier not told apart, every pair across tiers
    detectably different — and None when it cannot ("differs" is not transitive: a = b, b = c, a > c)."""

    order: tuple[str, ...]
    letters: dict[str, str]
    tiers: tuple[tuple[str, ...], ...] | None


def rank(scores: dict[str, float], differs: Callable[[str, str], bool], higher_is_better: bool = True) -> Ranking:
    """`scores` (geometric means) give the order; `differs(a, b)` (symmetric: the verdict of their
    comparison) the letters and, where they say it exactly, the tiers."""
    order = sorted(scores, key=lambda name: scores[name], reverse=higher_is_better)
    position = {name: i for i, name in enumerate(order)}
    groups = sorted(
        _maximal_cliques(order, lambda a, b: not differs(a, b)), key=lambda g: sorted(position[n] for n in g)
    )
    letters = {name: "".join(_letter(i) for i, g in enumerate(groups) if name in g) for name in order}
    disjoint = sum(len(g) for g in groups) == len(order)
    contiguous = all(max(position[n] for n in g) - min(position[n] for n in g) == len(g) - 1 for g in groups)
    tiers = tuple(tuple(sorted(g, key=position.__getitem__)) for g in groups) if disjoint and contiguous else None
    return Ranking(tuple(order), letters, tiers)


def _maximal_cliques(names: list[str], together: Callable[[str, str], bool]) -> list[frozenset[str]]:
    """Every maximal set of names pairwise `together` (Bron–Kerbosch; a study has a few targets)."""
    found: list[frozenset[str]] = []

    def extend(clique: set[str], candidates: list[str], excluded: list[str]) -> None:
        if not candidates and not excluded:
            found.append(frozenset(clique))
        for name in list(candidates):
            extend(
                clique | {name},
                [n for n in candidates if n != name and together(name, n)],
                [n for n in excluded if together(name, n)],
            )
            candidates = [n for n in candidates if n != name]
            excluded = [*excluded, name]

    extend(set(), list(names), [])
    return found


def _letter(i: int) -> str:
    return "abcdefghijklmnopqrstuvwxyz"[i] if i < 26 else f"[{i + 1}]"
