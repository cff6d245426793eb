"""The hand FLOP count (PaLM / nanoGPT way) against a count by hand and against PyTorch's own counter."""

from __future__ import annotations

import pytest
import torch

from ablate.bench.timing import census
from ablate.config import ModelConfig
from ablate.model.build import build_model
from scripts.gpu_check.flops import Dims, batches_flops, datasheet_peak, training_flops


def test_one_layer_each_counted_by_hand():
    dims = Dims(d_model=4, d_ff=8, heads=2, d_k=2, d_v=2, encoder_layers=1, decoder_layers=1, vocab=10)
    out = training_flops(dims, src_lengths=[3], tgt_lengths=[2])
    # encoder: (4 projections 4x4 = 64 + ffn 2*4*8 = 64) MACs x 3 tokens = 384
    # decoder: (self 64 + cross Q,O 32 + ffn 64) x 2 tokens = 320; cross K,V 32 x 3 memory tokens = 96
    # output layer: 4 x 10 x 2 tokens = 80;  MACs 880 -> 6 FLOPs each
    assert out["dense"] == 6 * 880
    # attention: 6 * heads 2 * (d_k + d_v) 4 = 48 per query-key pair; pairs 3*3 + (2*2 + 2*3) = 19
    assert out["attention"] == 48 * 19
    assert out["total"] == 6 * 880 + 48 * 19 and out["per_token"] == out["total"] / 5


def test_nanogpt_six_n_per_token_when_attention_is_free():
    """With no attention pairs to speak of, the count is 6 x matrix parameters per token they see."""
    dims = Dims(512, 2048, 8, 64, 64, 6, 6, 8000)
    out = training_flops(dims, [1] * 10, [1] * 10)
    enc = 6 * (4 * 512 * 512 + 2 * 512 * 2048)
    dec = 6 * (8 * 512 * 512 + 2 * 512 * 2048) + 512 * 8000
    assert out["dense"] == pytest.approx(6 * 10 * (enc + dec))


@pytest.mark.parametrize("d_k", [None, 6])
def test_equals_pytorch_flop_counter_on_an_unpadded_batch(d_k):
    """FlopCounterMode counts every matmul and SDPA call of a real forward + backward: the same total,
    except that it also counts the Q K^T product the fused attention backward recomputes (hardware work,
    not model FLOPs: 2 h d_k per query-key pair)."""
    torch.manual_seed(0)
    cfg = ModelConfig(layers=2, decoder_layers=1, d_model=16, d_ff=24, heads=4, d_k=d_k, dropout=0.0)
    model = build_model(cfg, 30, 30, pad_id=0)
    batch = {
        "src": torch.randint(3, 30, (3, 7)),
        "tgt_in": torch.randint(3, 30, (3, 5)),
        "tgt_out": torch.randint(3, 30, (3, 5)),
    }
    counted, _ = census(lambda: model(batch["src"], batch["tgt_in"]).float().logsumexp(-1).sum().backward())
    dims = Dims.of(cfg, 30)
    ours = training_flops(dims, [7, 7, 7], [5, 5, 5])
    assert batches_flops(dims, [batch]) == ours["total"]
    assert ours["total"] + 2 * dims.heads * dims.d_k * ours["pairs"] == pytest.approx(counted, rel=1e-9)


def test_padding_is_not_model_flops():
    dims = Dims(16, 24, 4, 4, 4, 1, 1, 30)
    src = torch.tensor([[5, 6, 7], [5, 6, 0]])
    tgt = torch.tensor([[5, 6], [5, 0]])
    padded = batches_flops(dims, [{"src": src, "tgt_out": tgt}])
    assert padded == training_flops(dims, [3, 2], [2, 1])["total"] < training_flops(dims, [3, 3], [2, 2])["total"]


def test_datasheet_peaks():
    assert datasheet_peak("NVIDIA H200", "bfloat16") == pytest.approx(989.4e12)
    assert datasheet_peak("NVIDIA H100 PCIe", "bfloat16") == pytest.approx(756e12)
    assert datasheet_peak("NVIDIA A100-SXM4-80GB", "float32") == pytest.approx(19.5e12)
    assert datasheet_peak("Intel Xeon", "bfloat16") is None
