"""Learning-rate schedule of Vaswani et al. (2017), Section 5.3."""

from __future__ import annotations

import math


def inverse_sqrt(step: int, warmup: int, min_ratio: float = 0.0) -> float:
    """Multiplier on the peak learning rate at optimizer ``step`` (0-based).

    Linear warm-up to 1 over ``warmup`` steps, then decay as sqrt(warmup / step): the paper's
    ``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` normalised so its peak is 1, as in
    fairseq's ``inverse_sqrt``. Never below ``min_ratio``.
    """
    step = step + 1
    if warmup <= 0:
        return 1.0
    value = step / warmup if step < warmup else math.sqrt(warmup / step)
    return max(value, min_ratio)
