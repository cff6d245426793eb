"""Encoder-decoder Transformer (Vaswani et al. 2017, sec. 3) built from injected parts.

The model exposes the interface that decoding and training rely on (the RNN baseline
implements the same)::

    model.pad_id
    model(src (B, S), tgt_in (B, T), *, src_padded=True, rows=None, src_rows=None) -> logits (B, T, V), or (N, V)
    model.encode(src) -> enc                          # dict, batch in dim 0 of every tensor
    model.decode(tgt, enc, state=None) -> (logits, state)

``enc`` holds the encoder output, the source padding mask and, per decoder layer, the
encoder-decoder keys/values projected once per source. ``state`` holds the decoder
self-attention caches and the number of decoded positions (an int); with a state, ``tgt``
holds only the new tokens. Every tensor in ``enc`` and ``state`` has the batch in dim 0, so
beam search reorders them generically. ``src_padded=False`` says that no source row is padded (the host
knows it from the lengths: :func:`ablate.data.datamodule.collate`), so attention runs without a padding
mask, which lets ``scaled_dot_product_attention`` pick its flash kernel. ``rows`` (N,) are the non-padding
positions of the flattened (B*T) targets and ``src_rows`` those of the sources (training passes them,
:func:`ablate.training.module.sequence_loss`): the residual streams hold those positions alone
(:class:`~ablate.model.attention.Packing`), so the projections, feed-forward layers, norms, dropout and the
output projection with its log-softmax (the largest terms of a small model's step) skip the padding; only
attention sees the padded layout.
"""

from __future__ import annotations

import math
import typing
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ablate.model.attention import KV, MultiHeadAttention, Packing
from ablate.model.positions import Positions

State = dict[str, Any]
Maps = Optional[dict[str, Tensor]]


class FeedForward(nn.Module):
    """Position-wise ``max(0, x W1 + b1) W2 + b2`` (Vaswani et al. 2017, eq. 2)."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.inner = nn.Linear(d_model, d_ff)
        self.outer = nn.Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        """(..., D) -> (..., D); the ReLU overwrites the inner projection (which its backward does not read)."""
        return self.outer(torch.relu_(self.inner(x)))


class Dropout(nn.Module):
    """Inverted dropout (Srivastava et al. 2014, sec. 4): zero each element with probability ``p``, scale
    the others by 1 / (1 - p); the identity in eval mode.

    On a CPU the keep mask is ``uniform >= p`` (one ``rand_like``; float32 uniforms for a half-precision ``x``),
    which costs about 60 % of the ``bernoulli_`` that ``nn.Dropout`` draws there; elsewhere it is
    ``nn.functional.dropout`` (on a GPU one fused kernel).
    """

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def extra_repr(self) -> str:
        return f"p={self.p}"

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu" or self.p >= 1.0:
            return F.dropout(x, self.p, True)
        # 0 or 1 / (1 - p); drawn in float32 for a half-precision x, whose uniforms (bf16: steps of 2^-8) miss p
        uniform = (
            torch.rand_like(x) if x.dtype in (torch.float32, torch.float64) else torch.rand(x.shape, device=x.device)
        )
        return x * uniform.ge_(self.p).mul_(1.0 / (1.0 - self.p)).to(x.dtype)


class _Residual(nn.Module):
    """Residual connection with LayerNorm after (post-norm, the paper's sec. 5.4) or before (pre-norm)."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.drop = Dropout(dropout)
        self.pre_norm = pre_norm

    def inp(self, x: Tensor) -> Tensor:
        """What the sublayer reads."""
        return self.norm(x) if self.pre_norm else x

    def out(self, x: Tensor, y: Tensor) -> Tensor:
        """Combine the residual stream ``x`` with the sublayer output ``y``."""
        x = x + self.drop(y)
        return x if self.pre_norm else self.norm(x)


class EncoderLayer(nn.Module):
    """Self-attention and feed-forward sublayers, each wrapped in a residual."""

    def __init__(self, self_attn: MultiHeadAttention, ffn: FeedForward, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.self_attn, self.ffn = self_attn, ffn
        self.res_attn = _Residual(d_model, dropout, pre_norm)
        self.res_ffn = _Residual(d_model, dropout, pre_norm)

    def forward(
        self,
        x: Tensor,
        pad: Optional[Tensor],
        positions: Positions,
        maps: Maps = None,
        name: str = "",
        packing: Optional[Packing] = None,
    ) -> Tensor:
        """(B, S, D) -> (B, S, D), or (N, D) rows of ``packing``; ``pad`` (B, S) is True at source padding
        (None: no padding)."""
        y, _, w = self.self_attn.self_attend(
            self.res_attn.inp(x),
            key_padding_mask=pad,
            positions=positions,
            need_weights=maps is not None,
            packing=packing,
        )
        if maps is not None and w is not None:
            maps[name] = w
        x = self.res_attn.out(x, y)
        return self.res_ffn.out(x, self.ffn(self.res_ffn.inp(x)))


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention and feed-forward sublayers."""

    def __init__(
        self,
        self_attn: MultiHeadAttention,
        cross_attn: MultiHeadAttention,
        ffn: FeedForward,
        d_model: int,
        dropout: float,
        pre_norm: bool,
    ):
        super().__init__()
        self.self_attn, self.cross_attn, self.ffn = self_attn, cross_attn, ffn
        self.res_self = _Residual(d_model, dropout, pre_norm)
        self.res_cross = _Residual(d_model, dropout, pre_norm)
        self.res_ffn = _Residual(d_model, dropout, pre_norm)

    def forward(
        self,
        x: Tensor,
        memory_kv: KV,
        src_pad: Optional[Tensor],
        positions: Positions,
        cache: Optional[KV],
        maps: Maps = None,
        name: str = "",
        packing: Optional[Packing] = None,
    ) -> tuple[Tensor, KV]:
        """(B, t, D) new target positions, or (N, D) rows of ``packing`` (no cache) -> the same shape and the
        extended self-attention cache."""
        want = maps is not None
        y, cache, w_self = self.self_attn.self_attend(
            self.res_self.inp(x), cache, causal=True, positions=positions, need_weights=want, packing=packing
        )
        x = self.res_self.out(x, y)
        y, w_cross = self.cross_attn(
            self.res_cross.inp(x), memory_kv, key_padding_mask=src_pad, need_weights=want, packing=packing
        )
        x = self.res_cross.out(x, y)
        if maps is not None and w_self is not None and w_cross is not None:
            maps[f"{name}.self"], maps[f"{name}.cross"] = w_self, w_cross
        return self.res_ffn.out(x, self.ffn(self.res_ffn.inp(x))), cache


class Transformer(nn.Module):
    """Encoder-decoder Transformer assembled from built parts.

    Args:
        src_embed: Source token embedding (may be the same module as ``tgt_embed``).
        tgt_embed: Target token embedding.
        generator: Output projection D -> V (its weight may be ``tgt_embed.weight``).
        src_positions: Position scheme of the encoder (every layer).
        tgt_positions: Position scheme of the decoder; the same module as ``src_positions`` when
            they share parameters (one learned table for both sides).
        encoder: Encoder layers.
        decoder: Decoder layers.
        pad_id: Padding token id.
        dropout: Dropout on embeddings + positions.
        pre_norm: Whether layers are pre-norm; then final LayerNorms close both stacks.
    """

    def __init__(
        self,
        src_embed: nn.Embedding,
        tgt_embed: nn.Embedding,
        generator: nn.Linear,
        src_positions: Positions,
        tgt_positions: Positions,
        encoder: list[EncoderLayer],
        decoder: list[DecoderLayer],
        *,
        pad_id: int,
        dropout: float,
        pre_norm: bool,
    ):
        super().__init__()
        self.src_embed, self.tgt_embed, self.generator = src_embed, tgt_embed, generator
        self.src_positions, self.tgt_positions = src_positions, tgt_positions
        self.encoder = nn.ModuleList(encoder)
        self.decoder = nn.ModuleList(decoder)
        self.pad_id = pad_id
        self.d_model = tgt_embed.embedding_dim
        self.drop = Dropout(dropout)
        self.encoder_norm = nn.LayerNorm(self.d_model) if pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(self.d_model) if pre_norm else nn.Identity()

    @property
    def positions(self) -> Positions:
        """The encoder's position scheme, for readers that show one (``ablate.report.attention_maps``)."""
        return self.src_positions

    @property
    def max_input(self) -> Optional[int]:
        """The longest source the encoder can position (None: any): one less than the source positions' limit,
        for the EOS every source ends with."""
        limit = getattr(self.src_positions, "limit", None)
        return None if limit is None else limit - 1

    @property
    def max_output(self) -> Optional[int]:
        """The longest output the decoder can position (None: any): one less than the target positions' limit,
        as beam search feeds the EOS it forces at the length limit."""
        limit = getattr(self.tgt_positions, "limit", None)  # a plugin scheme may be duck-typed
        return None if limit is None else limit - 1

    def _embed(self, table: nn.Embedding, positions: Positions, tokens: Tensor, offset: int) -> Tensor:
        x = table(tokens) * math.sqrt(self.d_model)  # sec. 3.4
        return self.drop(positions.embed(x, offset))

    def encode(
        self, src: Tensor, maps: Maps = None, padded: bool = True, packing: Optional[Packing] = None
    ) -> dict[str, Any]:
        """Encode a padded source batch.

        Args:
            src: (B, S) token ids.
            maps: If a dict, attention weights are stored in it (see :meth:`attention_maps`).
            padded: False when no row of ``src`` holds padding: no padding mask is built.
            packing: The non-padding positions of ``src``: the encoder computes those alone (None: all).

        Returns:
            ``{"memory": (B, S, D) (or (N, D) rows of ``packing``), "src_pad": (B, S) bool or None (not
            ``padded``), "cross": [per decoder layer {"keys": (B, H, S, d'), "values": (B, H, S, d_v)}]}``.
        """
        pad = src.eq(self.pad_id) if padded else None
        x = self._embed(self.src_embed, self.src_positions, src, 0)
        if packing is not None:
            x = packing.pack(x)  # (N, D)
        for i, layer in enumerate(self.encoder):
            x = layer(x, pad, self.src_positions, maps, f"encoder.{i}", packing)
        memory = self.encoder_norm(x)
        cross = [
            typing.cast(DecoderLayer, layer).cross_attn.project_kv(memory, packing=packing) for layer in self.decoder
        ]
        return {"memory": memory, "src_pad": pad, "cross": cross}

    def decode(
        self, tgt: Tensor, enc: dict[str, Any], state: Optional[State] = None, maps: Maps = None
    ) -> tuple[Tensor, State]:
        """Decoder logits for target positions.

        Args:
            tgt: (B, t) target ids: the whole prefix when ``state`` is None, else only new tokens.
            enc: Output of :meth:`encode`.
            state: Output of a previous call, or None.
            maps: If a dict, attention weights are stored in it.

        Returns:
            Logits (B, t, V) and the new state ``{"step": int, "layers": [KV per layer]}``.
        """
        states, state = self._decode_states(tgt, enc, state, maps)
        return self.generator(states), state

    def _decode_states(
        self,
        tgt: Tensor,
        enc: dict[str, Any],
        state: Optional[State],
        maps: Maps = None,
        packing: Optional[Packing] = None,
    ) -> tuple[Tensor, State]:
        """What :meth:`decode` projects to logits: the final decoder states (B, t, D), or the (N, D) rows of
        ``packing`` (no ``state``), and the new state."""
        offset = 0 if state is None else state["step"]
        x = self._embed(self.tgt_embed, self.tgt_positions, tgt, offset)
        if packing is not None:
            x = packing.pack(x)  # (N, D)
        caches = []
        for i, layer in enumerate(self.decoder):
            cache = None if state is None else state["layers"][i]
            x, cache = layer(
                x, enc["cross"][i], enc["src_pad"], self.tgt_positions, cache, maps, f"decoder.{i}", packing
            )
            caches.append(cache)
        return self.decoder_norm(x), {"step": offset + tgt.size(1), "layers": caches}

    def forward(
        self,
        src: Tensor,
        tgt_in: Tensor,
        *,
        src_padded: bool = True,
        rows: Optional[Tensor] = None,
        src_rows: Optional[Tensor] = None,
        enc: Optional[dict[str, Any]] = None,
    ) -> Tensor:
        """Teacher-forced logits.

        Args:
            src: (B, S) source ids.
            tgt_in: (B, T) target ids, BOS first.
            src_padded: False when no source row is padded (no padding mask).
            rows: (N,) indices into the flattened (B*T) target positions whose logits are wanted, or None:
                the non-padding ones (:func:`ablate.training.module.target_rows`), or any set holding, with
                each position, the earlier ones of its sequence. The decoder computes these positions alone,
                so their logits equal those of the full (B, T, V).
            src_rows: (M,) the non-padding positions of the flattened (B*S) sources, or None: the encoder
                computes these alone (needs ``src_padded``: the padding mask hides the rest).
            enc: :meth:`encode`'s output for ``src``, where the caller has it (validation decodes from it too):
                the encoder is not run again, and ``src_padded`` and ``src_rows`` are not read.

        Returns:
            Logits (B, T, V), or (N, V) of ``rows`` only.
        """
        if enc is None:
            B, S = src.shape
            src_packing = Packing(src_rows, B, S) if src_rows is not None and src_padded else None
            enc = self.encode(src, padded=src_padded, packing=src_packing)
        packing = None if rows is None else Packing(rows, *tgt_in.shape)
        states = self._decode_states(tgt_in, enc, None, packing=packing)[0]  # (B, T, D) or (N, D)
        return self.generator(states)

    @torch.no_grad()
    def attention_maps(self, src: Tensor, tgt_in: Tensor) -> dict[str, Tensor]:
        """Attention weights of every site, keyed ``encoder.{i}``, ``decoder.{i}.self``, ``decoder.{i}.cross``.

        Each value is (B, H, Tq, Tk). Runs the slow (explicit softmax) path; call in eval mode.
        """
        maps: dict[str, Tensor] = {}
        self.decode(tgt_in, self.encode(src, maps), maps=maps)
        return maps


def init_transformer(model: Transformer) -> None:
    """Xavier-uniform linear weights and zero biases; embeddings N(0, d^-1/2) with a zero pad row (as fairseq)."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    std = model.d_model**-0.5
    for weight in {id(p): p for p in (model.src_embed.weight, model.tgt_embed.weight, model.generator.weight)}.values():
        nn.init.normal_(weight, 0.0, std)
    with torch.no_grad():
        for table in (model.src_embed, model.tgt_embed):
            if table.padding_idx is not None:
                table.weight[table.padding_idx].zero_()
