"""Translation metrics that training and the report share: the registry of scorers, their interface, and the
statistics cache with its stat-keyed index.

``METRIC_SCORERS`` maps a name (``bleu``, ``chrf``, ``chrf++``, ``ter``; plugins add more with
:func:`register_metric` or ``@ablate.register("metric", name)``) to a factory of a :class:`MetricScorer`,
whose per-sentence sufficient statistics (n, k) sum, under any bootstrap weights, to the corpus score
(:class:`SentenceMetric`: ``(score, 1)``). A run's summary keeps metric ``NAME`` of test split ``S`` as
``test_S/NAME`` (the first also as ``test/NAME``, validation as ``val/NAME``), its signature as ``NAME_signature``.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Protocol, Sequence, TypeVar, overload, runtime_checkable

import numpy as np

from ablate.errors import AblateError, did_you_mean, first_line
from ablate.metrics.scorers import Bleu, Chrf, ChrfPlusPlus, MetricError, Ter, Texts, check_aligned
from ablate.registry import register, table
from ablate.utils.io import atomic_write_bytes, cache_root, read_json
from ablate.utils.plugins import entry_points


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

    def corpus(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> float:
        """The corpus score of ``hyps`` against ``refs`` (aligned lists; ``sources`` where known)."""

    def sentences(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> list[float]:
        """One finite score per sentence."""

    def statistics(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> np.ndarray:
        """(n, k) per-sentence sufficient statistics: ``from_statistics(stats.sum(0)) == corpus(...)``."""

    def from_statistics(self, stats: np.ndarray) -> np.ndarray:
        """(..., k) summed statistics -> (...) corpus scores."""


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
        if not np.isfinite(scores).all():  # one NaN makes the corpus score and every resample NaN
            bad = int(np.flatnonzero(~np.isfinite(scores))[0])
            raise ValueError(f"metric {self.name} gave {scores[bad]} for sentence {bad + 1}; scores must be finite")
        return np.stack([scores, np.ones_like(scores)], axis=1)

    def from_statistics(self, stats: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return stats[..., 0] / stats[..., 1]

    def corpus(self, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> float:
        return float(self.from_statistics(self.statistics(hyps, refs, sources).sum(0)))


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
        entry_points()  # an installed package's metric (``ablate.plugins`` entry point): no config loads it here
    if name not in METRIC_SCORERS:
        raise MetricError(
            f"unknown metric '{name}' (choose from: {', '.join(METRIC_SCORERS)}){did_you_mean(name, METRIC_SCORERS)}"
        )
    scorer = METRIC_SCORERS[name]()
    if scorer.name != name:
        raise MetricError(f"the metric registered as '{name}' calls itself '{scorer.name}'; register it as that")
    _one_line(scorer, scorer.signature)  # a plugin's that cannot sign (its package missing) fails here, before any work
    return scorer


def metric_key(name: str, split: str | None = None, prefix: str = "test") -> str:
    """The summary key of metric ``name``: ``test_<split>/<name>``, or ``<prefix>/<name>`` without a split."""
    return f"{prefix}_{split}/{name}" if split else f"{prefix}/{name}"


def signature_key(name: str) -> str:
    """The summary key of metric ``name``'s signature (``bleu_signature``, ``ter_signature``)."""
    return f"{name}_signature"


T = TypeVar("T")
_CACHE: dict[tuple, np.ndarray] = {}
_CACHE_SIZE = 1024


def statistics(scorer: MetricScorer, hyps: Texts, refs: Texts, sources: Optional[Texts] = None) -> np.ndarray:
    """(n, k) per-sentence statistics of ``scorer``, computed once per text: kept in the process and on disk
    under ``$ABLATE_CACHE/statistics/`` (default ``~/.cache/ablate``), named by a sha256 of the scorer's
    signature and the texts, so a changed text or scorer version is scored afresh. Saved texts
    (:class:`SavedText`) the index knows find their file without being read."""
    if not getattr(scorer, "reads_sources", True):
        sources = None
    texts, signature = (hyps, refs, sources or None), _one_line(scorer, scorer.signature)
    entry = entry_key(scorer.name, signature, texts)
    key = (scorer.name, entry) if entry else (scorer.name, signature, *(t if t is None else tuple(t) for t in texts))
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        compute = lambda: _one_line(scorer, lambda: scorer.statistics(hyps, refs, sources))  # noqa: E731
        _CACHE[key] = _on_disk((scorer.name, signature, *texts), entry, compute)
    return _CACHE[key]


def _one_line(scorer: MetricScorer, work: Callable[[], T]) -> T:
    """``work()`` (the scorer's signature or statistics); MetricError in one line where it fails on its texts or its
    imports (a plugin's ValueError for missing sources, a learned metric's package not installed)."""
    try:
        return work()
    except AblateError:
        raise
    except (ValueError, ImportError, OSError, RuntimeError) as err:
        raise MetricError(f"metric '{scorer.name}' failed: {first_line(err)}") from None


def _on_disk(key: tuple, entry: Optional[str], compute: Callable[[], np.ndarray]) -> np.ndarray:
    """``compute()``, read from / saved to the statistics cache under the sha256 of ``key``'s texts (the
    name the index keeps under ``entry``, if any); an unreadable file, or one without a row per
    reference, is scored afresh, an unwritable folder skipped."""
    found, cache, rows = text_index(), cache_root() / "statistics", len(key[3])
    if entry in found.keys and (saved := _saved(cache / f"{found.keys[entry]}.npy", rows)) is not None:
        return saved
    digest = hashlib.sha256()
    for part in key:
        parts = (part,) if part is None or isinstance(part, str) else tuple(part)
        digest.update(key_bytes(parts) + b"\1")  # parts apart
    path = cache / f"{digest.hexdigest()}.npy"
    if entry is not None:
        found.keys[entry], found.dirty = digest.hexdigest(), True
    if (saved := _saved(path, rows)) is not None:
        return saved
    stats = np.asarray(compute())
    write_npy(path, stats)
    return stats


def _saved(path: Path, rows: int) -> Optional[np.ndarray]:
    """The cache file at ``path`` if it is readable and holds one row per reference sentence."""
    saved = read_npy(path)
    return saved if saved is not None and saved.ndim == 2 and len(saved) == rows else None


_NPY_HEADER = re.compile(rb"\{'descr': '<f8', 'fortran_order': False, 'shape': \((\d+), (\d+)\), \} *\n")
"""The header ``np.save`` writes for a C-ordered (n, k) float64 array (format 1.0)."""


def read_npy(path: Path) -> Optional[np.ndarray]:
    """``np.load(path, allow_pickle=False)``, None for a file that cannot be read as one; the header of a file
    this cache wrote is read without ``np.load``'s literal parser (a table reads a thousand of them)."""
    try:
        data = path.read_bytes()
        if data[:8] == b"\x93NUMPY\x01\x00":
            end = 10 + int.from_bytes(data[8:10], "little")
            shape = _NPY_HEADER.fullmatch(data[10:end])
            if shape and len(data) - end == int(shape[1]) * int(shape[2]) * 8:
                return np.frombuffer(data, dtype="<f8", offset=end).reshape(int(shape[1]), int(shape[2])).copy()
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None


def write_npy(path: Path, array: np.ndarray) -> None:
    """``array`` as the ``.npy`` cache file ``path``; an unwritable folder or a lost rename is skipped (the next
    reader computes it afresh)."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    with contextlib.suppress(OSError):
        atomic_write_bytes(path, buffer.getvalue(), fsync_folder=False)


# The stat-keyed index in front of the statistics cache, like git's index: one JSON file per cache root
# (``$ABLATE_CACHE/statistics-index.json``, loaded once per process, written atomically) keeps for each text
# file its ``(resolved path, size, mtime_ns)``, the sha256 of its lines (:func:`text_digest`) and their count,
# and for each ``(scorer, signature, text digests)`` the statistics file's name, so a :class:`SavedText` whose
# file matches its entry is not read until its lines are wanted; a changed size or mtime is read and hashed
# again. A file modified within :data:`RACY_NS` of being read is not entered (git's "racily clean" files: a
# second change in the same timestamp tick would go unseen).

INDEX_FILE = "statistics-index.json"
RACY_NS = 2_000_000_000  # FAT's 2 s timestamps are the coarsest a sweep folder may sit on
VERSION = 1


def key_bytes(texts: Sequence[Any]) -> bytes:
    """Each text and a newline (None: a zero byte), hashed as one update (the same digest as one per text)."""
    if texts:
        try:
            return ("\n".join(texts) + "\n").encode("utf-8")
        except TypeError:  # a None or a number among them
            pass
    return b"".join(b"\0" if t is None else str(t).encode("utf-8") + b"\n" for t in texts)


def text_digest(texts: Sequence[Any]) -> str:
    """The sha256 of a text's lines (a :class:`SavedText`'s from the index, without reading its file)."""
    if isinstance(texts, SavedText):
        return texts.digest
    return hashlib.sha256(key_bytes(tuple(texts))).hexdigest()


class Index:
    """The index of one cache root: ``files`` (path -> size, mtime_ns, digest, lines) and ``keys``
    (a scorer and its texts' digests -> the statistics cache file's name)."""

    def __init__(self, root: Path):
        self.path = root / INDEX_FILE
        self.files: dict[str, list[Any]] = {}
        self.keys: dict[str, str] = {}
        self.dirty = False
        try:
            data = read_json(self.path)  # a shared cache's: nested too deep or a pipe is no index
            if data.get("version") == VERSION:
                self.files, self.keys = dict(data["files"]), dict(data["keys"])
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            pass  # no index yet, or a damaged one: every text is read and hashed

    def flush(self) -> None:
        """Write the index if it changed (merged into the one on disk: another process's entries kept), without
        the entries of text files and statistics files that are gone, so deleted runs do not grow it for good."""
        if not self.dirty:
            return
        on_disk, saved = Index(self.path.parent), self.path.parent / "statistics"
        files = {path: entry for path, entry in {**on_disk.files, **self.files}.items() if os.path.exists(path)}
        keys = {k: name for k, name in {**on_disk.keys, **self.keys}.items() if (saved / f"{name}.npy").exists()}
        data = {"version": VERSION, "files": files, "keys": keys}
        try:  # no folder fsync, as for the cache's files: a lost rename only costs a re-read
            atomic_write_bytes(self.path, json.dumps(data, separators=(",", ":")).encode("utf-8"), fsync_folder=False)
        except OSError:
            return  # an unwritable cache: the next process reads and hashes again
        self.dirty = False


_INDEXES: dict[Path, Index] = {}


def text_index() -> Index:
    """The process's index of the current cache root (loaded on first use)."""
    if (root := cache_root()) not in _INDEXES:
        _INDEXES[root] = Index(root)
    return _INDEXES[root]


def flush_index() -> None:
    """Write every changed index (a table does at its end; the process, at exit)."""
    for found in _INDEXES.values():
        found.flush()


atexit.register(flush_index)


def entry_key(scorer: str, signature: str, texts: Sequence[Optional[Sequence[str]]]) -> Optional[str]:
    """The key under which the index keeps the statistics file's name of a scorer on these texts, if
    every one is a :class:`SavedText` or None (a text the index does not know is read and hashed); else None."""
    if not all(t is None or isinstance(t, SavedText) for t in texts):
        return None
    parts = [scorer, signature] + [t.digest if isinstance(t, SavedText) else "-" for t in texts]
    return hashlib.sha256("\1".join(parts).encode("utf-8")).hexdigest()


class SavedText(Sequence[str]):
    """The lines of a saved text file (line i is sentence i), read by ``read`` only when wanted if the
    index knows the file by its path, size and mtime (its length and digest come from the index)."""

    def __init__(
        self,
        path: Path,
        read: Callable[[Path], list[str]],
        found: Optional[Index] = None,
        resolved: Optional[str] = None,
    ):
        """``found``: the index (:func:`index`'s); ``resolved``: ``path`` resolved (one folder's files
        share their folder's)."""
        self.path, self._read, self._index = path, read, found or text_index()
        self._where = resolved or os.path.realpath(path)
        st = os.stat(self._where)
        self._stat = [st.st_size, st.st_mtime_ns]
        self._lines: Optional[list[str]] = None
        self._digest: Optional[str] = None
        self._count: Optional[int] = None
        entry = self._index.files.get(self._where)
        if entry and entry[:2] == self._stat:
            self._digest, self._count = entry[2], entry[3]

    @property
    def known(self) -> bool:
        """Whether the index knows this file as it is (its digest needs no reading)."""
        return self._digest is not None

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self._read(self.path)
        return self._lines

    @property
    def digest(self) -> str:
        """The sha256 of the lines (:func:`text_digest`), from the index or read, hashed and entered."""
        if self._digest is None:
            started = time.time_ns()
            lines = self.lines
            self._digest, self._count = hashlib.sha256(key_bytes(tuple(lines))).hexdigest(), len(lines)
            if started - self._stat[1] > RACY_NS:
                self._index.files[self._where] = [*self._stat, self._digest, self._count]
                self._index.dirty = True
        return self._digest

    def __len__(self) -> int:
        return self._count if self._count is not None and self._lines is None else len(self.lines)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: int | slice) -> str | list[str]:
        return self.lines[i]

    def __iter__(self) -> Iterator[str]:
        return iter(self.lines)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SavedText):
            return self is other or len(self) == len(other) and self.digest == other.digest
        if isinstance(other, (list, tuple)):
            return self.lines == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a list's equality: unhashable

    def __repr__(self) -> str:
        return f"SavedText({str(self.path)!r})"
