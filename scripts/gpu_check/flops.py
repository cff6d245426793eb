"""Model FLOPs of one training step of the encoder-decoder Transformer, counted by hand (PaLM / nanoGPT).

Kaplan et al. (2020) and PaLM (Chowdhery et al. 2022, Appendix B), as nanoGPT's ``estimate_mfu``
does, count a training step as **6 FLOPs per matrix parameter per token it is applied to** (2 for
the forward multiply-add, 4 for the two backward products) **plus the attention terms**
``6 * Tq * Tk * (d_k + d_v)`` per head and layer (the ``Q K^T`` and ``A V`` products, forward and
backward; PaLM's ``12 * L * H * Q * T`` per token with d_k = d_v = Q). For an encoder-decoder this
becomes, per batch, with ``S`` source and ``T`` target tokens (non-padding only, as throughput
counts them) and ``s_i``, ``t_i`` the lengths of sentence ``i``:

* encoder layer: Q, K, V, O projections and the feed-forward, on the ``S`` source tokens;
* decoder layer: self-attention Q, K, V, O, cross-attention Q and O and the feed-forward on the
  ``T`` target tokens, and the cross-attention K and V projections on the ``S`` memory tokens;
* the output layer (``d_model x V``, tied to the embeddings) on the ``T`` target tokens; the
  embedding lookups are not products and cost nothing;
* attention: ``sum s_i^2`` (encoder self), ``sum t_i^2`` (decoder self; causal masking is not
  halved, as in PaLM), ``sum s_i t_i`` (cross) query-key pairs per layer.

Biases, norms, softmax, dropout and the loss are not counted (they are not matrix products), nor is
padding, nor the ``Q K^T`` product a fused attention backward recomputes: this is *model* FLOPs, so
MFU = model FLOPs x steps/s / the hardware's peak. On an unpadded batch the count equals what
``torch.utils.flop_counter.FlopCounterMode`` counts for the standard model less that recomputation
(``2 h d_k`` per query-key pair; ``tests/bench/test_flops.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PEAK_TFLOPS = {  # vendor datasheet, dense (no sparsity); first matching substring of the device name wins
    "bfloat16": (
        ("H100 PCIe", 756.0),
        ("H100", 989.4),
        ("H200", 989.4),
        ("GH200", 989.4),
        ("A100", 312.0),
        ("L40S", 362.1),
        ("L4", 121.0),
        ("A10", 125.0),
    ),
    "float32": (
        ("H100 PCIe", 51.2),
        ("H100", 66.9),
        ("H200", 66.9),
        ("GH200", 66.9),
        ("A100", 19.5),
        ("L40S", 91.6),
        ("L4", 30.3),
        ("A10", 31.2),
    ),
}
"""dtype -> (device-name substring, TFLOP/s); fp32 means plain fp32 (TF32 is off in PyTorch by default)."""


def datasheet_peak(device_name: str, dtype: str) -> float | None:
    """The vendor's dense peak in FLOP/s for ``dtype`` (``bfloat16`` / ``float32``), None if unknown."""
    for key, tflops in PEAK_TFLOPS.get(dtype, ()):
        if key in device_name:
            return tflops * 1e12
    return None


@dataclass(frozen=True)
class Dims:
    """The sizes the count needs (see ``ablate.config.ModelConfig``)."""

    d_model: int
    d_ff: int
    heads: int
    d_k: int
    d_v: int
    encoder_layers: int
    decoder_layers: int
    vocab: int

    @classmethod
    def of(cls, model_cfg, vocab: int) -> Dims:
        """From a Transformer ``ModelConfig`` (per-head sizes from :func:`ablate.config.head_dims`, as built)."""
        from ablate.config import head_dims

        m = model_cfg
        d_k, d_v = head_dims(m)
        return cls(
            m.d_model, m.d_ff, m.heads, d_k, d_v, m.encoder_layers or m.layers, m.decoder_layers or m.layers, vocab
        )


def training_flops(dims: Dims, src_lengths: list[int], tgt_lengths: list[int]) -> dict[str, float]:
    """Model FLOPs of one forward + backward pass over sentences of these (non-padding) lengths.

    Args:
        dims: Model sizes.
        src_lengths: Source length of each sentence (S = their sum).
        tgt_lengths: Target length of each sentence (decoder input = output positions), same order.

    Returns:
        ``{"dense": 6 x matrix-parameter x token products, "attention": the score and weighting products,
        "total": their sum, "per_token": total / (S + T), "pairs": query-key pairs summed over layers}``.
    """
    d, h = dims.d_model, dims.heads
    qk, v = h * dims.d_k, h * dims.d_v
    attn_proj = 2 * d * qk + 2 * d * v  # Q, K (d x h d_k), V, O (d x h d_v)
    ffn = 2 * d * dims.d_ff
    S, T = sum(src_lengths), sum(tgt_lengths)
    dense_macs = (
        dims.encoder_layers * (attn_proj + ffn) * S
        + dims.decoder_layers * ((attn_proj + d * qk + d * v + ffn) * T + (d * qk + d * v) * S)
        + d * dims.vocab * T
    )
    pairs_enc = sum(s * s for s in src_lengths)
    pairs_dec = sum(t * t + t * s for s, t in zip(src_lengths, tgt_lengths))
    pairs = dims.encoder_layers * pairs_enc + dims.decoder_layers * pairs_dec
    attention = 6.0 * h * (dims.d_k + dims.d_v) * pairs
    dense = 6.0 * dense_macs
    total = dense + attention
    return {
        "dense": dense,
        "attention": attention,
        "total": total,
        "per_token": total / max(S + T, 1),
        "pairs": float(pairs),
    }


def batch_lengths(batch: dict[str, torch.Tensor], pad_id: int = 0) -> tuple[list[int], list[int]]:
    """Non-padding source and target lengths of each sentence of a collated batch."""
    return batch["src"].ne(pad_id).sum(1).tolist(), batch["tgt_out"].ne(pad_id).sum(1).tolist()


def batches_flops(dims: Dims, batches: list[dict[str, torch.Tensor]], pad_id: int = 0) -> float:
    """Model FLOPs of one training pass over ``batches`` (see :func:`training_flops`)."""
    return sum(training_flops(dims, *batch_lengths(b, pad_id))["total"] for b in batches)
