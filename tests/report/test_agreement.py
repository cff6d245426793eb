"""Sign counts against chance and Pearson's r with its Fisher interval, against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from ablate.report.agreement import SignCount, binomial_p, pearson, sign_count


def test_binomial_p_is_the_upper_tail_of_a_fair_coin():
    for k, n in [(0, 0), (0, 5), (3, 4), (10, 17), (5, 5), (2, 5), (12, 17)]:
        closed = sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n
        assert binomial_p(k, n) == pytest.approx(closed, rel=1e-12)
        if n:
            assert binomial_p(k, n) == pytest.approx(binomtest(k, n, 0.5, alternative="greater").pvalue, rel=1e-12)
    assert SignCount(3, 4).p_value == 5 / 16
    assert SignCount(3, 4).text() == "3 of 4 agree in sign (binomial p = 0.31 against chance 1/2)"
    assert SignCount(0, 0).p_value is None and "nothing to count" in SignCount(0, 0).text()
    with pytest.raises(ValueError):
        binomial_p(5, 4)


def test_a_change_of_zero_or_none_has_no_sign_and_is_not_counted():
    pairs = [(-0.9, -2.0), (0.4, -0.1), (0.0, 1.0), (-0.2, 0.0), (None, 1.0), (0.3, None), (1.0, 2.0)]
    assert sign_count(pairs) == SignCount(2, 3)


def test_pearson_r_and_its_fisher_interval_match_an_independent_computation():
    rng = np.random.default_rng(0)
    xs = rng.normal(size=12)
    ys = 0.6 * xs + rng.normal(size=12)
    c = pearson(list(xs), list(ys))
    r = np.corrcoef(xs, ys)[0, 1]
    z, se = 0.5 * math.log((1 + r) / (1 - r)), 1 / math.sqrt(12 - 3)
    assert c.n == 12 and c.r == pytest.approx(r, rel=1e-12)
    assert (c.low, c.high) == pytest.approx((math.tanh(z - 1.959964 * se), math.tanh(z + 1.959964 * se)), rel=1e-6)
    assert c.text() == f"Pearson r = {r:.2f}, 95% CI [{c.low:.2f}, {c.high:.2f}] (Fisher z), n = 12"
    small = pearson([1.0, 2.0, 3.0], [2.0, 1.0, 4.0])
    assert small.r is None and small.text() == "n = 3: n too small for a correlation (needs 4)"
    assert pearson([1.0, 1.0, 1.0, 1.0], [1.0, 2.0, 3.0, 4.0]).r is None  # a constant column has no r
    assert pearson([1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0]).high == 1.0
