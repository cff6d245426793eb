"""``ablate.training.run_folder``: the values a run records (and the report shows) are the ones the built model uses."""

from __future__ import annotations

import pytest

from ablate.config import load_config
from ablate.model.attention import MultiHeadAttention
from ablate.model.build import build_model
from ablate.training.run_folder import resolved

CASES = [
    [],  # d_k = 128 / 4
    ["model.heads=1"],  # Table 3 row A: d_k = d_model
    ["model.d_model=256"],  # row C: d_k = 64
    ["model.d_k=16"],  # row B: d_v follows d_k
    ["model.d_k=16", "model.d_v=40"],
    ["model.attention.score=additive"],  # auto: unscaled (Bahdanau)
    ["model.attention.score=additive", "model.attention.cross_score=dot"],
    ["model.attention.scale=true", "model.attention.score=additive"],
    ["model.attention.scale=0.5"],
    ["model.arch=rnn", "model.attention.score=additive"],
    ["model.arch=rnn", "model.attention.score=none"],
    ["model.encoder_layers=2"],
]


@pytest.mark.parametrize("overrides", CASES, ids=lambda o: " ".join(o) or "default")
def test_resolved_values_are_what_the_built_model_uses(overrides):
    cfg = load_config(None, overrides)
    values = resolved(cfg)
    model = build_model(cfg.model, 100, 100)
    atts = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    if atts:
        assert {(m.d_k, m.d_v) for m in atts} == {(values["model.d_k"], values["model.d_v"])}
        scales = sorted({m.scaling for m in atts})
        recorded = values["model.attention.scale"]
        assert sorted(recorded if isinstance(recorded, list) else [recorded]) == pytest.approx(scales)
    else:
        assert "model.attention.scale" not in values  # an RNN without attention
    if cfg.model.arch == "transformer":
        assert (len(model.encoder), len(model.decoder)) == (
            values["model.encoder_layers"],
            values["model.decoder_layers"],
        )
    assert values["train.lr"] == pytest.approx(cfg.model.d_model**-0.5 * cfg.train.warmup**-0.5)
