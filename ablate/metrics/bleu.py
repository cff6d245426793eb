"""BLEU (Papineni et al. 2002) as sacreBLEU computes it, with per-sentence sufficient statistics.

Corpus BLEU is a function of summed per-sentence counts (hypothesis and reference lengths,
matching and total n-grams, n = 1..4): :func:`sentence_stats` counts them as sacreBLEU's
``BLEU.sentence_score`` does, and :func:`bleu_from_stats` equals ``BLEU().corpus_score`` on the same
lines for any (weighted) sum of them.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ablate.metrics.scorer import Texts, check_aligned

ORDER = 4  # BLEU's maximum n-gram order


def _bleu(tokenize: Optional[str], **kwargs: Any) -> Any:
    """sacreBLEU's BLEU with ``tokenize`` (None: its default, 13a); an unknown name (an old signature's) falls back."""
    from sacrebleu.metrics import BLEU

    if tokenize:
        try:
            return BLEU(tokenize=tokenize, **kwargs)
        except Exception:  # noqa: BLE001 - an unknown tokenizer name in an old signature
            pass
    return BLEU(**kwargs)


def sentence_stats(hyps: Texts, refs: Texts, tokenize: Optional[str] = None) -> np.ndarray:
    """sacreBLEU's per-sentence BLEU statistics, shape (n, 2 + 2·4): hypothesis length, reference
    length, matching n-grams (n = 1..4), hypothesis n-grams (n = 1..4).

    The counts ``BLEU.sentence_score`` (and ``corpus_score``) make, from the metric's own tokenizer
    and n-gram extraction, with each reference set's n-grams computed once per process: a table's
    trials share their references, so its cost is the hypotheses' (a test pins equality with
    ``sentence_score`` on Multi30k).
    """
    from sacrebleu.metrics.helpers import extract_all_word_ngrams

    check_aligned(hyps, refs)
    metric = _bleu(tokenize)
    references = _reference_ngrams(metric, refs)
    out = np.zeros((len(hyps), 2 + 2 * ORDER), dtype=np.float64)
    orders = np.arange(ORDER)
    for i, (hyp, (ref_ngrams, ref_len)) in enumerate(zip(hyps, references)):
        ngrams, hyp_len = extract_all_word_ngrams(_segment(metric, hyp), 1, ORDER)
        out[i, 0], out[i, 1] = hyp_len, ref_len
        out[i, 2 + ORDER :] = np.maximum(hyp_len - orders, 0)  # a line of L tokens has L - n + 1 n-grams
        for ngram in ngrams.keys() & ref_ngrams.keys():  # clipped matches: only shared n-grams count
            out[i, 1 + len(ngram)] += min(ngrams[ngram], ref_ngrams[ngram])
    return out


def _segment(metric: Any, text: str) -> str:
    """A line as sacreBLEU scores it: lowercased if the metric is, then tokenized."""
    return metric.tokenizer((text.lower() if metric.lowercase else text).rstrip())


_REFERENCES: dict[tuple[Any, ...], list[tuple[Any, int]]] = {}
"""(tokenizer, lowercase, references) -> each reference's n-gram counts and length (a few sets at most)."""


def _reference_ngrams(metric: Any, refs: Texts) -> list[tuple[Any, int]]:
    from sacrebleu.metrics.helpers import extract_all_word_ngrams

    key = (metric.tokenizer.signature(), metric.lowercase, tuple(refs))
    if key not in _REFERENCES:
        if len(_REFERENCES) >= 8:
            _REFERENCES.clear()
        _REFERENCES[key] = [extract_all_word_ngrams(_segment(metric, ref), 1, ORDER) for ref in refs]
    return _REFERENCES[key]


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


class Bleu:
    """sacreBLEU BLEU, cased, ``tokenize`` as the runs scored it (None: 13a)."""

    name = "bleu"
    label = "BLEU"
    reads_sources = False
    higher_is_better = True
    decimals = 2

    def __init__(self, tokenize: Optional[str] = None):
        self.tokenize = tokenize

    def signature(self) -> str:
        metric = _bleu(self.tokenize)
        metric.corpus_score(["x"], [["x"]])  # sacreBLEU signs a metric once it has scored
        return str(metric.get_signature())

    def corpus(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> float:
        check_aligned(hyps, refs)
        return float(_bleu(self.tokenize).corpus_score(list(hyps), [list(refs)]).score)

    def sentences(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> list[float]:
        check_aligned(hyps, refs)
        metric = _bleu(self.tokenize, effective_order=True)
        return [float(metric.sentence_score(h, [r]).score) for h, r in zip(hyps, refs)]

    def statistics(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> np.ndarray:
        return sentence_stats(hyps, refs, self.tokenize)

    def from_statistics(self, stats: np.ndarray) -> np.ndarray:
        return bleu_from_stats(stats)
