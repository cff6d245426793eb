"""The training progress bar: epochs, and steps of ``train.max_steps`` when that is the budget.

Lightning's Rich bar labels training ``Epoch {e}/{max_epochs - 1}``, which reads ``Epoch 5/-2``
when epochs are unbounded (``train.max_epochs=null`` passes ``max_epochs=-1``, as every shipped
sweep does). This bar drops the bound it does not have and counts the budget the run does have:
``Epoch 5 · step 312/1800``. The training loss it shows is the module's ``bar_metrics``, numbers set at the
steps that log: a tensor logged with ``prog_bar=True`` would be read back from the device on every step.
"""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import ProgressBar, RichProgressBar


def train_description(epoch: int, max_epochs: int | None, step: int, max_steps: int) -> str:
    """``Epoch 3/9``, ``Epoch 3 · step 120/600`` or ``Epoch 3`` (no bound on either)."""
    text = f"Epoch {epoch}"
    if max_epochs is not None and max_epochs > 0:
        text += f"/{max_epochs - 1}"
    if max_steps > 0:
        text += f" · step {step}/{max_steps}"
    return text


class BudgetProgressBar(RichProgressBar):
    """Lightning's Rich progress bar with :func:`train_description` as its training label."""

    def _describe(self) -> str:
        t = self.trainer
        return train_description(t.current_epoch, t.max_epochs, t.global_step, t.max_steps)

    def _get_train_description(self, current_epoch: int) -> str:  # Lightning's label, on each epoch start
        return self._describe()

    def get_metrics(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        return {**super().get_metrics(trainer, pl_module), **getattr(pl_module, "bar_metrics", {})}

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        if self.progress is not None and self.train_progress_bar_id is not None:
            self.progress.update(self.train_progress_bar_id, description=self._describe())


def progress_bar(options: dict[str, Any], callbacks: list) -> list:
    """``[BudgetProgressBar()]``, or ``[]`` when the run turns the bar off (``trainer.enable_progress_bar=false``)
    or brings its own (``trainer.callbacks``)."""
    if not options.get("enable_progress_bar", True) or any(isinstance(c, ProgressBar) for c in callbacks):
        return []
    return [BudgetProgressBar()]
