"""Tiny Lightning-free models and batches for the model tests (the fixtures of tests/model/conftest.py).

Smaller than the tiny training run (:mod:`tests.helpers.tiny`) but with two layers and four heads, so
stacking and head splitting are exercised; nothing here trains.
"""

from __future__ import annotations

import torch

from ablate.config import AttentionConfig, ModelConfig
from ablate.model.build import build_model

VOCAB = 19
PAD, BOS, EOS = 0, 1, 2

WITH_EVERY_WEIGHT: dict[str, dict] = {"gaussian": {"bandwidth": True}}
"""Score parameters that switch on the parts a score learns only when asked (gaussian's bandwidth)."""


def every_weight(score: str) -> AttentionConfig:
    """The attention section of ``score`` with :data:`WITH_EVERY_WEIGHT`'s parameters, if it has some."""
    return AttentionConfig(score=score, params=WITH_EVERY_WEIGHT.get(score, {}))


def tiny_model_config(score: str = "dot", scale=True, positions: str = "sinusoidal", **model) -> ModelConfig:
    """A 2-layer, d_model-16, 4-head ModelConfig without dropout; ``model`` overrides its fields."""
    attention = model.pop("attention", {})
    fields = dict(layers=2, d_model=16, d_ff=32, heads=4, dropout=0.0, max_positions=64, positions=positions)
    fields.update(model)
    return ModelConfig(attention=AttentionConfig(score=score, scale=scale, **attention), **fields)


def tiny_model(*args, seed: int = 0, **kwargs) -> torch.nn.Module:
    """A seeded :func:`tiny_model_config` Transformer over :data:`VOCAB` tokens, in eval mode."""
    torch.manual_seed(seed)
    return build_model(tiny_model_config(*args, **kwargs), VOCAB, VOCAB, pad_id=PAD).eval()


def random_batch(batch: int = 3, src_len: int = 7, tgt_len: int = 6, seed: int = 1):
    """(src with ragged right padding, tgt_in starting with BOS), both ``(batch, len)`` token ids."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, VOCAB, (batch, src_len), generator=g)
    for row in range(1, batch):
        src[row, src_len - row :] = PAD
    tgt = torch.randint(3, VOCAB, (batch, tgt_len), generator=g)
    tgt[:, 0] = BOS
    return src, tgt
