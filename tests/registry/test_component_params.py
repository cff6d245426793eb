"""A component's hyperparameters are its constructor's parameters, set through ``params`` keys only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ablate.config import ConfigError, flatten, from_flat, load_config, valid_keys
from ablate.model.build import build_model
from ablate.model.positions import RotaryPositions
from ablate.model.scores import AdditiveScore, GaussianScore
from ablate.training.train import train

from tests.helpers.tiny import EVAL_PAIRS, tiny

ROOT = Path(__file__).resolve().parents[2]


def _modules(cfg, cls):
    return [m for m in build_model(cfg.model, 20, 20).modules() if isinstance(m, cls)]


def test_score_parameters_reach_their_constructors_as_params():
    gaussian = load_config(None, ["model.attention.score=gaussian", "model.attention.params.bandwidth=true"])
    assert all(m.bandwidth is not None for m in _modules(gaussian, GaussianScore))
    additive = load_config(None, ["model.attention.score=additive", "model.attention.params.chunk_mb=2"])
    assert {m.chunk_bytes for m in _modules(additive, AdditiveScore)} == {2 * 2**20}
    assert "model.attention.bandwidth" not in valid_keys() and "model.attention.chunk_mb" not in valid_keys()


def test_the_old_bandwidth_and_chunk_mb_keys_become_params():
    cfg = load_config(None, ["model.attention.score=gaussian", "model.attention.bandwidth=true"])
    assert cfg.model.attention.params == {"bandwidth": True}
    cfg = load_config(None, ["model.attention.score=additive", "model.attention.chunk_mb=8"])
    assert cfg.model.attention.params == {"chunk_mb": 8.0}
    cfg = load_config(None, ["model.attention.bandwidth=true"])  # a dot score ignored it, and still does
    assert cfg.model.attention.params == {}
    with pytest.raises(ConfigError, match="model.attention.bandwidth now reaches only model.attention.score"):
        load_config(None, ["model.attention.cross_score=gaussian", "model.attention.bandwidth=true"])


def test_a_shipped_record_with_the_old_keys_loads():
    summary = json.loads((ROOT / "results" / "mission-cpu" / "score-additive-seed=1" / "summary.json").read_text())
    assert {"bandwidth", "chunk_mb"} <= set(summary["config"]["model"]["attention"])
    cfg = from_flat(flatten(summary["config"]), trust="never")
    assert cfg.model.attention.score == "additive" and cfg.model.attention.params == {}


def test_rotary_base_sets_the_wavelengths():
    cfg = load_config(None, ["model.positions=rotary", "model.positions_params.base=500", "model.d_model=32"])
    (rotary, *_) = _modules(cfg, RotaryPositions)
    d_k = 32 // cfg.model.heads
    torch.testing.assert_close(rotary.inv_freq, 500.0 ** (-torch.arange(0, d_k, 2).float() / d_k))


def test_a_parameter_written_the_plain_python_way_is_accepted(tmp_path):
    (tmp_path / "plain.py").write_text(
        "import ablate\n"
        "from ablate.model.scores import DotScore\n\n"
        "@ablate.register('score', 'plain')\n"
        "class Plain(DotScore):\n"
        "    def __init__(self, d_k, heads, cfg, temperature: float = 1.0):\n"
        "        super().__init__(d_k, heads, cfg)\n"
        "        self.temperature = temperature\n"
    )
    plugin = [f"plugins={tmp_path / 'plain.py'}", "model.attention.score=plain"]
    cfg = load_config(None, [*plugin, "model.attention.params.temperature=3"])
    assert cfg.model.attention.params == {"temperature": 3.0}
    assert {m.temperature for m in build_model(cfg.model, 20, 20).modules() if hasattr(m, "temperature")} == {3.0}
    with pytest.raises(
        ConfigError, match=r"params.d_k is not a parameter of score 'plain' \(parameters: temperature\)"
    ):
        load_config(None, [*plugin, "model.attention.params.d_k=3"])


@pytest.mark.slow
def test_the_documented_rotary_base_trains(tmp_path):
    overrides = tiny(
        "model.positions=rotary", "model.positions_params.base=500", "train.max_steps=1", eval_pairs=EVAL_PAIRS
    )
    summary = train(load_config(None, [*overrides, "tracking.wandb=disabled", "eval.beam=1"]), tmp_path / "run")
    assert summary["status"] == "finished" and summary["config"]["model"]["positions_params"] == {"base": 500.0}
