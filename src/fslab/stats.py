"""Statistics on the raw samples of a cell. Pure functions: numbers in, numbers out."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

CONFIDENCE = 0.95


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

    @property
    def ci_half_width(self) -> float | None:
        return None if self.ci_high is None else (self.ci_high - self.ci_low) / 2


def summarize(values: list[float]) -> Summary:
    if not values:
        raise ValueError("no samples to summarize")
    data = np.asarray(values, dtype=float)
    n = len(data)
    mean = float(data.mean())
    if n < 2:
        return Summary(n, mean, float(np.median(data)), None, None, float(data.min()), float(data.max()), None, None)
    stdev = float(data.std(ddof=1))
    half = float(sps.t.ppf((1 + CONFIDENCE) / 2, n - 1)) * stdev / math.sqrt(n)
    return Summary(
        n=n,
        mean=mean,
        median=float(np.median(data)),
        stdev=stdev,
        cv=stdev / mean if mean else None,
        minimum=float(data.min()),
        maximum=float(data.max()),
        ci_low=mean - half,
        ci_high=mean + half,
    )
