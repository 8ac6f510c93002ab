import numpy as np
import pytest
from scipy import stats as sps

from fslab.stats import summarize

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
