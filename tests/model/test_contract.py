"""Every registered score and position scheme keeps the contract a plugin's must keep: ``ablate.testing``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import ablate.testing
from ablate.model.positions import POSITIONS, Positions
from ablate.model.scores import SCORES

from tests.helpers.model import WITH_EVERY_WEIGHT


@pytest.mark.parametrize("name", list(SCORES))
def test_every_score_keeps_the_contract(name):
    ablate.testing.check_score(name, **WITH_EVERY_WEIGHT.get(name, {}))


@pytest.mark.parametrize("name", list(POSITIONS))
def test_every_position_scheme_keeps_the_contract(name):
    ablate.testing.check_positions(name)


class ZeroRelativeBias(Positions):
    """A learned relative bias per head and offset, zero-initialised: blind to word order until trained."""

    def __init__(self, d_model, d_k, heads, max_positions):
        super().__init__(d_model, d_k, heads, max_positions)
        self.table = nn.Parameter(torch.zeros(heads, 2 * max_positions - 1))

    def bias(self, tq, tk, offset=0):
        distance = torch.arange(offset, offset + tq)[:, None] - torch.arange(tk)[None, :]
        return self.table[:, distance + self.max_positions - 1]  # (H, Tq, Tk)


def test_a_position_blind_scheme_fails_the_contract(monkeypatch):
    """Every hook of the zero-initialised bias is consistent; only the end-to-end check sees that it
    leaves the encoder a bag of words."""
    monkeypatch.setitem(POSITIONS, "zero-relative", ZeroRelativeBias)
    with pytest.raises(
        AssertionError, match="positions 'zero-relative': reversing the source changed the logits by only"
    ):
        ablate.testing.check_positions("zero-relative")


@pytest.mark.parametrize(
    "check, name, params, expected",
    [
        (ablate.testing.check_score, "gaussian", {"bandwith": True}, "did you mean 'bandwidth'"),
        (ablate.testing.check_score, "dot", {"temperature": 5.0}, "score 'dot' takes no parameters"),
        (ablate.testing.check_positions, "rotary", {"bse": 500}, "did you mean 'base'"),
        (ablate.testing.check_positions, "rotary", {"base": "fast"}, "model.positions_params.base"),
    ],
)
def test_a_misspelt_or_mistyped_parameter_is_the_configs_one_line(check, name, params, expected):
    """``check_score("cosine", temprature=5)`` raised the constructor's raw TypeError (no did-you-mean): the contract
    built the component past the registry's check_params, which the config (and so the CLI) runs."""
    from ablate.errors import AblateError

    with pytest.raises(AblateError, match=expected) as err:
        check(name, **params)
    assert "\n" not in str(err.value)
