"""Shared fixtures: the real Multi30k corpus beside the checkout, and quiet, small torch.

Also the seconds each test file took, printed at the end of every run (slowest first), so CI logs
show where the time goes and which tests deserve ``@pytest.mark.slow``.

SIGTERM stops the session within seconds (:func:`_stop_on_sigterm`). Without it the code under
test turned each SIGTERM into a graceful stop of *its* work (a sweep stops its trials, a trainer
saves a checkpoint and records ``interrupted``) and the session went on with the next test.
A session that inherited SIGINT ignored handles it again, so the Ctrl-C tests do not depend on how it was started.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections import defaultdict
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # `from tests.helpers... import ...` in every test
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
torch.set_num_threads(1)

MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"

_SECONDS_PER_FILE: defaultdict[str, float] = defaultdict(float)

STOP_S = 5.0
"""Seconds the session gets after a SIGTERM to end by itself before it exits hard (status 143)."""
_SESSION: list[pytest.Session] = []
_STOPPING: list[threading.Timer] = []


def _stop_on_sigterm(signum: int, frame: object) -> None:
    """End the session: no test after this one, KeyboardInterrupt now, and a hard exit after :data:`STOP_S`.

    The code under test may catch the interrupt (a trainer's graceful stop, ``CliRunner``) and go on;
    the session stops after the current test, and the timer ends whatever is still running.
    Handlers that chain to the one before them (Lightning's signal connector,
    :class:`ablate.sweep.local.signals_raise_interrupt`) reach this one.
    """
    for session in _SESSION:
        session.shouldstop = f"signal {signum}"
    if not _STOPPING:
        timer = threading.Timer(STOP_S, os._exit, args=(128 + signum,))
        timer.daemon = True
        timer.start()
        _STOPPING.append(timer)
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_sessionstart(session: pytest.Session) -> None:
    _SESSION.append(session)
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _stop_on_sigterm)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # A session started in the background of a shell without job control (`nohup pytest &` in a script)
        # inherits SIGINT ignored, and so would every trainer it spawns: the tests of Ctrl-C (and Ray's cancel,
        # which raises it through _thread.interrupt_main) would fail for how pytest was started, not for ablate.
        signal.signal(signal.SIGINT, signal.default_int_handler)


LONGEST_FIRST = (
    "tests/sweep/test_soak.py",
    "tests/sweep/test_slurm.py",
    "tests/sweep/test_packed.py",
    "tests/sweep/test_ray.py",
    "tests/training/test_train_resume.py",
    "tests/api/test_python_api.py",
    "tests/sweep/test_e2e.py",
    "tests/registry/test_plugin_runs.py",
)
"""The test files that take longest (the seconds per file printed at the end of a run), collected first.
CI runs two pytest-xdist workers that each take whole files in collection order (``--dist loadfile
--no-loadscope-reorder`` in pyproject.toml; without the second, the files with the most tests go first):
a long file handed out last would keep one worker busy while the other has ended."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """:data:`LONGEST_FIRST` first, in its order; every other file after them, as collected."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


@pytest.fixture(scope="session")
def multi30k() -> Path:
    """The real Multi30k en-de folder (``{split}.{lang}.gz``); skipped only if absent."""
    if not (MULTI30K / "train.en.gz").exists():
        pytest.skip(f"Multi30k not found at {MULTI30K}")
    return MULTI30K


@pytest.fixture()
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private tokenizer/data cache for one test."""
    path = tmp_path / "cache"
    monkeypatch.setenv("ABLATE_CACHE", str(path))
    return path


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add the setup, call and teardown seconds of each test to its file's total."""
    _SECONDS_PER_FILE[report.nodeid.split("::", 1)[0]] += report.duration


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Seconds per test file, slowest first, and their sum."""
    if not _SECONDS_PER_FILE:
        return
    terminalreporter.section("seconds per test file")
    for path, seconds in sorted(_SECONDS_PER_FILE.items(), key=lambda item: (-item[1], item[0])):
        terminalreporter.write_line(f"{seconds:8.1f}  {path}")
    terminalreporter.write_line(f"{sum(_SECONDS_PER_FILE.values()):8.1f}  in all {len(_SECONDS_PER_FILE)} files")
