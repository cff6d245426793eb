"""Corpus BLEU under resampled test sentences: the sentence-level half of a Δ's variance.

A row (a configuration) trained with K seeds has K hypothesis files for the same n source
sentences. Corpus BLEU is not a mean of sentence scores, but it is a function of summed
per-sentence sufficient statistics (sacreBLEU's), so a resample of sentences is a weight vector
``w`` (how often each sentence is drawn) and the resampled corpus BLEU of a trial is
``BLEU(w @ stats)``: :func:`bleu_from_stats` equals ``sacrebleu.corpus_bleu`` on the same lines,
and thousands of resamples take seconds.

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

from typing import Optional, Sequence

import numpy as np

from ablate.report.records import ReportError

ORDER = 4  # BLEU's maximum n-gram order
SEED = 12345


def sentence_stats(hyps: Sequence[str], refs: Sequence[str], tokenize: Optional[str] = None) -> np.ndarray:
    """sacreBLEU's per-sentence BLEU statistics, shape (n, 2 + 2·4): hypothesis length, reference
    length, matching n-grams (n = 1..4), hypothesis n-grams (n = 1..4).

    Read from ``BLEU.sentence_score`` (public API); ``effective_order`` only changes the sentence
    score, not these counts, and keeps sacreBLEU from warning on every line.
    """
    from sacrebleu.metrics import BLEU

    if len(hyps) != len(refs) or not refs:
        raise ReportError(f"hypotheses and references differ in length ({len(hyps)}, {len(refs)})")
    try:
        metric = BLEU(tokenize=tokenize, effective_order=True) if tokenize else BLEU(effective_order=True)
    except Exception:  # noqa: BLE001 - an unknown tokenizer name in an old signature
        metric = BLEU(effective_order=True)
    out = np.empty((len(hyps), 2 + 2 * ORDER), dtype=np.float64)
    for i, (hyp, ref) in enumerate(zip(hyps, refs)):
        s = metric.sentence_score(hyp, [ref])
        out[i, 0], out[i, 1] = s.sys_len, s.ref_len
        out[i, 2 : 2 + ORDER], out[i, 2 + ORDER :] = s.counts, s.totals
    return out


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

    def bleu(self, stats: np.ndarray) -> np.ndarray:
        """(B,) corpus BLEU of one trial's (n, 10) statistics under each resample."""
        if stats.shape[0] != self.n:
            raise ReportError(f"hypotheses cover {stats.shape[0]} sentences, the split has {self.n}")
        return bleu_from_stats(self.weights @ stats)


def bootstrap_p(deltas: np.ndarray, observed: float) -> float:
    """Two-sided p-value of ``observed`` from its bootstrap distribution ``deltas`` (shifted to
    mean 0, as sacreBLEU's paired bootstrap): ``(1 + #{|d - mean d| >= |observed|}) / (B + 1)``."""
    if observed == 0.0:
        return 1.0
    extreme = int(np.sum(np.abs(deltas - deltas.mean()) >= abs(observed)))
    return (extreme + 1) / (len(deltas) + 1)


def approximate_randomization(a: np.ndarray, b: np.ndarray, trials: int, seed: int = SEED) -> float:
    """Two-sided paired approximate randomisation p-value of ``mean_s BLEU(b_s) - mean_s BLEU(a_s)``.

    Args:
        a, b: (K, n, 10) statistics of the two rows' seeds, paired by position.
        trials: random swaps.
    """
    observed = float(bleu_from_stats(b.sum(1)).mean() - bleu_from_stats(a.sum(1)).mean())
    if observed == 0.0:
        return 1.0
    rng = np.random.default_rng(seed)
    n = a.shape[1]
    extreme, chunk = 0, max(1, 2_000_000 // (n * 2 * a.shape[0]))
    for start in range(0, trials, chunk):
        keep = (rng.random((min(chunk, trials - start), n)) >= 0.5).astype(np.float64)
        sa = np.einsum("bn,knj->bkj", keep, a) + np.einsum("bn,knj->bkj", 1 - keep, b)
        sb = np.einsum("bn,knj->bkj", keep, b) + np.einsum("bn,knj->bkj", 1 - keep, a)
        d = bleu_from_stats(sb).mean(axis=1) - bleu_from_stats(sa).mean(axis=1)
        extreme += int(np.sum(np.abs(d) >= abs(observed) - 1e-12))
    return (extreme + 1) / (trials + 1)
