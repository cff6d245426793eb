"""Learning-rate schedules: linear warm-up, then a decay (``train.schedule``).

``inverse_sqrt`` is the schedule of Vaswani et al. (2017), Sec. 5.3, Eq. 3. ``linear`` and
``cosine`` decay to ``train.min_lr`` exactly when the training budget runs out (steps, epochs or
training seconds, whichever is nearest), which is what a fixed budget wants: Li, Yumer & Ramanan (2020),
"Budgeted Training" (ICLR), show that decaying to zero at the end of the budget beats schedules that
ignore it; cosine is Loshchilov & Hutter (2017) without restarts.

Adding a schedule is one function of the post-warm-up fraction with ``@register("schedule", "<name>")``
(it lands in ``DECAYS``), here or in a plugin.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from ablate.registry import register, table

DECAYS: dict[str, Callable[[float], float]] = table("schedule")
"""Decay name -> multiplier at fraction q in [0, 1] of the post-warm-up budget (1 at q=0)."""
INVERSE_SQRT = "inverse_sqrt"
"""The paper's schedule, outside :data:`DECAYS` (it ignores the budget)."""


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


@register("schedule", "linear")
def linear(q: float) -> float:
    """1 at the end of warm-up, 0 at the end of the budget."""
    return 1.0 - q


@register("schedule", "cosine")
def cosine(q: float) -> float:
    """Half a cosine from 1 to 0 (Loshchilov & Hutter 2017, Eq. 5 with one cycle)."""
    return 0.5 * (1.0 + math.cos(math.pi * q))


def schedules() -> list[str]:
    """Every ``train.schedule`` name: ``inverse_sqrt`` and the registered decays."""
    return [INVERSE_SQRT, *DECAYS]


class WarmupDecay(torch.optim.lr_scheduler.LRScheduler):
    """Warm-up over ``warmup`` steps, then ``schedule`` as a function of budget ``progress``.

    Args:
        optimizer: its groups' ``lr`` are the peak learning rates.
        schedule: a name in :func:`schedules`.
        warmup: warm-up steps (linear from 0).
        min_ratio: floor, as a fraction of the peak.
        progress: returns the fraction of the training budget used so far, in [0, 1]. The decay
            runs from the progress at which warm-up ended to 1, so a time budget and a step budget
            shape the curve alike. That starting point is part of the state, so a resumed run
            continues the same curve.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        schedule: str,
        warmup: int,
        min_ratio: float,
        progress: Callable[[], float],
    ):
        if schedule not in schedules():
            raise ValueError(f"unknown schedule {schedule!r}; valid: {', '.join(schedules())}")
        self.schedule, self.warmup, self.min_ratio = schedule, warmup, min_ratio
        self._progress = progress
        self.decay_from: float | None = None
        super().__init__(optimizer)

    def multiplier(self, step: int) -> float:
        """Factor on the peak rate for optimizer ``step`` (0-based)."""
        if self.schedule == INVERSE_SQRT:
            return inverse_sqrt(step, self.warmup, self.min_ratio)
        if step + 1 < self.warmup:
            return (step + 1) / self.warmup
        p = min(max(self._progress(), 0.0), 1.0)
        if self.decay_from is None:
            self.decay_from = p
        q = 1.0 if p >= 1.0 else (p - self.decay_from) / max(1.0 - self.decay_from, 1e-12)
        return max(DECAYS[self.schedule](min(max(q, 0.0), 1.0)), self.min_ratio)

    def get_lr(self) -> list[float]:
        m = self.multiplier(self.last_epoch)
        return [base * m for base in self.base_lrs]

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_progress")}
