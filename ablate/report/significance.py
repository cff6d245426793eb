"""Significance of a table's differences, over training seeds and test sentences, Holm-corrected.

**The statistic.** A row (a configuration) trained with K seeds has K hypothesis files for the
same source sentences. Its score is the mean over its seeds of corpus BLEU, and a comparison's
statistic is the difference of two rows' scores: ``Δ = mean_s BLEU(B_s) - mean_s BLEU(A_s)``.
Any metric of :mod:`ablate.metrics` takes BLEU's place (``ablate table --metric``): the resamples
are of its per-sentence statistics, whose sum gives its corpus score (chrF's n-gram counts, TER's
edits, a per-sentence metric's scores); the test is two-sided, so an error rate (TER) is tested alike.

**The tests** (``--test``):

* ``seeds`` (default), seed-aware: ``Δ`` is uncertain for two reasons, the training seeds each
  row happened to get and the test sentences the corpus happened to hold. Its variance is the sum
  of a seed part, ``σ² (1/K_a + 1/K_b)`` with the per-trial seed σ pooled over the whole table
  (the seed-variance section below: a row + seed fit for rows trained with the same seeds, Clark et al.
  2011's replicates), and a sentence part, the variance of ``Δ`` under paired bootstrap
  resampling of sentences (Koehn 2004; the same sentence ids for every seed of both rows). The
  p-value is Student's t at the seed σ's degrees of freedom (the conservative choice; the
  plug-in Welch-Satterthwaite df is too liberal with few seeds, see the seed-variance section below). Where no seed variance
  can be estimated (one seed in every row) nothing is tested and the table says why.
* ``bs``: paired bootstrap resampling of sentences alone; ``ar``: paired approximate
  randomisation (Riezler & Maxwell 2005). Both measure **test-set variance only**: two seeds of
  one configuration differ by more than that (``results/calibration-cpu``), so these call a
  same-configuration pair "different" far more often than alpha.

**Multiple comparisons.** :func:`holm` adjusts all of a table's p-values together (Holm 1979),
which controls the family-wise error rate at alpha over the whole table.

**Resampled test sentences** (the sentence-level half of a Δ's variance).

A row (a configuration) trained with K seeds has K hypothesis files for the same n source
sentences. Corpus BLEU is not a mean of sentence scores, but it is a function of summed
per-sentence sufficient statistics (sacreBLEU's), so a resample of sentences is a weight vector
``w`` (how often each sentence is drawn) and the resampled corpus BLEU of a trial is
``BLEU(w @ stats)``: :func:`bleu_from_stats` equals ``sacrebleu.corpus_bleu`` on the same lines,
and thousands of resamples take seconds. Every metric of :mod:`ablate.metrics` works the same way
(chrF's n-gram counts, TER's edits and reference lengths, a plugin's sentence scores), so the
functions here take the metric's ``from_statistics`` as ``score`` (BLEU's by default).

* :class:`Resamples` draws one set of bootstrap weights per test split and keeps every trial's
  resampled BLEU, so each comparison of a table reuses them (paired bootstrap resampling, Koehn
  2004, with the *same* sentence ids for every seed of both rows: a sentence's K outputs move
  together).
* :func:`approximate_randomization`: paired approximate randomisation (Riezler & Maxwell 2005),
  swapping the two rows' outputs for a random half of the sentences, seed pairs together.

Concatenating seeds' outputs and resampling K·n lines independently (sacreBLEU's bootstrap on
pooled output) would count one sentence's advantage K times; ``tests/report/test_calibration.py``
measures that failure.

**Training-seed variance** (how far a whole run moves when only its seed changes).

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
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np
from scipy import stats as st

from ablate.metrics import scorers as bleu_metric
from ablate.metrics.scorers import ORDER, bleu_from_stats  # noqa: F401 - re-exported
from ablate.report.aggregate import Sweep, value_order
from ablate.report.metric_values import DEFAULT_METRIC, bleu_tokenizer, scorer_for, statistics  # noqa: F401 - re-exported
from ablate.report.records import ReportError, Trial

# --------------------------------------------------------------------------------------
# Resampled test sentences (Koehn 2004; Riezler & Maxwell 2005)
# --------------------------------------------------------------------------------------


SEED = 12345
Score = Callable[[np.ndarray], np.ndarray]
"""(..., k) summed statistics -> (...) corpus scores: a scorer's ``from_statistics``."""


def sentence_stats(hyps: Sequence[str], refs: Sequence[str], tokenize: Optional[str] = None) -> np.ndarray:
    """sacreBLEU's per-sentence BLEU statistics (:func:`ablate.metrics.scorers.sentence_stats`).

    Raises:
        ReportError: the hypotheses and references differ in length.
    """
    if len(hyps) != len(refs) or not refs:
        raise ReportError(f"hypotheses and references differ in length ({len(hyps)}, {len(refs)})")
    return bleu_metric.sentence_stats(hyps, refs, tokenize)


class Resamples:
    """One split's bootstrap resamples of sentences, shared by every trial and comparison.

    :meth:`shared` keeps one per ``(n, samples, seed)`` in the process, and each keeps the resampled
    scores of the statistics it has seen (by identity: :func:`ablate.metrics.statistics` gives
    one array per text), so a table's two-row re-runs (:func:`compare_alone`) resample nothing again.

    Args:
        n: sentences in the split.
        samples: bootstrap resamples.
        seed: RNG seed (results are deterministic).
    """

    def __init__(self, n: int, samples: int, seed: int = SEED):
        rng = np.random.default_rng(seed)
        self.n, self.samples = n, samples
        self.weights = rng.multinomial(n, np.full(n, 1.0 / n), size=samples).astype(np.float64)  # (B, n)
        self._seen: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
        self._weights32: Optional[np.ndarray] = None

    @staticmethod
    @functools.lru_cache(maxsize=4)
    def shared(n: int, samples: int, seed: int = SEED) -> Resamples:
        """The process's one :class:`Resamples` of these parameters (the same weights as a new one)."""
        return Resamples(n, samples, seed)

    def _single(self) -> np.ndarray:
        """The weights in float32 (made once): exact for counts whose weighted sums stay below 2^24."""
        if self._weights32 is None:
            self._weights32 = self.weights.astype(np.float32)
        return self._weights32

    def bleu(self, stats: np.ndarray, score: Score = bleu_from_stats) -> np.ndarray:
        """(B,) corpus score (BLEU, or ``score`` of the metric's statistics) of one trial's (n, k)
        statistics under each resample."""
        return self.bleu_many([stats], score)[0]

    def bleu_many(self, stats: Sequence[np.ndarray], score: Score = bleu_from_stats) -> list[np.ndarray]:
        """:meth:`bleu` of each of several trials' (n, k) statistics; whole-number statistics (counts,
        as BLEU's and chrF's are) are resampled together in one matrix product, exact in float64."""
        if any(s.shape[0] != self.n for s in stats):
            bad = next(s.shape[0] for s in stats if s.shape[0] != self.n)
            raise ReportError(f"hypotheses cover {bad} sentences, the split has {self.n}")
        name = getattr(score, "__qualname__", repr(score))
        todo = [s for s in {id(s): s for s in stats}.values() if self._seen.get((id(s), name), (None,))[0] is not s]
        counts = [s for s in todo if s.ndim == 2 and np.array_equal(s, np.rint(s))]
        summed = dict(_resample_counts(self.weights, counts, self._single()))
        for s in todo:
            boot = score(summed[id(s)] if id(s) in summed else self.weights @ s)
            if len(self._seen) >= 4096:
                self._seen.clear()
            self._seen[(id(s), name)] = (s, boot)
        return [self._seen[(id(s), name)][1] for s in stats]


def _resample_counts(
    weights: np.ndarray, stats: Sequence[np.ndarray], single: np.ndarray, chunk: int = 64
) -> Iterable[tuple[int, np.ndarray]]:
    """``(id(s), weights @ s)`` for each (n, k) ``s``, ``chunk`` trials per matrix product: (B, n) @ (n, chunk·k).

    Whole-number statistics and weights make every product and sum an exact float64 integer (below
    2^53), so the result is the one ``weights @ s`` gives, bit for bit; where every sum stays below
    2^24 (a row of weights sums to n) it is exact in float32 too, and ``single`` (the weights in
    float32) computes it in half the time."""
    for start in range(0, len(stats), chunk):
        part = np.concatenate(stats[start : start + chunk], axis=1)
        widths = np.cumsum([0] + [s.shape[1] for s in stats[start : start + chunk]])
        if weights.shape[1] * float(np.abs(part).max(initial=0.0)) < 2**24:
            product = (single @ part.astype(np.float32)).astype(np.float64)  # (B, sum k)
        else:
            product = weights @ part
        for s, lo, hi in zip(stats[start : start + chunk], widths[:-1], widths[1:]):
            yield id(s), np.ascontiguousarray(product[:, lo:hi])


def bootstrap_p(deltas: np.ndarray, observed: float) -> float:
    """Two-sided p-value of ``observed`` from its bootstrap distribution ``deltas`` (shifted to
    mean 0, as sacreBLEU's paired bootstrap): ``(1 + #{|d - mean d| >= |observed|}) / (B + 1)``."""
    if observed == 0.0:
        return 1.0
    extreme = int(np.sum(np.abs(deltas - deltas.mean()) >= abs(observed)))
    return (extreme + 1) / (len(deltas) + 1)


def approximate_randomization(
    a: np.ndarray, b: np.ndarray, trials: int, seed: int = SEED, score: Score = bleu_from_stats
) -> float:
    """Two-sided paired approximate randomisation p-value of ``mean_s BLEU(b_s) - mean_s BLEU(a_s)``.

    Args:
        a, b: (K, n, k) statistics of the two rows' seeds, paired by position.
        trials: random swaps.
        score: the metric's corpus score of summed statistics (default BLEU's).
    """
    observed = float(score(b.sum(1)).mean() - score(a.sum(1)).mean())
    if observed == 0.0:
        return 1.0
    rng = np.random.default_rng(seed)
    n = a.shape[1]
    extreme, chunk = 0, max(1, 2_000_000 // (n * 2 * a.shape[0]))
    for start in range(0, trials, chunk):
        keep = (rng.random((min(chunk, trials - start), n)) >= 0.5).astype(np.float64)
        sa = np.einsum("bn,knj->bkj", keep, a) + np.einsum("bn,knj->bkj", 1 - keep, b)
        sb = np.einsum("bn,knj->bkj", keep, b) + np.einsum("bn,knj->bkj", 1 - keep, a)
        d = score(sb).mean(axis=1) - score(sa).mean(axis=1)
        extreme += int(np.sum(np.abs(d) >= abs(observed) - 1e-12))
    return (extreme + 1) / (trials + 1)


# --------------------------------------------------------------------------------------
# Training-seed variance (Clark et al. 2011)
# --------------------------------------------------------------------------------------


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


def floored(sigma: Optional[float], floor_var: float) -> Optional[float]:
    """``max(σ, sqrt(floor_var))``: a seed σ no smaller than what is known to be inside it.

    A trial's corpus BLEU on the fixed test set moves with its seed for two reasons: what the seed
    does to the model everywhere, and the seed x sentence interaction on these sentences, whose
    variance ``s`` the sentence bootstrap measures for every trial from thousands of resamples
    (:func:`per_seed_sentence_var`). So σ² >= s, and a σ̂ estimated from 2-4 degrees of freedom
    that came out below it is known to be too small; those are the draws that make a t-test with
    few df fire on noise. The floor is a variance "fudge" in the spirit of SAM's s0 (Tusher,
    Tibshirani & Chu 2001, PNAS 98(9)), here with a value measured on the same runs. On
    results/calibration-cpu (σ 0.70, s 0.065) it moves the false-positive rate over all 5,460 2-vs-2
    splits of the 16 seeds from 8.2% (Student t at 2 df) to 6.4%; with 3+ seeds per row or more
    rows σ̂ almost never falls below it and nothing changes (no shipped table reaches it).
    """
    if sigma is None or floor_var <= 0:
        return sigma
    return max(sigma, math.sqrt(floor_var))


def fit_seed_noise(scores: Mapping[str, Mapping[Any, float]]) -> SeedNoise:
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


# --------------------------------------------------------------------------------------
# Comparisons of a table's rows, Holm-corrected (Holm 1979)
# --------------------------------------------------------------------------------------


TESTS = {
    "seeds": "seed-aware t-test (table-pooled training-seed variance + paired bootstrap over test sentences)",
    "bs": "paired bootstrap resampling over test sentences (test-set variance only)",
    "ar": "paired approximate randomization over test sentences (test-set variance only)",
}
DEFAULT_TEST = "seeds"
DEFAULT_SAMPLES = {"seeds": 2000, "bs": 2000, "ar": 10000}
LEVEL = 0.95  # confidence level of every interval a table shows


@dataclass(frozen=True)
class Comparison:
    """Row ``row`` against row ``reference`` on one test split.

    Attributes:
        reference, row: row names (``reference`` is the base for comparisons against the base).
        split: the test split.
        p_value: two-sided p-value of the score difference, uncorrected (nan: not tested, see ``note``).
        base_bleu, bleu: mean over seeds of the corpus score (BLEU, or ``metric``) of ``reference`` and ``row``.
        seeds: seeds used on each side.
        p_adjusted: Holm-Bonferroni adjusted p-value over all tested comparisons of the table.
        test: the test's key in :data:`TESTS`.
        se: standard error of Δ (seed + sentence parts for ``seeds``, sentence part alone otherwise).
        ci: the 95% confidence interval of Δ, uncorrected.
        sentence_var: variance of Δ over resampled test sentences.
        sentence_fixed: its k-independent part (:func:`ablate.report.significance.sentence_split`), the
            part the seed-aware test adds to the seed σ's (the rest is inside σ already).
        sigma, sigma_df, paired: the table's per-trial seed σ used, its degrees of freedom, and
            whether it was the seed-paired estimate (None where not estimable).
        sigma_floored: whether ``sigma`` is the floor (:func:`ablate.report.significance.floored`): the
            estimate came out below the per-seed sentence variance the bootstrap puts inside it.
        per_seed: ``(seed, Δ)`` for every seed value both rows trained with.
        note: why the comparison was not tested, if it was not.
        metric: the metric compared (a key of :data:`ablate.metrics.METRIC_SCORERS`).
    """

    reference: str
    row: str
    split: str
    p_value: float
    base_bleu: float
    bleu: float
    seeds: tuple[int, int]
    p_adjusted: float = math.nan
    test: str = DEFAULT_TEST
    se: float = math.nan
    ci: tuple[float, float] = (math.nan, math.nan)
    sentence_var: float = math.nan
    sentence_fixed: float = math.nan
    sigma: Optional[float] = None
    sigma_df: int = 0
    paired: bool = False
    sigma_floored: bool = False
    per_seed: tuple[tuple[str, float], ...] = ()
    note: str = ""
    metric: str = DEFAULT_METRIC

    @property
    def delta(self) -> float:
        return self.bleu - self.base_bleu

    @property
    def tested(self) -> bool:
        return not math.isnan(self.p_value)

    @property
    def sign_flip(self) -> bool:
        """Per-seed Δs disagree in sign (some seeds say better, some worse)."""
        signs = {d > 0 for _, d in self.per_seed if d != 0}
        return len(signs) > 1

    def significant(self, alpha: float) -> bool:
        return self.tested and self.p_adjusted < alpha


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (Holm 1979): step-down, monotone, capped at 1."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    m, running, out = len(p_values), 0.0, [1.0] * len(p_values)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


# --------------------------------------------------------------------------------------
# One split: every usable trial's statistics, resampled once
# --------------------------------------------------------------------------------------


class SplitScores:
    """Per-sentence statistics, corpus BLEU and bootstrap BLEU of every trial on one split.

    Built once per table and split (:meth:`of_sweep`), so each comparison costs a few vector
    operations; :meth:`compare` tests two of its rows.

    Args:
        split: the split's name.
        rows: row name -> ``[(seed, (n, k) statistics)]``, the same n sentences everywhere.
        samples: bootstrap resamples of sentences.
        score: the metric's corpus score of summed statistics (BLEU's by default).
        metric: the metric's name.
    """

    def __init__(
        self,
        split: str,
        rows: dict[str, list[tuple[Any, np.ndarray]]],
        samples: int,
        score: Score = bleu_from_stats,
        metric: str = DEFAULT_METRIC,
    ):
        self.split, self.rows = split, {r: list(ts) for r, ts in rows.items() if ts}
        self.score, self.metric = score, metric
        sizes = {s.shape[0] for ts in self.rows.values() for _, s in ts}
        if len(sizes) > 1:
            raise ReportError(f"{split}: hypotheses cover different numbers of sentences ({sorted(sizes)})")
        resamples = Resamples.shared(sizes.pop(), samples) if sizes else None
        self.bleu = {r: [float(score(s.sum(0))) for _, s in ts] for r, ts in self.rows.items()}
        self.boot = {}
        if resamples is not None:
            boots = iter(resamples.bleu_many([s for ts in self.rows.values() for _, s in ts], score))
            self.boot = {r: [next(boots) for _ in ts] for r, ts in self.rows.items()}
        self.seeds = {r: [str(seed) for seed, _ in ts] for r, ts in self.rows.items()}
        self._fit()

    def _fit(self) -> None:
        """The table's seed σ and the per-seed part of its trials' bootstrap variance."""
        self.noise = fit_seed_noise({r: dict(zip(self.seeds[r], self.bleu[r])) for r in self.bleu})
        self.per_seed_var = per_seed_sentence_var(self.boot)

    @classmethod
    def of_values(
        cls, split: str, bleu: dict[str, list[float]], boot: dict[str, list[np.ndarray]], seeds: dict[str, list[str]]
    ) -> SplitScores:
        """A table from per-trial scores alone (row -> per-seed corpus BLEU, (B,) bootstrap BLEU and
        seed values), e.g. a relabelled grouping of one configuration's seeds for calibration;
        ``ar`` (which needs the sentence statistics) is not available on it."""
        out = object.__new__(SplitScores)
        out.split, out.score, out.metric, out.rows = split, bleu_from_stats, DEFAULT_METRIC, {}
        out.bleu, out.boot, out.seeds = dict(bleu), dict(boot), {r: [str(x) for x in v] for r, v in seeds.items()}
        out._fit()
        return out

    @classmethod
    def of_sweep(cls, sweep: Sweep, split: str, samples: int, metric: str = DEFAULT_METRIC) -> SplitScores:
        """Every usable trial of ``sweep``: as many hypotheses as references, and the split's
        references (the first usable trial's), scored with ``metric``."""
        scorer, refs = scorer_for(metric, sweep.base.trials), None
        rows: dict[str, list[tuple[Any, np.ndarray]]] = {}
        for row in sweep.rows:
            for t in _usable(row.trials, split):
                refs = refs if refs is not None else t.refs[split]
                if t.refs[split] == refs:
                    sources = t.sources.get(split)
                    sources = sources if sources and len(sources) == len(refs) else None
                    rows.setdefault(row.name, []).append((t.seed, statistics(scorer, t.hyps[split], refs, sources)))
        return cls(split, rows, samples, scorer.from_statistics, metric)

    def relabel(self, row: str, i: int, j: int) -> SplitScores:
        """A copy in which ``row``'s i-th and j-th seeds are two one-seed rows, ``row@<seed>``
        (its other seeds left out), for calibration: the two are one configuration."""
        out = object.__new__(SplitScores)
        out.split, out.score, out.metric = self.split, self.score, self.metric
        keep = {r: list(range(len(ts))) for r, ts in self.rows.items() if r != row}
        keep.update({f"{row}@{self.seeds[row][i]}": [i], f"{row}@{self.seeds[row][j]}": [j]})
        source = {r: (r if r in self.rows else row) for r in keep}
        out.rows = {r: [self.rows[source[r]][x] for x in keep[r]] for r in keep}
        out.bleu = {r: [self.bleu[source[r]][x] for x in keep[r]] for r in keep}
        out.boot = {r: [self.boot[source[r]][x] for x in keep[r]] for r in keep}
        out.seeds = {r: [self.seeds[source[r]][x] for x in keep[r]] for r in keep}
        out._fit()
        return out

    def compare(self, reference: str, row: str, test: str = DEFAULT_TEST, trials: int = 0) -> Optional[Comparison]:
        """``row`` against ``reference`` (uncorrected); None when either has no usable trial.

        Args:
            trials: random swaps for ``ar`` (0: the default).
        """
        if reference not in self.bleu or row not in self.bleu:
            return None
        xa, xb = self.bleu[reference], self.bleu[row]
        deltas = np.mean(self.boot[row], axis=0) - np.mean(self.boot[reference], axis=0)
        observed = float(np.mean(xb) - np.mean(xa))
        estimated, df, paired = self.noise.for_rows(self.seeds[reference], self.seeds[row])
        sigma = floored(estimated, self.per_seed_var)
        v = float(np.var(deltas, ddof=1))
        base = Comparison(
            reference, row, self.split, math.nan, float(np.mean(xa)), float(np.mean(xb)), (len(xa), len(xb)),
            test=test, sentence_var=v, sentence_fixed=sentence_split(v, self.per_seed_var, len(xa), len(xb)),
            sigma=sigma, sigma_df=df, paired=paired, per_seed=self._per_seed(reference, row), metric=self.metric,
            sigma_floored=sigma != estimated,
        )  # fmt: skip
        if test == "seeds":
            if sigma is None:
                return replace(base, note="no seed variance: every row of the table has one seed")
            result = seed_test(xa, xb, base.sentence_fixed, sigma, df, paired)
            return replace(base, p_value=result.p_value, se=result.se, ci=result.interval(LEVEL))
        se = math.sqrt(base.sentence_var)
        half = normal_quantile(0.5 + LEVEL / 2) * se
        if test == "bs":
            p = bootstrap_p(deltas, observed)
        else:
            a, b = self._paired_stats(reference, row)
            p = approximate_randomization(a, b, trials or DEFAULT_SAMPLES["ar"], score=self.score)
        return replace(base, p_value=p, se=se, ci=(observed - half, observed + half))

    def _per_seed(self, reference: str, row: str) -> tuple[tuple[str, float], ...]:
        """``(seed, Δ)`` for the seed values both rows trained with, in seed order."""
        base = dict(zip(self.seeds[reference], self.bleu[reference]))
        shared = [(s, x - base[s]) for s, x in zip(self.seeds[row], self.bleu[row]) if s in base]
        return tuple(sorted(shared, key=lambda p: value_order(_number(p[0]))))

    def _paired_stats(self, reference: str, row: str) -> tuple[np.ndarray, np.ndarray]:
        """(K, n, 10) statistics of both rows, paired by seed value where shared, else by rank."""
        a, b = dict(zip(self.seeds[reference], self.rows[reference])), dict(zip(self.seeds[row], self.rows[row]))
        shared = [s for s in a if s in b]
        if shared:
            pairs = [(a[s][1], b[s][1]) for s in shared]
        else:
            pairs = [(x[1], y[1]) for x, y in zip(self.rows[reference], self.rows[row])]
        return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])


def _number(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


# --------------------------------------------------------------------------------------
# Rows of a sweep
# --------------------------------------------------------------------------------------


def _usable(trials: Sequence[Trial], split: str) -> list[Trial]:
    ok = [t for t in trials if split in t.hyps and split in t.refs and len(t.hyps[split]) == len(t.refs[split])]
    return sorted(ok, key=lambda t: (value_order(t.seed), t.name))


def check_test(test: str) -> None:
    if test not in TESTS:
        raise ReportError(f"unknown significance test '{test}' (choose from: {', '.join(TESTS)})")


def split_scores(
    sweep: Sweep, n_samples: int = 0, test: str = DEFAULT_TEST, metric: str = DEFAULT_METRIC
) -> dict[str, SplitScores]:
    """:class:`SplitScores` of every test split with saved hypotheses (``n_samples`` bootstrap
    resamples; for ``ar``, whose samples are swaps, the bootstrap's default), on ``metric``."""
    samples = (n_samples if test != "ar" else 0) or DEFAULT_SAMPLES["bs"]
    return {split: SplitScores.of_sweep(sweep, split, samples, metric) for split in test_splits(sweep)}


def compare(
    sweep: Sweep,
    test: str = DEFAULT_TEST,
    n_samples: int = 0,
    plan: Optional[Sequence[tuple[str, str]]] = None,
    metric: str = DEFAULT_METRIC,
) -> list[Comparison]:
    """The table's comparisons on every test split with saved hypotheses, Holm-adjusted together.

    Args:
        sweep: the aggregated rows.
        test: a key of :data:`TESTS`.
        n_samples: bootstrap resamples (``seeds``, ``bs``) or random swaps (``ar``); 0 for the default.
        plan: ``(reference row, row)`` name pairs to compare; default the sweep's named
            comparisons (:func:`ablate.report.plan.planned_pairs`), else every row against the base.
        metric: the metric compared (``bleu``, ``chrf``, ``ter``, a plugin's).
    """
    from ablate.report.plan import planned_pairs

    check_test(test)
    if plan is None:
        plan = planned_pairs(sweep)
    return compare_scores(split_scores(sweep, n_samples, test, metric).values(), plan, test, n_samples)


def compare_scores(
    splits: Iterable[SplitScores], plan: Sequence[tuple[str, str]], test: str = DEFAULT_TEST, n_samples: int = 0
) -> list[Comparison]:
    """The ``plan``'s comparisons on every one of ``splits``, Holm-adjusted together: what puts a
    † on a table's row (:func:`compare`), and what ``ablate calibrate`` runs on relabelled tables."""
    found = [
        c for scores in splits for ref, name in plan if (c := scores.compare(ref, name, test, n_samples)) is not None
    ]
    tested = [c for c in found if c.tested]
    adjusted = iter(holm([c.p_value for c in tested]))
    return [replace(c, p_adjusted=next(adjusted)) if c.tested else c for c in found]


def against_base(comparisons: Sequence[Comparison], sweep: Sweep) -> dict[tuple[str, str], Comparison]:
    """``{(row, split): Comparison}`` for the comparisons against the base row."""
    return {(c.row, c.split): c for c in comparisons if c.reference == sweep.base.name}


def test_splits(sweep: Sweep) -> list[str]:
    """Test splits with saved hypotheses (the validation split's are saved too, but not tested)."""
    from ablate.report.validation import tested_splits

    return tested_splits([t for r in sweep.rows for t in r.trials])


def describe(test: str, n_samples: int) -> dict[str, Any]:
    """Words for the footnote: the test's name and its number of samples."""
    return {"name": TESTS[test], "samples": n_samples or DEFAULT_SAMPLES[test]}


# --------------------------------------------------------------------------------------
# Robustness of a mark: the same comparison with a σ from its own two rows alone
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hinge:
    """A marked comparison re-run on its two rows alone (their own seeds give the σ).

    Attributes:
        comparison: as the table made it (σ pooled over every row of the table).
        alone: the same two rows tabled by themselves (None: they have no seed variance of their own).
        p_adjusted: the Holm-adjusted p the table would give it with ``alone``'s p in place of its own.
    """

    comparison: Comparison
    alone: Optional[Comparison]
    p_adjusted: float

    def holds(self, alpha: float) -> bool:
        return self.alone is not None and self.alone.tested and self.p_adjusted < alpha


def marks_alone(comparisons: Sequence[Comparison], alpha: float, alone: Any) -> list[Hinge]:
    """Every marked comparison (Holm p < ``alpha``) re-run by ``alone(comparison)``, which tables its
    two rows by themselves and compares them (:func:`compare_alone` for a sweep); the rest of the table's
    p-values stay in the Holm family, so a mark that does not hold here hinges on the σ the table pooled
    over its unrelated rows (their seeds, their df), not on what the two rows themselves show."""
    tested = [c for c in comparisons if c.tested]
    out = []
    for i, c in enumerate(tested):
        if not c.significant(alpha):
            continue
        own = alone(c)
        ps = [x.p_value for x in tested]
        ps[i] = own.p_value if own is not None and own.tested else 1.0
        out.append(Hinge(c, own, holm(ps)[i]))
    return out


def compare_alone(sweep: Sweep, comparison: Comparison, n_samples: int = 0) -> Optional[Comparison]:
    """``comparison`` re-run on a table of its two rows only (the same trials, test and samples)."""
    rows = [r for r in sweep.rows if r.name in (comparison.reference, comparison.row)]
    if len(rows) != 2:
        return None
    pair = replace(sweep, rows=sorted(rows, key=lambda r: r.name != comparison.reference), comparisons=None)
    scores = SplitScores.of_sweep(pair, comparison.split, n_samples or DEFAULT_SAMPLES["seeds"], comparison.metric)
    return scores.compare(comparison.reference, comparison.row, comparison.test)
