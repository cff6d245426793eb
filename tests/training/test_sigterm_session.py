"""The test session itself: SIGTERM stops it within seconds, whatever the running test does with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SWEEP = """\
import time
from pathlib import Path

from tests.helpers.sweep import run_sweep
from tests.helpers.sweep import Events, fake_command, options, quiet_progress, small_spec


def test_a_sweep_that_is_interrupted_then_more_work(tmp_path):
    events = Events(Path({ready!r}))
    progress, _ = quiet_progress()
    command = fake_command(events, {{"trial": "hang"}})
    run_sweep(small_spec({{"seed": {{"value": 1}}}}), options(tmp_path / "out", command), progress)  # SIGTERM here
    time.sleep(120)  # the sweep took the signal as its own stop; the session used to go on
"""

TRAINER = """\
import signal
import time
from pathlib import Path


def test_a_trainer_that_stops_gracefully_then_more_work():
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum, frame):  # as Lightning's signal connector: note it, chain to a Python handler
        if callable(previous):
            previous(signum, frame)

    signal.signal(signal.SIGTERM, on_term)
    try:
        Path({ready!r}).write_text("start trial")
        time.sleep(120)
    except (KeyboardInterrupt, SystemExit):  # the run is recorded interrupted; the test goes on
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    time.sleep(120)
"""


@pytest.mark.slow
@pytest.mark.parametrize("inner", [SWEEP, TRAINER], ids=["sweep", "trainer"])
def test_sigterm_stops_the_session_within_seconds(tmp_path, inner):
    ready = tmp_path / "events.log"
    (tmp_path / "test_inner.py").write_text(inner.format(ready=str(ready)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    argv = [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-q", "test_inner.py"]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 180
        while not (ready.exists() and "start" in ready.read_text()):  # the inner test is under way
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode()
            time.sleep(0.1)
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        took = time.monotonic() - sent
        assert took < 10, f"pytest went on for {took:.0f} s after SIGTERM"
        assert proc.returncode != 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
