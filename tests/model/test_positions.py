"""Position schemes: the paper's formulas, offsets for incremental decoding, errors."""

from __future__ import annotations

import math

import pytest
import torch

from ablate.model.positions import (
    PositionError,
    alibi_slopes,
    build_positions,
    sinusoids,
)

D, DK, H = 16, 4, 4


def test_sinusoidal_matches_paper_formula():
    pe = sinusoids(torch.arange(50), D)
    for pos in (0, 1, 7, 49):
        for i in range(D // 2):
            angle = pos / 10000 ** (2 * i / D)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)


def test_sinusoidal_odd_size_and_beyond_table():
    assert sinusoids(torch.arange(3), 5).shape == (3, 5)
    pos = build_positions("sinusoidal", D, DK, H, max_positions=8)
    x = torch.zeros(1, 4, D)
    beyond = pos.embed(x, offset=10)  # past the precomputed table: computed on the fly
    torch.testing.assert_close(beyond[0], sinusoids(torch.arange(10, 14), D))


def test_rotary_scores_depend_on_relative_position_only():
    """RoPE (Su et al. 2021, eq. 16): <R_m q, R_n k> depends on m - n only."""
    torch.manual_seed(0)
    pos = build_positions("rotary", D, DK, H, 64)
    q, k = torch.randn(1, H, 1, DK), torch.randn(1, H, 1, DK)

    def dot(m, n):
        return (pos.rotate(q, m) * pos.rotate(k, n)).sum(-1)

    torch.testing.assert_close(dot(5, 2), dot(13, 10))
    assert not torch.allclose(dot(5, 2), dot(5, 4))
    torch.testing.assert_close(pos.rotate(q, 0), q)  # position 0 is the identity
    torch.testing.assert_close(pos.rotate(q, 7).norm(dim=-1), q.norm(dim=-1))  # a rotation


def test_rotary_needs_even_head_size():
    with pytest.raises(PositionError, match="even"):
        build_positions("rotary", 15, 5, 3, 16)


def test_alibi_slopes_follow_the_paper():
    """Press et al. (2022): 8 heads -> 1/2, 1/4, ..., 1/256."""
    torch.testing.assert_close(alibi_slopes(8), torch.tensor([2.0**-k for k in range(1, 9)]))
    six = alibi_slopes(6)  # not a power of two: 4 slopes for 4 heads + every other of 8
    torch.testing.assert_close(six, torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]))


def test_alibi_bias_is_linear_in_distance_with_a_slope_per_direction():
    """Keys to the left: the paper's -m_h (i - j); keys to the right: -m_h 2^(4/H) (j - i), the slopes
    of Press et al.'s sequence for 2H heads that lie between the H used for the left."""
    pos = build_positions("alibi", D, DK, H, 32)
    bias = pos.bias(4, 6, offset=2)  # queries at 2..5, keys at 0..5
    slopes = alibi_slopes(H)
    between = alibi_slopes(2 * H)[0::2]  # 2^-1, 2^-3, 2^-5, 2^-7 for H = 4
    torch.testing.assert_close(between, slopes * 2 ** (4 / H))
    for h in range(H):
        for i in range(4):
            for j in range(6):
                slope = slopes[h] if j <= 2 + i else between[h]
                assert bias[h, i, j].item() == pytest.approx(-slope.item() * abs(2 + i - j))


def test_alibi_bias_has_a_direction_for_any_head_count():
    """Mirroring the keys around a query changes the bias (the symmetric -m|i-j| would not)."""
    for heads in (1, 3, 4, 8):
        bias = build_positions("alibi", D, DK, heads, 32).bias(1, 9, offset=4)[:, 0]  # (H, 9), query at 4
        assert torch.all(bias[:, :4] > bias.flip(-1)[:, :4])  # left of the query penalised less than right


def test_learned_positions_are_bounded():
    pos = build_positions("learned", D, DK, H, max_positions=8)
    assert pos.embed(torch.zeros(1, 8, D)).shape == (1, 8, D)
    with pytest.raises(PositionError, match="model.max_positions=8"):
        pos.embed(torch.zeros(1, 3, D), offset=6)


def test_unknown_positions_is_a_one_line_error():
    with pytest.raises(PositionError, match="choose from"):
        build_positions("relative", D, DK, H, 8)
