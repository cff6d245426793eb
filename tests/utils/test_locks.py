"""The one lock: exclusive, named after its holder, dropped by the kernel when the holder is killed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from ablate.utils import io

HOLD = (
    "import pathlib, sys, time; from ablate.utils.io import HolderLock; "
    "lock = HolderLock(pathlib.Path(sys.argv[1]), holder='holder-7').acquire(); "
    "print('held', flush=True); time.sleep(60)"
)


def _hold_in_child(path):
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_second_holder_is_refused_naming_the_first_until_the_first_is_killed(tmp_path):
    path = tmp_path / ".lock"
    assert io.is_held(path) is None  # no file: cannot tell
    child = _hold_in_child(path)
    try:
        with pytest.raises(io.LockHeld) as refused:
            io.HolderLock(path).acquire()
        assert refused.value.holder == "holder-7"
        assert path.read_text() == "holder-7\n"  # the refused try left the holder's name alone
        assert io.is_held(path) is True
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert io.is_held(path) is False  # the kernel dropped the killed holder's lock
    before = path.stat().st_mtime_ns, path.read_text()
    assert io.is_held(path) is False and (path.stat().st_mtime_ns, path.read_text()) == before  # a probe writes nothing
    with io.HolderLock(path) as lock:  # taken over; the file names the new holder
        assert lock.is_locked and path.read_text() == f"{os.getpid()}@{socket.gethostname()}\n"
    assert io.is_held(path) is False and path.exists()  # released, the file stays for the next probe


def test_a_waiting_lock_waits_for_the_holder_to_release(tmp_path):
    path = tmp_path / "entry.lock"
    first = io.HolderLock(path).acquire()
    got = threading.Event()

    def second() -> None:
        with io.HolderLock(path, wait=True):
            got.set()

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.3)
    assert not got.is_set()  # still waiting on the first holder
    first.release()
    thread.join(timeout=10)
    assert got.is_set()
