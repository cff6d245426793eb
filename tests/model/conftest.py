"""Tiny model factories shared by the model tests (as fixtures that return functions; see tests/helpers/model.py)."""

from __future__ import annotations

import pytest

from tests.helpers.model import random_batch as _random_batch, tiny_model, tiny_model_config


@pytest.fixture()
def tiny_config():
    """``tiny_config(score, scale, positions, **fields)`` -> a 2-layer d_model 16 ModelConfig."""
    return tiny_model_config


@pytest.fixture()
def make_model():
    """``make_model(score, scale, positions, seed=0, **fields)`` -> a seeded tiny Transformer in eval mode."""
    return tiny_model


@pytest.fixture()
def random_batch():
    """``random_batch(batch, src_len, tgt_len, seed)`` -> (src with ragged right padding, tgt_in starting with BOS)."""
    return _random_batch
