"""One process per run folder: an exclusive lock on ``<run_dir>/.lock`` that names its holder.

Two ``ablate train --run-dir same`` at once would share the temporary checkpoint file and write
two W&B runs with one id. The lock is a :class:`~ablate.utils.io.HolderLock` (``filelock``'s
``flock`` on an open file), so the kernel drops it when the holder dies, even by SIGKILL: a
lock left by a dead process (its file still names it) is simply taken over. The file holds ``pid@host`` of the holder, for the refusal message. Readers
(``ablate table``, ``ablate sync``) ask :func:`is_held` whether a record that says ``running`` still
has a live holder: a free lock means its process died, so the run is interrupted.

Taking the lock is also the first write into the folder, so a run folder that cannot be written
(an existing file, a read-only file system) fails here, before any data is prepared.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any, Optional

from ablate.config import ConfigError
from ablate.record import LOCK_FILE, RunStatus
from ablate.utils import io


class UnwritableRunDir(ConfigError):
    """The run folder cannot be written (read-only, no permission); one line naming it."""


class RunLock:
    """``with RunLock(run_dir):`` holds ``run_dir`` for this process; a second holder is refused.

    Raises:
        ConfigError: another live process holds the folder (naming its pid and host), or the
            folder cannot be created or written.
    """

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._lock = io.HolderLock(self.path)

    def acquire(self) -> RunLock:
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._lock.acquire()
        except io.LockHeld as held:
            pid, _, host = held.holder.partition("@")
            raise ConfigError(
                f"run dir {self.run_dir} is in use by another training (pid {pid} on "
                f"{host or 'this host'}); wait for it, stop it, or choose another --run-dir"
            ) from None
        except FileExistsError:
            raise ConfigError(
                f"--run-dir {self.run_dir} is an existing file, not a folder; choose another path"
            ) from None
        except OSError as err:
            if err.errno == errno.ENOTDIR:
                raise ConfigError(
                    f"--run-dir {self.run_dir}: a part of the path is a file; choose another path"
                ) from None
            raise UnwritableRunDir(
                f"cannot write to run dir {self.run_dir}: {err.strerror or err}; choose a writable --run-dir"
            ) from None
        return self

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def is_held(run_dir: Path) -> Optional[bool]:
    """Whether a live process holds ``run_dir``'s lock: True; False when the lock is free (its holder
    ended, or was killed, even by SIGKILL); None when there is no lock file (an older run, or a record
    copied from elsewhere), so liveness cannot be told. Never creates or changes the file."""
    return io.is_held(Path(run_dir) / LOCK_FILE)


def running_status(run_dir: Path, status: str) -> str:
    """A record's status with liveness from the lock: ``running`` whose lock is free is ``interrupted``."""
    return RunStatus.INTERRUPTED if status == RunStatus.RUNNING and is_held(run_dir) is False else status
