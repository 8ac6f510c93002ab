"""fslab's own Student t and Mann–Whitney U (src/fslab/distributions.py) against the reference,
scipy 1.17 — special.stdtr and stdtrit; stats.mannwhitneyu(x, y, alternative="two-sided") with its
default method "auto" — a test dependency only: fslab itself never imports it."""

from __future__ import annotations

import math
import subprocess
import sys
from itertools import combinations

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from fslab.distributions import (
    _u_cumulative_counts,
    log_beta,
    mann_whitney_two_sided_p,
    student_t_quantile,
    student_t_sf,
    student_t_two_sided_p,
)

DEGREES = [0.5, 1, 1.3, 2, 2.7, 3, 5, 9.4, 30, 120, 1e4, 1e6]
# from 1e-12 to 1 − 1e-12: both tails geometrically, the middle, and the levels stats.py asks
TAIL = np.geomspace(1e-12, 0.5, 49)
PROBABILITIES = np.unique(np.concatenate([TAIL, 1 - TAIL, [0.3, 0.7, 0.025, 0.2, 0.8, 0.975]]))
RELATIVE = 1e-9


def relative_error(mine, reference) -> np.ndarray:
    mine, reference = np.asarray(mine), np.asarray(reference)
    return np.abs(mine - reference) / np.abs(reference)


@pytest.mark.parametrize("df", DEGREES, ids=lambda df: f"df={df:g}")
def test_t_quantile_is_scipys(df):
    mine, reference = student_t_quantile(PROBABILITIES, df), special.stdtrit(df, PROBABILITIES)
    middle = PROBABILITIES == 0.5
    assert np.all(mine[middle] == 0)
    worst = relative_error(mine[~middle], reference[~middle])
    assert worst.max() <= RELATIVE, (PROBABILITIES[~middle][worst.argmax()], worst.max())
    assert np.all(np.diff(mine) > 0), "increasing in p"


@pytest.mark.parametrize("df", DEGREES, ids=lambda df: f"df={df:g}")
def test_t_tails_are_scipys(df):
    """At the quantiles of the grid (tails from 1e-12 to 1 − 1e-12), and far beyond them (where
    scipy's tail underflows to 0, so does fslab's)."""
    t = np.concatenate([special.stdtrit(df, PROBABILITIES), [0.0, 1e3, -1e3, 1e6, -1e6, 1e12, -1e12]])
    for mine, reference in [(student_t_sf(t, df), special.stdtr(df, -t)), (student_t_two_sided_p(t, df), 2 * special.stdtr(df, -np.abs(t)))]:
        assert relative_error(mine[reference > 0], reference[reference > 0]).max() <= RELATIVE
        assert np.all(mine[reference == 0] < 1e-300)
    assert student_t_two_sided_p(0.0, df) == 1.0 and student_t_sf(0.0, df) == 0.5


@pytest.mark.parametrize("df", [d for d in DEGREES if d <= 120], ids=lambda df: f"df={df:g}")
def test_t_next_to_the_median(df):
    """Within 1e-8 of t = 0 the tail is ½ − f(0)·t to O(t³) (f(0) = Γ((df+1)/2) / (√(df π) Γ(df/2))):
    the reference where scipy's are not one (at df = 1, stdtr(1, −1e-8) is 3e-9 off, stdtrit
    near p = ½ up to 3e-8 at df = 1 to 5)."""
    density = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    for t in (1e-8, -1e-8, 3e-10):
        assert student_t_sf(t, df) == pytest.approx(0.5 - density * t, rel=1e-15)
    for p in (0.5 - 1e-9, 0.5 + 1e-9, 0.5 + 1e-12):
        assert student_t_quantile(p, df) == pytest.approx((p - 0.5) / density, rel=1e-13)


def test_t_at_the_degrees_of_freedom_a_welch_test_has():
    """Real degrees of freedom between 1 and 2,000 (runs_needed asks up to 2·1000 − 2), at the
    levels stats.py asks and at random statistics."""
    rng = np.random.default_rng(7)
    df = np.concatenate([rng.uniform(1, 40, 400), rng.uniform(40, 2000, 100)])
    for p in (0.975, 0.8):
        assert relative_error(student_t_quantile(p, df), special.stdtrit(df, p)).max() <= RELATIVE
    t = rng.uniform(0, 12, df.size)
    assert relative_error(student_t_two_sided_p(t, df), 2 * special.stdtr(df, -t)).max() <= RELATIVE


def test_closed_forms_and_edges():
    assert student_t_quantile(0.75, 1) == pytest.approx(1.0, rel=1e-15)  # Cauchy: tan(π/4)
    assert student_t_quantile(0.975, 2) == pytest.approx(4.302652729749464, rel=1e-15)  # (1 − 2q)/√(2q(1 − q))
    assert student_t_quantile(0.0, 5) == -math.inf and student_t_quantile(1.0, 5) == math.inf
    for p, df in [(1.5, 5), (-0.1, 5), (math.nan, 5), (0.5, 0), (0.5, -1), (0.3, math.nan), (0.3, math.inf)]:
        assert math.isnan(student_t_quantile(p, df)), (p, df)
    assert math.isnan(student_t_two_sided_p(math.nan, 5)) and math.isnan(student_t_two_sided_p(1.0, 0))
    assert student_t_two_sided_p(math.inf, 3) == 0.0
    assert isinstance(student_t_quantile(0.9, 4), float) and isinstance(student_t_two_sided_p(2.0, 4), float)
    assert student_t_quantile(np.full((2, 3), 0.9), 4).shape == (2, 3)


def test_each_element_is_computed_on_its_own_to_the_bit():
    """compare_pairs computes a thousand pairs' t figures at once: each must be what that pair
    alone gives, whatever else is in the array (some needing many more steps than others)."""
    rng = np.random.default_rng(3)
    df = np.concatenate([rng.uniform(1, 30, 50), [0.5, 1, 2, 1e6]])
    p, t = rng.uniform(0.001, 0.999, df.size), rng.uniform(0, 20, df.size)
    together_q, together_p = student_t_quantile(p, df), student_t_two_sided_p(t, df)
    assert together_q.tolist() == [student_t_quantile(a, b) for a, b in zip(p.tolist(), df.tolist())]
    assert together_p.tolist() == [student_t_two_sided_p(a, b) for a, b in zip(t.tolist(), df.tolist())]


def test_log_beta_keeps_its_digits_at_large_arguments():
    """Against scipy's betaln where it keeps them; at large arguments (where betaln loses 3e-11 at
    (5e5, ½)) against B(n, ½) = 4ⁿ n! (n − 1)! / (2n)!, exact in integers."""
    for a, b in [(0.25, 0.5), (4.7, 0.5), (9.99, 0.5), (10.0, 0.5), (12.0, 30.0), (1e7, 3.5)]:
        assert log_beta(a, b) == pytest.approx(special.betaln(a, b), rel=1e-14), (a, b)
    for n in (10, 11, 60, 1000, 50_000):
        exact = math.log(4**n * math.factorial(n) * math.factorial(n - 1) / math.factorial(2 * n))
        assert log_beta(n, 0.5) == pytest.approx(exact, rel=1e-14) and log_beta(0.5, n) == log_beta(n, 0.5), n
    assert log_beta(1.0, 1.0) == pytest.approx(0.0, abs=1e-14) and log_beta(0.5, 0.5) == pytest.approx(math.log(math.pi), rel=1e-14)


# --- Mann–Whitney U ---------------------------------------------------------------------------


def test_the_exact_null_distribution_counts_every_ordering():
    """U's counts from the Gaussian binomial coefficient are those of all C(m+n, m) orderings."""
    for m, n in [(1, 1), (1, 5), (3, 4), (4, 4), (2, 7), (5, 6)]:
        counts = [0] * (m * n + 1)
        for positions in combinations(range(m + n), m):  # where the m values of x stand in the sorted whole
            counts[sum(p - i for i, p in enumerate(positions))] += 1  # U: the y values below each x
        cumulative = _u_cumulative_counts(m, n)
        assert [b - a for a, b in zip((0, *cumulative), cumulative)] == counts, (m, n)
        assert cumulative[-1] == math.comb(m + n, m)


def _method(x: list[float], y: list[float]) -> str:
    """scipy's choice (method "auto")."""
    return "exact" if min(len(x), len(y)) <= 8 and len(set(x) | set(y)) == len(x) + len(y) else "asymptotic"


def _random_pairs() -> list[tuple[str, list[float], list[float]]]:
    rng = np.random.default_rng(2026)
    pairs = []
    for i in range(400):
        n1, n2 = (int(n) for n in rng.integers(7, 41, 2))
        if i % 5 == 0:
            n1 = int(rng.integers(7, 9))  # a small side: the exact test unless tied
        shift = rng.uniform(-1.5, 1.5)
        x, y = rng.normal(0, 1, n1), rng.normal(shift, 1, n2)
        kind = ["untied", "tied", "untied", "tied", "separated"][i % 5]
        if kind == "tied":
            x, y = np.round(x, 1), np.round(y, 1)
        if kind == "separated":
            x = np.sort(x) - 10
        pairs.append((kind, [float(v) for v in x], [float(v) for v in y]))
    pairs += [("equal", [3.0] * n1, [3.0] * n2) for n1, n2 in [(7, 7), (7, 12), (20, 9), (40, 40)]]
    pairs += [("separated", list(range(n1)), [100.0 + v for v in range(n2)]) for n1, n2 in [(7, 7), (8, 40), (7, 40), (40, 40), (40, 9)]]
    return pairs


def test_mann_whitney_is_scipys():
    pairs = _random_pairs()
    seen = set()
    for kind, x, y in pairs:
        reference = float(sps.mannwhitneyu(x, y, alternative="two-sided").pvalue)
        mine = mann_whitney_two_sided_p(x, y)
        assert mine == pytest.approx(reference, rel=RELATIVE, abs=0), (kind, len(x), len(y))
        assert mann_whitney_two_sided_p(y, x) == mine, "two-sided: either way round"
        seen.add((kind, _method(x, y)))
    assert {("untied", "exact"), ("untied", "asymptotic"), ("tied", "asymptotic"), ("separated", "exact"), ("separated", "asymptotic"), ("equal", "asymptotic")} <= seen
    assert {("tied", "exact")}.isdisjoint(seen)


def test_mann_whitney_extremes():
    assert mann_whitney_two_sided_p([3.0] * 7, [3.0] * 9) == 1.0, "all equal: U = mn/2"
    assert mann_whitney_two_sided_p(list(range(8)), [100.0 + v for v in range(40)]) == 2 / math.comb(48, 8), "the smallest exact p"
    smallest = mann_whitney_two_sided_p(list(range(40)), [100.0 + v for v in range(40)])
    assert 0 < smallest < 1e-13 and smallest == pytest.approx(float(sps.mannwhitneyu(list(range(40)), [100.0 + v for v in range(40)]).pvalue), rel=RELATIVE)
    assert math.isnan(mann_whitney_two_sided_p([1.0, math.nan] * 4, [2.0] * 8))
    with pytest.raises(ValueError):
        mann_whitney_two_sided_p([], [1.0])


def test_statistics_import_no_scipy():
    """Half a second a summary saves: no module fslab.stats brings in is scipy's."""
    code = "import sys, fslab.stats, fslab.distributions; print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
