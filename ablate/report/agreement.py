"""How far two columns of changes agree: sign counts against chance and a correlation.

Used by :mod:`ablate.report.reference` to set our Δ per row beside a paper's.

- :class:`SignCount`: ``k`` of ``n`` pairs of changes have the same sign. Under the null that
  each pair agrees by a fair coin, the one-sided p-value is P(X >= k) for X ~ Binomial(n, 1/2),
  the sign test (Dixon & Mood 1946, "The statistical sign test", JASA 41). A pair where either
  change is 0 has no sign and is left out before counting.
- :class:`Correlation`: Pearson's r of the two columns with a confidence interval from Fisher's
  z-transform (Fisher 1921, "On the 'probable error' of a coefficient of correlation deduced from
  a small sample"): z = atanh(r) is about normal with standard error 1/sqrt(n - 3), so the
  interval is tanh(z ± q / sqrt(n - 3)) with q the normal quantile of the level. It needs
  n >= 4 and two columns that are not constant.
- :func:`agreement_test`: the sign agreement of a paper's column of Δs and ours with the null that
  fits a side-by-side. Our Δs all share one noisy base, so a fair coin per row is the wrong null
  (moving the base by one SE moves every sign at once), and the paper's own signs are lopsided
  (Vaswani et al.'s Table 3: 15 of 17 changes hurt), so chance is not 1/2 either. See its docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from math import comb
from typing import Iterable, Optional, Sequence

MIN_CORRELATION_N = 4
"""Fewest pairs for a correlation interval (Fisher's standard error 1/sqrt(n - 3) needs n > 3)."""


def binomial_p(k: int, n: int) -> float:
    """P(X >= k) for X ~ Binomial(n, 1/2): how often chance alone agrees in k or more of n signs."""
    if not 0 <= k <= n:
        raise ValueError(f"k={k} must be in [0, n={n}]")
    from scipy import stats  # here, not at the top: `ablate table` without --reference never needs scipy

    return float(stats.binom.sf(k - 1, n, 0.5))


def p_text(p: float) -> str:
    """A p-value to two significant digits (``0.31``, ``0.0039``, ``1``)."""
    return f"{p:.2g}"


@dataclass(frozen=True)
class SignCount:
    """``agree`` of ``n`` pairs of non-zero changes have the same sign."""

    agree: int
    n: int

    @property
    def p_value(self) -> Optional[float]:
        """One-sided sign-test p-value against chance 1/2; None when nothing was counted."""
        return binomial_p(self.agree, self.n) if self.n else None

    def text(self) -> str:
        """``3 of 4 agree in sign (binomial p = 0.31 against chance 1/2)``."""
        if not self.n:
            return "no row has a sign on both sides: nothing to count"
        p = p_text(binomial_p(self.agree, self.n))
        return f"{self.agree} of {self.n} agree in sign (binomial p = {p} against chance 1/2)"


def sign_count(pairs: Iterable[tuple[Optional[float], Optional[float]]]) -> SignCount:
    """Count the pairs whose two changes have the same sign; pairs with a 0 or None are left out."""
    signed = [(a > 0, b > 0) for a, b in pairs if a and b]
    return SignCount(sum(x == y for x, y in signed), len(signed))


@dataclass(frozen=True)
class Correlation:
    """Pearson's r over ``n`` pairs and its confidence interval (None where it cannot be computed)."""

    n: int
    r: Optional[float] = None
    low: Optional[float] = None
    high: Optional[float] = None
    level: float = 0.95
    why_not: str = ""

    def text(self) -> str:
        """``Pearson r = 0.42, 95% CI [-0.07, 0.75] (Fisher z), n = 17``, or why there is none."""
        if self.r is None:
            return f"n = {self.n}: {self.why_not}"
        return (
            f"Pearson r = {self.r:.2f}, {self.level:.0%} CI [{self.low:.2f}, {self.high:.2f}] (Fisher z), n = {self.n}"
        )


def pearson(xs: list[float], ys: list[float], level: float = 0.95) -> Correlation:
    """Pearson's r of ``xs`` and ``ys`` (same length) with a Fisher-z interval at ``level``."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} x values but {len(ys)} y values")
    n = len(xs)
    if n < MIN_CORRELATION_N:
        return Correlation(n, level=level, why_not=f"n too small for a correlation (needs {MIN_CORRELATION_N})")
    if len(set(xs)) == 1 or len(set(ys)) == 1:
        return Correlation(n, level=level, why_not="one column is constant, so r is undefined")
    from scipy import stats

    r = float(stats.pearsonr(xs, ys).statistic)
    r = max(-1.0, min(1.0, r))
    half = float(stats.norm.ppf(0.5 + level / 2)) / math.sqrt(n - 3)
    z = math.atanh(r) if abs(r) < 1 else math.copysign(math.inf, r)
    return Correlation(n, r, math.tanh(z - half), math.tanh(z + half), level)


EXACT_LIMIT = 50_000
"""Most row assignments :func:`agreement_test` enumerates exactly; above it, :data:`DRAWS` random ones."""
DRAWS = 20_000


@dataclass(frozen=True)
class AgreementTest:
    """The sign agreement of two columns of Δs, tested with both sign margins held fixed.

    Attributes:
        n: rows with a sign on both sides; paper_up: how many of the paper's Δs are positive.
        agree: rows whose two Δs have the same sign (our Δs as measured).
        expected: the agreement count expected when our Δs are redrawn from their noise
            (:func:`agreement_test`); equal to ``agree`` where no SE is known.
        p_value: one-sided permutation p of ``expected`` (None where the paper's signs are all one way).
        exact: whether every assignment of our rows to the paper's was enumerated.
    """

    n: int
    paper_up: int
    agree: int
    expected: float
    p_value: Optional[float]
    exact: bool = True

    def text(self) -> str:
        """``10 of 17 agree in sign (9.5 expected from our noise; permutation p = 0.081, margins 2 up : 15 down kept)``."""
        if not self.n:
            return "no row has a sign on both sides: nothing to count"
        head = f"{self.agree} of {self.n} agree in sign"
        if self.p_value is None:
            way = "up" if self.paper_up else "down"
            return (
                f"{head}; not testable: every paper Δ here is {way}, so with both sign margins kept every "
                f"assignment of our rows agrees equally often (the count is only how many of ours are {way})"
            )
        how = "" if self.exact else f", {DRAWS:,} random assignments"
        return (
            f"{head} ({self.expected:.1f} expected from our noise; permutation p = {p_text(self.p_value)}{how}, "
            f"margins kept: paper {self.paper_up} up : {self.n - self.paper_up} down)"
        )


def agreement_test(
    paper: Sequence[float], ours: Sequence[float], ses: Sequence[Optional[float]], seed: int = 0
) -> AgreementTest:
    """Do our Δs take the paper's signs more often than rows assigned at random would?

    The statistic is the *expected* number of rows that agree in sign when our whole Δ column is
    redrawn from its noise, ``T = sum_i P(sign(Δ*_i) = sign(paper_i))`` with ``Δ*_i ~ N(Δ_i, SE_i²)``.
    A parametric seed bootstrap of the whole column draws one shared base error for every row, so
    its draws are correlated; by linearity of expectation its mean count is still exactly
    ``sum_i Φ(±Δ_i / SE_i)``, which is what is computed (no Monte Carlo error). Where a row's SE is
    unknown or 0 its term is the hard 0/1 agreement, and with no SE at all the test is Fisher's
    exact test of the 2 x 2 table of signs (one-sided).

    The null: our rows are exchangeable with respect to the paper's (no association). The p-value
    is the share of assignments of our rows (each with its SE) to the paper's rows whose ``T`` is at
    least the observed one: the paper's sign margin is kept (its rows stay), and so is ours (the
    same Δs, only reassigned), as Fisher's test conditions on both margins. Every assignment is
    enumerated when there are at most :data:`EXACT_LIMIT` (they differ only in which of our rows
    land on the paper's positive ones); otherwise :data:`DRAWS` random ones (seeded: reproducible).

    Why not a fair coin per row (:class:`SignCount`): a shift of our base moves every Δ at once,
    and the coin's p swings with it (table3-cpu: 0.93 to 0.025 for a base moved by ±1 SE); this
    T moves smoothly with the base and the permutation null moves with it, so p hardly does.

    Args:
        paper, ours: the two columns of Δs; rows with a 0 on either side have no sign and are left out.
        ses: the standard error of each of our Δs (None: unknown).
        seed: of the random assignments, where they are drawn.
    """
    import numpy as np
    from scipy import stats

    rows = [(p, o, s) for p, o, s in zip(paper, ours, ses) if p and o]
    n = len(rows)
    up = np.array([p > 0 for p, _, _ in rows], dtype=bool)
    # q[i]: P(our i-th Δ, redrawn, is > 0)
    q = np.array([(1.0 if o > 0 else 0.0) if not s else float(stats.norm.cdf(o / s)) for _, o, s in rows])
    agree = sum((p > 0) == (o > 0) for p, o, _ in rows)
    expected = float(np.sum(np.where(up, q, 1 - q))) if n else 0.0
    n_up = int(up.sum())
    if n_up in (0, n):
        return AgreementTest(n, n_up, agree, expected, None)
    # T of an assignment = (n - n_up) - sum(q) + 2 * (sum of q over the rows landing on the paper's up rows)
    m = min(n_up, n - n_up)
    exact = comb(n, m) <= EXACT_LIMIT
    if exact:
        from itertools import combinations

        sums = np.array([q[list(c)].sum() for c in combinations(range(n), m)])
    else:
        rng = np.random.default_rng(seed)
        sums = np.array([q[rng.permutation(n)[:m]].sum() for _ in range(DRAWS)])
    up_sums = sums if m == n_up else q.sum() - sums
    null = (n - n_up) - q.sum() + 2 * up_sums
    hits = int(np.sum(null >= expected - 1e-9))
    p = hits / len(null) if exact else (hits + 1) / (len(null) + 1)
    return AgreementTest(n, n_up, agree, expected, p, exact)
