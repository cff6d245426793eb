"""Training throughput: tokens per second over the training steps, and what the run trained on."""

from __future__ import annotations

import time
from typing import Any

import pytorch_lightning as pl
import torch

from ablate.training.objective import batch_tokens
from ablate.training.record_checks import nonnegative

COUNTERS = ("tok", "sec", "all_tok", "all_sec", "skip")
"""What :class:`Throughput` keeps: tokens and seconds after the warm-up steps, of every step, warm-up steps left."""


class Throughput(pl.Callback):
    """Tokens per second of training, summed over devices, and the tokens and seconds spent.

    A step is timed from ``on_train_batch_start`` to ``on_train_batch_end`` (forward, backward,
    optimizer step; data loading, validation and decoding excluded; on a GPU the step is
    synchronised first, so the time is the device's, not the launch queue's). Tokens are non-padding
    source plus target tokens. The first ``skip`` steps (allocator, kernel selection) are left out of
    :attr:`tokens_per_sec` unless the run has no other steps. Across devices: all ranks' tokens over
    the slowest rank's seconds, reduced by the strategy. The counters are saved in checkpoints, so a
    resumed run (or a rerun that only decodes) reports the whole run.

    ``train/tokens_per_sec`` and ``train/lr`` are logged every ``log_every`` steps.
    """

    def __init__(self, pad_id: int, skip: int = 10, log_every: int = 50):
        self.pad_id, self.log_every = pad_id, log_every
        self.skip = skip  # warm-up steps still to leave out
        self.tok, self.sec = 0, 0.0  # after the warm-up steps, this rank
        self.all_tok, self.all_sec = 0, 0.0  # every step, this rank
        self.tokens_per_sec = float("nan")  # all devices; set at each log and at the end of training
        self.train_tokens: int | None = None  # all devices' tokens of every step; set at the end of training
        self._t0 = 0.0

    @property
    def step_seconds(self) -> float:
        """Seconds spent in training steps so far (every step, this rank)."""
        return self.all_sec

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._t0 = time.perf_counter()

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)
        elapsed = time.perf_counter() - self._t0
        tokens = batch_tokens(batch, self.pad_id)
        self.all_tok += tokens
        self.all_sec += elapsed
        if self.skip > 0:
            self.skip -= 1
        else:
            self.tok += tokens
            self.sec += elapsed
        if trainer.global_step % self.log_every == 0 and self.all_sec > 0:
            self._reduce(trainer, pl_module)
            scheduler = trainer.lr_scheduler_configs[0].scheduler if trainer.lr_scheduler_configs else None
            metrics = {"train/tokens_per_sec": self.tokens_per_sec}
            if scheduler is not None:
                metrics["train/lr"] = scheduler.get_last_lr()[0]
            pl_module.log_dict(metrics, on_step=True, on_epoch=False, rank_zero_only=True, batch_size=1)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._reduce(trainer, pl_module)
        tokens = torch.tensor(float(self.all_tok), dtype=torch.float64, device=pl_module.device)
        self.train_tokens = int(trainer.strategy.reduce(tokens, reduce_op="sum").item())

    def _reduce(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """All ranks' tokens over the slowest rank's seconds (after the warm-up steps when there are any)."""
        tokens, seconds = (self.tok, self.sec) if self.sec > 0 else (self.all_tok, self.all_sec)
        device = pl_module.device
        tok = trainer.strategy.reduce(torch.tensor(float(tokens), dtype=torch.float64, device=device), reduce_op="sum")
        sec = trainer.strategy.reduce(torch.tensor(seconds, dtype=torch.float64, device=device), reduce_op="max")
        if sec.item() > 0:
            self.tokens_per_sec = tok.item() / sec.item()

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {"tok": self.tok, "sec": self.sec, "all_tok": self.all_tok, "all_sec": self.all_sec, "skip": self.skip}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._restore(state_dict)

    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        # checkpoints written before this callback existed keep the counters in ablate.measured;
        # a newer checkpoint's own state (load_state_dict, called after this) takes precedence
        state = checkpoint.get("ablate")
        measured = state.get("measured") if isinstance(state, dict) else None
        if isinstance(measured, dict):
            self._restore(measured)
        elif isinstance(state, dict) and nonnegative(state.get("train_tokens")) is not None:
            self.all_tok = int(state["train_tokens"])

    def _restore(self, state: Any) -> None:
        """Take the counters when all are finite and non-negative (a checkpoint may be someone else's)."""
        counts = {k: nonnegative(state.get(k)) for k in COUNTERS} if isinstance(state, dict) else {}
        if not counts or any(v is None for v in counts.values()):
            return
        self.tok, self.all_tok, self.skip = int(counts["tok"]), int(counts["all_tok"]), int(counts["skip"])
        self.sec, self.all_sec = float(counts["sec"]), float(counts["all_sec"])
        if self.sec > 0 or self.all_sec > 0:
            self.tokens_per_sec = self.tok / self.sec if self.sec > 0 else self.all_tok / self.all_sec
