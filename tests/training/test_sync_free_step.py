"""A training step never waits for the device: outside logging steps, no op in it reads a
tensor's value on the host (``.item()``, ``int(t)``, ``bool(t)``, ``float(t)``: all ``aten::_local_scalar_dense``)
and none is a collective (``c10d``). On a GPU each of them would stall the launch queue once a step.

A :class:`~torch.utils._python_dispatch.TorchDispatchMode` sees every aten op of a real ``train()`` run (the
module, its callbacks, Lightning's loop, the progress bar, the W&B logger) from the start of one training batch
to the start of the next, and books each host read and collective under the batch it happened in. AdamW's step
counters are exempt where they are host tensors: a non-fused AdamW keeps them on the CPU whatever the
parameters' device, so reading them waits for nothing (on CUDA the fused kernel keeps them on the device and
reads none).
"""

from __future__ import annotations

import traceback
from collections import defaultdict

import pytest
import pytorch_lightning as pl
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ablate.config import load_config
from ablate.training.train import train
from ablate.training.trainer import TrainClock

from tests.helpers.tiny import EVAL_PAIRS, tiny

LOG_EVERY = 4
STEPS = 11


def _is_sync(func) -> bool:
    return func is torch.ops.aten._local_scalar_dense.default or func.namespace == "c10d"


class _Syncs(TorchDispatchMode):
    """Host reads and collectives, each with the stack of the Python code that made it."""

    def __init__(self, book: list, host_counters: set[int]):
        super().__init__()
        self.book, self.host_counters = book, host_counters

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if _is_sync(func) and not (args and isinstance(args[0], torch.Tensor) and _host_counter(args[0], self)):
            self.book.append((str(func), "".join(traceback.format_stack(limit=8)[:-1])))
        return func(*args, **(kwargs or {}))


def _host_counter(t: torch.Tensor, mode: _Syncs) -> bool:
    return t.device.type == "cpu" and t.dim() == 0 and t.data_ptr() in mode.host_counters


def _step_counters(trainer) -> set[int]:
    """The data pointers of the optimizers' CPU step counters (AdamW's ``state[p]["step"]``)."""
    return {
        state["step"].data_ptr()
        for opt in trainer.optimizers
        for state in opt.state.values()
        if isinstance(state.get("step"), torch.Tensor) and state["step"].device.type == "cpu"
    }


class SyncCounter(pl.Callback):
    """Books every sync from ``on_train_batch_start`` of batch ``b`` to that of batch ``b + 1`` under ``b``."""

    def __init__(self):
        self.per_batch: dict[int, list] = defaultdict(list)
        self.mode: _Syncs | None = None

    def _stop(self) -> None:
        if self.mode is not None:
            self.mode.__exit__(None, None, None)
            self.mode = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        self._stop()
        self.mode = _Syncs(self.per_batch[batch_idx], _step_counters(trainer))
        self.mode.__enter__()

    def on_train_end(self, trainer, pl_module) -> None:
        self._stop()

    def on_exception(self, trainer, pl_module, exception) -> None:
        self._stop()


@pytest.mark.slow  # trains (seconds)
def test_no_host_sync_or_collective_in_a_non_logging_training_step(tmp_path, cache_dir):
    counter = SyncCounter()
    cfg = load_config(
        None,
        tiny(
            f"train.max_steps={STEPS}",
            "train.max_tokens=512",
            "train.warmup=4",
            "eval.beam=1",
            "tracking.wandb=offline",
            f"tracking.log_every={LOG_EVERY}",
            "train.val_every=1000",
            "train.checkpoint_every=1000",
            eval_pairs=EVAL_PAIRS,
        ),
    )
    summary = train(cfg, tmp_path / "run", callbacks=[counter])
    assert summary["status"] == "finished" and summary["step"] == STEPS
    # batch b ends at global step b + 1; the logging steps are those that end on a multiple of log_every.
    # The first batch (one-off set-up) and the last (the end of training) are not steady-state steps.
    logging = {b for b in range(STEPS) if (b + 1) % LOG_EVERY == 0}
    steady = [b for b in range(1, STEPS - 1) if b not in logging]
    assert len(steady) >= 5
    syncs = {b: counter.per_batch[b] for b in steady if counter.per_batch[b]}
    if syncs:
        counts = {k: len(v) for k, v in syncs.items()}
        b, calls = next(iter(syncs.items()))
        where = "\n".join(f"--- {op}\n{stack}" for op, stack in calls[:3])
        pytest.fail(f"host syncs in non-logging steps (batch: count) {counts}; the first of batch {b}:\n{where}")
    assert any(counter.per_batch[b] for b in logging), "a logging step reads its values (the counter works)"


class _Strategy:
    def __init__(self):
        self.broadcasts = 0

    def broadcast(self, obj, src=0):
        self.broadcasts += 1
        return obj


class _Trainer:
    world_size = 2
    sanity_checking = False

    def __init__(self, log_every: int):
        self.strategy = _Strategy()
        self.global_step = 0
        self.log_every_n_steps = log_every


def test_the_train_clock_is_shared_across_ranks_only_on_logging_steps():
    """Under DDP rank 0's clock reaches the other ranks every log_every steps, not with a collective per step."""
    clock = TrainClock(max_time=3600.0, log_every=5)
    trainer = _Trainer(5)
    clock.on_train_start(trainer, None)
    for step in range(1, 21):
        trainer.global_step = step
        clock.on_train_batch_end(trainer, None, None, None, step - 1)
    assert trainer.strategy.broadcasts == 4  # steps 5, 10, 15, 20


def test_under_accumulation_the_train_clock_is_shared_once_per_logging_step():
    """With ``train.accumulate=2`` two batches end at each global step: rank 0's clock is broadcast when the step
    completes, not again at the next batch, which ends at the same step (a collective that waits for every rank)."""
    clock = TrainClock(max_time=3600.0, accumulate=2, log_every=5)
    trainer = _Trainer(5)
    clock.on_train_start(trainer, None)
    for batch in range(1, 41):
        trainer.global_step = batch // 2  # Lightning steps after batches 2, 4, ...
        clock.on_train_batch_end(trainer, None, None, None, batch - 1)
    assert trainer.strategy.broadcasts == 4  # steps 5, 10, 15, 20


class _FiniteChecks(pl.Callback):
    """Counts the module's :meth:`check_finite` calls (a host read on a GPU) and ``train/loss`` logs made inside
    training batches, by the global step the batch belongs to."""

    def __init__(self):
        self.checks: dict[int, int] = defaultdict(int)
        self.logs: dict[int, int] = defaultdict(int)
        self.step: int | None = None

    def on_train_start(self, trainer, pl_module) -> None:
        check, log = pl_module.check_finite, pl_module.log

        def counted_check():
            if self.step is not None:
                self.checks[self.step] += 1
            check()

        def counted_log(name, *args, **kwargs):
            if self.step is not None and name == "train/loss":
                self.logs[self.step] += 1
            log(name, *args, **kwargs)

        pl_module.check_finite, pl_module.log = counted_check, counted_log

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        self.step = trainer.global_step + 1  # the optimizer step this batch works towards

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        self.step = None


@pytest.mark.slow  # trains (seconds)
def test_under_accumulation_the_loss_is_checked_and_logged_once_per_logging_step(tmp_path, cache_dir):
    """With ``train.accumulate=3`` the logging step's loss is read back, checked for NaN and logged once, by the
    batch that completes the step, not by each of the three batches of its window."""
    counter = _FiniteChecks()
    cfg = load_config(
        None,
        tiny(
            "train.max_steps=8",
            "train.accumulate=3",
            "train.max_tokens=256",
            "train.warmup=2",
            "eval.beam=1",
            "tracking.wandb=offline",
            "tracking.log_every=4",
            "train.val_every=1000",
            "train.checkpoint_every=1000",
            eval_pairs=EVAL_PAIRS,
        ),
    )
    summary = train(cfg, tmp_path / "run", callbacks=[counter])
    assert summary["status"] == "finished" and summary["step"] == 8
    assert dict(counter.checks) == {4: 1, 8: 1}
    assert dict(counter.logs) == {4: 1, 8: 1}
