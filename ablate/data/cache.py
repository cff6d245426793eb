"""A crash- and concurrency-safe on-disk cache of built artefacts (tokenizers, encoded corpora).

Each entry is a directory ``<root>/<kind>/<key>``. It is built under a per-entry file lock
(``filelock``) into a private temporary directory on the same file system and published with
one atomic rename (:func:`ablate.utils.io.replace`, fsynced), so parallel sweep trials and DDP ranks either build an entry once and
share it, or find it complete; a reader never sees a half-written entry, and a crashed builder
leaves only a temporary directory behind.

Entries are shared: they get the permissions a plain ``mkdir``/``open`` would (the umask decides,
so a team cache under ``umask 002`` is group-writable). Each entry lists its files and their sizes
in ``.manifest.json``; an entry that no longer matches (a truncated Arrow file, a file removed) or
that its reader finds unreadable is moved aside and rebuilt under the lock, never used. A full disk
while building stops with one line naming the cache folder.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Callable, Optional

from ablate.data.errors import DataError
from ablate.utils.io import HolderLock, plain_mode, replace

MANIFEST = ".manifest.json"
log = logging.getLogger(__name__)

CACHE_ENV = "ABLATE_CACHE"


def cache_root(configured: str = "") -> Path:
    """``data.cache_dir`` if set, else ``$ABLATE_CACHE``, else ``~/.cache/ablate``."""
    if configured:
        return Path(configured).expanduser()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path.home() / ".cache" / "ablate"


def check_cache_root(root: Path) -> Path:
    """``root`` when the cache can live there: a folder, or a path one can be made at, this process can write.

    Nothing is created: the nearest existing folder on the way is checked.

    Raises:
        DataError: ``root`` (or a folder on its way) is a file, or it cannot be written (a
            read-only file system, no permission), naming where the setting comes from.
    """
    found = root
    while not found.exists() and found.parent != found:
        found = found.parent
    if not found.is_dir():
        raise _unusable(root, NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR)))
    if not os.access(found, os.W_OK | os.X_OK):
        code = errno.EROFS if os.statvfs(found).f_flag & os.ST_RDONLY else errno.EACCES
        raise _unusable(root, OSError(code, os.strerror(code)))
    return root


def _unusable(root: Path, err: OSError) -> DataError:
    """One line for a cache folder that cannot be used, and how to point it elsewhere."""
    setting = "data.cache_dir, else ABLATE_CACHE, else ~/.cache/ablate"
    if isinstance(err, (FileExistsError, NotADirectoryError)) or err.errno in (errno.EEXIST, errno.ENOTDIR):
        why = "is a file, or lies under one, not a folder"
    elif err.errno == errno.EROFS:
        why = "is on a read-only file system"
    else:
        why = f"cannot be written ({err.strerror or err})"
    return DataError(
        f"the data cache {root} ({setting}) {why}; point ABLATE_CACHE or data.cache_dir at a writable folder"
    )


def digest(*parts: object) -> str:
    """A short stable hash of JSON-serialisable parts (the cache key)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def cached_entry(
    root: Path, kind: str, key: str, build: Callable[[Path], None], damaged: Optional[int] = None
) -> tuple[Path, bool]:
    """Return the entry ``root/kind/key``, building it with ``build(tmp_dir)`` if absent or damaged.

    Args:
        root: Cache root.
        kind: Sub-folder naming the artefact family (``tokenizers``, ``corpora``).
        key: Content-derived key of this entry.
        build: Writes the entry's files into the (empty, existing) directory it is given.
        damaged: The inode (``st_ino``) of an entry its reader could not use: that entry is
            replaced, unless another process already did.

    Returns:
        ``(path, hit)``: the published entry and whether it already existed.

    Raises:
        DataError: the disk (or quota) is full, naming the cache folder.
    """
    final = root / kind / key
    if damaged is None and final.is_dir():
        problem = check_entry(final)
        if problem is None:
            return final, True
        log.warning("cache entry %s is damaged (%s); rebuilding it", final, problem)
        damaged = _inode(final)
    try:
        locks = root / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        with HolderLock(locks / f"{kind}-{key}.lock", wait=True):
            if final.is_dir():
                if _inode(final) != damaged and check_entry(final) is None:
                    return final, True  # another process built (or rebuilt) it while we waited
                _discard(final)
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=final.parent))
            try:
                build(tmp)
                _seal(tmp)
                replace(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DataError(
                f"no space left to write the data cache in {root} ({kind}/{key}): free space there, "
                f"or point ABLATE_CACHE (or data.cache_dir) at a disk with room"
            ) from None
        if err.errno in (errno.ENOTDIR, errno.EEXIST, errno.EROFS, errno.EACCES, errno.EPERM):
            raise _unusable(root, err) from None
        raise
    return final, False


def check_entry(entry: Path) -> Optional[str]:
    """None when ``entry`` holds exactly the files (and sizes) of its manifest, else what is wrong."""
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
        if not isinstance(manifest, dict):
            return "unreadable manifest"
    except (OSError, ValueError):
        return "no readable manifest"
    for name, size in manifest.items():
        try:
            actual = (entry / name).stat().st_size
        except OSError:
            return f"{name} is missing"
        if actual != size:
            return f"{name} has {actual} bytes, expected {size}"
    return None


def _seal(folder: Path) -> None:
    """Write the manifest of ``folder`` and give it (and its sub-folders) plain folder permissions."""
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_dir():
            path.chmod(plain_mode(directory=True))
        elif path.is_file():
            files[str(path.relative_to(folder))] = path.stat().st_size
    (folder / MANIFEST).write_text(json.dumps(files, indent=0))
    folder.chmod(plain_mode(directory=True))  # mkdtemp made it 0700


def _inode(path: Path) -> Optional[int]:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def _discard(entry: Path) -> None:
    """Move a damaged entry aside (one rename, so readers never see it half-deleted), then delete it."""
    aside = entry.with_name(f".damaged-{entry.name}-{uuid.uuid4().hex[:8]}")
    os.rename(entry, aside)
    shutil.rmtree(aside, ignore_errors=True)


def scratch_dir(root: Path) -> Path:
    """A fresh private directory for intermediate files; the caller removes it."""
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=root / "tmp"))
