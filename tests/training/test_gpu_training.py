"""Training on a GPU (skipped without CUDA): a bf16-autocast run learns and its BLEU is sacreBLEU's.

Run it where a GPU is present: ``python -m pytest -q -m gpu``.
"""

from __future__ import annotations

import pytest
import sacrebleu
import torch

from ablate.config import load_config
from ablate.training.train import train

from tests.helpers.tiny import tiny

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

TINY = tiny(  # the tiny run, twice as wide and deep: it must learn something in 120 steps
    "model.d_model=64",
    "model.layers=2",
    "model.heads=4",
    "model.d_ff=128",
    "train.max_steps=120",
    "train.max_tokens=1024",
    "train.warmup=20",
    "eval.beam=3",
    "tracking.wandb=disabled",
    pairs=600,
)


def test_bf16_autocast_run_end_to_end(tmp_path, cache_dir):
    summary = train(load_config(None, TINY), tmp_path / "run")  # precision auto -> bf16-mixed on a GPU
    assert summary["status"] == "finished" and summary["step"] == 120
    assert summary["train/loss"] == summary["train/loss"] and summary["train/loss"] < 6
    assert summary["peak_memory_mb"] > 0 and summary["train/tokens_per_sec"] > 0
    hyps = (tmp_path / "run" / "hyps" / "test.txt").read_text().splitlines()
    refs = (tmp_path / "run" / "refs" / "test.txt").read_text().splitlines()
    assert len(hyps) == len(refs)
    assert summary["test/bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-6)
    assert summary["test/bleu"] > 5  # it learned something in bf16
