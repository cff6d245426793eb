"""One training per run folder (``ablate train`` in processes): a second is refused, a dead holder's lock is taken over,
and a folder that cannot be written is refused before any data work."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.cli import start_cli
from tests.helpers.tiny import tiny_checkpointing

TINY = tiny_checkpointing()


def _train_until_killed(run: Path, cwd: Path, cache: Path) -> subprocess.Popen:
    """``ablate train --run-dir run`` of a tiny model with a budget it never reaches."""
    return start_cli(
        "train",
        "--run-dir",
        str(run),
        *TINY,
        "train.max_steps=100000",
        "train.max_epochs=null",
        cwd=cwd,
        ABLATE_CACHE=str(cache),
    )


@pytest.mark.slow
def test_a_second_training_of_the_same_folder_is_refused_and_a_dead_holder_is_taken_over(tmp_path):
    """Two concurrent ``ablate train --run-dir same``: the second is refused naming the first."""
    run, cache = tmp_path / "run", tmp_path / "cache"
    first = _train_until_killed(run, tmp_path, cache)
    try:
        deadline = time.time() + 300
        while not (run / "checkpoints" / "last.ckpt").exists():
            assert first.poll() is None, first.communicate()[1][-2000:]
            assert time.time() < deadline
            time.sleep(0.2)
        second = _train_until_killed(run, tmp_path, cache)
        _, err = second.communicate(timeout=120)
        assert second.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err[-2000:]
        assert f"run dir {run} is in use by another training (pid {first.pid} on " in err
        assert first.poll() is None  # the holder trains on, undisturbed
    finally:
        first.kill()
        first.wait()
    assert (run / ".lock").read_text().startswith(f"{first.pid}@")  # a stale lock: its holder is dead
    third = _train_until_killed(run, tmp_path, cache)
    try:
        deadline = time.time() + 300
        while not (run / ".lock").read_text().startswith(f"{third.pid}@"):
            assert third.poll() is None, third.communicate()[1][-2000:]
            assert time.time() < deadline
            time.sleep(0.2)
    finally:
        third.send_signal(signal.SIGTERM)
        third.wait(timeout=120)


def test_a_run_folder_that_cannot_be_written_is_refused_before_any_data_work(tmp_path, monkeypatch):
    """A read-only file system fails in one line at the lock, before data is prepared."""
    from ablate.config import ConfigError
    from ablate.training.run_folder import RunLock

    real_open = os.open

    def read_only(path, flags, mode=0o777, *args, **kwargs):
        if str(path).startswith(str(tmp_path / "ro")):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, mode, *args, **kwargs)

    (tmp_path / "ro").mkdir()
    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(
        ConfigError, match="cannot write to run dir .*Read-only file system; choose a writable --run-dir"
    ):
        RunLock(tmp_path / "ro" / "run").acquire()
