"""What training minimises and how: the loss, the optimiser with its schedule, and the tokens a batch holds.

Plain functions, used by :class:`~ablate.training.module.TranslationModule` and by ``ablate bench``
alike, so the benchmark times exactly what training runs.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ablate.config import Config, peak_lr
from ablate.training.schedule import WarmupDecay


def batch_tokens(batch: dict[str, torch.Tensor], pad_id: int) -> int:
    """Non-padding source tokens plus non-padding target tokens predicted (EOS included)."""
    return int((batch["src"] != pad_id).sum() + (batch["tgt_out"] != pad_id).sum())


def token_loss(logits: torch.Tensor, target: torch.Tensor, pad_id: int, smoothing: float) -> tuple[torch.Tensor, int]:
    """Mean label-smoothed cross-entropy over non-padding targets, and their number.

    Args:
        logits: (B, T, V) next-token scores.
        target: (B, T) token ids; ``pad_id`` positions are ignored.
        pad_id: padding id.
        smoothing: label smoothing epsilon (Szegedy et al. 2016; 0.1 in Vaswani et al. 2017).
    """
    ntok = int((target != pad_id).sum())
    loss = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        target.reshape(-1),
        ignore_index=pad_id,
        label_smoothing=smoothing,
        reduction="sum",
    )
    return loss / max(ntok, 1), ntok


def make_optimizer(
    model: nn.Module, cfg: Config, progress: Callable[[], float] = lambda: 0.0
) -> tuple[torch.optim.Optimizer, WarmupDecay]:
    """AdamW (no weight decay on biases and norms) and its per-step :class:`WarmupDecay` schedule.

    ``progress`` is the fraction of the training budget used (:meth:`TrainClock.progress`), which the
    budget-aware decays read.
    """
    t = cfg.train
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "norm" in name else decay).append(p)
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    lr = peak_lr(cfg)
    opt = torch.optim.AdamW(groups, lr=lr, betas=t.betas, eps=1e-9)
    return opt, WarmupDecay(opt, t.schedule, t.warmup, t.min_lr / lr, progress=progress)
