"""TER, translation edit rate (Snover et al. 2006), as sacreBLEU computes it: lower is better.

Corpus TER is the sum of the sentences' edits (insertions, deletions, substitutions and shifts of
word sequences) over the sum of their reference lengths, so its per-sentence statistics are
``(edits, reference words)``, read from sacreBLEU's public ``TER.sentence_score``.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ablate.metrics.scorer import SacreBleuScorer, Texts, check_aligned


def ter_from_stats(stats: np.ndarray) -> np.ndarray:
    """(..., 2) summed ``(edits, reference words)`` -> (...) TER in percent (sacreBLEU's rule: an
    empty reference costs 100 if the hypothesis is not empty, else 0)."""
    edits, length = stats[..., 0], stats[..., 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(length > 0, edits / length, np.where(edits > 0, 1.0, 0.0))
    return 100 * rate


class Ter(SacreBleuScorer):
    """sacreBLEU TER with its defaults (case-insensitive, no normalisation)."""

    name = "ter"
    label = "TER"
    higher_is_better = False
    decimals = 2

    def metric(self) -> Any:
        from sacrebleu.metrics import TER

        return TER()

    def sentences(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> list[float]:
        return [float(s) for s in ter_from_stats(self.statistics(hyps, refs))]

    def statistics(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> np.ndarray:
        check_aligned(hyps, refs)
        metric = self.metric()
        out = np.empty((len(hyps), 2), dtype=np.float64)
        for i, (hyp, ref) in enumerate(zip(hyps, refs)):
            s = metric.sentence_score(hyp, [ref])
            out[i] = s.num_edits, s.ref_length
        return out

    def from_statistics(self, stats: np.ndarray) -> np.ndarray:
        return ter_from_stats(stats)
