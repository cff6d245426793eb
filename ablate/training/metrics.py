"""Corpus-level translation metrics with sacreBLEU, on detokenized text."""

from __future__ import annotations

from dataclasses import dataclass

import sacrebleu


@dataclass(frozen=True)
class Scores:
    """BLEU and chrF of one system output, with sacreBLEU's reproducibility signature of each."""

    bleu: float
    chrf: float
    signature: str
    chrf_signature: str = ""


def corpus_scores(hypotheses: list[str], references: list[str]) -> Scores:
    """sacreBLEU BLEU (13a tokenisation, cased) and chrF of ``hypotheses`` against ``references``.

    Both lists are raw, detokenized sentences in the same order.
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    return Scores(
        bleu=b.score, chrf=c.score, signature=str(bleu.get_signature()), chrf_signature=str(chrf.get_signature())
    )
