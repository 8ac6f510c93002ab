"""The distributions fslab's statistics need, in its own code (importing a library of them would
cost a summary half a second): Student's t for any real degrees of freedom — its tail
probabilities and its quantile — and the Mann–Whitney U test's two-sided p-value. Pure functions:
numbers in, numbers out; tests/test_distributions.py checks them against the reference
implementation the tests name.

The t functions work element-wise on numpy arrays (a summary asks them of a thousand pairs at
once) and give a float for scalar arguments. Each element is computed on its own, to the same bits
whatever else is in the array.
"""

from __future__ import annotations

import math
from functools import cache
from itertools import accumulate, groupby
from statistics import NormalDist

import numpy as np

# Stirling's series for ln Γ(z): B₂ₖ / (2k(2k − 1)) for k = 1..8, enough for z ≥ 10 in double precision.
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400)
_STIRLING_FROM = 10.0
_TINY = 1e-300  # modified Lentz: what a vanishing denominator is replaced by
_FRACTION_EPSILON = 1e-15
_FRACTION_MAX_TERMS = 1_000  # t tails take at most ~70 terms, at any df up to 10⁶
_QUANTILE_MAX_STEPS = 100
_QUANTILE_DONE = 1e-6  # a Halley step this small (relative) leaves an error of its cube: it is the last


def _out(values: np.ndarray):
    """An array as it is, a 0-d one (from scalar arguments) as a float."""
    return values if values.ndim else float(values)


def _shifted_up(z: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """z + k with the least k ≥ 0 that brings it to _STIRLING_FROM, and the logarithms of
    z (z+1) ⋯ (z+k−1) and of (z+s)(z+s+1) ⋯ (z+s+k−1) / that product: by Γ(z + 1) = z Γ(z),
    ln Γ(z) = ln Γ(z + k) − the first, and ln Γ(z) − ln Γ(z + s) = the same at z + k + the second."""
    shifted, product, ratio = z.copy(), np.ones_like(z), np.ones_like(z)
    for _ in range(math.ceil(_STIRLING_FROM)):
        below = shifted < _STIRLING_FROM
        product = np.where(below, product * shifted, product)
        ratio = np.where(below, ratio * ((shifted + s) / shifted), ratio)
        shifted = np.where(below, shifted + 1, shifted)
    return shifted, np.log(product), np.log(ratio)


def _stirling_correction(z: np.ndarray) -> np.ndarray:
    """ln Γ(z) − ((z − ½) ln z − z + ½ ln 2π), from Stirling's series (z ≥ 10)."""
    inverse_square = 1 / (z * z)
    total = np.zeros_like(z)
    for coefficient in reversed(_STIRLING):
        total = total * inverse_square + coefficient
    return total / z


def log_beta(a, b):
    """ln B(a, b) = ln Γ(a) + ln Γ(b) − ln Γ(a + b) for a, b > 0, element-wise, from Stirling's
    series after the recurrence Γ(z + 1) = z Γ(z) has brought the arguments to 10 or more. With s
    the smaller argument and z the larger, ln Γ(z) − ln Γ(z + s) is taken as one small number
    (s − s ln z − (z + s − ½) ln(1 + s/z) and the series' difference; the way of DiDonato & Morris
    1992, TOMS 708's algdiv) rather than as the difference of two large ones, which would lose the
    digits a t tail at 10⁶ degrees of freedom needs."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    small, big = np.minimum(a, b), np.maximum(a, b)
    shifted, log_product, _ = _shifted_up(small, small)
    log_gamma_small = (shifted - 0.5) * np.log(shifted) - shifted + 0.5 * math.log(2 * math.pi) + _stirling_correction(shifted) - log_product
    # ln Γ(big) − ln Γ(big + small)
    shifted, _, log_ratio = _shifted_up(big, small)
    ratio = small - small * np.log(shifted) - (shifted + small - 0.5) * np.log1p(small / shifted)
    ratio += _stirling_correction(shifted) - _stirling_correction(shifted + small) + log_ratio
    return _out(log_gamma_small + ratio)


def _nonzero(values: np.ndarray) -> np.ndarray:
    """Lentz's guard: a vanishing denominator replaced by a tiny one."""
    return np.where(np.abs(values) < _TINY, _TINY, values)


def _beta_fraction(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The continued fraction of the regularized incomplete beta function I_x(a, b) (DLMF 8.17.22;
    Numerical Recipes' betacf), evaluated by the modified Lentz method (Thompson & Barnett 1986),
    element-wise: each element stops at its own convergence, and leaves the arrays worked on."""
    shape = x.shape
    a, b, x = (np.broadcast_to(v, shape).ravel() for v in (a, b, x))
    total = a + b
    c = np.ones_like(x)
    d = 1 / _nonzero(1 - total * x / (a + 1))
    h = d.copy()
    going = np.arange(x.size)  # where in h the elements still converging are
    for m in range(1, _FRACTION_MAX_TERMS + 1):
        a_2m = a + 2 * m
        even = m * (b - m) * x / ((a_2m - 1) * a_2m)
        d = 1 / _nonzero(1 + even * d)
        c = _nonzero(1 + even / c)
        step = d * c
        odd = -(a + m) * (total + m) * x / (a_2m * (a_2m + 1))
        d = 1 / _nonzero(1 + odd * d)
        c = _nonzero(1 + odd / c)
        delta = d * c
        h[going] *= step * delta
        on = np.abs(delta - 1) > _FRACTION_EPSILON
        if not on.all():
            if not on.any():
                break
            going, a, b, x, total, c, d = going[on], a[on], b[on], x[on], total[on], c[on], d[on]
    return h.reshape(shape)


def _beta_tails(a, b, x, y, log_x, log_y, log_b):
    """(I_x(a, b), I_y(b, a)) — the regularized incomplete beta function and its complement, y =
    1 − x given on its own (with ln x, ln y and ln B(a, b)) so that neither is lost to rounding.
    The continued fraction computes the smaller tail, to full relative precision: it converges
    fast only for x < (a + 1)/(a + b + 2); beyond, I_x(a, b) = 1 − I_y(b, a) is used."""
    swap = x > (a + 1) / (a + b + 2)
    first, second = np.where(swap, b, a), np.where(swap, a, b)
    front = np.exp(first * np.where(swap, log_y, log_x) + second * np.where(swap, log_x, log_y) - log_b) / first
    small = front * _beta_fraction(first, second, np.where(swap, y, x))
    return np.where(swap, 1 - small, small), np.where(swap, small, 1 - small)


def _t_log_norm(df: np.ndarray) -> np.ndarray:
    """ln B(df/2, ½), the t density's normalising constant (with √df)."""
    return np.asarray(log_beta(df / 2, 0.5))


def _t_tails(t, df, log_norm):
    """(P(|T| ≥ |t|), P(|T| < |t|)) for T ~ Student's t with df degrees of freedom: the two-sided
    tail is I_{df/(df+t²)}(df/2, ½) (Abramowitz & Stegun 26.7.1), the middle its complement."""
    square = t * t
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        x, y = 1 / (1 + square / df), 1 / (1 + df / square)
        log_x, log_y = -np.log1p(square / df), -np.log1p(df / square)
        return _beta_tails(df / 2, np.full_like(x, 0.5), x, y, log_x, log_y, log_norm)


def _t_density(t, df, log_norm):
    """The t density (1 + t²/df)^(−(df+1)/2) / (√df · B(df/2, ½))."""
    return np.exp(-(df + 1) / 2 * np.log1p(t * t / df) - 0.5 * np.log(df) - log_norm)


def student_t_two_sided_p(t, df):
    """P(|T| ≥ |t|) for Student's t with df > 0 (real) degrees of freedom: a two-sided test's p-value
    (2 · the CDF at −|t|). Relative error below 1e-13 up to a few
    hundred degrees of freedom, tails down to 1e-300 included; it grows with df (5e-13 at 2,000,
    1e-12 at 10⁴, 1e-10 at 10⁶: the continued fraction's terms lose digits as x nears 1). NaN
    where df ≤ 0, is infinite, or t or df is NaN."""
    t, df = np.broadcast_arrays(np.asarray(t, dtype=float), np.asarray(df, dtype=float))
    bad = ~(df > 0) | ~np.isfinite(df) | np.isnan(t)
    safe_df = np.where(bad, 1.0, df)
    p, _ = _t_tails(np.abs(t), safe_df, _t_log_norm(safe_df))
    return _out(np.where(bad, np.nan, p))


def student_t_sf(t, df):
    """P(T > t), Student's t's survival function, df > 0 real: from
    student_t_two_sided_p, so the far tail (t > 0) as precisely, the near one as 1 − its half."""
    t = np.asarray(t, dtype=float)
    two_sided = np.asarray(student_t_two_sided_p(t, df))
    return _out(np.where(t >= 0, two_sided / 2, 1 - two_sided / 2))


def _normal_quantile(p: np.ndarray) -> np.ndarray:
    """statistics.NormalDist().inv_cdf (Wichura's AS 241) for each distinct value."""
    distinct, where = np.unique(p, return_inverse=True)
    return np.array([NormalDist().inv_cdf(v) for v in distinct.tolist()])[where].reshape(p.shape)


def _hill_start(two_sided: np.ndarray, df: np.ndarray) -> np.ndarray:
    """|t| with P(|T| ≥ |t|) = two_sided, approximately (to ~1e-5 relative, worse towards df = 1):
    G. W. Hill, Algorithm 396: Student's t-quantiles, CACM 13(10), 1970, as R's qt starts. df ≥ 1."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        a = 1 / (df - 0.5)
        b = 48 / (a * a)
        c = ((20700 * a / b - 98) * a - 16) * a + 96.36
        d = ((94.5 / (b + c) - 3) / b + 1) * np.sqrt(a * math.pi / 2) * df
        y = (d * two_sided) ** (2 / df)
        # near the normal: an asymptotic inverse expansion about the normal quantile
        x = _normal_quantile(0.5 * two_sided)
        near_c = (((0.05 * d * x - 5) * x - 7) * x - 2) * x + b + np.where(df < 5, c + 0.3 * (df - 4.5) * (x + 0.6), c)
        square = x * x
        near = (((((0.4 * square + 6.3) * square + 36) * square + 94.5) / near_c - square - 3) / b + 1) * x
        near = np.expm1(a * near * near)
        # in the far tail of few degrees of freedom
        far = ((1 / (((df + 6) / (df * y) - 0.089 * d - 0.822) * (df + 2) * 3) + 0.5 / (df + 4)) * y - 1) * (df + 1) / (df + 2) + 1 / y
        return np.sqrt(df * np.where(y > 0.05 + a, near, far))


def _power_tail_start(two_sided: np.ndarray, df: np.ndarray, log_norm: np.ndarray) -> np.ndarray:
    """|t| from the t tail's power law P(|T| ≥ t) ≈ 2 df^(df/2 − 1) t^(−df) / B(df/2, ½) where
    that tail is small, else from the density at 0 (the middle P(|T| < t) ≈ 2t / (√df B)); for
    df < 1, where Hill's start does not apply."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        tail = np.exp((math.log(2) + (df / 2 - 1) * np.log(df) - log_norm - np.log(two_sided)) / df)
        middle = (1 - two_sided) * np.sqrt(df) * np.exp(log_norm) / 2
    return np.where(two_sided < 0.5, tail, middle)


def _two_sided_quantile(two_sided: np.ndarray, df: np.ndarray, log_norm: np.ndarray) -> np.ndarray:
    """t > 0 with P(|T| ≥ t) = two_sided (0 < two_sided < 1, 0 < df finite): from a start (Hill's;
    closed forms at df = 1 and 2), Halley's method on the CDF with the closed-form density and its
    derivative, guarded by the bracket found so far (bisection where a step leaves it). Where the
    tail is below ½ the step is taken on ln P(|T| ≥ t) against ln t, where the tail is nearly a
    straight line; else on the middle P(|T| < t) against t, the tail that is computed exactly.
    log_norm: _t_log_norm(df)."""
    tail = two_sided < 0.5
    middle_target = 1 - two_sided  # exact where it is used (two_sided ≥ ½)
    log_target = np.log(two_sided)
    t = np.where(df < 1, _power_tail_start(two_sided, df, log_norm), _hill_start(two_sided, df))
    t = np.where(np.isfinite(t) & (t > 0), t, 1.0)
    low, high = np.zeros_like(t), np.full_like(t, np.inf)
    active = np.ones(t.shape, dtype=bool)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        for _ in range(_QUANTILE_MAX_STEPS):
            far, near = _t_tails(t, df, log_norm)
            density = _t_density(t, df, log_norm)
            curvature = (df + 1) * t / (df + t * t)  # −f′/f
            # tail: g(u) = ln far − ln target, u = ln t; g′ = −s, g″ = −s·df(1 − t²)/(df + t²) − s²
            g = np.log(far) - log_target
            s = 2 * t * density / far
            g2 = -s * df * (1 - t * t) / (df + t * t) - s * s
            halley = 1 - g * g2 / (2 * s * s)
            halley = np.where((halley > 0.5) & (halley < 2), halley, 1.0)
            tail_next = t * np.exp(g / s / halley)
            # middle: F(t) = near − target, F′ = 2f, F″ = −2f·curvature
            residual = near - middle_target
            halley = 1 + residual * curvature / (4 * density)
            halley = np.where((halley > 0.5) & (halley < 2), halley, 1.0)
            middle_next = t - residual / (2 * density) / halley
            below = np.where(tail, g > 0, residual < 0)
            exact = np.where(tail, g == 0, residual == 0)
            low, high = np.where(below, t, low), np.where(below | exact, high, t)
            following = np.where(tail, tail_next, middle_next)
            inside = np.isfinite(following) & (following > low) & (following < high)
            bisected = np.where(np.isinf(high), 4 * t, np.where(low > 0, np.sqrt(low * high), high / 4))
            following = np.where(exact, t, np.where(inside, following, bisected))
            done = exact | (inside & (np.abs(following - t) <= _QUANTILE_DONE * t))
            t = np.where(active, following, t)
            active &= ~done
            if not active.any():
                break
    # closed forms (Hill 1970 too): df = 1 is Cauchy's; df = 2 solves a quadratic
    half = two_sided / 2
    cauchy = np.where(half < 0.25, 1 / np.tan(math.pi * half), np.tan(math.pi * (0.5 - half)))
    two = (1 - two_sided) / np.sqrt(two_sided * (1 - half))
    return np.where(df == 1, cauchy, np.where(df == 2, two, t))


def student_t_quantile(p, df):
    """t with P(T ≤ t) = p for Student's t with df > 0 (real) degrees of freedom, the quantile
    function. Relative error ~1e-14 for p from 1e-12 to 1 − 1e-12 up to a few
    thousand degrees of freedom, growing beyond as student_t_two_sided_p's (2e-13 at 10⁴, 2e-11
    at 10⁶). p = 0 and 1 give ∓inf; p outside [0, 1], df ≤ 0, infinite or NaN give NaN."""
    p, df = np.asarray(p, dtype=float), np.asarray(df, dtype=float)
    usable = (df > 0) & np.isfinite(df)
    safe_df = np.where(usable, df, 1.0)
    log_norm = _t_log_norm(safe_df)  # before broadcasting: p and df may be a column and a row
    p, df, safe_df, log_norm = np.broadcast_arrays(p, df, safe_df, log_norm)
    lower = np.minimum(p, 1 - p)  # 1 − p is exact for p ≥ ½
    solvable = (lower > 0) & (lower < 0.5)  # the others' answer is known: given any harmless two-sided p
    magnitude = _two_sided_quantile(np.where(solvable, 2 * lower, 0.5), safe_df, log_norm)
    t = np.where(p < 0.5, -magnitude, magnitude)
    t = np.where(p == 0.5, 0.0, t)
    t = np.where(p == 0, -np.inf, np.where(p == 1, np.inf, t))
    bad = ~((p >= 0) & (p <= 1)) | ~(df > 0) | ~np.isfinite(df)
    return _out(np.where(bad, np.nan, t))


# --- Mann–Whitney U ---------------------------------------------------------------------------

EXACT_MAX_N = 8  # the reference's rule: the exact null distribution when a side has at most this many values and none is tied


def mann_whitney_two_sided_p(x: list[float], y: list[float]) -> float:
    """The two-sided p-value of the Mann–Whitney U test of x against y, as the reference the tests
    name gives it (its default method "auto", with the continuity correction): U = max(U₁, U₂)
    from average ranks; with a side of at most 8 values and no ties the
    exact null distribution (2 · P(U ≥ u)), else the normal approximation with the tie correction
    (2 · sf(z), z = (U − mn/2 − ½)/σ); at most 1. NaN where a value is NaN."""
    n1, n2 = len(x), len(y)
    if not n1 or not n2:
        raise ValueError("the Mann–Whitney test needs values on both sides")
    values = [*x, *y]
    if math.isnan(sum(values)) and any(map(math.isnan, values)):
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
    doubled_rank_sum = sum(map(doubled_rank.__getitem__, values[:n1]))
    u1 = (doubled_rank_sum - n1 * (n1 + 1)) / 2
    u = max(u1, n1 * n2 - u1)
    if min(n1, n2) <= EXACT_MAX_N and not tie_term:
        cumulative = _u_cumulative_counts(min(n1, n2), max(n1, n2))
        return min(1.0, 2 * cumulative[n1 * n2 - int(u)] / cumulative[-1])
    # the reference's arithmetic, operation by operation
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - float(tie_term) / (n * (n - 1))))
    if sigma == 0:  # every value the same: U = mn/2, z = −∞
        return 1.0
    z = (u - n1 * n2 / 2 - 0.5) / sigma
    return min(1.0, math.erfc(z / math.sqrt(2)))  # 2 · P(Z > z)


@cache
def _u_cumulative_counts(m: int, n: int) -> tuple[int, ...]:
    """Exact cumulative counts of U = 0..mn over the C(m+n, m) orderings of m against n untied
    values: U's counts are the coefficients of the Gaussian binomial coefficient
    [m+n choose m]_q = Π_{i=1..m} (1 − q^(n+i)) / (1 − q^i) (Andrews, The Theory of Partitions,
    3.3), multiplied and divided out factor by factor in integers, truncated at q^mn."""
    top = m * n
    counts = [1] + [0] * top
    for i in range(1, m + 1):
        for u in range(top, n + i - 1, -1):
            counts[u] -= counts[u - n - i]
        for u in range(i, top + 1):
            counts[u] += counts[u - i]
    return tuple(accumulate(counts))
