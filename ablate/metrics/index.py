"""The stat-keyed index in front of the statistics cache, like git's index: a saved text is known by its file.

The statistics cache (:func:`ablate.metrics.statistics`) names each file by a sha256 of the scorer and
the texts themselves, so finding it means reading and hashing every text. The index, one small JSON file
under the cache root (``$ABLATE_CACHE/statistics-index.json``, loaded once per process, written
atomically), remembers for each text file its ``(resolved path, size, mtime_ns)``, the sha256 of its lines
(:func:`text_digest`) and its line count, and for each ``(scorer, signature, text digests)`` the cache
file's name. A :class:`SavedText` whose file matches its entry is not decoded until its lines are wanted;
a changed size or mtime is read and hashed again. A file modified within :data:`RACY_NS` of being read
is not entered (git's "racily clean" files: a second change in the same timestamp tick would go unseen).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence, overload

from ablate.utils.io import atomic_write_bytes

CACHE_ENV = "ABLATE_CACHE"
INDEX_FILE = "statistics-index.json"
RACY_NS = 2_000_000_000  # FAT's 2 s timestamps are the coarsest a sweep folder may sit on
VERSION = 1


def cache_root() -> Path:
    """The folder of the statistics cache and its index (``$ABLATE_CACHE``, default ``~/.cache/ablate``)."""
    return Path(os.environ.get(CACHE_ENV) or "~/.cache/ablate").expanduser()


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
            data = json.loads(self.path.read_bytes())
            if data.get("version") == VERSION:
                self.files, self.keys = dict(data["files"]), dict(data["keys"])
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            pass  # no index yet, or a damaged one: every text is read and hashed

    def flush(self) -> None:
        """Write the index if it changed (merged into the one on disk: another process's entries kept)."""
        if not self.dirty:
            return
        on_disk = Index(self.path.parent)
        data = {
            "version": VERSION,
            "files": {**on_disk.files, **self.files},
            "keys": {**on_disk.keys, **self.keys},
        }
        try:  # no folder fsync, as for the cache's files: a lost rename only costs a re-read
            atomic_write_bytes(self.path, json.dumps(data, separators=(",", ":")).encode("utf-8"), fsync_folder=False)
        except OSError:
            return  # an unwritable cache: the next process reads and hashes again
        self.dirty = False


_INDEXES: dict[Path, Index] = {}


def index() -> Index:
    """The process's index of the current cache root (loaded on first use)."""
    root = cache_root()
    if root not in _INDEXES:
        _INDEXES[root] = Index(root)
    return _INDEXES[root]


def flush() -> None:
    """Write every changed index (a table does at its end; the process, at exit)."""
    for found in _INDEXES.values():
        found.flush()


atexit.register(flush)


def entry_key(scorer: str, signature: str, texts: Sequence[Optional[Sequence[str]]]) -> Optional[str]:
    """The key under which the index keeps the statistics file's name of a scorer on these texts, if
    every one is a :class:`SavedText` or None (a text the index does not know is read and hashed); else None."""
    if not all(t is None or isinstance(t, SavedText) for t in texts):
        return None
    parts = [scorer, signature] + ["-" if t is None else t.digest for t in texts]
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
        self.path, self._read, self._index = path, read, found or index()
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
