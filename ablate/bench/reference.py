"""The speed reference: ``torch.nn.Transformer`` with our embeddings, positions and output layer.

Everything around the encoder-decoder stack matches ``build_transformer`` with the standard
config (dot, scaled, sinusoidal, tied embeddings; pre- or post-norm): one token embedding shared by both
sides and tied to the output projection, scaled by sqrt(d_model), sinusoidal positions
(Vaswani et al. 2017, sec. 3.4-3.5), dropout on the sum. The stack is PyTorch's own
``nn.TransformerEncoderLayer``/``nn.TransformerDecoderLayer`` (fused in-projection,
``scaled_dot_product_attention``), with ``norm_first`` for pre-norm, and the final LayerNorms
``nn.Transformer`` adds by default only for pre-norm, as ours (post-norm layers already end in
one). Dropout sits where
ours does (embeddings and every sublayer output, Vaswani et al. sec. 5.4): PyTorch's layers would
also apply ``dropout`` to the attention weights and to the feed-forward's hidden activation; here
the attention weights get ``attention_dropout`` (``model.attention_dropout``, 0 by default) and
the feed-forward's inner dropout is removed, so both models do the same work.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ablate.model.positions import sinusoids


class TorchTransformer(nn.Module):
    """``torch.nn.Transformer`` between a tied embedding and output layer.

    Args:
        vocab: Joint vocabulary size.
        d_model, heads, layers, d_ff: Sizes (``layers`` encoder and ``layers`` decoder layers).
        dropout: Dropout of the embeddings, sublayers and feed-forward.
        attention_dropout: Dropout of the attention weights.
        pad_id: Padding id (its embedding row starts at zero, as ours).
        max_positions: Rows of the precomputed sinusoid table.
        norm_first: pre-norm layers (and a final LayerNorm after each stack) instead of post-norm.
    """

    def __init__(
        self,
        vocab: int,
        d_model: int,
        heads: int,
        layers: int,
        d_ff: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        pad_id: int = 0,
        max_positions: int = 1024,
        norm_first: bool = False,
    ):
        super().__init__()
        self.pad_id, self.d_model = pad_id, d_model
        self.embed = nn.Embedding(vocab, d_model, padding_idx=pad_id)
        self.register_buffer("table", sinusoids(torch.arange(max_positions), d_model), persistent=False)
        self.drop = nn.Dropout(dropout)

        def encoder_layer() -> nn.TransformerEncoderLayer:
            return nn.TransformerEncoderLayer(d_model, heads, d_ff, dropout, batch_first=True, norm_first=norm_first)

        def decoder_layer() -> nn.TransformerDecoderLayer:
            return nn.TransformerDecoderLayer(d_model, heads, d_ff, dropout, batch_first=True, norm_first=norm_first)

        def final_norm() -> nn.LayerNorm | None:
            return nn.LayerNorm(d_model) if norm_first else None

        self.transformer = nn.Transformer(
            d_model,
            heads,
            batch_first=True,
            custom_encoder=nn.TransformerEncoder(
                encoder_layer(), layers, norm=final_norm(), enable_nested_tensor=False
            ),
            custom_decoder=nn.TransformerDecoder(decoder_layer(), layers, norm=final_norm()),
        )
        for module in self.transformer.modules():
            if isinstance(module, nn.MultiheadAttention):
                module.dropout = attention_dropout
            if isinstance(module, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
                module.dropout = nn.Identity()  # inside the feed-forward: relu(x W1) W2, no dropout between
        self.generator = nn.Linear(d_model, vocab, bias=False)
        nn.init.normal_(self.embed.weight, 0.0, d_model**-0.5)
        with torch.no_grad():
            self.embed.weight[pad_id].zero_()
        self.generator.weight = self.embed.weight

    def _embed(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens) * math.sqrt(self.d_model)
        return self.drop(x + self.table[: tokens.size(1)].to(x.dtype))

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits: (B, S), (B, T) -> (B, T, V)."""
        src_pad = src.eq(self.pad_id)  # (B, S)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=src.device)  # (T, T)
        out = self.transformer(
            self._embed(src),
            self._embed(tgt_in),
            tgt_mask=causal,
            src_key_padding_mask=src_pad,
            memory_key_padding_mask=src_pad,
            tgt_is_causal=True,
        )  # (B, T, D)
        return self.generator(out)
