"""Shared fixtures: the real Multi30k corpus beside the checkout, and quiet, small torch.

Also the seconds each test file took, printed at the end of every run (slowest first), so CI logs
show where the time goes and which tests deserve ``@pytest.mark.slow``.
"""

from __future__ import annotations

import os
import sys
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
