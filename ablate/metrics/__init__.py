"""Translation metrics that training and the report share: the registry of scorers and their interface.

``METRIC_SCORERS`` maps a name (``bleu``, ``chrf``, ``chrf++``, ``ter``; plugins add more with
:func:`register_metric` or ``@ablate.register("metric", name)``) to a factory of a :class:`MetricScorer`,
whose per-sentence sufficient statistics (n, k) sum, under any bootstrap weights, to the corpus score
(:class:`SentenceMetric`: ``(score, 1)``). A run's summary keeps metric ``NAME`` of test split ``S`` as
``test_S/NAME`` (the first also as ``test/NAME``, validation as ``val/NAME``), its signature as ``NAME_signature``.
"""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path
from typing import Any, Callable, Optional, Protocol, runtime_checkable

import numpy as np

from ablate.errors import AblateError, did_you_mean
from ablate.metrics import index
from ablate.metrics.index import CACHE_ENV as CACHE_ENV  # the folder of the statistics cache
from ablate.metrics.scorers import Bleu, Chrf, ChrfPlusPlus, Ter, Texts, check_aligned
from ablate.registry import register, table
from ablate.utils.io import atomic_write_bytes


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


class SentenceMetric:
    """A metric defined per sentence (a learned metric such as COMET, or any plugin): subclasses set the
    class attributes (``version`` goes into the signature) and :meth:`sentences`; the corpus score is the mean."""

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


class MetricError(AblateError):
    """An unknown metric name, or a plugin that clashes with a registered one."""


METRIC_SCORERS: dict[str, Callable[[], MetricScorer]] = table("metric")
"""Name -> scorer factory, filled by ``ablate.register("metric", name)`` (:func:`register_metric`)."""
for _name, _factory in (("bleu", Bleu), ("chrf", Chrf), ("chrf++", ChrfPlusPlus), ("ter", Ter)):
    register("metric", _name)(_factory)
TEST_METRICS = ("bleu", "chrf", "chrf++", "ter")
"""What every training scores on every test split."""


def register_metric(name: str, factory: Callable[[], MetricScorer]) -> None:
    """Add a metric under ``name`` (``factory()`` builds its scorer; a class will do); :class:`MetricError`
    if ``name`` is taken or not a plain lower-case name."""
    if not name or name != name.strip().lower() or "/" in name or " " in name:
        raise MetricError(f"metric name '{name}' must be lower-case without '/' or spaces, e.g. 'comet'")
    if name in METRIC_SCORERS:
        raise MetricError(f"metric '{name}' is already registered; register the plugin under another name")
    register("metric", name)(factory)


def get_scorer(name: str) -> MetricScorer:
    """The scorer of metric ``name``; :class:`MetricError` with the choices and the nearest one if unknown."""
    if name not in METRIC_SCORERS:
        raise MetricError(
            f"unknown metric '{name}' (choose from: {', '.join(METRIC_SCORERS)}){did_you_mean(name, METRIC_SCORERS)}"
        )
    scorer = METRIC_SCORERS[name]()
    if scorer.name != name:
        raise MetricError(f"the metric registered as '{name}' calls itself '{scorer.name}'; register it as that")
    return scorer


def metric_key(name: str, split: str | None = None, prefix: str = "test") -> str:
    """The summary key of metric ``name``: ``test_<split>/<name>``, or ``<prefix>/<name>`` without a split."""
    return f"{prefix}_{split}/{name}" if split else f"{prefix}/{name}"


def signature_key(name: str) -> str:
    """The summary key of metric ``name``'s signature (``bleu_signature``, ``ter_signature``)."""
    return f"{name}_signature"


_CACHE: dict[tuple, np.ndarray] = {}
_CACHE_SIZE = 1024


def statistics(scorer: MetricScorer, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> np.ndarray:
    """(n, k) per-sentence statistics of ``scorer``, computed once per text: kept in the process and on disk
    under ``$ABLATE_CACHE/statistics/`` (default ``~/.cache/ablate``), named by a sha256 of the scorer's
    signature and the texts, so a changed text or scorer version is scored afresh. Saved texts
    (:class:`~ablate.metrics.index.SavedText`) the index knows find their file without being read."""
    if not getattr(scorer, "reads_sources", True):
        sources = None
    texts = (hyps, refs, sources if sources else None)
    entry = index.entry_key(scorer.name, scorer.signature(), texts)
    if entry is not None:
        key: tuple = (scorer.name, entry)
    else:
        key = (scorer.name, scorer.signature(), tuple(hyps), tuple(refs), tuple(sources) if sources else None)
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        _CACHE[key] = _on_disk(
            (scorer.name, scorer.signature(), *texts), entry, lambda: scorer.statistics(hyps, refs, sources)
        )
    return _CACHE[key]


def _on_disk(key: tuple, entry: Optional[str], compute: Any) -> np.ndarray:
    """``compute()``, read from / saved to the statistics cache under the sha256 of ``key``'s texts (the
    name the index keeps under ``entry``, if any); an unreadable file, or one without a row per
    reference, is scored afresh, an unwritable folder skipped."""
    found, cache = index.index(), index.cache_root() / "statistics"
    if entry is not None and entry in found.keys:
        saved = _saved(cache / f"{found.keys[entry]}.npy", len(key[3]))
        if saved is not None:
            return saved
    digest = hashlib.sha256()
    for part in key:
        parts = (part,) if part is None or isinstance(part, str) else tuple(part)
        digest.update(index.key_bytes(parts) + b"\1")  # parts apart
    path = cache / f"{digest.hexdigest()}.npy"
    if entry is not None:
        found.keys[entry], found.dirty = digest.hexdigest(), True
    saved = _saved(path, len(key[3]))
    if saved is not None:
        return saved
    stats = np.asarray(compute())
    buffer = io.BytesIO()
    np.save(buffer, stats, allow_pickle=False)
    try:
        atomic_write_bytes(path, buffer.getvalue(), fsync_folder=False)  # a lost rename: scored afresh
    except OSError:
        pass
    return stats


def _saved(path: Path, rows: int) -> Optional[np.ndarray]:
    """The cache file at ``path`` if it is readable and holds one row per reference sentence."""
    try:
        saved = read_npy(path)
        if saved.ndim == 2 and len(saved) == rows:
            return saved
    except (OSError, ValueError, EOFError):
        pass
    return None


_NPY_HEADER = re.compile(rb"\{'descr': '<f8', 'fortran_order': False, 'shape': \((\d+), (\d+)\), \} *\n")
"""The header ``np.save`` writes for a C-ordered (n, k) float64 array (format 1.0)."""


def read_npy(path: Path) -> np.ndarray:
    """``np.load(path, allow_pickle=False)``; the header of a file this cache wrote is read without
    ``np.load``'s literal parser (a table reads a thousand of them)."""
    data = path.read_bytes()
    if data[:8] == b"\x93NUMPY\x01\x00":
        end = 10 + int.from_bytes(data[8:10], "little")
        shape = _NPY_HEADER.fullmatch(data[10:end])
        if shape and len(data) - end == int(shape[1]) * int(shape[2]) * 8:
            return np.frombuffer(data, dtype="<f8", offset=end).reshape(int(shape[1]), int(shape[2])).copy()
    return np.load(io.BytesIO(data), allow_pickle=False)


_key_bytes = index.key_bytes
