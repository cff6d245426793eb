"""One process per run folder: an exclusive lock on ``<run_dir>/.lock`` that names its holder.

Two ``ablate train --run-dir same`` at once would share the temporary checkpoint file and write
two W&B runs with one id. The lock is an ``flock`` on an open file, so the kernel drops it when
the holder dies, even by SIGKILL: a lock left by a dead process (its file still names it) is
simply taken over. The file holds ``pid@host`` of the holder, for the refusal message. Readers
(``ablate table``, ``ablate sync``) ask :func:`is_held` whether a record that says ``running`` still
has a live holder: a free lock means its process died, so the run is interrupted.

Taking the lock is also the first write into the folder, so a run folder that cannot be written
(an existing file, a read-only file system) fails here, before any data is prepared.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from pathlib import Path
from typing import Any, Optional

from ablate.config import ConfigError
from ablate.record import LOCK_FILE, RunStatus
from ablate.utils.io import plain_mode


class RunLock:
    """``with RunLock(run_dir):`` holds ``run_dir`` for this process; a second holder is refused.

    Raises:
        ConfigError: another live process holds the folder (naming its pid and host), or the
            folder cannot be created or written.
    """

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._fd: Optional[int] = None

    def acquire(self) -> RunLock:
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, plain_mode())
        except FileExistsError:
            raise ConfigError(
                f"--run-dir {self.run_dir} is an existing file, not a folder; choose another path"
            ) from None
        except OSError as err:
            if err.errno == errno.ENOTDIR:
                raise ConfigError(
                    f"--run-dir {self.run_dir}: a part of the path is a file; choose another path"
                ) from None
            raise ConfigError(
                f"cannot write to run dir {self.run_dir}: {err.strerror or err}; choose a writable --run-dir"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            pid, _, host = holder.partition("@")
            raise ConfigError(
                f"run dir {self.run_dir} is in use by another training (pid {pid} on "
                f"{host or 'this host'}); wait for it, stop it, or choose another --run-dir"
            ) from None
        me = f"{os.getpid()}@{socket.gethostname()}\n".encode()
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, me, 0)
        except OSError as err:
            os.close(fd)
            raise ConfigError(
                f"cannot write to run dir {self.run_dir}: {err.strerror or err}; choose a writable --run-dir"
            ) from None
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def is_held(run_dir: Path) -> Optional[bool]:
    """Whether a live process holds ``run_dir``'s lock: True; False when the lock is free (its holder
    ended, or was killed, even by SIGKILL); None when there is no lock file (an older run, or a record
    copied from elsewhere), so liveness cannot be told. Never creates or changes the file."""
    try:
        fd = os.open(Path(run_dir) / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops a lock this call took
    return False


def running_status(run_dir: Path, status: str) -> str:
    """A record's status with liveness from the lock: ``running`` whose lock is free is ``interrupted``."""
    return RunStatus.INTERRUPTED if status == RunStatus.RUNNING and is_held(run_dir) is False else status
