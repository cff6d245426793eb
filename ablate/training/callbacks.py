"""Lightning callbacks that keep a run recoverable and its record current."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Callable

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities.exceptions import SIGTERMException

from ablate.record import DEV_BLEU, RunStatus


class InterruptCheckpoint(pl.Callback):
    """Save ``last.ckpt`` when a run is stopped by SIGTERM or Ctrl-C, so it resumes from there.

    SIGTERM is turned into an exception at a step boundary by Lightning, so the saved state is
    consistent. Failures (divergence, out of memory) do not overwrite the last good checkpoint.
    """

    def __init__(self, path: Path):
        self.path = Path(path)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if isinstance(exception, (KeyboardInterrupt, SIGTERMException)) and trainer.global_step > 0:
            trainer.save_checkpoint(self.path, weights_only=False)  # the full training state, to resume


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
        history = pl_module.history
        self.record.update(
            history=history,
            step=int(trainer.global_step),
            **{DEV_BLEU.key: max((h[DEV_BLEU.key] for h in history), default=None)},
        )
        self.record.write(RunStatus.RUNNING)


class Milestones(pl.Callback):
    """Reports ``fit_start`` and the first ``first_step`` to ``mark`` (start-up timing, :mod:`ablate.bench.processes`)."""

    def __init__(self, mark: Callable[[str], None]):
        self.mark = mark
        self.started = False

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.mark("fit_start")

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch, batch_idx: int) -> None:
        if not self.started:
            self.started = True
            self.mark("first_step")


FAULTS = ("nan", "oom", "kill", "term")
"""The kinds of deliberate fault (``train.inject_fault=KIND:STEP``); see :class:`FaultInjection`."""


class FaultInjection(pl.Callback):
    """Deliberate faults for reliability drills (``train.inject_fault`` or ``$ABLATE_INJECT_FAULT``).

    ``nan:STEP`` poisons the weights so the real non-finite-loss check fires; ``oom:STEP`` raises
    the error an exhausted device raises; ``kill:STEP`` SIGKILLs the run (its whole process group
    under DDP) and ``term:STEP`` sends SIGTERM, each once per run directory, so the rerun that
    resumes it goes through. Inert when unset.
    """

    def __init__(self, spec: str, run_dir: Path):
        kind, _, step = spec.partition(":")
        if kind not in FAULTS or not step.isdigit():
            raise ValueError(f"fault {spec!r} must be KIND:STEP with KIND one of {', '.join(FAULTS)}")
        self.kind, self.step = kind, int(step)
        self.marker = Path(run_dir) / f".fault-{kind}-{step}"

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch, batch_idx: int) -> None:
        if trainer.global_step != self.step:
            return
        if self.kind == "oom":
            raise torch.OutOfMemoryError("simulated out of memory (train.inject_fault)")
        if self.kind == "nan":
            with torch.no_grad():
                next(pl_module.parameters()).fill_(float("nan"))
            return
        if self.marker.exists():
            return
        if trainer.global_rank == 0:
            self.marker.touch()
        if self.kind == "term":
            os.kill(os.getpid(), signal.SIGTERM)
        elif trainer.world_size > 1:
            os.killpg(os.getpgid(0), signal.SIGKILL)
        else:
            os.kill(os.getpid(), signal.SIGKILL)


class TrainClock(pl.Callback):
    """Seconds spent training (data loading and optimizer steps; validation and decoding excluded).

    ``train.max_time`` is a budget of these seconds, so variants whose decoding is slow are not
    charged for it, and the budget-aware schedules read :meth:`progress` from here. The clock is
    saved in checkpoints, so a resumed run spends only what is left. Under DDP rank 0's clock is
    broadcast every ``log_every`` steps (and before each validation), not every step (a collective waits for
    every rank): the ranks read the budget and the time-based schedules from the clock they last shared, so
    they stop together and use the same learning rate; a run may overrun ``max_time`` by up to ``log_every``
    steps. A single process reads its own clock every step.
    """

    def __init__(
        self,
        max_time: float | None = None,
        max_steps: int = -1,
        max_epochs: int | None = None,
        accumulate: int = 1,
        log_every: int = 1,
    ):
        self.max_time, self.max_steps, self.max_epochs, self.accumulate = max_time, max_steps, max_epochs, accumulate
        self.log_every = max(int(log_every), 1)
        self.seconds = 0.0  # this rank's
        self.shared = 0.0  # under DDP, the clock every rank agrees on: rank 0's when it was last shared
        self._mark: float | None = None
        self._trainer: pl.Trainer | None = None

    def progress(self) -> float:
        """Fraction of the nearest budget used, in [0, 1]; 0 before training starts."""
        trainer = self._trainer
        if trainer is None:
            return 0.0
        step = trainer.global_step
        used = [0.0]
        if self.max_steps and self.max_steps > 0:
            used.append(step / self.max_steps)
        batches = trainer.num_training_batches
        if self.max_epochs and isinstance(batches, int) and batches > 0:
            used.append(step / (self.max_epochs * max(batches // self.accumulate, 1)))
        if self.max_time:
            used.append(self._seconds(trainer) / self.max_time)
        return min(max(used), 1.0)

    def _seconds(self, trainer: pl.Trainer) -> float:
        """The clock the budget and the schedules read: the one every rank shares."""
        return self.seconds if trainer.world_size <= 1 else self.shared

    def _tick(self, trainer: pl.Trainer, share: bool = True) -> None:
        now = time.perf_counter()
        if self._mark is not None:
            self.seconds += now - self._mark
        self._mark = now
        if trainer.world_size > 1 and share:
            self.seconds = self.shared = float(trainer.strategy.broadcast(self.seconds, src=0))

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._trainer = trainer
        self._mark = time.perf_counter()

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        self._tick(trainer, share=trainer.global_step % self.log_every == 0)
        if self.max_time and self._seconds(trainer) >= self.max_time:
            trainer.should_stop = True

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking and self._mark is not None and trainer.state.fn == "fit":
            self._tick(trainer)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._mark is not None:
            self._mark = time.perf_counter()  # the time spent validating is not training time

    def state_dict(self) -> dict:
        return {"seconds": self.seconds}

    def load_state_dict(self, state_dict: dict) -> None:
        self.seconds = self.shared = float(state_dict.get("seconds", 0.0))
