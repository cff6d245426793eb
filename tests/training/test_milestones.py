"""``train(milestone=...)``: the start-up hook ``ablate bench`` times with (no monkeypatching)."""

from __future__ import annotations

import pytest

from ablate.config import load_config
from ablate.training.train import train

from tests.helpers.tiny import EVAL_PAIRS, tiny

TINY = tiny(
    "data.vocab_size=200",
    "train.max_steps=2",
    "train.max_tokens=512",
    "eval.beam=1",
    "eval.max_len_b=3",
    "tracking.wandb=disabled",
    eval_pairs=EVAL_PAIRS,
)


@pytest.mark.slow
def test_milestones_arrive_once_in_order(tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    seen: list[str] = []
    summary = train(load_config(None, TINY), tmp_path / "run", milestone=seen.append)
    assert summary["status"] == "finished"
    assert seen == ["data", "model", "fit_start", "first_step"]
