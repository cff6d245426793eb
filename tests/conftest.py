"""Shared fixtures: the real Multi30k corpus beside the checkout, and quiet, small torch."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
torch.set_num_threads(1)

MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"


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
