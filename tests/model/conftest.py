"""Tiny model factories shared by the model tests (as fixtures that return functions)."""

from __future__ import annotations

import pytest
import torch

from ablate.config import AttentionConfig, ModelConfig
from ablate.model.build import build_model

VOCAB = 19
PAD, BOS, EOS = 0, 1, 2


def _tiny_config(score: str = "dot", scale=True, positions: str = "sinusoidal", **model) -> ModelConfig:
    attention = model.pop("attention", {})
    fields = dict(layers=2, d_model=16, d_ff=32, heads=4, dropout=0.0, max_positions=64, positions=positions)
    fields.update(model)
    return ModelConfig(attention=AttentionConfig(score=score, scale=scale, **attention), **fields)


@pytest.fixture()
def tiny_config():
    """``tiny_config(score, scale, positions, **fields)`` -> a 2-layer d_model 16 ModelConfig."""
    return _tiny_config


@pytest.fixture()
def make_model():
    """``make_model(score, scale, positions, seed=0, **fields)`` -> a seeded tiny Transformer in eval mode."""

    def make(*args, seed: int = 0, **kwargs):
        torch.manual_seed(seed)
        return build_model(_tiny_config(*args, **kwargs), VOCAB, VOCAB, pad_id=PAD).eval()

    return make


def _random_batch(batch: int = 3, src_len: int = 7, tgt_len: int = 6, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, VOCAB, (batch, src_len), generator=g)
    for row in range(1, batch):
        src[row, src_len - row :] = PAD
    tgt = torch.randint(3, VOCAB, (batch, tgt_len), generator=g)
    tgt[:, 0] = BOS
    return src, tgt


@pytest.fixture()
def random_batch():
    """``random_batch(batch, src_len, tgt_len, seed)`` -> (src with ragged right padding, tgt_in starting with BOS)."""
    return _random_batch
