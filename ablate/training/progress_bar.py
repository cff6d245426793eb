"""Training progress, always on stderr: a live bar on a terminal, plain status lines elsewhere.

stdout holds only what a command produces (``ablate train > result.txt`` holds the result line), so
both kinds write to stderr. On a terminal, :class:`BudgetProgressBar` (Rich) counts epochs, and steps
of ``train.max_steps`` when that is the budget. Where stderr is not a terminal (a log file, a sweep
trial's ``trial.log``, a notebook cell), :class:`StatusLines` logs one plain line per validation (step,
training loss, tokens/s, the validation BLEU and the training time left) through the ``ablate`` logger,
which the command line shows on stderr (:mod:`ablate.utils.commands`) and the run's ``console.log`` keeps;
a notebook (whose cells render ``\\r``) gets that line rewritten in place on stderr instead of widgets.

Lightning's Rich bar labels training ``Epoch {e}/{max_epochs - 1}``, which reads ``Epoch 5/-2``
when epochs are unbounded (``train.max_epochs=null`` passes ``max_epochs=-1``, as every shipped
sweep does). This bar drops the bound it does not have and counts the budget the run does have:
``Epoch 5 · step 312/1800``. The training loss it shows is the module's ``bar_metrics``, numbers set at the
steps that log: a tensor logged with ``prog_bar=True`` would be read back from the device on every step.
"""

from __future__ import annotations

import logging
import sys
from datetime import timedelta
from typing import Any, TextIO

import pytorch_lightning as pl
from pytorch_lightning.callbacks import ProgressBar, RichProgressBar

from ablate.record import DEV_BLEU

log = logging.getLogger(__name__)


def train_description(epoch: int, max_epochs: int | None, step: int, max_steps: int) -> str:
    """``Epoch 3/9``, ``Epoch 3 · step 120/600`` or ``Epoch 3`` (no bound on either)."""
    text = f"Epoch {epoch}"
    if max_epochs is not None and max_epochs > 0:
        text += f"/{max_epochs - 1}"
    if max_steps > 0:
        text += f" · step {step}/{max_steps}"
    return text


class BudgetProgressBar(RichProgressBar):
    """Lightning's Rich progress bar, on stderr, with :func:`train_description` as its training label."""

    def __init__(self) -> None:
        super().__init__(console_kwargs={"stderr": True})

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


def status_line(
    step: int, max_steps: int, loss: float | None, tokens_per_sec: float | None, bleu: float | None, eta_s: float | None
) -> str:
    """``step 120/600 · loss 4.213 · 8,920 tok/s · val/bleu 3.21 · ETA 0:05:12`` (unknown parts left out)."""
    parts = [f"step {step}/{max_steps}" if max_steps > 0 else f"step {step}"]
    if loss is not None:
        parts.append(f"loss {loss:.3f}")
    if tokens_per_sec is not None:
        parts.append(f"{tokens_per_sec:,.0f} tok/s")
    if bleu is not None:
        parts.append(f"{DEV_BLEU.key} {bleu:.2f}")
    if eta_s is not None:
        parts.append(f"ETA {timedelta(seconds=round(eta_s))}")
    return " · ".join(parts)


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (whose cell output renders ``\\r`` as "rewrite the line")."""
    shell = sys.modules.get("IPython")
    get = getattr(shell, "get_ipython", None)
    return get is not None and type(get()).__name__ == "ZMQInteractiveShell"


class StatusLines(ProgressBar):
    """One plain line per validation of the fit (:func:`status_line`), and one where training ends after the
    last validation, logged; in a notebook the same line rewritten in place on stderr. The ETA is the training
    time left by the budget the run spends fastest (:meth:`~ablate.training.callbacks.TrainClock.progress`),
    validation and decoding excluded."""

    def __init__(self, stream: TextIO | None = None, rewrite: bool | None = None) -> None:
        super().__init__()
        self.stream = stream
        self.rewrite = in_notebook() if rewrite is None else rewrite
        self._enabled = True
        self._open = False  # a rewritten line waits for its newline
        self._said = -1  # the step of the last line

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def print(self, *args: Any, **kwargs: Any) -> None:  # Lightning's default prints on stdout
        print(*args, **{**kwargs, "file": self.stream or sys.stderr})

    def _write(self, text: str) -> None:
        if not self.rewrite:
            log.info(text)
            return
        if log.isEnabledFor(logging.INFO):  # quiet: nothing
            stream = self.stream or sys.stderr  # looked up now: a captured or redirected stderr gets it
            stream.write(f"\r{text}")
            stream.flush()
            self._open = True

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self._enabled or trainer.sanity_checking or trainer.state.fn != "fit" or trainer.global_rank != 0:
            return
        self._write(self.describe(trainer, pl_module))
        self._said = trainer.global_step

    def describe(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> str:
        from ablate.training.callbacks import TrainClock
        from ablate.training.throughput import Throughput

        clock = next((c for c in trainer.callbacks if isinstance(c, TrainClock)), None)  # type: ignore[attr-defined]
        meter = next((c for c in trainer.callbacks if isinstance(c, Throughput)), None)  # type: ignore[attr-defined]
        rate = meter.all_tok / meter.step_seconds if meter is not None and meter.step_seconds > 0 else None
        eta = None
        if clock is not None and 0 < clock.progress() < 1:
            eta = clock.seconds * (1 - clock.progress()) / clock.progress()
        bleu = getattr(pl_module, "last_val", {}).get(DEV_BLEU.key)
        last = getattr(pl_module, "last_loss", None)  # the latest step's (a validation waits for the device anyway)
        loss = float(last) if last is not None else None
        return status_line(trainer.global_step, trainer.max_steps, loss, rate, bleu, eta)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._enabled and trainer.global_rank == 0 and trainer.global_step != self._said:  # the budget's end
            self._write(self.describe(trainer, pl_module))
        if self._open:
            (self.stream or sys.stderr).write("\n")
            self._open = False


def progress_bar(options: dict[str, Any], callbacks: list, terminal: bool | None = None) -> list:
    """``[BudgetProgressBar()]`` where stderr is a terminal, else ``[StatusLines()]``; ``[]`` when the run turns
    progress off (``trainer.enable_progress_bar=false``) or brings its own bar (``trainer.callbacks``)."""
    if not options.get("enable_progress_bar", True) or any(isinstance(c, ProgressBar) for c in callbacks):
        return []
    if terminal is None:
        terminal = sys.stderr.isatty()
    return [BudgetProgressBar() if terminal else StatusLines()]
