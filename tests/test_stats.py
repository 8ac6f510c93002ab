import math
import subprocess
import sys
from itertools import combinations

import numpy as np
import pytest
from scipy import special, stats as sps

from fslab.report.summary import beyond_raw_note
from fslab.statistics.analysis import analyse, ranking_line
from fslab.statistics.raw_reference import beyond_raw, raw_references
from fslab.statistics.stats import (
    NORMAL_MAD,
    VERDICTS,
    Comparison,
    SamplePair,
    _u_cumulative_counts,
    adjust_family,
    benjamini_hochberg,
    compare,
    compare_pairs,
    decide,
    family_level,
    inverted,
    log_welch,
    mann_whitney_p_values,
    mann_whitney_two_sided_p,
    median,
    modified_z_scores,
    rank,
    runs_needed,
    summarize,
    t_quantile,
)

SAMPLES = [51154.0, 49870.5, 53021.2, 50500.0, 47950.8, 52210.3, 50011.1]


def test_summary_matches_numpy_and_scipy():
    s = summarize(SAMPLES)
    data = np.array(SAMPLES)
    low, high = sps.t.interval(0.95, len(data) - 1, loc=data.mean(), scale=sps.sem(data))
    assert s.n == 7
    assert s.mean == pytest.approx(data.mean())
    assert s.median == pytest.approx(np.median(data))
    assert s.stdev == pytest.approx(data.std(ddof=1))
    assert s.cv == pytest.approx(data.std(ddof=1) / data.mean())
    assert (s.minimum, s.maximum) == (min(SAMPLES), max(SAMPLES))
    assert (s.ci_low, s.ci_high) == (pytest.approx(low), pytest.approx(high))


def test_one_sample_has_no_spread_or_interval():
    s = summarize([42.0])
    assert (s.n, s.mean, s.median) == (1, 42.0, 42.0)
    assert s.stdev is None and s.cv is None and s.ci_low is None and s.ci_half_width is None


def test_no_samples_is_an_error():
    with pytest.raises(ValueError):
        summarize([])


# --- comparisons ------------------------------------------------------------------------------


A = [36996.0, 35120.4, 38010.9, 36550.2, 35890.7]
B = [26024.0, 27330.1, 25410.8, 26900.3, 25877.5, 26500.0]


def test_log_ratio_interval_and_p_match_scipy_welch():
    c = compare(A, B, higher_is_better=True)
    welch = sps.ttest_ind(np.log(B), np.log(A), equal_var=False)
    low, high = welch.confidence_interval(0.95)
    assert c.ratio == pytest.approx(np.exp(np.log(B).mean() - np.log(A).mean()))
    assert (c.ci_low, c.ci_high) == (pytest.approx(np.exp(low)), pytest.approx(np.exp(high)))
    assert c.p_value == pytest.approx(welch.pvalue)
    assert c.verdict == "slower" and c.mann_whitney_p is None, "rank test only with 7 runs a side"


def test_mann_whitney_only_with_seven_runs_a_side():
    rng = np.random.default_rng(3)
    a, b = list(rng.normal(100, 3, 7)), list(rng.normal(110, 3, 8))
    c = compare(a, b)
    assert c.mann_whitney_p == pytest.approx(sps.mannwhitneyu(b, a, alternative="two-sided").pvalue)


def test_pairs_compared_together_give_each_pair_its_own_figures_to_the_bit():
    """compare_pairs computes the t figures of all pairs at once: each comparison must be the one
    that pair gets alone, to the bit, whatever else is in the list. Small samples with and without
    ties side by side: the rank test exact or normal as scipy picks per pair."""
    rng = np.random.default_rng(11)

    def cell(n: int, tied: bool) -> list[float]:
        values = [float(v) for v in rng.lognormal(np.log(100), 0.05, n)]
        return [*values[:-1], values[0]] if tied else values

    sizes = [(7, 7), (10, 10), (7, 8), (5, 5), (12, 9), (10, 10), (8, 7), (7, 7)]
    pairs = [
        SamplePair(cell(n_a, tied), cell(n_b, False), higher_is_better=i % 3 != 0)
        for i, (n_a, n_b) in enumerate(sizes)
        for tied in (False, True)
    ]
    pairs.append(SamplePair([100.0, 100.0, 100.0], [100.0, 100.0, 100.0]))  # no spread: p 1, no t statistic
    together = compare_pairs(pairs)
    assert together == [compare(p.baseline, p.other, p.higher_is_better) for p in pairs]
    alone = [
        float(sps.mannwhitneyu(p.other, p.baseline, alternative="two-sided").pvalue)
        if min(len(p.baseline), len(p.other)) >= 7
        else None
        for p in pairs
    ]
    assert [c.mann_whitney_p for c in together] == [None if p is None else pytest.approx(p, rel=1e-9) for p in alone]
    assert len({alone[0], alone[1], alone[-3], alone[-2]}) == 4, (
        "7 against 7 with and without ties: the exact and the normal test"
    )
    assert (together[-1].p_value, together[-1].ci_low, together[-1].ratio) == (1.0, 1.0, 1.0)
    assert compare_pairs([]) == []


def test_rank_tests_are_scipys():
    """fslab's Mann–Whitney U (its own: scipy.stats takes a second to import) gives scipy's p,
    exact (a side of at most 8 untied values) or normal, with ties, identical samples, one
    constant value, a NaN; below 7 runs a side (n = 1, 2, 6) none. Exact p-values are fslab's
    counts divided once, scipy's a sum of floats: they agree to 1e-9, not to the bit."""
    rng = np.random.default_rng(31)
    pairs = []
    for n_a, n_b in [(7, 7), (7, 8), (8, 8), (8, 9), (9, 9), (10, 10), (12, 7), (6, 10), (1, 1), (2, 2)]:
        a, b = list(rng.lognormal(4, 0.1, n_a)), list(rng.lognormal(4.05, 0.1, n_b))
        pairs += [
            SamplePair(a, b),
            SamplePair([*a[:-1], a[0]], b),  # a tie within one side
            SamplePair(a, [*b[:-1], a[0]]),  # a tie across the sides
            SamplePair(a, list(a)),  # identical samples
            SamplePair([5.0] * n_a, [5.0] * n_b),  # one value throughout
            SamplePair([math.nan, *a[1:]], b),
        ]
    found = mann_whitney_p_values(pairs)
    for pair, p in zip(pairs, found):
        if min(len(pair.baseline), len(pair.other)) < 7:
            assert p is None
            continue
        reference = float(sps.mannwhitneyu(pair.other, pair.baseline, alternative="two-sided").pvalue)
        assert p == pytest.approx(reference, rel=1e-9, abs=0) or (math.isnan(p) and math.isnan(reference)), (
            pair,
            p,
            reference,
        )
    assert sum(p is not None for p in found) == 7 * 6
    assert mann_whitney_p_values([]) == []


def _scipys_method(x: list[float], y: list[float]) -> str:
    """scipy's choice (method "auto")."""
    return "exact" if min(len(x), len(y)) <= 8 and len(set(x) | set(y)) == len(x) + len(y) else "asymptotic"


def test_rank_tests_of_random_samples_are_scipys_either_way_round():
    rng = np.random.default_rng(2026)
    pairs = []
    for i in range(400):
        n1, n2 = (int(n) for n in rng.integers(7, 41, 2))
        if i % 5 == 0:
            n1 = int(rng.integers(7, 9))  # a small side: the exact test unless tied
        x, y = rng.normal(0, 1, n1), rng.normal(rng.uniform(-1.5, 1.5), 1, n2)
        kind = ["untied", "tied", "untied", "tied", "separated"][i % 5]
        if kind == "tied":
            x, y = np.round(x, 1), np.round(y, 1)
        if kind == "separated":
            x = np.sort(x) - 10
        pairs.append((kind, [float(v) for v in x], [float(v) for v in y]))
    pairs += [("equal", [3.0] * n1, [3.0] * n2) for n1, n2 in [(7, 7), (7, 12), (20, 9), (40, 40)]]
    pairs += [
        ("separated", list(range(n1)), [100.0 + v for v in range(n2)])
        for n1, n2 in [(7, 7), (8, 40), (7, 40), (40, 40), (40, 9)]
    ]
    seen = set()
    for kind, x, y in pairs:
        mine = mann_whitney_two_sided_p(x, y)
        assert mine == pytest.approx(float(sps.mannwhitneyu(x, y, alternative="two-sided").pvalue), rel=1e-9, abs=0), (
            kind,
            len(x),
            len(y),
        )
        assert mann_whitney_two_sided_p(y, x) == mine, "two-sided: either way round"
        seen.add((kind, _scipys_method(x, y)))
    assert {
        ("untied", "exact"),
        ("untied", "asymptotic"),
        ("tied", "asymptotic"),
        ("separated", "exact"),
        ("separated", "asymptotic"),
        ("equal", "asymptotic"),
    } <= seen
    assert ("tied", "exact") not in seen


def test_the_exact_null_distribution_counts_every_ordering():
    """U's counts from the Gaussian binomial coefficient are those of all C(m+n, m) orderings."""
    for m, n in [(1, 1), (1, 5), (3, 4), (4, 4), (2, 7), (5, 6)]:
        counts = [0] * (m * n + 1)
        for positions in combinations(range(m + n), m):  # where the m values of x stand in the sorted whole
            counts[sum(p - i for i, p in enumerate(positions))] += 1  # U: the y values below each x
        cumulative = _u_cumulative_counts(m, n)
        assert [b - a for a, b in zip((0, *cumulative), cumulative)] == counts, (m, n)
        assert cumulative[-1] == math.comb(m + n, m)


def test_rank_test_extremes():
    assert mann_whitney_two_sided_p([3.0] * 7, [3.0] * 9) == 1.0, "all equal: U = mn/2"
    assert mann_whitney_two_sided_p(list(range(8)), [100.0 + v for v in range(40)]) == 2 / math.comb(48, 8), (
        "the smallest exact p"
    )
    smallest = mann_whitney_two_sided_p(list(range(40)), [100.0 + v for v in range(40)])
    assert 0 < smallest < 1e-13
    assert math.isnan(mann_whitney_two_sided_p([1.0, math.nan] * 4, [2.0] * 8))
    with pytest.raises(ValueError):
        mann_whitney_two_sided_p([], [1.0])


def test_welch_figures_of_many_pairs_match_scipy():
    """The interval, p and detectable change of pairs of every size and spread, against scipy's
    Welch test and t quantiles."""
    rng = np.random.default_rng(12)
    pairs = [
        SamplePair(
            list(rng.lognormal(np.log(100), rng.uniform(0.005, 0.3), rng.integers(2, 15))),
            list(rng.lognormal(np.log(100 * rng.uniform(0.8, 1.25)), rng.uniform(0.005, 0.3), rng.integers(2, 15))),
        )
        for _ in range(300)
    ]
    for pair, c in zip(pairs, compare_pairs(pairs)):
        a, b = np.log(pair.baseline), np.log(pair.other)
        welch = sps.ttest_ind(b, a, equal_var=False)
        low, high = welch.confidence_interval(0.95)
        df = welch.df
        se = (b.mean() - a.mean()) / welch.statistic
        assert c.p_value == pytest.approx(welch.pvalue, rel=1e-9)
        assert (c.ci_low, c.ci_high) == (pytest.approx(np.exp(low), rel=1e-12), pytest.approx(np.exp(high), rel=1e-12))
        detectable = np.exp((sps.t.ppf(0.975, df) + sps.t.ppf(0.8, df)) * abs(se)) - 1
        printed = min(len(a), len(b)) >= 3 and np.exp(high - low) ** 0.5 - 1 <= 1  # a figure as any (figure_needs)
        assert c.detectable_change == (pytest.approx(detectable, rel=1e-9) if printed else None)


def test_t_figures_are_scipys_to_the_bit():
    """A cell's interval, and a comparison's interval and p, from scipy's own t (special.stdtrit,
    stdtr) at every degree of freedom a study meets: the reference users trust, not a copy of it."""
    for df in range(1, 2000):
        assert t_quantile(0.975, df) == special.stdtrit(df, 0.975), df
    rng = np.random.default_rng(21)
    pairs = [
        SamplePair(
            list(rng.lognormal(np.log(100), 0.1, rng.integers(2, 12))),
            list(rng.lognormal(np.log(105), 0.05, rng.integers(2, 12))),
        )
        for _ in range(200)
    ]
    for pair, c in zip(pairs, compare_pairs(pairs)):
        diff, se, df = log_welch(pair.baseline, pair.other)
        t = special.stdtrit(df, 0.975)
        assert (c.ci_low, c.ci_high, c.p_value) == (
            math.exp(diff - t * se),
            math.exp(diff + t * se),
            2 * special.stdtr(df, -abs(diff) / se),
        )


def test_cells_compared_with_every_other_give_each_pair_its_own_figures_to_the_bit():
    """As a summary compares them: each cell's very list in many pairs (every other target),
    and in pairs of two resolutions — compare_pairs works out a list's logs once (stats._Logs),
    and each comparison must still be the one its pair gets alone, to the bit."""
    rng = np.random.default_rng(5)
    cells = [[float(v) for v in rng.lognormal(np.log(50), 0.03, 10)] for _ in range(5)]
    pairs = [SamplePair(a, b, True, resolution) for resolution in (0.0, 4.0, 8.0) for a, b in combinations(cells, 2)]
    together = compare_pairs(pairs)
    assert together == [compare(p.baseline, p.other, p.higher_is_better, resolution=p.resolution) for p in pairs]
    intervals = [[(c.ci_low, c.ci_high) for c in together[i : i + 10]] for i in (0, 10, 20)]
    assert all(a != b for a, b in combinations(intervals, 2)), "each resolution widens the intervals its own way"


def test_student_t_loaded_meanwhile_is_there_when_needed_and_says_nothing_when_it_cannot_be():
    """A summary starts loading scipy.special in a thread while it reads (load_student_t_meanwhile):
    the figures that need it find it loaded; where it cannot be loaded, the thread prints nothing
    (no traceback of its own): the statistics' own import says why, once."""
    code = """import sys, threading
from fslab.statistics.stats import load_student_t_meanwhile, t_quantile
load_student_t_meanwhile()
print([t.name for t in threading.enumerate() if t is not threading.main_thread()])
print(round(t_quantile(0.975, 9), 6), 'scipy.special' in sys.modules)"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "['fslab-load-scipy']" and out[1] == "2.262157 True"
    blocked = """import sys
class NoScipy:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] == 'scipy':
            raise ImportError('scipy is not installed')
sys.meta_path.insert(0, NoScipy())
from fslab.statistics.stats import load_student_t_meanwhile, t_quantile
load_student_t_meanwhile()
import threading
[t.join() for t in threading.enumerate() if t is not threading.main_thread()]
t_quantile(0.975, 9)"""
    done = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.count("Traceback") == 1 and "scipy is not installed" in done.stderr, (
        done.stderr
    )


def test_scipy_is_loaded_only_where_a_figure_needs_it():
    """fslab --help loads no scipy; statistics load scipy.special for a t interval, and never
    scipy.stats (a second more), not even for a rank test (7 runs a side): that one is fslab's."""
    help_imports = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "fslab", "--help"], capture_output=True, text=True, check=True
    ).stderr
    assert "fslab.cli" in help_imports and "scipy" not in help_imports
    code = """import sys
from fslab.statistics.stats import compare, summarize
loaded = lambda: sorted({m for m in sys.modules if m in ("scipy.special", "scipy.stats")})
summarize([3.0]); print(loaded())
compare([1.0, 1.1, 1.2], [1.3, 1.2, 1.4]); print(loaded())
compare([1.0 + i / 10 for i in range(7)], [1.05 + i / 10 for i in range(7)]); print(loaded())"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "['scipy.special']", "['scipy.special']"]


def test_benjamini_hochberg_matches_scipy():
    p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216]
    assert benjamini_hochberg(p) == pytest.approx(list(sps.false_discovery_control(p, method="bh")))
    assert benjamini_hochberg([]) == []


def test_correction_can_turn_a_marginal_verdict_into_undecided():
    rng = np.random.default_rng(11)
    base = list(rng.lognormal(np.log(100), 0.05, 5))
    marginal = next(
        c
        for seed in range(500)
        for c in [compare(base, list(np.random.default_rng(seed).lognormal(np.log(107), 0.05, 5)))]
        if 0.02 < c.p_value < 0.05
    )
    nulls = [compare(base, list(np.random.default_rng(1000 + i).lognormal(np.log(100), 0.05, 5))) for i in range(9)]
    adjusted = adjust_family([marginal, *nulls], threshold=0.03)
    assert marginal.verdict == "faster" and adjusted[0].verdict == "undecided"
    assert adjusted[0].p_adjusted > marginal.p_value
    # the verdict is read from the interval printed: the family's is wider, and holds 1
    assert adjusted[0].level > marginal.level and adjusted[0].ci_low < 1 < adjusted[0].ci_high


@pytest.mark.parametrize(
    "ratio, sigma, expected",
    [
        (1.00, 0.02, "equivalent"),
        (1.10, 0.02, "faster"),
        (0.90, 0.02, "slower"),
        (1.10, 0.60, "undecided"),
    ],
    ids=["equal", "10%-faster-low-noise", "10%-slower-low-noise", "10%-apart-huge-noise"],
)
def test_verdicts_on_constructed_data(ratio, sigma, expected):
    rng = np.random.default_rng(5)
    base = list(rng.lognormal(np.log(1000), sigma, 10))
    other = list(rng.lognormal(np.log(1000 * ratio), sigma, 10))
    assert compare(base, other, higher_is_better=True).verdict == expected


def test_direction_decides_faster_for_latency():
    assert compare([100.0, 101, 99, 100.5], [80.0, 81, 79, 80.5], higher_is_better=False).verdict == "faster"
    assert compare([100.0, 101, 99, 100.5], [80.0, 81, 79, 80.5], higher_is_better=True).verdict == "slower"


def test_a_certain_change_within_the_threshold_is_equivalent():
    base = [1000.0, 1001, 999, 1000.5, 999.5]
    other = [1020.0, 1021, 1019, 1020.5, 1019.5]  # 2 %: certain, but within 3 %
    c = compare(base, other, threshold=0.03)
    assert c.p_value < 1e-6 and c.verdict == "equivalent" and c.reason == "within ±3 %"
    assert compare(base, other, threshold=0.01).verdict == "faster"
    # 2 % measured, but an interval reaching past 3 %: neither equivalent nor beyond the threshold
    loose = compare([1000.0, 1010, 990, 1005, 995], [1020.0, 1032, 1008, 1026, 1014], threshold=0.03)
    assert loose.interval[1] > 1.03 and loose.verdict == "undecided"
    assert loose.reason.startswith("interval 1.0") and "spans the threshold: ~" in loose.reason


def _made(ratio: float, low: float | None, high: float | None, higher_is_better: bool = True) -> Comparison:
    return Comparison(3, 3, ratio, low, high, None, higher_is_better, None)


@pytest.mark.parametrize(
    "ratio, interval, higher_is_better, verdict",
    [
        (1.01, (0.99, 1.025), True, "equivalent"),  # inside ±3 % on the log scale
        (1.01, (1 / 1.031, 1.025), True, "undecided"),  # reaching below 1/1.03
        (1.10, (1.01, 1.2), True, "faster"),  # excludes 1, ratio beyond: faster, though the interval dips below 1.03
        (1.10, (0.99, 1.2), True, "undecided"),  # beyond, but 1 inside
        (0.80, (0.7, 0.9), True, "slower"),
        (0.80, (0.7, 0.9), False, "faster"),  # a latency falling
        (1.02, (1.01, 1.04), True, "undecided"),  # excludes 1, within the threshold, interval not inside it
        (1000.0, (50.0, 20_000.0), True, "faster"),
        (1000.0, None, True, "undecided"),
    ],
)
def test_the_four_verdicts_are_read_from_the_interval_alone(ratio, interval, higher_is_better, verdict):
    c = _made(ratio, *(interval or (None, None)), higher_is_better=higher_is_better)
    assert c.verdict == verdict and decide(ratio, interval, higher_is_better, 0.03) == verdict
    assert c.verdict in VERDICTS and inverted(c).verdict == {"faster": "slower", "slower": "faster"}.get(
        verdict, verdict
    )


def test_a_thousandfold_ratio_from_two_runs_is_decided_only_by_an_interval_that_excludes_1():
    """Two runs a side: a 1,000× ratio is faster where its interval (1 degree of freedom, wide)
    excludes 1, undecided where the runs spread too far for that — never equivalent."""
    tight = compare([100.0, 102], [100_000.0, 101_000])
    assert tight.verdict == "faster" and tight.interval[0] > 1 and tight.reason == "beyond ±3 %"
    spread = compare([100.0, 5000], [100_000.0, 1000])
    assert spread.ratio > 1 and spread.interval[0] < 1 and spread.verdict == "undecided"
    assert spread.reason.startswith("2 runs: interval ")
    family = adjust_family([tight, spread], 0.03)  # wider in a family: still never equivalent
    assert {c.verdict for c in family} <= {"faster", "undecided"}


def test_a_count_of_0_on_one_side_is_never_equivalent():
    for baseline, other in (([0.0, 0.0, 0.0], [3.0, 4, 5]), ([3.0, 4, 5], [0.0, 0, 0]), ([0.0, 1, 0], [1.0, 0, 1])):
        c = compare(baseline, other)
        assert c.verdict == "undecided" and c.interval is None and "a value of 0" in c.reason, (baseline, other)
    assert compare([0.0, 0, 0], [3.0, 4, 5]).ratio == math.inf
    assert compare([2.0, 2, 2], [0.0, 0, 0]).ratio == 0.0


def test_one_run_a_side_says_what_an_interval_needs():
    c = compare([100.0], [200.0])
    assert c.verdict == "undecided" and c.reason == "1 run: an interval needs 2"


def test_a_familys_intervals_hold_the_false_coverage_rate_and_match_its_rejections():
    """Benjamini–Yekutieli: every interval of a family at 1 − max(R, 1)·q/m; those that exclude 1
    are exactly those Benjamini–Hochberg rejects."""
    rng = np.random.default_rng(35)
    base = list(rng.lognormal(np.log(100), 0.03, 6))
    ratios = [1.0, 1.0, 1.0, 1.02, 1.05, 1.2, 0.8, 1.0]
    compared = [compare(base, list(rng.lognormal(np.log(100 * r), 0.03, 6))) for r in ratios]
    family = adjust_family(compared, 0.03)
    rejected = sum(c.p_adjusted <= 0.05 for c in family)
    assert family_level([c.p_value for c in compared]) == pytest.approx(1 - max(rejected, 1) * 0.05 / len(ratios))
    assert all(c.level == family[0].level for c in family)
    assert [c.p_adjusted <= 0.05 for c in family] == [not (c.ci_low <= 1 <= c.ci_high) for c in family]
    # looks of a sequential study split the error further
    assert family_level([c.p_value for c in compared], looks=4) > family[0].level


def test_the_reason_names_the_runs_that_would_decide():
    c = compare([100.0, 104, 97, 102], [103.0, 108, 99, 106])
    assert c.verdict == "undecided" and c.runs_to_decide is not None and c.runs_to_decide > 4
    assert c.reason.endswith(f"~{c.runs_to_decide} runs would decide")
    assert compare([100.0, 101, 99], [150.0, 151, 149]).runs_to_decide is None  # decided


def test_interval_covers_the_true_ratio_95_percent_of_the_time():
    rng = np.random.default_rng(2026)
    true_ratio, trials, pairs = 1.07, 2000, []
    for _ in range(trials):
        n_a, n_b = rng.integers(3, 11, size=2)
        sigma_a, sigma_b = rng.uniform(0.02, 0.15, size=2)
        a = rng.lognormal(np.log(500), sigma_a, n_a)
        b = rng.lognormal(np.log(500 * true_ratio), sigma_b, n_b)
        pairs.append(SamplePair(list(a), list(b)))
    covered = sum(c.ci_low <= true_ratio <= c.ci_high for c in compare_pairs(pairs))
    assert 0.93 <= covered / trials <= 0.97, covered / trials


def test_modified_z_scores_use_the_scaled_mad():
    values = [100.0, 101.0, 99.0, 100.5, 250.0]
    mad = np.median(np.abs(np.array(values) - np.median(values))) * 1.4826
    assert modified_z_scores(values) == pytest.approx(list((np.array(values) - np.median(values)) / mad), rel=1e-4)
    assert modified_z_scores([5.0, 5.0, 5.0]) == [0.0, 0.0, 0.0]


def test_median_and_summary_are_numpys_to_the_bit():
    """The median and the MAD are taken in plain Python (numpy's per-call cost is 10 times the work
    on a few runs): they must be exactly what numpy gives, the mean of the middle two included."""
    rng = np.random.default_rng(5)
    samples = [list(rng.lognormal(np.log(1000), 0.3, n)) for n in range(1, 13) for _ in range(20)]
    samples += [[3, 1, 4, 1], [2**53 + 1, 2**53 + 3], [7.0, 7.0, 7.0]]
    for values in samples:
        data = np.asarray(values, dtype=float)
        s = summarize(values)
        assert median(values) == s.median == float(np.median(data)), values
        assert (s.minimum, s.maximum) == (float(data.min()), float(data.max()))
        mad = float(np.median(np.abs(data - np.median(data)))) / NORMAL_MAD
        assert modified_z_scores(values) == (
            [0.0] * len(data) if mad == 0 else [float(z) for z in (data - np.median(data)) / mad]
        )


def test_warnings_flag_but_never_drop():
    assert list(summarize([100.0, 101.0]).warnings) == ["only 2 runs"]
    assert any(w.startswith("CV") for w in list(summarize([100.0, 130.0, 80.0]).warnings))
    outlier = [100.0, 100.5, 99.5, 100.2, 99.8, 400.0]
    assert any("outlier run 6" in w for w in list(summarize(outlier).warnings))
    assert summarize(outlier).n == 6, "the outlier stays in the statistics"
    assert any("first run 30% slower" in w for w in list(summarize([70.0, 100.0, 101.0, 99.0]).warnings))
    assert any(
        "first run" in w for w in list(summarize([130.0, 100.0, 101.0, 99.0], higher_is_better=False).warnings)
    ), "slower latency is higher"
    assert list(summarize([100.0, 100.5, 99.5, 100.2]).warnings) == []


def test_runs_needed_for_a_precision():
    rng = np.random.default_rng(8)
    cells = [list(rng.lognormal(np.log(100), 0.05, 10)) for _ in range(3)]
    n = runs_needed(cells, precision=0.03)
    pooled = np.sqrt(np.mean([np.var(np.log(c), ddof=1) for c in cells]))
    assert sps.t.ppf(0.975, 2 * n - 2) * pooled * np.sqrt(2 / n) <= np.log(1.03)
    assert sps.t.ppf(0.975, 2 * n - 4) * pooled * np.sqrt(2 / (n - 1)) > np.log(1.03)
    assert runs_needed(cells, precision=0.10) < n


def test_ranking_ties_what_cannot_be_told_apart():
    rng = np.random.default_rng(4)
    cells = {
        "btrfs": list(rng.lognormal(np.log(26000), 0.02, 6)),
        "ext4": list(rng.lognormal(np.log(37000), 0.02, 6)),
        "xfs": list(rng.lognormal(np.log(32000), 0.02, 6)),
        "raw": list(rng.lognormal(np.log(32300), 0.02, 6)),
    }
    analysis = analyse({("w", t): {"read_iops": v} for t, v in cells.items()}, {"read_iops": True}, list(cells), ["w"])
    ranking = analysis.rankings[("w", "read_iops", None)]
    assert (
        ranking.tiers is not None
        and ranking.tiers[0] == ("ext4",)
        and sorted(ranking.tiers[1]) == ["raw", "xfs"]
        and ranking.tiers[2] == ("btrfs",)
    )
    assert ranking_line(ranking).startswith("ext4 > ") and ranking_line(ranking).endswith(" > btrfs")


def test_a_ranking_that_is_not_transitive_is_told_in_letters():
    differ = {frozenset("ac")}  # a = b, b = c, yet a > c
    ranking = rank({"a": 3.0, "b": 2.0, "c": 1.0}, lambda x, y: frozenset((x, y)) in differ)
    assert ranking.tiers is None and ranking.letters == {"a": "a", "b": "ab", "c": "b"}
    assert ranking_line(ranking) == "a (a) · b (ab) · c (b) — no verdict sets apart targets sharing a letter"
    clean = rank({"a": 3.0, "b": 2.0, "c": 1.0}, lambda x, y: "a" in (x, y))
    assert clean.tiers == (("a",), ("b", "c")) and ranking_line(clean) == "a > b = c"


def _target(name, filesystem, devices=1, images=None, layers=()):
    spec = {"devices": devices, "layers": list(layers)} | ({"images": images} if images else {})
    return {"name": name, "filesystem": filesystem, "spec": spec}


def test_each_target_is_checked_against_the_raw_devices_under_it():
    targets = [
        _target("raw", "raw", images=["raw"]),
        _target("ext4", "ext4", images=["ext4"]),
        _target("b", "btrfs", devices=2, images=["b-1", "b-2"]),
        _target("b/raw-1", "raw", images=["b-1"]),
        _target("b/raw-2", "raw", images=["b-2"]),
        _target("crypt", "raw", images=["crypt"], layers=["luks"]),
        _target("old", "xfs", devices=2),  # stored before images were: named from devices
    ]
    assert raw_references(targets) == {
        "ext4": ["raw"],
        "b": ["b/raw-1", "b/raw-2"],
        "crypt": ["raw"],
        "old": ["raw", "raw"],
    }
    samples = {
        ("r", "raw"): {"read_iops": [100.0, 110.0, 90.0]},
        ("r", "ext4"): {"read_iops": [300.0, 310.0, 290.0]},  # a cache answered
        ("r", "b/raw-1"): {"read_iops": [100.0, 104.0, 97.0]},
        ("r", "b/raw-2"): {"read_iops": [100.0, 96.0, 103.0]},
        ("r", "b"): {"read_iops": [190.0, 196.0, 203.0]},  # two devices read together: not beyond their sum
        ("r", "crypt"): {"read_iops": [140.0]},
    }
    found = beyond_raw(samples, raw_references(targets))
    assert list(found) == [("r", "ext4")] and found[("r", "ext4")]["read_iops"].comparison.ratio == pytest.approx(
        3.0, rel=0.01
    )
    assert found[("r", "ext4")]["read_iops"].comparison.ci_low > 1.5
    assert beyond_raw(samples, {}) == {}


def test_beyond_raw_needs_the_interval_not_a_median_ratio():
    """baseline-paper's XFS seq_read: 1.8× the raw median from 2 runs while the raw figure varied
    15 %: no flag. The same ratio measured tightly over 5 runs: flagged, interval and all."""
    refs = {"xfs": ["raw"]}
    noisy = {("seq_read", "raw"): {"read_iops": [2900.0, 3400.0]}, ("seq_read", "xfs"): {"read_iops": [5600.0, 5750.0]}}
    assert beyond_raw(noisy, refs) == {}
    clear = {
        ("seq_read", "raw"): {"read_iops": [3100.0, 3150.0, 3080.0, 3120.0, 3140.0]},
        ("seq_read", "xfs"): {"read_iops": [5600.0, 5650.0, 5580.0, 5620.0, 5610.0]},
    }
    flagged = beyond_raw(clear, refs)[("seq_read", "xfs")]["read_iops"]
    assert 1.5 < flagged.comparison.ci_low < flagged.comparison.ratio < flagged.comparison.ci_high
    note = beyond_raw_note(flagged)
    assert note.startswith("measured 1.8× (95 % CI 1.8–1.8×) its raw devices") and "may have answered" in note, note


def test_a_workload_no_raw_device_runs_is_held_against_the_most_they_delivered():
    """sysbench (or dd, or a scenario's phase) needs a filesystem, so the raw devices never run it:
    its bandwidth is held against their fastest cell in that direction, summed over devices."""
    refs = {"ext4": ["raw"], "b": ["b/raw-1", "b/raw-2"]}
    samples = {
        ("seq_read", "raw"): {"read_mb_s": [1000.0, 1010.0, 990.0], "read_iops": [1000.0, 1010.0, 990.0]},
        ("rand_read", "raw"): {"read_mb_s": [60.0, 61.0, 59.0]},
        ("seq_write", "raw"): {"write_mb_s": [900.0, 910.0, 890.0]},
        ("mail", "ext4"): {
            "read_mb_s": [3000.0, 3100.0, 2950.0],
            "write_mb_s": [400.0, 410.0, 390.0],
            "events_per_s": [9e5, 9.1e5, 8.9e5],
        },
        ("cow", "ext4"): {"after.read_mb_s": [2400.0, 2500.0, 2450.0], "before.read_mb_s": [950.0, 990.0, 970.0]},
        ("seq_read", "b/raw-1"): {"read_mb_s": [1000.0, 1010.0, 990.0]},
        ("seq_read", "b/raw-2"): {"read_mb_s": [1000.0, 990.0, 1005.0]},
        ("mail", "b"): {"read_mb_s": [1900.0, 1950.0, 2010.0]},  # two devices: not beyond their sum
    }
    found = beyond_raw(samples, refs)
    assert set(found) == {("mail", "ext4"), ("cow", "ext4")}
    mail = found[("mail", "ext4")]
    assert list(mail) == ["read_mb_s"], "writes at 400 MB/s and a rate of events are not judged against bandwidth"
    assert mail["read_mb_s"].reference == "seq_read" and mail["read_mb_s"].comparison.ratio == pytest.approx(
        3.04, rel=0.01
    )
    assert list(found[("cow", "ext4")]) == ["after.read_mb_s"], "a scenario phase: by its metric's own name"
    note = beyond_raw_note(mail["read_mb_s"])
    assert (
        note.startswith("measured 3.0× (95 % CI")
        and "the most its raw devices delivered in this study (seq_read)" in note
    ), note


def test_a_regression_is_judged_on_the_log_scale_like_every_verdict():
    """Throughput falling to 0.951 (1/1.0515) is the same change as latency rising to 1.0515: both
    beyond 5 %, and neither is missed because one is read as 1 − 0.951 = 4.9 %."""
    from fslab.statistics.analysis import Row, regressions
    from fslab.statistics.stats import Comparison, beyond

    def slower(ratio: float, higher_is_better: bool) -> Row:
        low, high = (ratio * 0.99, ratio * 1.01)  # an interval that excludes 1: decided
        return Row(
            "w", "t", "t", "m", Comparison(10, 10, ratio, low, high, 0.001, higher_is_better, None, p_adjusted=0.001)
        )

    throughput, latency = slower(0.951, True), slower(1 / 0.951, False)
    assert regressions([throughput, latency], 0.05) == [throughput, latency]
    assert regressions([slower(0.96, True), slower(1 / 0.96, False)], 0.05) == []
    assert beyond(1.031, 0.03) and beyond(1 / 1.031, 0.03) and not beyond(1.029, 0.03) and not beyond(1 / 1.029, 0.03)
