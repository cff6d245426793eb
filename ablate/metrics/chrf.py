"""chrF (Popović 2015) and chrF++ (Popović 2017) as sacreBLEU computes them, from per-sentence counts.

chrF is the F-beta score (beta = 2) of character n-grams (n = 1..6, whitespace removed), averaged
over the orders; chrF++ adds word unigrams and bigrams (punctuation split off words). Its corpus
score is a function of summed per-sentence counts: for every order, the hypothesis n-grams, the
reference n-grams and their matches. :func:`chrf_statistics` counts them with sacreBLEU's public
n-gram helpers, and :func:`chrf_from_stats` is sacreBLEU's default (effective-order) F-score of
their sum, so ``chrf_from_stats(stats.sum(0))`` equals ``CHRF().corpus_score`` on the same lines.
"""

from __future__ import annotations

import string
from collections import Counter
from typing import Any, Optional

import numpy as np

from ablate.metrics.scorer import SacreBleuScorer, Texts, check_aligned

CHAR_ORDER = 6
BETA = 2
PUNCTUATION = frozenset(string.punctuation)


def words(sentence: str) -> list[str]:
    """chrF++'s words: whitespace tokens with one punctuation mark split off the end, else off the
    start (``(hi)`` -> ``(hi``, ``)``; one-character tokens stay whole), as the reference chrF++.py."""
    out: list[str] = []
    for word in sentence.split():
        if len(word) > 1 and word[-1] in PUNCTUATION:
            out += [word[:-1], word[-1]]
        elif len(word) > 1 and word[0] in PUNCTUATION:
            out += [word[0], word[1:]]
        else:
            out.append(word)
    return out


def _ngrams(sentence: str, word_order: int) -> list[Counter]:
    from sacrebleu.metrics.helpers import extract_all_char_ngrams, extract_word_ngrams

    grams = extract_all_char_ngrams(sentence, CHAR_ORDER, False)
    if word_order:
        tokens = words(sentence)
        grams += [extract_word_ngrams(tokens, n) for n in range(1, word_order + 1)]
    return grams


def chrf_statistics(hyps: Texts, refs: Texts, word_order: int = 0) -> np.ndarray:
    """(n, 3·orders) counts per sentence: ``[hyp n-grams, ref n-grams, matches]`` per order, char
    orders first. A hypothesis's n-grams of an order the reference has none of count 0 (sacreBLEU's rule)."""
    check_aligned(hyps, refs)
    orders = CHAR_ORDER + word_order
    out = np.zeros((len(hyps), 3 * orders), dtype=np.float64)
    for i, (hyp, ref) in enumerate(zip(hyps, refs)):
        for j, (h, r) in enumerate(zip(_ngrams(hyp, word_order), _ngrams(ref, word_order))):
            matches = sum(min(count, r[gram]) for gram, count in h.items() if gram in r)
            out[i, 3 * j : 3 * j + 3] = (sum(h.values()) if r else 0, sum(r.values()), matches)
    return out


def chrf_from_stats(stats: np.ndarray, beta: int = BETA) -> np.ndarray:
    """chrF from summed counts (..., 3·orders) -> (...): precision and recall averaged over the
    orders both sides have, then F-beta, in [0, 100] (sacreBLEU's default, no epsilon smoothing)."""
    factor = beta**2
    shape = stats.shape[:-1]
    avg_prec, avg_rec, effective = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(stats.shape[-1] // 3):
            n_hyp, n_ref, n_match = stats[..., 3 * j], stats[..., 3 * j + 1], stats[..., 3 * j + 2]
            both = (n_hyp > 0) & (n_ref > 0)
            avg_prec = np.where(both, avg_prec + n_match / n_hyp, avg_prec)
            avg_rec = np.where(both, avg_rec + n_match / n_ref, avg_rec)
            effective = effective + both
        avg_prec = np.where(effective > 0, avg_prec / effective, 0.0)
        avg_rec = np.where(effective > 0, avg_rec / effective, 0.0)
        score = (1 + factor) * avg_prec * avg_rec
        score = score / (factor * avg_prec + avg_rec)
    return np.where(avg_prec + avg_rec > 0, 100 * score, 0.0)


class Chrf(SacreBleuScorer):
    """sacreBLEU chrF (``word_order`` 0) or chrF++ (2), cased, whitespace excluded."""

    name = "chrf"
    label = "chrF"
    higher_is_better = True
    decimals = 2
    word_order = 0

    def metric(self) -> Any:
        from sacrebleu.metrics import CHRF

        return CHRF(word_order=self.word_order)

    def sentences(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> list[float]:
        check_aligned(hyps, refs)
        metric = self.metric()
        return [float(metric.sentence_score(h, [r]).score) for h, r in zip(hyps, refs)]

    def statistics(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> np.ndarray:
        return chrf_statistics(hyps, refs, self.word_order)

    def from_statistics(self, stats: np.ndarray) -> np.ndarray:
        return chrf_from_stats(stats)


class ChrfPlusPlus(Chrf):
    """chrF++: chrF with word unigrams and bigrams (Popović 2017)."""

    name = "chrf++"
    label = "chrF++"
    word_order = 2
