"""The values a run actually uses where its config leaves them implicit.

``model.d_k: null`` means d_model / heads, ``model.attention.scale: auto`` means each score's
paper default, ``train.lr: null`` the peak of Eq. 3 of Vaswani et al. A table that printed the
config would show ``-`` or ``auto``; the trainer records :func:`resolved` in ``summary.json``
and the report shows it, deriving it with this same function for runs recorded before.
"""

from __future__ import annotations

import math
from typing import Any

from ablate.config import Config, head_dims, peak_lr


def resolved(cfg: Config) -> dict[str, Any]:
    """Dotted keys -> values used: ``model.d_k``, ``model.d_v`` (:func:`ablate.config.head_dims`, as
    the builders), ``model.encoder_layers``, ``model.decoder_layers``, ``train.lr``
    (:func:`ablate.config.peak_lr`) and ``model.attention.scale``, the factor on the scores
    (:func:`ablate.model.build.resolved_scale`; ``[self, cross]`` when the two differ, absent for an
    RNN without attention)."""
    from ablate.model.build import resolved_scale

    m = cfg.model
    d_k, d_v = head_dims(m)
    depth = m.rnn.layers if m.arch == "rnn" else m.layers
    out: dict[str, Any] = {
        "model.d_k": d_k,
        "model.d_v": d_v,
        "model.encoder_layers": m.encoder_layers or depth,
        "model.decoder_layers": m.decoder_layers or depth,
        "train.lr": peak_lr(cfg),
    }
    scales = [resolved_scale(m), resolved_scale(m, cross=True)]
    if not any(math.isnan(s) for s in scales):
        out["model.attention.scale"] = scales[0] if scales[0] == scales[1] else scales
    return out
