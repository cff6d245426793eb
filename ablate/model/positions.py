"""Position information: one registry, three hooks.

Every variant is a :class:`Positions` module with three hooks that default to no-ops, so the
Transformer and the attention module treat all of them alike:

* ``embed(x, offset)`` -- add absolute positions to the scaled token embeddings (B, T, D);
* ``rotate(x, offset)`` -- rotate per-head queries or keys (B, H, T, d_k) inside attention;
* ``bias(tq, tk, offset)`` -- an additive (H, Tq, Tk) bias on the attention scores.

``offset`` is the absolute position of the first row of ``x`` (or of the first query), i.e. the
number of tokens already decoded, which makes every variant work with incremental decoding.
Keys always start at position 0. The attention hooks apply to self-attention only; the
Transformer passes no positions to encoder-decoder attention.

Adding a variant is one class with ``@register("positions", "<name>")`` (it lands in
:data:`POSITIONS`), here or in a plugin; keyword-only constructor parameters are its
hyperparameters, set by ``model.positions_params.<name>``.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import torch
from torch import Tensor, nn

from ablate.errors import AblateError
from ablate.registry import register, table


class PositionError(AblateError):
    """A sequence that does not fit the position scheme, or an unknown scheme."""


POSITIONS: dict[str, type[Positions]] = table("positions")
"""Name -> position class, filled by ``@register("positions", name)`` (ours below, and plugins')."""


class Positions(nn.Module):
    """Base class and the ``none`` variant: no position information at all.

    Args:
        d_model: Model (embedding) size.
        d_k: Per-head query/key size.
        heads: Number of attention heads.
        max_positions: Longest sequence a table-based variant must cover.
    """

    limit: Optional[int] = None
    """The most positions the scheme can encode (None: any number)."""

    def __init__(self, d_model: int, d_k: int, heads: int, max_positions: int):
        super().__init__()
        self.d_model, self.d_k, self.heads, self.max_positions = d_model, d_k, heads, max_positions

    def embed(self, x: Tensor, offset: int = 0) -> Tensor:
        """(B, T, D) embeddings -> (B, T, D) with positions ``offset .. offset+T-1`` added."""
        return x

    def rotate(self, x: Tensor, offset: int = 0) -> Tensor:
        """(B, H, T, d_k) queries or keys -> the same, rotated by their positions."""
        return x

    def bias(self, tq: int, tk: int, offset: int = 0) -> Optional[Tensor]:
        """Float (H, Tq, Tk) score bias for queries at ``offset..`` and keys at ``0..``, or None."""
        return None


def sinusoids(positions: Tensor, d: int) -> Tensor:
    """The paper's encoding (Vaswani et al. 2017, sec. 3.5).

    ``PE(pos, 2i) = sin(pos / 10000^(2i/d))`` and ``PE(pos, 2i+1) = cos(pos / 10000^(2i/d))``.

    Args:
        positions: (T,) integer positions.
        d: Encoding size.

    Returns:
        (T, d) float32 encodings.
    """
    pos = positions.to(torch.float32).unsqueeze(1)  # (T, 1)
    two_i = torch.arange(0, d, 2, dtype=torch.float32, device=positions.device)
    angle = pos / torch.pow(10000.0, two_i / d)  # (T, ceil(d/2))
    pe = torch.zeros(positions.numel(), d, device=positions.device)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d // 2])
    return pe


@register("positions", "sinusoidal")
class SinusoidalPositions(Positions):
    """Fixed sinusoidal absolute positions (Vaswani et al. 2017, sec. 3.5), added to embeddings.

    Positions beyond ``max_positions`` are computed on the fly, so any length works; a trace (``ablate
    export-model``) always computes them, since it would keep the table's slice for every length.
    """

    def __init__(self, d_model: int, d_k: int, heads: int, max_positions: int):
        super().__init__(d_model, d_k, heads, max_positions)
        self.table: Tensor
        self.register_buffer("table", sinusoids(torch.arange(max_positions), d_model), persistent=False)

    def embed(self, x: Tensor, offset: int = 0) -> Tensor:
        end = offset + x.size(1)
        if end <= self.table.size(0) and not torch.jit.is_tracing():
            pe = self.table[offset:end]
        else:
            pe = sinusoids(torch.arange(offset, end, device=x.device), self.d_model)
        return x + pe.to(x.dtype)


@register("positions", "learned")
class LearnedPositions(Positions):
    """Learned absolute position embeddings (Vaswani et al. 2017, Table 3 row E; Gehring et al. 2017)."""

    def __init__(self, d_model: int, d_k: int, heads: int, max_positions: int):
        super().__init__(d_model, d_k, heads, max_positions)
        self.limit = max_positions
        self.weight = nn.Parameter(torch.randn(max_positions, d_model) * d_model**-0.5)

    def embed(self, x: Tensor, offset: int = 0) -> Tensor:
        end = offset + x.size(1)
        if end > self.max_positions:
            raise PositionError(
                f"sequence reaches position {end} but learned positions stop at "
                f"model.max_positions={self.max_positions}; raise model.max_positions"
            )
        return x + self.weight[offset:end].to(x.dtype)


register("positions", "none")(Positions)  # the base class: no position information


@register("positions", "rotary")
class RotaryPositions(Positions):
    """Rotary position embedding, RoPE (Su et al. 2021, eq. 34), applied to queries and keys.

    Dimension pairs ``(j, j + d_k/2)`` are rotated by ``pos * base^(-2j/d_k)``. The paper pairs
    neighbouring dimensions instead; the two differ by a fixed permutation of the projection
    outputs, which the learned projections absorb. Needs an even d_k.

    Args:
        base: the wavelength base, 10000 in the paper (``model.positions_params.base``); a smaller
            base rotates faster, so nearby positions differ more.
    """

    def __init__(self, d_model: int, d_k: int, heads: int, max_positions: int, *, base: float = 10000.0):
        super().__init__(d_model, d_k, heads, max_positions)
        if d_k % 2:
            raise PositionError(f"rotary positions need an even per-head size, got d_k={d_k}; set model.d_k")
        if base <= 1:
            raise PositionError(f"model.positions_params.base={base} must be greater than 1 (the paper's is 10000)")
        inv_freq = 1.0 / torch.pow(base, torch.arange(0, d_k, 2, dtype=torch.float32) / d_k)
        self.inv_freq: Tensor
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rotate(self, x: Tensor, offset: int = 0) -> Tensor:
        T = x.size(-2)
        pos = torch.arange(offset, offset + T, device=x.device, dtype=torch.float32)
        angle = pos[:, None] * self.inv_freq[None, :]  # (T, d_k/2)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def alibi_slopes(heads: int) -> Tensor:
    """Head slopes of Press et al. (2022, sec. 3): the geometric sequence ``2^(-8k/n)``, k = 1..n.

    For a head count n that is not a power of two, the slopes of the closest smaller power of
    two are followed by every other slope of the next power of two (as in the paper's code).
    """

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * k / n) for k in range(1, n + 1)]

    if heads & (heads - 1) == 0:
        return torch.tensor(power_of_two(heads))
    low = 2 ** math.floor(math.log2(heads))
    return torch.tensor(power_of_two(low) + power_of_two(2 * low)[0::2][: heads - low])


@register("positions", "alibi")
class AlibiPositions(Positions):
    """Attention with linear biases, ALiBi (Press et al. 2022, sec. 3), with a direction in the encoder.

    Head h adds ``-m_h (i - j)`` to the score of query i and an earlier (or the same) key j: the
    paper's causal bias, unchanged in decoder self-attention, where later keys are masked. Later
    keys, which only the (non-causal) encoder sees, get ``-m'_h (j - i)`` with a slope of their own:
    ``m'_h = m_h * 2^(4/n)``: for n a power of two, the slopes of the paper's sequence for 2n heads
    that lie between the n used for the left (so each head looks a little further left than right).

    Why two slopes: the symmetric extension ``-m_h |i - j|`` (Press's encoder recipe,
    github.com/ofirpress/attention_with_linear_biases/issues/5; data2vec 2.0, MosaicBERT) cannot tell
    a word's left neighbour from its right one, and with no positions in encoder-decoder attention
    a source and its reverse then give the same translation. Relative biases for bidirectional
    encoders keep the two directions apart: Shaw et al. (2018, sec. 3.2) learn separate embeddings
    for offsets -k..k, T5 (Raffel et al. 2020, sec. 2.1) separate buckets for keys before and after
    the query, and x-transformers' bidirectional learned ALiBi separate slopes for past and future;
    this is the fixed-slope form of the last.
    """

    def __init__(self, d_model: int, d_k: int, heads: int, max_positions: int):
        super().__init__(d_model, d_k, heads, max_positions)
        slopes = alibi_slopes(heads)
        self.slopes: Tensor
        self.future_slopes: Tensor
        self.register_buffer("slopes", slopes, persistent=False)  # (H,) keys to the left (j <= i)
        self.register_buffer("future_slopes", slopes * 2.0 ** (4.0 / heads), persistent=False)  # (H,) j > i

    def bias(self, tq: int, tk: int, offset: int = 0) -> Tensor:
        device = self.slopes.device
        q_pos = torch.arange(offset, offset + tq, device=device)
        k_pos = torch.arange(tk, device=device)
        distance = (q_pos[:, None] - k_pos[None, :]).float()  # (Tq, Tk): i - j, negative for later keys
        past = -self.slopes[:, None, None] * distance.clamp(min=0)
        future = self.future_slopes[:, None, None] * distance.clamp(max=0)
        return past + future  # (H, Tq, Tk)


def build_positions(
    name: str, d_model: int, d_k: int, heads: int, max_positions: int, params: Optional[dict[str, Any]] = None
) -> Positions:
    """Instantiate ``POSITIONS[name]``; an unknown name raises a one-line :class:`PositionError`.

    ``params`` (``model.positions_params``, checked when the config was validated) are keyword
    arguments of the constructor.
    """
    if name not in POSITIONS:
        raise PositionError(f"positions '{name}' is unknown; choose from: {', '.join(POSITIONS)}")
    return POSITIONS[name](d_model, d_k, heads, max_positions, **(params or {}))
