"""A crash- and concurrency-safe on-disk cache of built artefacts (tokenizers, encoded corpora).

Each entry is a directory ``<root>/<kind>/<key>``. It is built under a per-entry file lock
(``filelock``) into a private temporary directory on the same file system and published with
one atomic ``os.rename``, so parallel sweep trials and DDP ranks either build an entry once and
share it, or find it complete; a reader never sees a half-written entry, and a crashed builder
leaves only a temporary directory behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from filelock import FileLock

CACHE_ENV = "ABLATE_CACHE"


def cache_root(configured: str = "") -> Path:
    """``data.cache_dir`` if set, else ``$ABLATE_CACHE``, else ``~/.cache/ablate``."""
    if configured:
        return Path(configured).expanduser()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path.home() / ".cache" / "ablate"


def digest(*parts: object) -> str:
    """A short stable hash of JSON-serialisable parts (the cache key)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def cached_entry(root: Path, kind: str, key: str, build: Callable[[Path], None]) -> tuple[Path, bool]:
    """Return the entry ``root/kind/key``, building it with ``build(tmp_dir)`` if absent.

    Args:
        root: Cache root.
        kind: Sub-folder naming the artefact family (``tokenizers``, ``corpora``).
        key: Content-derived key of this entry.
        build: Writes the entry's files into the (empty, existing) directory it is given.

    Returns:
        ``(path, hit)``: the published entry and whether it already existed.
    """
    final = root / kind / key
    if final.is_dir():
        return final, True
    locks = root / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with FileLock(str(locks / f"{kind}-{key}.lock")):
        if final.is_dir():  # another process built it while we waited
            return final, True
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=final.parent))
        try:
            build(tmp)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final, False


def scratch_dir(root: Path) -> Path:
    """A fresh private directory for intermediate files; the caller removes it."""
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=root / "tmp"))
