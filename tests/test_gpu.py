"""GPU paths (skipped without CUDA): bf16 autocast training and decoding, and GPU == CPU decoding.

Run them where a GPU is present: ``python -m pytest -q -m gpu``.
"""

from __future__ import annotations

import pytest
import sacrebleu
import torch

from ablate.config import load_config
from ablate.model.build import build_model
from ablate.model.decoding import beam_search, greedy
from ablate.training.train import train

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

TINY = [
    "data.builtin_pairs=600",
    "data.vocab_size=300",
    "model.d_model=64",
    "model.layers=2",
    "model.heads=4",
    "model.d_ff=128",
    "train.max_steps=120",
    "train.max_tokens=1024",
    "train.warmup=20",
    "eval.beam=3",
    "tracking.wandb=disabled",
]


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


@pytest.mark.parametrize("score", ["dot", "additive", "general", "gaussian"])
def test_gpu_decoding_equals_cpu_decoding(score):
    torch.manual_seed(0)
    cfg = load_config(
        None,
        [
            "model.d_model=64",
            "model.layers=2",
            "model.heads=4",
            "model.d_ff=128",
            f"model.attention.score={score}",
            "model.dropout=0.0",
        ],
    )
    model = build_model(cfg.model, 50, 50, pad_id=0).eval()
    src = torch.randint(3, 50, (6, 9))
    src[3, 5:] = 0
    with torch.no_grad():
        tgt = torch.randint(3, 50, (6, 7))
        cpu_logits = model(src, tgt)
        cpu = greedy(model, src, bos=1, eos=2, max_len_a=1.0, max_len_b=3)
        model = model.cuda()
        assert torch.allclose(model(src.cuda(), tgt.cuda()).cpu(), cpu_logits, atol=1e-4)
        gpu = greedy(model, src.cuda(), bos=1, eos=2, max_len_a=1.0, max_len_b=3)
        assert cpu == gpu
        beams = beam_search(model, src.cuda(), beam=3, bos=1, eos=2, max_len_a=1.0, max_len_b=3)
    assert len(beams) == 6
