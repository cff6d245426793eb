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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional

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
