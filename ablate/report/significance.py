"""Significance of BLEU differences between rows, over seeds, with Holm-Bonferroni correction.

**The statistic.** A row (a configuration) trained with K seeds has K hypothesis files for the
same source sentences. Its score is the mean over its seeds of corpus BLEU, and a comparison's
statistic is the difference of two rows' scores: ``mean_s BLEU(B_s) - mean_s BLEU(A_s)``.

**The tests** resample *source sentences*, jointly across seeds (Koehn 2004, extended to seeds):

* ``bs`` (default), paired bootstrap resampling: each resample draws n sentence ids with
  replacement and applies the *same* ids to every seed of both rows, so a sentence's K outputs
  move together and the sentence-to-sentence variation of the seed-averaged difference is what
  the bootstrap measures. Two-sided p-value of the shifted bootstrap distribution
  (``(1 + #{|d* - mean d*| >= |d|}) / (N + 1)``), as sacreBLEU computes it.
* ``ar``, paired approximate randomisation (Riezler & Maxwell 2005): each trial swaps the two
  rows' outputs for a random half of the sentences, every seed pair of a sentence together.

Concatenating the seeds' outputs and resampling the K·n lines independently (sacreBLEU's test on
pooled output, what ablate did before) treats the K outputs of one sentence as K independent
sentences and so understates the variance of any per-sentence effect by up to a factor of K:
``tests/report/test_calibration.py`` measures it rejecting a true null far more often than
alpha. Both tests here compute corpus BLEU from sacreBLEU's per-sentence sufficient statistics
(:func:`bleu_from_stats` equals ``sacrebleu.corpus_bleu`` on the same lines), so thousands of
resamples take seconds. What the p-value does not contain is a shift of a whole run (one seed
better on every sentence): that between-seed spread is the ± std beside every mean.

**Multiple comparisons.** A table makes many comparisons (every row against the base, or the
pairs a sweep names, on every test split); :func:`holm` adjusts all of a table's p-values
together (Holm 1979), which controls the family-wise error rate at alpha over the whole table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

import numpy as np

from ablate.report.aggregate import Row, Sweep, value_order
from ablate.report.records import ReportError, Trial

TESTS = {"bs": "paired bootstrap resampling", "ar": "paired approximate randomization"}
DEFAULT_SAMPLES = {"bs": 2000, "ar": 10000}
SEED = 12345
ORDER = 4  # BLEU's maximum n-gram order


@dataclass(frozen=True)
class Comparison:
    """Row ``row`` against row ``reference`` on one test split.

    Attributes:
        reference, row: row names (``reference`` is the base for comparisons against the base).
        split: the test split.
        p_value: two-sided p-value of the BLEU difference, uncorrected.
        p_adjusted: Holm-Bonferroni adjusted p-value over all comparisons of the table.
        base_bleu, bleu: mean over seeds of corpus BLEU of ``reference`` and ``row``.
        seeds: seeds used on each side (the pairs for ``ar``).
    """

    reference: str
    row: str
    split: str
    p_value: float
    base_bleu: float
    bleu: float
    seeds: tuple[int, int]
    p_adjusted: float = math.nan

    @property
    def delta(self) -> float:
        return self.bleu - self.base_bleu

    def significant(self, alpha: float) -> bool:
        return self.p_adjusted < alpha


# --------------------------------------------------------------------------------------
# BLEU from sufficient statistics
# --------------------------------------------------------------------------------------


def sentence_stats(hyps: Sequence[str], refs: Sequence[str], tokenize: Optional[str] = None) -> np.ndarray:
    """sacreBLEU's per-sentence BLEU statistics, shape (n, 2 + 2·4): hypothesis length, reference
    length, matching n-grams (n = 1..4), hypothesis n-grams (n = 1..4)."""
    from sacrebleu.metrics import BLEU

    if len(hyps) != len(refs) or not refs:
        raise ReportError(f"hypotheses and references differ in length ({len(hyps)}, {len(refs)})")
    try:
        metric = BLEU(tokenize=tokenize) if tokenize else BLEU()
    except Exception:  # noqa: BLE001 - an unknown tokenizer name in an old signature
        metric = BLEU()
    metric._force = True  # no "tokenized period" warnings: these are the run's own outputs
    return np.asarray(metric._extract_corpus_statistics(list(hyps), [list(refs)]), dtype=np.float64)


def bleu_from_stats(stats: np.ndarray) -> np.ndarray:
    """Corpus BLEU (sacreBLEU's default: ``exp`` smoothing, order 4) from summed statistics.

    Args:
        stats: (..., 10) summed sufficient statistics (see :func:`sentence_stats`).

    Returns:
        (...) BLEU in [0, 100].
    """
    sys_len, ref_len = stats[..., 0], stats[..., 1]
    correct, total = stats[..., 2 : 2 + ORDER], stats[..., 2 + ORDER : 2 + 2 * ORDER]
    with np.errstate(divide="ignore", invalid="ignore"):
        bp = np.where(sys_len < ref_len, np.where(sys_len > 0, np.exp(1 - ref_len / sys_len), 0.0), 1.0)
        # sacreBLEU's 'exp' smoothing: the k-th order without a match gets 1 / (2^k · total)
        misses = np.cumsum(correct == 0, axis=-1)
        precision = np.where(correct > 0, 100.0 * correct / total, 100.0 / (2.0**misses * total))
        log_p = np.log(precision)
    score = bp * np.exp(log_p.sum(axis=-1) / ORDER)
    dead = (total == 0).any(axis=-1) | (correct == 0).all(axis=-1)
    return np.where(dead, 0.0, score)


# --------------------------------------------------------------------------------------
# The tests
# --------------------------------------------------------------------------------------


def _mean_bleu(weights: np.ndarray, stats: np.ndarray) -> np.ndarray:
    """Mean over seeds of corpus BLEU for each row of sentence ``weights`` (N, n); stats (K, n, 10)."""
    sums = np.einsum("bn,knj->bkj", weights, stats)  # (N, K, 10)
    return bleu_from_stats(sums).mean(axis=1)


def seed_bootstrap(
    a: np.ndarray, b: np.ndarray, test: str = "bs", n_samples: int = 0, seed: int = SEED
) -> tuple[float, float, float]:
    """Two-sided test of ``mean_s BLEU(b_s) - mean_s BLEU(a_s)`` resampling sentences jointly over seeds.

    Args:
        a, b: per-sentence statistics of each row's seeds, (Ka, n, 10) and (Kb, n, 10), the same
            n source sentences in the same order. ``ar`` pairs seeds by position (min(Ka, Kb)).
        test: ``bs`` or ``ar`` (see the module docstring).
        n_samples: resamples (``bs``) or trials (``ar``); 0 for :data:`DEFAULT_SAMPLES`.
        seed: the resampling RNG seed (results are deterministic).

    Returns:
        ``(p_value, bleu_a, bleu_b)``; identical inputs give p = 1.
    """
    if test not in TESTS:
        raise ReportError(f"unknown significance test '{test}' (choose from: {', '.join(TESTS)})")
    if a.ndim != 3 or b.ndim != 3 or a.shape[1:] != b.shape[1:] or not a.shape[1]:
        raise ReportError(f"hypotheses of the two rows cover different sentences ({a.shape[1]} vs {b.shape[1]})")
    n = a.shape[1]
    n_samples = n_samples or DEFAULT_SAMPLES[test]
    ones = np.ones((1, n))
    bleu_a, bleu_b = float(_mean_bleu(ones, a)[0]), float(_mean_bleu(ones, b)[0])
    observed = bleu_b - bleu_a
    if observed == 0.0:
        return 1.0, bleu_a, bleu_b
    rng = np.random.default_rng(seed)
    extreme, chunk = 0, max(1, 2_000_000 // (n * (a.shape[0] + b.shape[0])))
    if test == "bs":
        diffs = []
        for start in range(0, n_samples, chunk):
            w = rng.multinomial(n, np.full(n, 1.0 / n), size=min(chunk, n_samples - start)).astype(np.float64)
            diffs.append(_mean_bleu(w, b) - _mean_bleu(w, a))
        d = np.concatenate(diffs)
        extreme = int(np.sum(np.abs(d - d.mean()) >= abs(observed)))
    else:
        k = min(a.shape[0], b.shape[0])
        a, b = a[:k], b[:k]
        for start in range(0, n_samples, chunk):
            swap = rng.random((min(chunk, n_samples - start), n)) < 0.5
            keep = (~swap).astype(np.float64)
            sa = np.einsum("bn,knj->bkj", keep, a) + np.einsum("bn,knj->bkj", 1 - keep, b)
            sb = np.einsum("bn,knj->bkj", keep, b) + np.einsum("bn,knj->bkj", 1 - keep, a)
            d = bleu_from_stats(sb).mean(axis=1) - bleu_from_stats(sa).mean(axis=1)
            extreme += int(np.sum(np.abs(d) >= abs(observed) - 1e-12))
    return (extreme + 1) / (n_samples + 1), bleu_a, bleu_b


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (Holm 1979): step-down, monotone, capped at 1."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    m, running, out = len(p_values), 0.0, [1.0] * len(p_values)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


# --------------------------------------------------------------------------------------
# Rows of a sweep
# --------------------------------------------------------------------------------------


def _usable(trials: Sequence[Trial], split: str) -> list[Trial]:
    ok = [t for t in trials if split in t.hyps and split in t.refs and len(t.hyps[split]) == len(t.refs[split])]
    return sorted(ok, key=lambda t: (value_order(t.seed), t.name))


def pair_seeds(base: Sequence[Trial], row: Sequence[Trial]) -> list[tuple[Trial, Trial]]:
    """Seed pairs: equal seed values if any are shared, else by rank of sorted seeds."""
    by_seed = {t.seed: t for t in base}
    shared = [(by_seed[t.seed], t) for t in row if t.seed in by_seed]
    if shared:
        return sorted(shared, key=lambda p: value_order(p[0].seed))
    order = lambda ts: sorted(ts, key=lambda t: (value_order(t.seed), t.name))  # noqa: E731
    return list(zip(order(base), order(row)))


class _StatsCache:
    """Per-sentence statistics of each trial and split, computed once per report."""

    def __init__(self, tokenize: Optional[str]):
        self.tokenize, self._cache = tokenize, {}

    def __call__(self, trial: Trial, split: str) -> np.ndarray:
        key = (trial.name, split)
        if key not in self._cache:
            self._cache[key] = sentence_stats(trial.hyps[split], trial.refs[split], self.tokenize)
        return self._cache[key]


def compare_rows(
    reference: Row, row: Row, split: str, test: str = "bs", n_samples: int = 0, stats: Optional[_StatsCache] = None
) -> Optional[Comparison]:
    """``row`` against ``reference`` on ``split`` (uncorrected); None without usable hypotheses."""
    stats = stats or _StatsCache(_tokenizer(reference.trials))
    a, b = _usable(reference.trials, split), _usable(row.trials, split)
    if test == "ar":
        pairs = pair_seeds(a, b)
        a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    if not a or not b:
        return None
    refs = a[0].refs[split]
    a, b = [t for t in a if t.refs[split] == refs], [t for t in b if t.refs[split] == refs]
    if not a or not b:
        return None
    p, bleu_a, bleu_b = seed_bootstrap(
        np.stack([stats(t, split) for t in a]), np.stack([stats(t, split) for t in b]), test, n_samples
    )
    return Comparison(reference.name, row.name, split, p, bleu_a, bleu_b, (len(a), len(b)))


def compare(
    sweep: Sweep, test: str = "bs", n_samples: int = 0, plan: Optional[Sequence[tuple[str, str]]] = None
) -> list[Comparison]:
    """The table's comparisons on every test split with saved hypotheses, Holm-adjusted together.

    Args:
        sweep: the aggregated rows.
        test, n_samples: see :func:`seed_bootstrap`.
        plan: ``(reference row, row)`` name pairs to compare; default the sweep's named
            comparisons (:func:`ablate.report.plan.planned_pairs`), else every row against the base.
    """
    from ablate.report.plan import planned_pairs

    if plan is None:
        plan = planned_pairs(sweep)
    rows = {r.name: r for r in sweep.rows}
    splits = test_splits(sweep)
    stats = _StatsCache(_tokenizer(sweep.base.trials))
    found = [
        c
        for ref, name in plan
        for split in splits
        if (c := compare_rows(rows[ref], rows[name], split, test, n_samples, stats)) is not None
    ]
    adjusted = holm([c.p_value for c in found])
    return [replace(c, p_adjusted=p) for c, p in zip(found, adjusted)]


def against_base(comparisons: Sequence[Comparison], sweep: Sweep) -> dict[tuple[str, str], Comparison]:
    """``{(row, split): Comparison}`` for the comparisons against the base row."""
    return {(c.row, c.split): c for c in comparisons if c.reference == sweep.base.name}


def test_splits(sweep: Sweep) -> list[str]:
    """Test splits with saved hypotheses (the validation split's are saved too, but not tested)."""
    have = {s for r in sweep.rows for t in r.trials for s in t.hyps}
    known = set(sweep.test_splits)
    return sorted(have & known) if known else sorted(have - {"val", "valid", "dev"})


def _tokenizer(trials: Sequence[Trial]) -> Optional[str]:
    """The ``tok:`` field of the runs' sacreBLEU signature, so the test scores BLEU as they did."""
    for t in trials:
        for part in (t.signature or "").split("|"):
            if part.startswith("tok:"):
                return part[len("tok:") :]
    return None


def describe(test: str, n_samples: int) -> dict[str, Any]:
    """Words for the footnote: the test's name and its number of samples."""
    return {"name": TESTS[test], "samples": n_samples or DEFAULT_SAMPLES[test]}
