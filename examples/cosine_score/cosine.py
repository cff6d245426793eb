"""Scaled cosine attention, as a plugin: ablate's registries gain a score without editing ablate.

``cos(q, k) / tau`` with a learned per-head temperature tau (Liu et al. 2022, Swin Transformer V2,
sec. 3.2). Unit-length queries and keys make it a dot product, so it runs on the fused
``scaled_dot_product_attention`` kernel (``as_dot``).

Select it with ``plugins: [cosine.py]`` and ``model.attention.score: cosine``; its hyperparameters
are the keyword-only constructor parameters below, set by ``model.attention.params.<name>``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import ablate
from ablate.config import AttentionConfig
from ablate.model.scores import Score


@ablate.register("score", "cosine")
class CosineScore(Score):
    """``cos(q, k) / tau`` per head (Liu et al. 2022, Swin V2, sec. 3.2).

    Args:
        d_k, heads, cfg: as every score (per-head size, heads, the attention config section).
        temperature: the initial 1/tau (Swin V2 learns tau, clamped at 0.01; 10 is a common start).
        learn_temperature: learn 1/tau per head (true) or keep it fixed (false).
    """

    paper_scale = False  # 1/tau is the scale: model.attention.scale=auto applies none

    def __init__(
        self, d_k: int, heads: int, cfg: AttentionConfig, *, temperature: float = 10.0, learn_temperature: bool = True
    ):
        super().__init__(d_k, heads, cfg)
        if temperature <= 0:
            raise ValueError(f"model.attention.params.temperature={temperature} must be positive")
        log_inv_tau = torch.full((heads, 1, 1), math.log(temperature))  # (H, 1, 1)
        if learn_temperature:
            self.log_inv_tau = nn.Parameter(log_inv_tau)
        else:
            self.register_buffer("log_inv_tau", log_inv_tau)

    def prepare_keys(self, k: Tensor) -> Tensor:
        return F.normalize(k, dim=-1)  # (B, H, Tk, d_k), unit length

    def _queries(self, q: Tensor) -> Tensor:
        return F.normalize(q, dim=-1) * self.log_inv_tau.exp()  # (B, H, Tq, d_k) / tau

    def forward(self, q: Tensor, keys: Tensor) -> Tensor:
        return self._queries(q) @ keys.transpose(-1, -2)  # (B, H, Tq, Tk)

    def as_dot(self, q, keys):
        return self._queries(q), keys, None
