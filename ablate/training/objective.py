"""What training minimises and how: the loss, the optimiser with its schedule, and the tokens a batch holds.

Plain functions, used by :class:`~ablate.training.module.TranslationModule` and by ``ablate bench``
alike, so the benchmark times exactly what training runs.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn

from ablate.config import Config, peak_lr
from ablate.training.schedule import WarmupDecay


def batch_tokens(batch: dict[str, Any], pad_id: int) -> int:
    """Non-padding source tokens plus non-padding target tokens predicted (EOS included).

    From the host counts :func:`~ablate.data.datamodule.collate` puts in the batch; a batch without them is
    counted from its tensors (which waits for the device the tensors are on).
    """
    if "src_tokens" in batch and "tgt_tokens" in batch:
        return int(batch["src_tokens"]) + int(batch["tgt_tokens"])
    return int((batch["src"] != pad_id).sum() + (batch["tgt_out"] != pad_id).sum())


def token_loss(
    logits: torch.Tensor, target: torch.Tensor, pad_id: int, smoothing: float, ntok: int | None = None
) -> tuple[torch.Tensor, int]:
    """Mean label-smoothed cross-entropy over non-padding targets, and their number.

    Args:
        logits: (B, T, V) next-token scores, or (N, V) of N positions.
        target: (B, T) token ids (or (N,)); ``pad_id`` positions are ignored.
        pad_id: padding id.
        smoothing: label smoothing epsilon (Szegedy et al. 2016; 0.1 in Vaswani et al. 2017).
        ntok: the number of non-padding targets when the host knows it (the batch's ``tgt_tokens``);
            None counts them on the device and waits for the count.
    """
    if ntok is None:
        ntok = int((target != pad_id).sum())
    loss = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)).float(),
        target.reshape(-1),
        ignore_index=pad_id,
        label_smoothing=smoothing,
        reduction="sum",
    )
    return loss / max(ntok, 1), ntok


def target_rows(target: torch.Tensor, pad_id: int, ntok: int | None = None) -> torch.Tensor:
    """Indices (N,) of the non-padding positions of ``target`` (B, T) flattened, in order.

    With ``ntok`` (the host's count of them, the batch's ``tgt_tokens``) the size is known, so nothing waits
    for the device (``torch.nonzero_static``); None finds them with ``nonzero``, which waits.
    """
    keep = target.reshape(-1).ne(pad_id)
    rows = keep.nonzero() if ntok is None else torch.nonzero_static(keep, size=ntok)
    return rows.squeeze(1)


def sequence_loss(model: nn.Module, batch: dict[str, Any], pad_id: int, smoothing: float) -> tuple[torch.Tensor, int]:
    """The training loss of a collated batch (:func:`token_loss` over its non-padding targets), and their number.

    Logits are computed for the non-padding target positions only (``model(..., rows=)``): the output
    projection and the log-softmax, the largest terms of a small model's step, skip the padding. The loss
    and its gradients are those of the full (B, T, V) logits with padding ignored.
    """
    target = batch["tgt_out"]
    rows = target_rows(target, pad_id, batch.get("tgt_tokens"))
    logits = model(batch["src"], batch["tgt_in"], src_padded=batch.get("src_padded", True), rows=rows)  # (N, V)
    return token_loss(logits, target.reshape(-1).index_select(0, rows), pad_id, smoothing, ntok=rows.size(0))


def make_optimizer(
    model: nn.Module, cfg: Config, progress: Callable[[], float] = lambda: 0.0, fused: bool | None = None
) -> tuple[torch.optim.Optimizer, WarmupDecay]:
    """AdamW (no weight decay on biases and norms) and its per-step :class:`WarmupDecay` schedule.

    ``progress`` is the fraction of the training budget used (:meth:`TrainClock.progress`), which the
    budget-aware decays read. ``fused``: AdamW's fused kernel (None: where every parameter is on a CUDA device;
    it must be False under a gradient scaler whose unscaling the clipping relies on), else ``foreach``.
    """
    t = cfg.train
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "norm" in name else decay).append(p)
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    lr = peak_lr(cfg)
    if fused is None:
        fused = all(p.device.type == "cuda" for p in model.parameters())
    # one kernel for all parameters, its step counters on the device (no host read per parameter); elsewhere
    # one op per tensor list
    kernel = {"fused": True} if fused else {"foreach": True}
    opt = torch.optim.AdamW(groups, lr=lr, betas=t.betas, eps=1e-9, **kernel)
    return opt, WarmupDecay(opt, t.schedule, t.warmup, t.min_lr / lr, progress=progress)


def clip_gradients(parameters: Iterable[torch.Tensor], max_norm: float | None) -> torch.Tensor:
    """Scale the gradients of ``parameters`` to a total L2 norm of at most ``max_norm`` (None or 0: leave them);
    returns the total norm before clipping as a 0-d tensor (those without a gradient count 0).

    One norm computation serves the clipping and the record, and nothing waits for the device: reading the
    value (``float``) does.
    """
    params = [p for p in parameters if p.grad is not None]
    if not params:
        return torch.zeros(())
    if max_norm:  # what Lightning's gradient_clip_val calls, so the clipped gradients are the same
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    return torch.nn.utils.get_total_norm([p.grad for p in params])
