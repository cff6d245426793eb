"""Multi-head attention with an injected score (Vaswani et al. 2017, sec. 3.2.2).

One module owns the query/key/value/output projections, positions inside attention (rotary,
ALiBi), masking, scaling, softmax, dropout and head merging; only the score kernel is swapped
(:mod:`ablate.model.scores`). Keys and values are projected by :meth:`MultiHeadAttention.project_kv`
into a plain dict ``{"keys": (B, H, Tk, d'), "values": (B, H, Tk, d_v)}`` that the caller keeps:
encoder-decoder attention projects the source once, self-attention appends new positions to a
cache passed in and returned (:meth:`MultiHeadAttention.self_attend`). Nothing is stored on the
module between calls.

Fast path: when the score is a dot product (``dot``, ``general``, ``gaussian``; see
:meth:`ablate.model.scores.Score.as_dot`) and no weights are requested, attention runs through
``torch.nn.functional.scaled_dot_product_attention`` with ``scale=`` the configured factor.

Packed rows: in a teacher-forced training step the residual stream holds only the non-padding positions
of the batch, (N, D) (:class:`Packing`), so the projections, feed-forward and norms skip the padding; attention
alone unpacks them into the padded (B, T, .) layout, zeros at padding, and packs its output again.
"""

from __future__ import annotations

import math
from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ablate.errors import AblateError
from ablate.model.positions import Positions
from ablate.model.scores import Score

KV = dict[str, Tensor]


class Packing:
    """The non-padding positions of a (B, T) batch as ``rows`` (N,) of its flattening (ascending).

    Each sequence's positions must be a prefix of it (right padding), so that no kept query attends to a
    dropped position except through a mask: a key padding mask (encoder, encoder-decoder attention) or
    causality (a decoder's dropped positions come after its kept ones).

    Args:
        rows: (N,) indices into the flattened (B * T) positions, e.g.
            :func:`ablate.training.module.target_rows`.
        batch: B.
        length: T.
    """

    def __init__(self, rows: Tensor, batch: int, length: int):
        self.rows, self.batch, self.length = rows, batch, length
        self._dropped: Optional[Tensor] = None

    @property
    def dropped(self) -> Tensor:
        """(B * T - N,) the indices of the dropped positions, ascending (computed once, without a host read)."""
        if self._dropped is None:
            total, n = self.batch * self.length, self.rows.size(0)
            if n == total:  # nothing dropped (a shape the host knows: no device read)
                self._dropped = torch.empty(0, dtype=self.rows.dtype, device=self.rows.device)
            else:
                kept = torch.zeros(total, dtype=torch.bool, device=self.rows.device).index_fill_(0, self.rows, True)
                self._dropped = torch.nonzero_static(~kept, size=total - n).squeeze(1)
        return self._dropped

    def pack(self, x: Tensor) -> Tensor:
        """(B, T, C) -> (N, C): the rows at the kept positions."""
        return x.reshape(-1, x.size(-1)).index_select(0, self.rows)

    def unpack(self, x: Tensor) -> Tensor:
        """(N, C) -> (B, T, C), zeros at the dropped positions.

        Each row of the result is written once: zeros into the dropped rows, then ``x`` into the kept ones (a
        zero-filled buffer would write the kept rows twice); the backward pass gathers the kept rows of the
        gradient (the buffer itself needs none)."""
        full = x.new_empty(self.batch * self.length, x.size(-1)).index_fill_(0, self.dropped, 0.0)
        return full.index_copy_(0, self.rows, x).view(self.batch, self.length, -1)


class AttentionError(AblateError):
    """Inconsistent attention sizes."""


def resolve_scale(scale: Union[str, bool, float], d_k: int, score: Union[Score, type[Score]]) -> float:
    """The factor applied to the scores of ``score``.

    ``"auto"`` -> the score's :attr:`~ablate.model.scores.Score.paper_scale` (1/sqrt(d_k) for the
    dot-product family, 1 for additive); ``True`` -> 1/sqrt(d_k) (Vaswani et al. 2017, eq. 1);
    ``False`` -> 1; a number -> itself.
    """
    if scale == "auto":
        scale = score.paper_scale
    if scale is True:
        return 1.0 / math.sqrt(d_k)
    if scale is False:
        return 1.0
    return float(scale)


class MultiHeadAttention(nn.Module):
    """Multi-head attention with a swappable score.

    Args:
        d_model: Query input size, and output size.
        heads: Number of heads (1 gives single-head attention, e.g. Bahdanau-style RNNs).
        score: The score kernel, built with the same ``d_k`` and ``heads``.
        d_k: Per-head query/key size (default ``d_model // heads``).
        d_v: Per-head value size (default ``d_k``).
        d_kv: Key/value input size (default ``d_model``), e.g. a bidirectional RNN encoder's.
        scale: Score scaling, see :func:`resolve_scale`; the factor used is ``self.scaling``.
        dropout: Dropout on the attention weights.
        bias: Whether the projections have biases.
    """

    def __init__(
        self,
        d_model: int,
        heads: int,
        score: Score,
        *,
        d_k: Optional[int] = None,
        d_v: Optional[int] = None,
        d_kv: Optional[int] = None,
        scale: Union[str, bool, float] = "auto",
        dropout: float = 0.0,
        bias: bool = True,
    ):
        super().__init__()
        if d_k is None:
            if d_model % heads:
                raise AttentionError(f"heads={heads} does not divide d_model={d_model}; set d_k explicitly")
            d_k = d_model // heads
        d_v = d_v or d_k
        d_kv = d_kv or d_model
        if score.d_k != d_k or score.heads != heads:
            raise AttentionError(
                f"score built for d_k={score.d_k}, heads={score.heads} but attention has d_k={d_k}, heads={heads}"
            )
        self.heads, self.d_k, self.d_v = heads, d_k, d_v
        self.q_proj = nn.Linear(d_model, heads * d_k, bias=bias)
        self.k_proj = nn.Linear(d_kv, heads * d_k, bias=bias)
        self.v_proj = nn.Linear(d_kv, heads * d_v, bias=bias)
        self.out_proj = nn.Linear(heads * d_v, d_model, bias=bias)
        self.score = score
        self.scaling = resolve_scale(scale, d_k, score)
        self.dropout = dropout

    def _split(self, x: Tensor, d: int, packing: Optional[Packing] = None) -> Tensor:
        """Projected (B, T, H * d), or packed (N, H * d) rows of ``packing``, -> per head (B, H, T, d)."""
        if packing is not None:
            x = packing.unpack(x)
        B, T, _ = x.shape
        return x.view(B, T, self.heads, d).transpose(1, 2)  # (B, H, T, d)

    def project_kv(
        self, x: Tensor, positions: Optional[Positions] = None, offset: int = 0, packing: Optional[Packing] = None
    ) -> KV:
        """Project keys and values once; the result is what :meth:`forward` attends over.

        Args:
            x: Key/value input, (B, Tk, d_kv), or (N, d_kv) rows of ``packing``.
            positions: Rotates keys for rotary positions (self-attention only).
            offset: Absolute position of ``x[:, 0]``.
            packing: How ``x`` is packed (None: not packed); keys and values are unpacked, zeros at padding.

        Returns:
            ``{"keys": (B, H, Tk, d'), "values": (B, H, Tk, d_v)}``, keys already prepared by the score.
        """
        k = self._split(self.k_proj(x), self.d_k, packing)
        if positions is not None:
            k = positions.rotate(k, offset)
        return {"keys": self.score.prepare_keys(k), "values": self._split(self.v_proj(x), self.d_v, packing)}

    def forward(
        self,
        query: Tensor,
        kv: KV,
        *,
        key_padding_mask: Optional[Tensor] = None,
        causal: bool = False,
        positions: Optional[Positions] = None,
        offset: int = 0,
        need_weights: bool = False,
        packing: Optional[Packing] = None,
    ) -> tuple[Tensor, Optional[Tensor]]:
        """Attend from ``query`` over projected keys/values.

        Args:
            query: (B, Tq, d_model), or (N, d_model) rows of ``packing``.
            kv: From :meth:`project_kv` (possibly extended by a cache); keys sit at positions 0..Tk-1.
            key_padding_mask: (B, Tk) bool, True at padding keys.
            causal: Forbid query ``i`` (absolute position ``offset + i``) to see keys after it.
            positions: Rotates queries / adds a score bias (self-attention only).
            offset: Absolute position of the first query.
            need_weights: Also return the attention weights (slow path).
            packing: How ``query`` is packed (None: not packed); the output is packed alike.

        Returns:
            Output (B, Tq, d_model), or (N, d_model) with ``packing``, and, if requested, weights
            (B, H, Tq, Tk), else None.
        """
        keys, values = kv["keys"], kv["values"]
        q = self._split(self.q_proj(query), self.d_k, packing)
        if positions is not None:
            q = positions.rotate(q, offset)
        Tq, Tk = q.size(2), keys.size(2)
        pos_bias = positions.bias(Tq, Tk, offset) if positions is not None else None
        dot = None if need_weights else self.score.as_dot(q, keys)
        if dot is not None:
            out, weights = self._fused(*dot, values, key_padding_mask, causal, offset, pos_bias), None
        else:
            out, weights = self._explicit(q, keys, values, key_padding_mask, causal, offset, pos_bias)
        B = out.size(0)
        out = out.transpose(1, 2).reshape(B, Tq, self.heads * self.d_v)
        if packing is not None:
            out = packing.pack(out)  # (N, H * d_v)
        return self.out_proj(out), (weights if need_weights else None)

    def _fused(
        self,
        q: Tensor,
        k: Tensor,
        key_bias: Optional[Tensor],
        values: Tensor,
        key_padding_mask: Optional[Tensor],
        causal: bool,
        offset: int,
        pos_bias: Optional[Tensor],
    ) -> Tensor:
        """``softmax(s q k^T + biases + mask) V`` through the fused SDPA kernel: (B, H, Tq, d_v).

        The mask is the lightest that is exact: none for an unpadded, unbiased batch (any backend, flash
        included), ``is_causal`` for plain causal self-attention, a boolean mask (True: may attend) for
        padding without biases, a float mask only where a bias (ALiBi, Gaussian) is added.
        """
        tq, tk = q.size(2), k.size(2)
        biases = [pos_bias, None if key_bias is None else key_bias * self.scaling]
        unbiased = all(b is None for b in biases)
        pure_causal = causal and tq == tk and offset == 0 and key_padding_mask is None and unbiased
        mask = None
        if unbiased and not pure_causal:
            blocked = self._blocked(tq, tk, key_padding_mask, causal, offset, q.device)
            mask = None if blocked is None else ~blocked
        elif not unbiased:
            mask = self._mask(tq, tk, key_padding_mask, causal, offset, biases, q.device)
            mask = None if mask is None else mask.to(q.dtype)
        return F.scaled_dot_product_attention(
            q,
            k,
            values,
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=bool(pure_causal and tq > 1),  # a plain bool when traced, where sizes are tensors
            scale=self.scaling,
        )

    def _explicit(
        self,
        q: Tensor,
        keys: Tensor,
        values: Tensor,
        key_padding_mask: Optional[Tensor],
        causal: bool,
        offset: int,
        pos_bias: Optional[Tensor],
    ) -> tuple[Tensor, Tensor]:
        """Scores from the score module, then masked softmax: output (B, H, Tq, d_v), weights (B, H, Tq, Tk)."""
        scores = self.score(q, keys)
        if self.scaling != 1.0:
            scores = scores * self.scaling
        mask = self._mask(q.size(2), keys.size(2), key_padding_mask, causal, offset, [pos_bias], q.device)
        if mask is not None:
            scores = scores + mask
        weights = torch.softmax(scores.float(), dim=-1).to(values.dtype)
        return F.dropout(weights, self.dropout, self.training) @ values, weights

    def self_attend(
        self,
        x: Tensor,
        cache: Optional[KV] = None,
        *,
        key_padding_mask: Optional[Tensor] = None,
        causal: bool = False,
        positions: Optional[Positions] = None,
        need_weights: bool = False,
        packing: Optional[Packing] = None,
    ) -> tuple[Tensor, KV, Optional[Tensor]]:
        """Self-attention over ``x``, appended to ``cache`` (keys/values of earlier positions).

        Args:
            x: (B, T, d_model) the new positions (all of them when ``cache`` is None), or (N, d_model) rows
                of ``packing`` (without a cache).
            cache: Keys/values of the previous positions, or None.
            key_padding_mask: (B, Tk) over all keys (cached + new), True at padding.
            causal, positions, need_weights, packing: As in :meth:`forward`.

        Returns:
            Output (B, T, d_model) (or packed), the extended cache (new dict), weights or None.
        """
        offset = 0 if cache is None else cache["values"].size(2)
        kv = self.project_kv(x, positions, offset, packing)
        if cache is not None:
            kv = {name: torch.cat((cache[name], kv[name]), dim=2) for name in kv}
        out, weights = self(
            x,
            kv,
            key_padding_mask=key_padding_mask,
            causal=causal,
            positions=positions,
            offset=offset,
            need_weights=need_weights,
            packing=packing,
        )
        return out, kv, weights

    @staticmethod
    def _mask(
        tq: int,
        tk: int,
        key_padding_mask: Optional[Tensor],
        causal: bool,
        offset: int,
        biases: list[Optional[Tensor]],
        device: torch.device,
    ) -> Optional[Tensor]:
        """Additive float mask broadcastable to (B, H, Tq, Tk): biases summed, -inf where blocked."""
        mask = None
        for b in biases:
            if b is not None:
                mask = b.float() if mask is None else mask + b.float()
        blocked = MultiHeadAttention._blocked(tq, tk, key_padding_mask, causal, offset, device)
        if blocked is None:
            return mask
        if mask is None:
            mask = torch.zeros(blocked.shape, device=blocked.device)
        return mask.masked_fill(blocked, float("-inf"))

    @staticmethod
    def _blocked(
        tq: int, tk: int, key_padding_mask: Optional[Tensor], causal: bool, offset: int, device: torch.device
    ) -> Optional[Tensor]:
        """Bool, broadcastable to (B, H, Tq, Tk): True where a query may not see a key (None: nowhere)."""
        blocked = None
        if causal and offset < tk - 1:
            q_pos = torch.arange(offset, offset + tq, device=device)
            blocked = torch.arange(tk, device=device)[None, :] > q_pos[:, None]  # (Tq, Tk)
        if key_padding_mask is not None:
            pad = key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk)
            blocked = pad if blocked is None else (blocked | pad)
        return blocked
