"""Training-seed variance: how far a whole run moves when only its seed changes.

Two trainings of one configuration with different seeds differ in initialisation, data order and
dropout, and the resulting BLEU differs by far more than the test set's sampling error alone
suggests (Clark et al. 2011, "Better Hypothesis Testing for Statistical Machine Translation:
Controlling for Optimizer Instability"; Bouthillier et al. 2021, "Accounting for Variance in
Machine Learning Benchmarks"). A test of a table's Δ must include it, or two seeds of one
configuration are "significantly different" most of the time.

**The estimate.** A table gives per-trial scores ``x[row, seed]``. With few seeds per row (2-3 is
common) one row's spread is a poor estimate of its seed variance, so it is pooled over the whole
table, assuming one seed variance for every row (the assumption of a two-way ANOVA):

* *paired* rows (trained with the same seed values) share whatever a seed does to every row (the
  same data order, the same initialisation stream): the additive model ``x = row + seed + e``
  is fitted by least squares and the residual variance ``σ²_e`` (df = trials - rank of the design)
  is the variance of a seed-paired difference's parts, ``Var(Δ) = σ²_e (1/K_a + 1/K_b)``;
* *unpaired* rows (different seed values) also carry the seed effects: the one-way (within-row)
  pooled variance ``σ²_w`` (df = trials - rows) is used instead.

:func:`seed_test` adds the sentence-level variance of the same Δ (the paired bootstrap over test
sentences, Koehn 2004) to the seed part and compares ``Δ / SE`` with Student's t at the degrees
of freedom of the seed estimate alone. With no seed variance estimable (one seed per row
everywhere) nothing is tested.

**Why not Welch-Satterthwaite.** ``SE² = σ̂²(1/K_a + 1/K_b) + v`` sums an estimated part (σ̂², df
ν) and a known one (v, from thousands of resamples). The Welch-Satterthwaite df of that sum is
computed from σ̂ itself, so it is largest exactly when σ̂ came out small by chance, which is when
``|Δ| / SE`` is inflated: with few seeds the plug-in df makes the test too liberal (in 20,000
simulated 2-vs-2 nulls with σ 0.7 and v 0.065, the values measured on results/calibration-cpu,
7.6% false positives at α 0.05; on the real 16 seeds, 10.5%). Student's t at ν is the
conservative bound (the distribution of the statistic tends to t_ν as σ grows and to the normal
as it shrinks, so its size is at most α for every σ); it is the "smallest degrees of freedom"
rule of Welch's test (Hsu 1938). For a table with many rows ν is large and the two choices
agree; with two rows of two seeds the test is conservative (1.2% in the same simulation).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np
from scipy import stats as st

POWER = 0.8  # the power at which minimum detectable effects and needed seeds are stated
PAIRING_COST = 0.05
"""How much wider (relative) the seed-paired fit's t critical value may be than the unpaired fit's
for the paired fit to be used (:func:`use_paired`)."""


@functools.lru_cache(maxsize=1024)
def use_paired(paired_df: int, unpaired_df: int, alpha: float = 0.05) -> bool:
    """Whether the row + seed fit carries more information than the within-row one for this design.

    Pairing removes the seed effects shared by rows trained with the same seed values (real tables
    have large ones: table3-cpu's two-way ANOVA F(1, 18) = 26.5), but costs one df per seed value.
    With no seed effect at all, the paired test's interval is wider by ``t(ν_p) / t(ν_u)``; the paired
    fit is taken when that price is at most :data:`PAIRING_COST` (a seed effect of a few percent of
    the residual variance pays it back). Two rows of 2 shared seeds (1 df against 2), 3 seeds (2
    against 4) or 8 (7 against 14) stay unpaired; 4x4, 5x3, 8x2 and the shipped 10x3 and 19x2
    tables pair. A random-effects (mixed) model of seed would combine both, as an alternative.
    """
    if paired_df <= 0:
        return False
    if unpaired_df <= 0:
        return True
    q = 1 - alpha / 2
    return float(st.t.ppf(q, paired_df)) <= (1 + PAIRING_COST) * float(st.t.ppf(q, unpaired_df))


@dataclass(frozen=True)
class SeedNoise:
    """The table's per-trial seed standard deviation of one score, pooled over its rows.

    Attributes:
        paired: σ_e of the two-way fit (row + seed effects); None where no residual df is left.
        paired_df: its residual degrees of freedom.
        unpaired: σ_w, the pooled within-row standard deviation; None without replicated rows.
        unpaired_df: its degrees of freedom (trials - rows).
        trials: trials the fit used.
    """

    paired: Optional[float]
    paired_df: int
    unpaired: Optional[float]
    unpaired_df: int
    trials: int

    def for_rows(self, seeds_a: Sequence[Any], seeds_b: Sequence[Any]) -> tuple[Optional[float], int, bool]:
        """``(σ, df, paired)`` for a comparison of rows trained with these seed values.

        The seed-paired fit is used when the rows share their seed values and its degrees of freedom
        cost at most :data:`PAIRING_COST` of the t critical value against the unpaired fit's
        (:func:`use_paired`); otherwise the unpaired one. The choice depends on the design alone
        (df), never on the estimates, so it does not change the test's size.
        """
        paired = sorted(map(str, seeds_a)) == sorted(map(str, seeds_b)) and len(seeds_a) > 0
        if paired and self.paired is not None and use_paired(self.paired_df, self.unpaired_df):
            return self.paired, self.paired_df, True
        return self.unpaired, self.unpaired_df, False

    @property
    def estimable(self) -> bool:
        return self.unpaired is not None or self.paired is not None


def fit(scores: Mapping[str, Mapping[Any, float]]) -> SeedNoise:
    """Pool the seed variance of ``scores`` (row name -> {seed value: per-trial score}).

    Seeds are matched across rows by value (``str(seed)``), so seed 1 of every row shares one
    seed effect in the two-way fit.
    """
    rows = [r for r in scores if scores[r]]
    values = [(r, str(s), float(v)) for r in rows for s, v in scores[r].items() if math.isfinite(float(v))]
    n = len(values)
    within = sum(_ss([v for r2, _, v in values if r2 == r]) for r in rows)
    w_df = n - len({r for r, _, _ in values})
    seeds = sorted({s for _, s, _ in values})
    paired, p_df = None, 0
    if n:
        design = np.zeros((n, len(rows) + max(len(seeds) - 1, 0)))
        for i, (r, s, _) in enumerate(values):
            design[i, rows.index(r)] = 1.0
            if seeds.index(s) > 0:
                design[i, len(rows) + seeds.index(s) - 1] = 1.0
        y = np.array([v for _, _, v in values])
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        p_df = n - int(np.linalg.matrix_rank(design))
        if p_df > 0:
            paired = math.sqrt(float(np.sum((y - design @ coef) ** 2)) / p_df)
    return SeedNoise(paired, p_df, math.sqrt(within / w_df) if w_df > 0 else None, w_df, n)


def per_seed_sentence_var(boots: Mapping[str, Sequence[np.ndarray]]) -> float:
    """The per-seed part of one trial's sentence-bootstrap variance, pooled over the table's rows.

    A trial's bootstrap BLEU ``b_i`` (B,) moves with the resampled sentences for two reasons: what
    its configuration does on them (shared by the row's seeds) and what this seed's run does (the
    seed x sentence interaction). Within a row, ``Var(b_i) - Cov(b_i, b_j)`` (i != j) is the second
    part, ``s``. It shrinks as 1/k in a k-seed mean, and it is already inside the per-seed spread
    of corpus BLEU on the fixed test set that σ measures; so :func:`sentence_split` removes it
    from a Δ's bootstrap variance to keep it from being counted twice.

    Args:
        boots: row -> its trials' (B,) bootstrap scores; rows with one seed do not inform ``s``.

    Returns:
        ``s`` averaged over the rows with >= 2 seeds (weighted by seeds), 0 where there is none.
    """
    total, weight = 0.0, 0
    for trials in boots.values():
        if len(trials) < 2:
            continue
        cov = np.cov(np.stack(trials))  # (k, k)
        k = cov.shape[0]
        off = (cov.sum() - np.trace(cov)) / (k * (k - 1))
        total += k * float(np.trace(cov) / k - off)
        weight += k
    return max(total / weight, 0.0) if weight else 0.0


def sentence_split(sentence_var: float, per_seed: float, k_a: int, k_b: int) -> float:
    """The k-independent part of a Δ's sentence-bootstrap variance ``v`` (the configurations' own
    test-set sampling error): ``max(v - s (1/K_a + 1/K_b), 0)`` with ``s`` from
    :func:`per_seed_sentence_var`. Measured on results/calibration-cpu, ``v·k`` is constant over
    k = 1..8 (0.132-0.136): almost all of ``v`` is the per-seed part."""
    return max(sentence_var - per_seed * (1 / k_a + 1 / k_b), 0.0)


def _ss(values: Sequence[float]) -> float:
    return float(np.sum((np.asarray(values) - np.mean(values)) ** 2)) if values else 0.0


@dataclass(frozen=True)
class SeedTest:
    """One seed-aware comparison: the Δ, its standard error and where it came from.

    Attributes:
        delta: mean over b's seeds minus mean over a's seeds.
        se: sqrt(seed part + sentence part).
        seed_var, sentence_var: the two parts of se².
        df: degrees of freedom of the test: the seed σ's (inf when the seed part is 0).
        p_value: two-sided, Student's t at ``df``.
        sigma: the per-trial seed σ used; paired: whether the rows shared their seeds.
    """

    delta: float
    se: float
    seed_var: float
    sentence_var: float
    df: float
    p_value: float
    sigma: float
    paired: bool

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The two-sided ``level`` confidence interval of Δ (uncorrected for multiple comparisons)."""
        half = _t_quantile(0.5 + level / 2, self.df) * self.se
        return self.delta - half, self.delta + half


def seed_test(
    a: Sequence[float], b: Sequence[float], sentence_var: float, sigma: float, df: int, paired: bool
) -> SeedTest:
    """Two-sided test of ``mean(b) - mean(a)`` with seed and sentence variance together.

    Args:
        a, b: per-trial scores of the two rows (one per seed).
        sentence_var: the k-independent part of the seed-averaged Δ's variance over resampled test
            sentences (:func:`sentence_split`; the per-seed part is inside ``sigma`` already).
        sigma, df: the table's per-trial seed σ and its degrees of freedom (:func:`fit`).
        paired: whether ``sigma`` is the seed-paired (two-way) estimate.
    """
    delta = float(np.mean(b) - np.mean(a))
    seed_var = sigma**2 * (1 / len(a) + 1 / len(b))
    var = seed_var + max(sentence_var, 0.0)
    se = math.sqrt(var)
    dof = math.inf if seed_var == 0 else float(df)  # not Welch-Satterthwaite: see the module docstring
    if se == 0:
        p = 1.0 if delta == 0 else 0.0
    else:
        p = float(2 * st.t.sf(abs(delta) / se, dof))
    return SeedTest(delta, se, seed_var, sentence_var, dof, p, sigma, paired)


@functools.lru_cache(maxsize=1024)
def _t_quantile(q: float, df: float) -> float:
    return float(st.norm.ppf(q) if math.isinf(df) else st.t.ppf(q, df))


def standard_error(sigma: float, seeds_a: int, seeds_b: int, sentence_var: float) -> float:
    """SE(k) of a Δ between rows of ``seeds_a`` and ``seeds_b`` seeds: ``sqrt(σ² (1/K_a + 1/K_b) + v0)``,
    the per-trial seed σ (which holds the seed x sentence interaction) plus the k-independent
    sentence part ``v0`` (:func:`sentence_split`): each source of variance once."""
    return math.sqrt(sigma**2 * (1 / seeds_a + 1 / seeds_b) + max(sentence_var, 0.0))


def power(
    delta: float, sigma: float, df: float, seeds_a: int, seeds_b: int, sentence_var: float, alpha: float
) -> float:
    """Predicted power of the two-sided seed-aware test for a true ``delta``: the noncentral t at
    ``df`` with noncentrality ``|delta| / SE(k)`` (:func:`standard_error`; exact when ``v0`` = 0)."""
    se = standard_error(sigma, seeds_a, seeds_b, sentence_var)
    if se == 0:
        return 1.0 if delta else alpha
    nc, dof = abs(delta) / se, max(float(df), 1.0)
    if math.isinf(dof):
        crit = float(st.norm.ppf(1 - alpha / 2))
        return float(st.norm.sf(crit - nc) + st.norm.cdf(-crit - nc))
    crit = float(st.t.ppf(1 - alpha / 2, dof))
    return float(st.nct.sf(crit, dof, nc) + st.nct.cdf(-crit, dof, nc))


def detectable(sigma: float, df: int, seeds: int, sentence_var: float, alpha: float, power: float = POWER) -> float:
    """Minimum detectable |Δ|: the effect a two-sided test at ``alpha`` finds with ``power``
    between two rows of ``seeds`` seeds each (normal approximation with t quantiles at ``df``;
    ``sentence_var`` is the k-independent part, :func:`sentence_split`)."""
    se = standard_error(sigma, seeds, seeds, sentence_var)
    dof = max(df, 1)
    return (_t_quantile(1 - alpha / 2, dof) + _t_quantile(power, dof)) * se


def seeds_needed(delta: float, sigma: float, sentence_var: float, alpha: float, power: float = POWER) -> Optional[int]:
    """Seeds per row for a true ``delta`` to be found with ``power`` at ``alpha`` (large-sample
    normal quantiles), from SE²(k) = 2σ²/k + v0 with ``sentence_var`` the k-independent part ``v0``
    (:func:`sentence_split`; the per-seed part of the bootstrap variance shrinks with k and is in σ).
    None when no number of seeds would do: the test set's own sampling variance already hides an
    effect that small (a bigger test set would be needed)."""
    z = float(st.norm.ppf(1 - alpha / 2) + st.norm.ppf(power))
    room = (abs(delta) / z) ** 2 - max(sentence_var, 0.0)
    if room <= 0:
        return None
    return max(math.ceil(2 * sigma**2 / room), 2)


def normal_quantile(q: float) -> float:
    return float(st.norm.ppf(q))
