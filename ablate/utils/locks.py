"""The one kind of lock ablate takes: ``filelock`` on a file that names its holder.

A run folder (``<run_dir>/.lock``), a sweep folder (``<out>/.lock``) and a data cache entry
(``<cache>/locks/...``) are each guarded by a :class:`HolderLock`. On Unix ``filelock`` takes an
``flock`` on an open file, so the kernel drops the lock when its holder dies, even by SIGKILL: a
lock left by a dead process is simply taken over. The file keeps the holder's name (``pid@host``
by default) for the message of whoever is refused.

:func:`is_held` tells a reader (``ablate table``, ``ablate sync``, ``ablate sweep status``)
whether a live process holds a lock. It probes with a shared ``flock`` on a read-only file
descriptor, the one place ablate calls ``fcntl`` itself: ``filelock`` only takes exclusive locks,
on a file opened for writing, and a probe must work on a copied or read-only record and must
never create or change the file.
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path
from typing import Any, Optional

from filelock import FileLock, Timeout

from ablate.errors import AblateError
from ablate.utils.io import plain_mode

__all__ = ["HolderLock", "LockHeld", "default_holder", "holder_of", "is_held"]


class LockHeld(AblateError):
    """The lock is held by another live process; ``holder`` is what its file says (or ``unknown``).

    Callers catch it and say what the lock guards (a run folder, a sweep folder) in their own error.
    """

    def __init__(self, path: Path, holder: str):
        super().__init__(f"{path} is in use by {holder}; wait for it to finish or stop it")
        self.path = path
        self.holder = holder


def default_holder() -> str:
    """``pid@host`` of this process: what a lock file says about its holder."""
    return f"{os.getpid()}@{socket.gethostname()}"


class HolderLock:
    """``with HolderLock(path):`` holds ``path`` exclusively and writes ``holder`` into it.

    Args:
        path: the lock file; its folder must exist.
        holder: the text written into the file once the lock is taken (default ``pid@host``).
        wait: wait for another holder to finish (a shared cache entry being built) instead of
            refusing at once.

    Raises:
        LockHeld: another live process holds it, and ``wait`` is false (from :meth:`acquire`).
        OSError: the file cannot be created or written (a read-only folder, a file in the way).
    """

    def __init__(self, path: str | Path, holder: Optional[str] = None, wait: bool = False):
        self.path = Path(path)
        self.holder = holder
        self.wait = wait
        self._lock = FileLock(str(self.path), timeout=0, mode=plain_mode())

    def acquire(self) -> HolderLock:
        before = _read_holder(self.path)  # read first: some filelock versions truncate the file on every try
        try:
            self._lock.acquire(timeout=-1 if self.wait else 0)
        except Timeout:
            raise LockHeld(self.path, _read_holder(self.path) or before or "unknown") from None
        try:
            fd = os.open(self.path, os.O_WRONLY)
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{self.holder or default_holder()}\n".encode(), 0)
            finally:
                os.close(fd)
        except OSError:
            self._lock.release()
            raise
        return self

    def release(self) -> None:
        if self._lock.is_locked:
            self._lock.release()

    @property
    def is_locked(self) -> bool:
        """Whether this object holds the lock now."""
        return self._lock.is_locked

    def __enter__(self) -> HolderLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _read_holder(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def holder_of(path: str | Path) -> str:
    """What the lock file at ``path`` says about its (last) holder, or ``""``."""
    return _read_holder(Path(path))


def is_held(path: str | Path) -> Optional[bool]:
    """Whether a live process holds the lock file ``path``: True; False when it is free (its holder
    released it, ended or was killed, even by SIGKILL); None when there is no lock file (an older
    run, or a record copied from elsewhere), so liveness cannot be told. Never creates or changes it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops a shared lock this probe took
    return False
