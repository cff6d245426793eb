"""Property-based: any valid model config builds a model that trains a step and decodes."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from ablate.config import from_flat
from ablate.model.build import build_model
from ablate.model.decoding import greedy

SCORES = ["dot", "additive", "general", "gaussian"]
POSITIONS = ["sinusoidal", "learned", "none", "rotary", "alibi"]


@st.composite
def valid_model_configs(draw) -> dict:
    d_model = draw(st.sampled_from([8, 16, 24, 32]))
    heads = draw(st.sampled_from([h for h in (1, 2, 4, 8) if d_model % h == 0 and (d_model // h) % 2 == 0]))
    flat = {
        "model.arch": draw(st.sampled_from(["transformer", "rnn"])),
        "model.d_model": d_model,
        "model.heads": heads,
        "model.layers": draw(st.integers(1, 2)),
        "model.d_ff": draw(st.sampled_from([8, 16, 32])),
        "model.dropout": draw(st.sampled_from([0.0, 0.1, 0.3])),
        "model.positions": draw(st.sampled_from(POSITIONS)),
        "model.norm": draw(st.sampled_from(["post", "pre"])),
        "model.tie_embeddings": draw(st.booleans()),
        "model.attention.score": draw(st.sampled_from(SCORES)),
        "model.attention.scale": draw(st.one_of(st.booleans(), st.floats(0.05, 2.0))),
        "model.rnn.cell": draw(st.sampled_from(["gru", "lstm"])),
        "model.rnn.hidden": draw(st.sampled_from([8, 16])),
    }
    if flat["model.arch"] == "rnn" and draw(st.booleans()):
        flat["model.attention.score"] = "none"
    if draw(st.booleans()):
        flat["model.d_k"] = draw(st.sampled_from([4, 6, 8]))
    return flat


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flat=valid_model_configs(), seed=st.integers(0, 2**16))
def test_valid_configs_build_and_train_a_step(flat, seed):
    torch.manual_seed(seed)
    cfg = from_flat(flat)
    model = build_model(cfg.model, 40, 40, 0, True)
    src = torch.randint(4, 40, (3, 7))
    src[0, 5:] = 0
    tgt_in = torch.randint(4, 40, (3, 6))
    tgt_in[:, 0] = 1
    logits = model(src, tgt_in)
    assert logits.shape == (3, 6, 40)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 40), torch.randint(4, 40, (18,)))
    loss.backward()
    assert math.isfinite(loss.item())
    torch.optim.AdamW(model.parameters(), lr=1e-3).step()
    model.eval()
    out = greedy(model, src, 1, 2, max_len_a=1.0, max_len_b=3)
    assert len(out) == 3 and all(len(ids) <= 10 for ids in out)
