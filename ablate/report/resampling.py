"""Corpus BLEU under resampled test sentences: the sentence-level half of a Δ's variance.

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
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from ablate.metrics import bleu
from ablate.metrics.bleu import ORDER, bleu_from_stats  # noqa: F401 - re-exported
from ablate.report.records import ReportError

SEED = 12345
Score = Callable[[np.ndarray], np.ndarray]
"""(..., k) summed statistics -> (...) corpus scores: a scorer's ``from_statistics``."""


def sentence_stats(hyps: Sequence[str], refs: Sequence[str], tokenize: Optional[str] = None) -> np.ndarray:
    """sacreBLEU's per-sentence BLEU statistics (:func:`ablate.metrics.bleu.sentence_stats`).

    Raises:
        ReportError: the hypotheses and references differ in length.
    """
    if len(hyps) != len(refs) or not refs:
        raise ReportError(f"hypotheses and references differ in length ({len(hyps)}, {len(refs)})")
    return bleu.sentence_stats(hyps, refs, tokenize)


class Resamples:
    """One split's bootstrap resamples of sentences, shared by every trial and comparison.

    Args:
        n: sentences in the split.
        samples: bootstrap resamples.
        seed: RNG seed (results are deterministic).
    """

    def __init__(self, n: int, samples: int, seed: int = SEED):
        rng = np.random.default_rng(seed)
        self.n, self.samples = n, samples
        self.weights = rng.multinomial(n, np.full(n, 1.0 / n), size=samples).astype(np.float64)  # (B, n)

    def bleu(self, stats: np.ndarray, score: Score = bleu_from_stats) -> np.ndarray:
        """(B,) corpus score (BLEU, or ``score`` of the metric's statistics) of one trial's (n, k)
        statistics under each resample."""
        if stats.shape[0] != self.n:
            raise ReportError(f"hypotheses cover {stats.shape[0]} sentences, the split has {self.n}")
        return score(self.weights @ stats)


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
