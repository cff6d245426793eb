"""Token embeddings and the output projection, with optional tying (shared by every architecture)."""

from __future__ import annotations

from torch import nn

from ablate.model.errors import ModelBuildError


def build_embeddings(
    d: int, src_vocab: int, tgt_vocab: int, pad_id: int, tie: bool, shared_vocab: bool
) -> tuple[nn.Embedding, nn.Embedding, nn.Linear]:
    """``(src_embed, tgt_embed, generator)`` of width ``d``.

    With ``tie`` the output projection shares the target embedding matrix (Press & Wolf 2017;
    Vaswani et al. 2017, Sec. 3.4), and with a shared vocabulary the source embedding too.
    """
    tgt_embed = nn.Embedding(tgt_vocab, d, padding_idx=pad_id)
    generator = nn.Linear(d, tgt_vocab, bias=False)
    if tie:
        generator.weight = tgt_embed.weight
    if tie and shared_vocab:
        if src_vocab != tgt_vocab:
            raise ModelBuildError(
                f"shared_vocab needs equal vocabularies, got src {src_vocab} and tgt {tgt_vocab}; "
                "pass shared_vocab=False"
            )
        return tgt_embed, tgt_embed, generator
    return nn.Embedding(src_vocab, d, padding_idx=pad_id), tgt_embed, generator
