"""The interface of a metric, and the base of a per-sentence (plugin) metric.

A corpus metric such as BLEU is not a mean of sentence scores, but it is a function of summed
per-sentence sufficient statistics: :meth:`MetricScorer.statistics` gives them, shape (n, k), and
:meth:`MetricScorer.from_statistics` turns any sum (or weighted sum, as a bootstrap resample is)
of them into the corpus score. For a per-sentence metric (:class:`SentenceMetric`) the statistics
are ``(score, 1)`` per sentence, so the corpus score is the mean of the sentence scores and every
resample is a weighted mean: the report's seed-aware test applies to both alike.
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from typing import Any, Optional, Protocol, Sequence, runtime_checkable

import numpy as np

from ablate.utils.io import atomic_write_bytes

Texts = Sequence[str]


@runtime_checkable
class MetricScorer(Protocol):
    """One translation metric, on detokenized text.

    Attributes:
        name: the registry key and the summary key's suffix (``test_<split>/<name>``).
        label: header text in tables and figures (``BLEU``, ``chrF++``, ``TER``).
        higher_is_better: which end is best (False for TER, an error rate).
        decimals: digits after the point in the table.
    """

    name: str
    label: str
    higher_is_better: bool
    decimals: int

    def signature(self) -> str:
        """What reproduces the score (sacreBLEU's signature, or the plugin's name and version)."""
        ...

    def corpus(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> float:
        """The corpus score of ``hyps`` against ``refs`` (aligned lists; ``sources`` where known)."""
        ...

    def sentences(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> list[float]:
        """One score per sentence."""
        ...

    def statistics(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> np.ndarray:
        """(n, k) per-sentence sufficient statistics: ``from_statistics(stats.sum(0)) == corpus(...)``."""
        ...

    def from_statistics(self, stats: np.ndarray) -> np.ndarray:
        """(..., k) summed statistics -> (...) corpus scores."""
        ...


def check_aligned(hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> None:
    """Equal, non-zero lengths (``sources`` may be None)."""
    if len(hyps) != len(refs) or not refs or (sources is not None and len(sources) != len(refs)):
        counts = f"{len(hyps)} hypotheses, {len(refs)} references" + (
            f", {len(sources)} sources" if sources is not None else ""
        )
        raise ValueError(f"texts are not aligned: {counts}")


class SacreBleuScorer:
    """What the scorers of a sacreBLEU metric share: its signature and its corpus score.

    Subclasses give :meth:`metric`, a fresh sacreBLEU metric object (``CHRF(word_order=2)``, ``TER()``).
    """

    reads_sources = False
    """sacreBLEU's metrics compare hypotheses with references only (a scorer without this attribute
    is assumed to read the sources, as a learned metric may)."""

    def metric(self) -> Any:
        raise NotImplementedError

    def signature(self) -> str:
        metric = self.metric()
        metric.corpus_score(["x"], [["x"]])  # sacreBLEU signs a metric once it has scored
        return str(metric.get_signature())

    def corpus(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> float:
        check_aligned(hyps, refs)
        return float(self.metric().corpus_score(list(hyps), [list(refs)]).score)


class SentenceMetric:
    """A metric defined per sentence (a learned metric such as COMET, or any plugin).

    Subclasses set the class attributes and implement :meth:`sentences`; the corpus score is the
    mean of the sentence scores. ``version`` goes into the signature, so a changed metric shows.
    """

    name: str = ""
    label: str = ""
    higher_is_better: bool = True
    decimals: int = 2
    version: str = "1"

    def signature(self) -> str:
        return f"{self.name}|version:{self.version}"

    def sentences(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> list[float]:
        raise NotImplementedError

    def statistics(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> np.ndarray:
        check_aligned(hyps, refs, sources)
        scores = np.asarray(self.sentences(hyps, refs, sources), dtype=np.float64)
        if scores.shape != (len(refs),):
            raise ValueError(f"metric {self.name} gave {scores.size} sentence scores for {len(refs)} sentences")
        return np.stack([scores, np.ones_like(scores)], axis=1)

    def from_statistics(self, stats: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return stats[..., 0] / stats[..., 1]

    def corpus(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> float:
        return float(self.from_statistics(self.statistics(hyps, refs, sources).sum(0)))


_CACHE: dict[tuple, np.ndarray] = {}
_CACHE_SIZE = 1024
CACHE_ENV = "ABLATE_CACHE"
"""The folder that holds the statistics cache (``<it>/statistics``); default ``~/.cache/ablate``."""


def statistics(scorer: MetricScorer, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> np.ndarray:
    """(n, k) per-sentence statistics of ``scorer``, computed once per text: kept in the process (a
    table reads each trial's three times: its cell, its check against the summary, its significance
    test) and on disk under ``$ABLATE_CACHE/statistics/`` (default ``~/.cache/ablate``), named by a
    sha256 of the scorer's signature and the texts, so a second table of the same trials scores
    nothing and a changed hypothesis, reference or scorer version is scored afresh."""
    if not getattr(scorer, "reads_sources", True):
        sources = None
    key = (scorer.name, scorer.signature(), tuple(hyps), tuple(refs), tuple(sources) if sources else None)
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        _CACHE[key] = _on_disk(key, lambda: scorer.statistics(hyps, refs, sources))
    return _CACHE[key]


def _on_disk(key: tuple, compute: Any) -> np.ndarray:
    """``compute()``, read from / saved to the statistics cache under the sha256 of ``key``'s texts.

    An unreadable cache file, or one without a row per reference, is scored afresh; a cache folder that cannot be written is skipped (the
    cache only saves time)."""
    digest = hashlib.sha256()
    for part in key:
        digest.update(_key_bytes(part if isinstance(part, tuple) else (part,)) + b"\1")  # parts apart
    path = (
        Path(os.environ.get(CACHE_ENV) or "~/.cache/ablate").expanduser() / "statistics" / f"{digest.hexdigest()}.npy"
    )
    try:
        saved = np.load(path, allow_pickle=False)
        if saved.ndim == 2 and len(saved) == len(key[3]):  # one row per reference sentence
            return saved
    except (OSError, ValueError, EOFError):
        pass
    stats = np.asarray(compute())
    buffer = io.BytesIO()
    np.save(buffer, stats, allow_pickle=False)
    try:
        atomic_write_bytes(path, buffer.getvalue())
    except OSError:
        pass
    return stats


def _key_bytes(texts: tuple) -> bytes:
    """Each text and a newline (None: a zero byte), as one string: a part of the cache key's digest.

    Hashed as one update, not one per text (the same bytes, so the same digest and cache file)."""
    if texts:
        try:
            return ("\n".join(texts) + "\n").encode("utf-8")
        except TypeError:  # a None or a number among them
            pass
    return b"".join(b"\0" if t is None else str(t).encode("utf-8") + b"\n" for t in texts)
