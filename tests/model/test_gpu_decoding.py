"""Decoding on a GPU (skipped without CUDA) gives the logits and hypotheses of decoding on the CPU.

Run it where a GPU is present: ``python -m pytest -q -m gpu``.
"""

from __future__ import annotations

import pytest
import torch

from ablate.config import load_config
from ablate.model.build import build_model
from ablate.model.decoding import beam_search, greedy

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


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
