"""Translation metrics of a training run with sacreBLEU, on detokenized text (scorers: :mod:`ablate.metrics`).

Each validation scores BLEU (which picks the best checkpoint) and chrF; the test pass scores
every metric of :data:`~ablate.metrics.TEST_METRICS` (BLEU, chrF, chrF++, TER) on every
test split, each with its sacreBLEU signature.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ablate.metrics import TEST_METRICS, get_scorer


@dataclass(frozen=True)
class Scores:
    """Scores of one system output, with sacreBLEU's reproducibility signature of each.

    Attributes:
        bleu, chrf: corpus BLEU and chrF.
        signature, chrf_signature: their signatures.
        more: every other metric scored (``chrf++``, ``ter``) -> its corpus score.
        signatures: every metric scored -> its signature.
    """

    bleu: float
    chrf: float
    signature: str
    chrf_signature: str = ""
    more: dict[str, float] = field(default_factory=dict)
    signatures: dict[str, str] = field(default_factory=dict)

    def values(self) -> dict[str, float]:
        """Metric name -> corpus score, for every metric scored."""
        return {"bleu": self.bleu, "chrf": self.chrf, **self.more}


def corpus_scores(hypotheses: list[str], references: list[str], metrics: tuple[str, ...] = ("bleu", "chrf")) -> Scores:
    """sacreBLEU BLEU (13a tokenisation, cased), chrF and the other ``metrics`` of ``hypotheses``
    against ``references`` (raw, detokenized sentences in the same order)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    scores, signatures = {}, {}
    for name in dict.fromkeys(("bleu", "chrf", *metrics)):
        scorer = get_scorer(name)
        scores[name], signatures[name] = scorer.corpus(hypotheses, references), scorer.signature()
    return Scores(
        bleu=scores.pop("bleu"),
        chrf=scores.pop("chrf"),
        signature=signatures["bleu"],
        chrf_signature=signatures["chrf"],
        more=scores,
        signatures=signatures,
    )


def test_scores(hypotheses: list[str], references: list[str]) -> Scores:
    """:func:`corpus_scores` with every test metric (BLEU, chrF, chrF++, TER)."""
    return corpus_scores(hypotheses, references, TEST_METRICS)
