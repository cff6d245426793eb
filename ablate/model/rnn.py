"""RNN encoder-decoder baseline with swappable attention (``model.arch=rnn``).

Bahdanau et al. (2015, "Neural Machine Translation by Jointly Learning to Align and
Translate"), with the attention score taken from the same registry as the Transformer:

* **Encoder** (sec. 3.2): a bidirectional GRU or LSTM over the source embeddings, run on a
  packed sequence so padding never reaches it; annotation ``h_j = [fwd_j; bwd_j]`` (B, S, 2H).
* **Initial decoder state**: per layer ``s_0 = tanh(W_s [fwd_last; bwd_first] + b)`` from both
  directions' final states (Bahdanau A.2.2 uses only ``bwd_first``; Britz et al. 2017 use the
  final states). For an LSTM the cell starts from a linear map of the encoder's final cells.
* **Decoder** (sec. 3.1, A.2.2; d2l ``Seq2SeqAttentionDecoder``): at step i the context
  ``c_i = attention(s_{i-1}, h)`` is computed from the previous top-layer state, then
  ``s_i = RNN([E y_{i-1}; c_i], s_{i-1})``. Attention is a single-head
  :class:`ablate.model.attention.MultiHeadAttention` (query size H, key/value input 2H, d_k = d_v = H)
  with any score from :data:`ablate.model.scores.SCORES` and the same scaling option as the
  Transformer; ``additive`` is Bahdanau's ``v^T tanh(W s + U h)`` (eq. 6). Key projections are
  computed once per source in :meth:`RNNSeq2Seq.encode`.
* **Readout**: a one-layer tanh deep output ``o_i = tanh(W_o [s_i; c_i; E y_{i-1}] + b_o)`` of size
  d_model, then dropout and the (optionally tied) output embedding. This replaces Bahdanau's
  maxout deep output (A.2.2) with tanh, and reads ``s_i`` rather than ``s_{i-1}`` (as d2l and
  Luong et al. 2015, eq. 5).
* **No attention** (``model.attention.score=none``, the "None" row of Britz et al. 2017, Table 6):
  the decoder starts from the encoder's final states, reads ``E y_{i-1}`` only and the readout
  reads ``[s_i; E y_{i-1}]``; the decoder then runs over the whole target in one call.

The model has the interface of :class:`ablate.model.transformer.Transformer`; every tensor in
``enc`` and ``state`` has the batch in dim 0 (recurrent states are stored as (B, layers, H)).
Sources must be right-padded with ``pad_id``.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Optional, Union

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from ablate.config import ModelConfig
from ablate.model.attention import MultiHeadAttention
from ablate.model.embeddings import build_embeddings
from ablate.model.scores import build_score

State = dict[str, Tensor]
Maps = Optional[dict[str, Tensor]]
Hidden = Union[Tensor, tuple[Tensor, Tensor]]  # what nn.GRU / nn.LSTM take and return

CELLS: dict[str, Callable[..., nn.RNNBase]] = {"gru": nn.GRU, "lstm": nn.LSTM}


class Bridge(nn.Module):
    """Per-layer affine map of the encoder's final states to the decoder's initial state.

    Args:
        layers: Number of layers (one weight matrix each).
        d_in: Input size per layer (2H: both directions).
        d_out: Output size (H).
        tanh: Apply tanh (hidden states) or not (LSTM cell states).
    """

    def __init__(self, layers: int, d_in: int, d_out: int, tanh: bool):
        super().__init__()
        bound = 1.0 / math.sqrt(d_in)
        self.weight = nn.Parameter(torch.empty(layers, d_in, d_out).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(layers, 1, d_out))
        self.tanh = tanh

    def forward(self, final: Tensor) -> Tensor:
        """(L, B, d_in) -> (L, B, d_out)."""
        out = torch.baddbmm(self.bias, final, self.weight)
        return torch.tanh(out) if self.tanh else out


class RNNSeq2Seq(nn.Module):
    """Bidirectional RNN encoder, (attentional) RNN decoder and tanh readout, from built parts.

    Args:
        src_embed: Source embedding (d_model; may be ``tgt_embed``).
        tgt_embed: Target embedding (d_model).
        generator: Output projection d_model -> V (its weight may be ``tgt_embed.weight``).
        encoder: ``nn.GRU``/``nn.LSTM``, bidirectional, batch-first, input d_model, hidden H.
        bridges: ``[hidden bridge]`` or, for an LSTM, ``[hidden bridge, cell bridge]``.
        decoder: Same cell type, batch-first, input d_model (+ H with attention), hidden H.
        attention: Single-head attention (query H, keys/values 2H, output H), or None.
        readout: Linear from [s; c; E y] (or [s; E y] without attention) to d_model.
        pad_id: Padding token id.
        dropout: Dropout on both embeddings and on the readout output.
    """

    def __init__(
        self,
        src_embed: nn.Embedding,
        tgt_embed: nn.Embedding,
        generator: nn.Linear,
        encoder: nn.RNNBase,
        bridges: list[Bridge],
        decoder: nn.RNNBase,
        attention: Optional[MultiHeadAttention],
        readout: nn.Linear,
        *,
        pad_id: int,
        dropout: float,
    ):
        super().__init__()
        self.src_embed, self.tgt_embed, self.generator = src_embed, tgt_embed, generator
        self.encoder, self.decoder = encoder, decoder
        self.bridges = nn.ModuleList(bridges)
        self.attention = attention
        self.readout = readout
        self.pad_id = pad_id
        self.lstm = isinstance(decoder, nn.LSTM)
        self.drop = nn.Dropout(dropout)

    # --- recurrent states: (L, B, H) inside the RNN, (B, L, H) in enc/state dicts ---

    def _to_rnn(self, state: State) -> Hidden:
        h = state["hidden"].transpose(0, 1).contiguous()
        return (h, state["cell"].transpose(0, 1).contiguous()) if self.lstm else h

    def _from_rnn(self, hx: Hidden) -> State:
        if isinstance(hx, tuple):  # LSTM: (hidden, cell)
            return {"hidden": hx[0].transpose(0, 1), "cell": hx[1].transpose(0, 1)}
        return {"hidden": hx.transpose(0, 1)}

    def encode(self, src: Tensor, maps: Maps = None) -> dict[str, Any]:
        """Encode a right-padded source batch.

        Args:
            src: (B, S) token ids.
            maps: Unused (the encoder has no attention); kept for interface parity.

        Returns:
            ``{"src_pad": (B, S) bool, "hidden": (B, L, H) initial decoder state, ["cell": (B, L, H)],
            ["kv": {"keys": (B, 1, S, d'), "values": (B, 1, S, H)}]}`` (``kv`` with attention only).
        """
        pad = src.eq(self.pad_id)
        B, S = src.shape
        lengths = (~pad).sum(1).clamp(min=1).cpu()  # an empty row still gets one step
        packed = pack_padded_sequence(self.drop(self.src_embed(src)), lengths, batch_first=True, enforce_sorted=False)
        out, final = self.encoder(packed)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=S)  # (B, S, 2H)
        finals = final if self.lstm else (final,)
        # (2L, B, H) ordered layer-major, direction-minor -> (L, B, 2H) = [fwd at last; bwd at 0]
        joined = [f.view(-1, 2, B, f.size(-1)).transpose(1, 2).reshape(-1, B, 2 * f.size(-1)) for f in finals]
        init = [bridge(f) for bridge, f in zip(self.bridges, joined)]
        enc: dict[str, Any] = dict(self._from_rnn(tuple(init) if self.lstm else init[0]))
        enc["src_pad"] = pad
        if self.attention is not None:
            enc["kv"] = self.attention.project_kv(memory)
        return enc

    def decode(
        self, tgt: Tensor, enc: dict[str, Any], state: Optional[State] = None, maps: Maps = None
    ) -> tuple[Tensor, State]:
        """Decoder logits for target positions.

        Args:
            tgt: (B, t) target ids: the whole prefix (from BOS) when ``state`` is None, else only new tokens.
            enc: Output of :meth:`encode`.
            state: Output of a previous call, or None to start from ``enc``'s initial state.
            maps: If a dict, ``maps["cross"]`` receives the attention weights (B, 1, t, S).

        Returns:
            Logits (B, t, V) and the new state ``{"hidden": (B, L, H), ["cell": (B, L, H)]}``.
        """
        readout, state = self._decode_states(tgt, enc, state, maps)
        return self.generator(readout), state

    def _decode_states(
        self, tgt: Tensor, enc: dict[str, Any], state: Optional[State], maps: Maps = None
    ) -> tuple[Tensor, State]:
        """What :meth:`decode` projects to logits: the readout (B, t, E), and the new state."""
        emb = self.drop(self.tgt_embed(tgt))  # (B, t, E)
        hx = self._to_rnn(enc if state is None else state)
        if self.attention is None:
            out, hx = self.decoder(emb, hx)  # (B, t, H): no input feeding, one call
            features = [out, emb]
        else:
            outs, contexts, weights = [], [], []
            for i in range(tgt.size(1)):
                query = (hx[0] if self.lstm else hx)[-1].unsqueeze(1)  # (B, 1, H): s_{i-1}, top layer
                context, w = self.attention(
                    query, enc["kv"], key_padding_mask=enc["src_pad"], need_weights=maps is not None
                )  # (B, 1, H)
                out, hx = self.decoder(torch.cat((emb[:, i : i + 1], context), dim=-1), hx)
                outs.append(out)
                contexts.append(context)
                weights.append(w)
            features = [torch.cat(outs, 1), torch.cat(contexts, 1), emb]
            if maps is not None:
                maps["cross"] = torch.cat(weights, dim=2)  # (B, 1, t, S)
        readout = self.drop(torch.tanh(self.readout(torch.cat(features, dim=-1))))  # (B, t, E)
        return readout, self._from_rnn(hx)

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
        """Teacher-forced logits: (B, S), (B, T) -> (B, T, V); ``src_padded=False``: no source row is padded;
        ``rows`` (N,): indices into the flattened (B*T) target positions, whose logits (N, V) alone are computed;
        ``src_rows``, the non-padding source positions, is not needed (the packed GRU skips the padding);
        ``enc``: :meth:`encode`'s output for ``src`` where the caller has it (not encoded again; used as it is)."""
        if enc is None:
            enc = self.encode(src)
            if not src_padded:
                enc["src_pad"] = None  # attention needs no padding mask
        readout = self._decode_states(tgt_in, enc, None)[0]  # (B, T, E)
        if rows is not None:
            readout = readout.reshape(-1, readout.size(-1)).index_select(0, rows)  # (N, E)
        return self.generator(readout)

    @torch.no_grad()
    def attention_maps(self, src: Tensor, tgt_in: Tensor) -> dict[str, Tensor]:
        """``{"cross": (B, 1, T, S)}`` alignment weights (Bahdanau Fig. 3); ``{}`` without attention."""
        maps: dict[str, Tensor] = {}
        self.decode(tgt_in, self.encode(src), maps=maps if self.attention is not None else None)
        return maps


def build_rnn(
    cfg: ModelConfig, src_vocab: int, tgt_vocab: int, pad_id: int = 0, shared_vocab: bool = True
) -> RNNSeq2Seq:
    """The RNN baseline: embeddings of size ``cfg.d_model``, ``cfg.rnn`` recurrent sizes.

    The score is ``cfg.attention.cross_score`` or else ``cfg.attention.score`` (``none`` drops
    attention); ``cfg.attention.scale`` and ``cfg.attention_dropout`` apply as in the Transformer (so
    the default ``scale=auto`` leaves Bahdanau's additive score unscaled).
    ``cfg.tie_embeddings`` ties the output layer to the target embedding and, with a shared
    vocabulary, the source embedding too. Transformer-only fields (heads, d_ff, positions, ...)
    are ignored.
    """
    d, H, L = cfg.d_model, cfg.rnn.hidden, cfg.rnn.layers
    cell = CELLS[cfg.rnn.cell]
    inner_dropout = cfg.dropout if L > 1 else 0.0
    score_name = cfg.attention.cross_score or cfg.attention.score
    attention = None
    if score_name != "none":
        score = build_score(score_name, H, 1, cfg.attention)
        attention = MultiHeadAttention(
            H, 1, score, d_k=H, d_v=H, d_kv=2 * H, scale=cfg.attention.scale, dropout=cfg.attention_dropout
        )
    context = 0 if attention is None else H

    src_embed, tgt_embed, generator = build_embeddings(
        d, src_vocab, tgt_vocab, pad_id, cfg.tie_embeddings, shared_vocab
    )
    for table in {id(t): t for t in (src_embed, tgt_embed)}.values():
        nn.init.normal_(table.weight, 0.0, d**-0.5)  # as the Transformer (fairseq); pad row zero
        with torch.no_grad():
            table.weight[pad_id].zero_()

    bridges = [Bridge(L, 2 * H, H, tanh=True)]
    if cfg.rnn.cell == "lstm":
        bridges.append(Bridge(L, 2 * H, H, tanh=False))
    return RNNSeq2Seq(
        src_embed,
        tgt_embed,
        generator,
        encoder=cell(d, H, L, batch_first=True, bidirectional=True, dropout=inner_dropout),
        bridges=bridges,
        decoder=cell(d + context, H, L, batch_first=True, dropout=inner_dropout),
        attention=attention,
        readout=nn.Linear(H + context + d, d),
        pad_id=pad_id,
        dropout=cfg.dropout,
    )
