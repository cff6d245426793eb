"""BLEU by source sentence length (Bahdanau et al. 2015, Fig. 2), from the saved hypotheses.

The test sentences are split into buckets of source length in words (whitespace tokens) with
about equal numbers of sentences (quantiles of the test set's lengths, so every bucket holds
enough sentences for a corpus BLEU); each trial's corpus BLEU is computed on each bucket, and a
row's value is the mean ± std over its seeds. Runs recorded before sources were saved are
bucketed by reference length instead, and the label says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ablate.report.aggregate import Stat, Sweep, stat
from ablate.report.significance import bleu_from_stats, bleu_tokenizer, sentence_stats, test_splits
from ablate.report.table import Column

N_BUCKETS = 4


@dataclass(frozen=True)
class ByLength:
    """BLEU per source-length bucket of one test split.

    Attributes:
        split: the test split.
        buckets: ``(shortest, longest)`` length in words of each bucket, ascending.
        basis: ``source`` or ``reference`` (what was measured for the length).
        stats: row name -> one :class:`Stat` (over seeds) per bucket (None where a row lacks texts).
    """

    split: str
    buckets: list[tuple[int, int]]
    basis: str
    stats: dict[str, list[Optional[Stat]]]

    @property
    def labels(self) -> list[str]:
        return [f"{lo}-{hi}" if lo != hi else str(lo) for lo, hi in self.buckets]

    def columns(self) -> list[Column]:
        """Table columns ``BLEU len a-b`` (keys ``len:<split>:a-b``)."""
        return [Column(f"len:{self.split}:{label}", f"BLEU len {label}", 2) for label in self.labels]

    def row_stats(self) -> dict[str, dict[str, Stat]]:
        """Row name -> column key -> :class:`Stat`, for :func:`ablate.report.table.build_table`."""
        keys = [c.key for c in self.columns()]
        return {name: {k: s for k, s in zip(keys, stats) if s is not None} for name, stats in self.stats.items()}

    def note(self) -> str:
        return (
            f"BLEU len a-b: corpus BLEU of the {self.split} sentences whose {self.basis} has a to b words "
            f"(about equal-sized buckets), mean ± std over seeds (Bahdanau et al. 2015, Fig. 2)."
        )


def buckets(lengths: list[int], n: int = N_BUCKETS) -> list[tuple[int, int]]:
    """About equal-count buckets of ``lengths`` as inclusive ``(lo, hi)`` word counts, ascending."""
    if not lengths:
        return []
    qs = np.quantile(np.asarray(lengths), np.linspace(0, 1, n + 1)[1:-1], method="higher")
    uppers = sorted({int(q) for q in qs} | {max(lengths)})
    out, lo = [], min(lengths)
    for hi in uppers:
        if hi >= lo:
            out.append((lo, hi))
            lo = hi + 1
    return out


def bleu_by_length(sweep: Sweep, split: Optional[str] = None, n: int = N_BUCKETS) -> Optional[ByLength]:
    """BLEU per source-length bucket for every row on ``split`` (default: the first test split
    with saved hypotheses); None when no trial saved hypotheses."""
    splits = test_splits(sweep)
    split = split or (splits[0] if splits else None)
    trials = [
        t
        for r in sweep.rows
        for t in r.trials
        if split in t.hyps and split in t.refs and len(t.hyps[split]) == len(t.refs[split])
    ]
    if split is None or not trials:
        return None
    with_sources = [t for t in trials if len(t.sources.get(split, ())) == len(t.refs[split])]
    basis = "source" if with_sources else "reference"
    first = (with_sources or trials)[0]
    texts = first.sources[split] if with_sources else first.refs[split]
    lengths = np.array([len(x.split()) for x in texts])
    edges = buckets(lengths.tolist(), n)
    masks = [(lengths >= lo) & (lengths <= hi) for lo, hi in edges]
    usable, tokenize = {id(t) for t in trials}, bleu_tokenizer(trials)
    out: dict[str, list[Optional[Stat]]] = {}
    for row in sweep.rows:
        per_seed = []
        for t in row.trials:
            if id(t) not in usable or t.refs[split] != first.refs[split]:
                continue
            sent = sentence_stats(t.hyps[split], t.refs[split], tokenize)
            per_seed.append([float(bleu_from_stats(sent[m].sum(axis=0))) for m in masks])
        out[row.name] = [stat([s[i] for s in per_seed]) for i in range(len(edges))] if per_seed else [None] * len(edges)
    return ByLength(split, edges, basis, out)
