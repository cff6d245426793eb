"""Lightning callbacks that keep a run recoverable and its record current."""

from __future__ import annotations

from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities.exceptions import SIGTERMException


class InterruptCheckpoint(pl.Callback):
    """Save ``last.ckpt`` when a run is stopped by SIGTERM or Ctrl-C, so it resumes from there.

    SIGTERM is turned into an exception at a step boundary by Lightning, so the saved state is
    consistent. Failures (divergence, out of memory) do not overwrite the last good checkpoint.
    """

    def __init__(self, path: Path):
        self.path = Path(path)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if isinstance(exception, (KeyboardInterrupt, SIGTERMException)) and trainer.global_step > 0:
            trainer.save_checkpoint(self.path)


class LiveRecord(pl.Callback):
    """Rewrite ``summary.json`` (status ``running``) after every validation, on global rank 0.

    Sweep schedulers read the validation history from it for early termination, and a killed
    run still leaves its progress on disk.
    """

    def __init__(self, record):
        self.record = record

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or trainer.global_rank != 0:
            return
        history = getattr(pl_module, "history", [])
        self.record.update(history=history, step=int(trainer.global_step),
                           **{"val/bleu": max((h["val/bleu"] for h in history), default=None)})
        self.record.write("running")


class FaultInjection(pl.Callback):
    """Deliberate faults for reliability drills: ``ABLATE_INJECT_FAULT=nan:STEP`` or ``oom:STEP``.

    ``nan`` poisons the weights so the real non-finite-loss check fires; ``oom`` raises the
    error an exhausted device raises. Used by the soak test of a sweep; inert when unset.
    """

    def __init__(self, spec: str):
        kind, _, step = spec.partition(":")
        if kind not in ("nan", "oom") or not step.isdigit():
            raise ValueError(f"ABLATE_INJECT_FAULT={spec!r} must be nan:STEP or oom:STEP")
        self.kind, self.step = kind, int(step)

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch, batch_idx: int) -> None:
        if trainer.global_step != self.step:
            return
        if self.kind == "oom":
            raise torch.OutOfMemoryError("simulated out of memory (ABLATE_INJECT_FAULT)")
        with torch.no_grad():
            next(pl_module.parameters()).fill_(float("nan"))
