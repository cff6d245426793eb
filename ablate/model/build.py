"""Model builders: the one place that reads :class:`ablate.config.ModelConfig`.

``build_model`` dispatches on ``cfg.arch`` through :data:`ARCHS`; another architecture is one
builder function with the signature of :func:`build_transformer` and ``@register("arch", "<name>")``.
"""

from __future__ import annotations

from typing import Callable

from torch import nn

from ablate.config import ModelConfig, head_dims
from ablate.model.attention import MultiHeadAttention, resolve_scale
from ablate.model.embeddings import build_embeddings
from ablate.model.errors import ModelBuildError
from ablate.model.positions import Positions, build_positions
from ablate.model.rnn import build_rnn
from ablate.model.scores import SCORES, build_score
from ablate.model.transformer import DecoderLayer, EncoderLayer, FeedForward, Transformer, init_transformer
from ablate.registry import register, table

Builder = Callable[[ModelConfig, int, int, int, bool], nn.Module]

ARCHS: dict[str, Builder] = table("arch")
"""Name -> builder, filled by ``@register("arch", name)``."""


@register("arch", "transformer")
def build_transformer(
    cfg: ModelConfig, src_vocab: int, tgt_vocab: int, pad_id: int = 0, shared_vocab: bool = True
) -> Transformer:
    """The encoder-decoder Transformer of Vaswani et al. (2017) with the configured ablations."""
    d, heads = cfg.d_model, cfg.heads
    d_k, d_v = head_dims(cfg)
    att = cfg.attention
    pre_norm = cfg.norm == "pre"

    def attention(score_name: str) -> MultiHeadAttention:
        return MultiHeadAttention(
            d,
            heads,
            build_score(score_name, d_k, heads, att),
            d_k=d_k,
            d_v=d_v,
            scale=att.scale,
            dropout=cfg.attention_dropout,
        )

    cross_score = att.cross_score or att.score
    encoder = [
        EncoderLayer(attention(att.score), FeedForward(d, cfg.d_ff), d, cfg.dropout, pre_norm)
        for _ in range(cfg.encoder_layers or cfg.layers)
    ]
    decoder = [
        DecoderLayer(attention(att.score), attention(cross_score), FeedForward(d, cfg.d_ff), d, cfg.dropout, pre_norm)
        for _ in range(cfg.decoder_layers or cfg.layers)
    ]

    src_embed, tgt_embed, generator = build_embeddings(
        d, src_vocab, tgt_vocab, pad_id, cfg.tie_embeddings, shared_vocab
    )

    def positions() -> Positions:
        return build_positions(cfg.positions, d, d_k, heads, cfg.max_positions, cfg.positions_params)

    src_positions = positions()
    tgt_positions = src_positions if cfg.share_positions else positions()
    model = Transformer(
        src_embed,
        tgt_embed,
        generator,
        src_positions,
        tgt_positions,
        encoder,
        decoder,
        pad_id=pad_id,
        dropout=cfg.dropout,
        pre_norm=pre_norm,
    )
    init_transformer(model)
    return model


def resolved_scale(cfg: ModelConfig, cross: bool = False) -> float:
    """The score scaling factor the built model uses: in self-attention, or (``cross``) in
    encoder-decoder attention (the RNN's only attention). Resolves ``model.attention.scale=auto``
    with the score's paper default, with the d_k the builders use; equals ``.scaling`` of the
    built :class:`MultiHeadAttention` modules. ``nan`` for an RNN without attention.
    """
    att = cfg.attention
    score = (att.cross_score or att.score) if cross or cfg.arch == "rnn" else att.score
    if score == "none":
        return float("nan")
    return resolve_scale(att.scale, head_dims(cfg)[0], SCORES[score])


register("arch", "rnn")(build_rnn)


def build_model(
    cfg: ModelConfig, src_vocab: int, tgt_vocab: int, pad_id: int = 0, shared_vocab: bool = True
) -> nn.Module:
    """Build the configured model.

    Args:
        cfg: The model section of the config.
        src_vocab: Source vocabulary size.
        tgt_vocab: Target vocabulary size.
        pad_id: Padding token id (same in both vocabularies).
        shared_vocab: Source and target share one vocabulary (enables tying the source embedding).

    Returns:
        A Lightning-free ``nn.Module`` with the interface of :class:`ablate.model.transformer.Transformer`.
    """
    if cfg.arch not in ARCHS:
        raise ModelBuildError(f"model.arch={cfg.arch!r} has no builder; available: {', '.join(ARCHS)}")
    return ARCHS[cfg.arch](cfg, src_vocab, tgt_vocab, pad_id, shared_vocab)
