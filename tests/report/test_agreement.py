"""Sign counts against chance and Pearson's r with its Fisher interval, against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from ablate.report.stats import SignCount, binomial_p, pearson, sign_count


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


# --------------------------------------------------------------------------------------
# agreement_test: both sign margins kept, our noise (the shared base's included) in every Δ
# --------------------------------------------------------------------------------------

from scipy.stats import fisher_exact, norm  # noqa: E402

from ablate.report.stats import DRAWS, EXACT_LIMIT, agreement_test  # noqa: E402


@pytest.mark.parametrize(
    "paper, ours",
    [
        ([1, 1, -1, -1, -1, -1, -1], [2, 1, -1, -1, 1, -3, 1]),
        ([1, -1, -1, -1, -1, -1, -1, -1, -1, 1], [-1, -1, 1, 1, -2, 1, -1, -1, 1, 2]),
        ([1, 1, 1, -1, -1], [-1, -1, 1, 1, 1]),
    ],
)
def test_with_no_se_known_the_test_is_fishers_exact_test_of_the_signs(paper, ours):
    t = agreement_test(paper, ours, [None] * len(ours))
    table = [
        [sum(p > 0 and o > 0 for p, o in zip(paper, ours)), sum(p > 0 and o < 0 for p, o in zip(paper, ours))],
        [sum(p < 0 and o > 0 for p, o in zip(paper, ours)), sum(p < 0 and o < 0 for p, o in zip(paper, ours))],
    ]
    assert t.agree == table[0][0] + table[1][1] == t.expected and t.exact
    assert t.p_value == pytest.approx(fisher_exact(table, alternative="greater")[1], rel=1e-9)


def test_the_statistic_is_the_mean_count_of_a_seed_bootstrap_of_the_whole_column():
    """Redraw our Δ column as the seeds would: one base error shared by every row plus each row's own
    error; the mean agreement count is the sum of each row's probability of agreeing (exactly)."""
    rng = np.random.default_rng(1)
    paper = [-0.9, -0.3, 0.4, -2.1, 0.2, -1.2]
    ours = [1.1, -0.3, 0.3, -0.1, 2.4, 3.1]
    base_se, row_se = 0.5, 0.5
    se = math.sqrt(base_se**2 + row_se**2)  # SE of a Δ: the base's and the row's parts
    draws = 200_000
    column = np.array(ours) + rng.normal(0, row_se, (draws, len(ours))) - rng.normal(0, base_se, (draws, 1))
    counts = ((column > 0) == (np.array(paper) > 0)).sum(axis=1)
    t = agreement_test(paper, ours, [se] * len(ours))
    assert t.expected == pytest.approx(counts.mean(), abs=0.01)
    assert t.expected == pytest.approx(sum(norm.cdf(o / se if p > 0 else -o / se) for p, o in zip(paper, ours)))
    assert np.corrcoef(column[:, 0], column[:, 1])[0, 1] == pytest.approx(0.5, abs=0.01)  # the shared base


def test_the_null_reassigns_our_rows_and_keeps_both_margins():
    """4 rows, paper 1 up: 4 assignments, each putting one of our rows on the paper's up row."""
    paper, ours, ses = [1.0, -1.0, -1.0, -1.0], [2.0, 1.0, -1.0, -0.5], [1.0, 1.0, 1.0, 1.0]
    q = norm.cdf(np.array(ours))
    null = [3 - q.sum() + 2 * q[i] for i in range(4)]
    t = agreement_test(paper, ours, ses)
    assert t.expected == pytest.approx(null[0]) and t.p_value == pytest.approx(0.25)  # ours is the best of 4
    assert t.text() == (
        f"3 of 4 agree in sign ({t.expected:.1f} expected from our noise; permutation p = 0.25, "
        "margins kept: paper 1 up : 3 down)"
    )


def test_paper_signs_all_one_way_leave_nothing_to_test():
    t = agreement_test([-1.2, -0.5], [-1.0, -2.0], [0.7, 0.7])
    assert (t.agree, t.n, t.paper_up, t.p_value) == (2, 2, 0, None)
    assert "not testable: every paper Δ here is down" in t.text()
    assert agreement_test([0.0, 1.0], [1.0, 0.0], [None, None]).n == 0  # no sign, not counted


def test_a_long_column_draws_its_assignments_reproducibly():
    rng = np.random.default_rng(3)
    n = 40
    paper = list(np.where(np.arange(n) % 2 == 0, 1.0, -1.0))
    assert math.comb(n, 20) > EXACT_LIMIT
    ours = [p * 0.6 + x for p, x in zip(paper, rng.normal(0, 1, n))]
    t = agreement_test(paper, ours, [0.5] * n)
    assert not t.exact and t.p_value == agreement_test(paper, ours, [0.5] * n).p_value
    assert 1 / (DRAWS + 1) <= t.p_value < 0.01 and f"{DRAWS:,} random assignments" in t.text()
