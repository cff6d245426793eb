"""Training throughput: tokens per second (wall clock) and per CPU-second over the training steps."""

from __future__ import annotations

import math
import time
from typing import Any

import pytorch_lightning as pl
import torch

from ablate.record import TOKENS_PER_CPU_SEC, TOKENS_PER_SEC
from ablate.training.objective import batch_tokens
from ablate.training.record_checks import nonnegative

COUNTERS = ("tok", "sec", "all_tok", "all_sec", "skip")
"""What :class:`Throughput` keeps: tokens and seconds after the warm-up steps, of every step, warm-up steps left."""
CPU_COUNTERS = ("cpu", "all_cpu")
"""Process CPU seconds of the same steps as ``sec`` and ``all_sec`` (absent from checkpoints older than them)."""


class Throughput(pl.Callback):
    """Tokens per second of training, summed over devices, and the tokens and seconds spent.

    A step is timed from ``on_train_batch_start`` to ``on_train_batch_end`` (forward, backward,
    optimizer step; data loading, validation and decoding excluded; on a GPU by CUDA events recorded at
    both ends, so the time is the device's, not the launch queue's, and nothing waits for the device until
    the events are read, at the steps that log). Tokens are non-padding source plus target tokens, the
    host's counts (:func:`~ablate.training.objective.batch_tokens`). The first ``skip`` steps (allocator, kernel selection) are left out of
    :attr:`tokens_per_sec` unless the run has no other steps. Across devices: all ranks' tokens over
    the slowest rank's seconds, reduced by the strategy. The counters are saved in checkpoints, so a
    resumed run (or a rerun that only decodes) reports the whole run.

    Wall-clock seconds stretch when other processes share the cores, so the same steps are also timed
    in process CPU seconds (:func:`time.process_time`: user + system time of every thread of the
    process): :attr:`tokens_per_cpu_sec` is all ranks' tokens over all ranks' CPU seconds
    (:attr:`cpu_seconds`), of the same steps as :attr:`tokens_per_sec`. It counts the CPU the steps
    used, not the time they waited for a core, so it depends far less on the machine's load (cache
    and memory contention still slow it); it grows with the threads' overhead, so compare it only
    between runs with the same threads. Steps counted before a resume from a checkpoint without CPU
    counters leave it unknown (NaN), never a rate over part of the steps.

    ``train/tokens_per_sec``, ``train/tokens_per_cpu_sec`` and ``train/lr`` are logged every
    ``log_every`` steps.
    """

    def __init__(self, pad_id: int, skip: int = 10, log_every: int = 50):
        self.pad_id, self.log_every = pad_id, log_every
        self.skip = skip  # warm-up steps still to leave out
        self.tok, self.sec = 0, 0.0  # after the warm-up steps, this rank
        self.all_tok, self.all_sec = 0, 0.0  # every step, this rank
        self.cpu, self.all_cpu = 0.0, 0.0  # process CPU seconds of the same steps, this rank; NaN: unknown
        self.tokens_per_sec = float("nan")  # all devices; set at each log and at the end of training
        self.tokens_per_cpu_sec = float("nan")  # all devices' tokens over their CPU seconds; set likewise
        self.cpu_seconds = float("nan")  # all devices' CPU seconds of the steps tokens_per_cpu_sec counts
        self.train_tokens: int | None = None  # all devices' tokens of every step; set at the end of training
        self._t0 = self._c0 = 0.0
        self._start: Any = None  # the CUDA event of the running step's start
        self._pending: list[tuple[Any, Any, int, float, bool]] = []  # (start, end, tokens, cpu, warm-up) unread

    @property
    def step_seconds(self) -> float:
        """Seconds spent in training steps so far (every step, this rank)."""
        self._settle()
        return self.all_sec

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._t0, self._c0 = time.perf_counter(), time.process_time()
        if pl_module.device.type == "cuda":
            self._start = torch.cuda.Event(enable_timing=True)
            self._start.record()

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        cpu = time.process_time() - self._c0
        tokens = batch_tokens(batch, self.pad_id)
        warm = self.skip > 0
        if warm:
            self.skip -= 1
        if self._start is not None:  # read when the step logs: reading it now would wait for the device
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self._pending.append((self._start, end, tokens, cpu, warm))
            self._start = None
        else:
            self._count(tokens, time.perf_counter() - self._t0, cpu, warm)
        if trainer.global_step % self.log_every == 0:
            self._settle()
            if self.all_sec <= 0:
                return
            self._reduce(trainer, pl_module)
            scheduler = trainer.lr_scheduler_configs[0].scheduler if trainer.lr_scheduler_configs else None
            metrics = {TOKENS_PER_SEC.key: self.tokens_per_sec}
            if math.isfinite(self.tokens_per_cpu_sec):
                metrics[TOKENS_PER_CPU_SEC.key] = self.tokens_per_cpu_sec
            if scheduler is not None:
                metrics["train/lr"] = scheduler.get_last_lr()[0]
            pl_module.log_dict(metrics, on_step=True, on_epoch=False, rank_zero_only=True, batch_size=1)

    def _count(self, tokens: int, seconds: float, cpu: float, warm: bool) -> None:
        self.all_tok += tokens
        self.all_sec += seconds
        self.all_cpu += cpu
        if not warm:
            self.tok += tokens
            self.sec += seconds
            self.cpu += cpu

    def _settle(self) -> None:
        """Count the steps whose CUDA events are still unread (waits for the last of them)."""
        for start, end, tokens, cpu, warm in self._pending:
            end.synchronize()
            self._count(tokens, start.elapsed_time(end) / 1000.0, cpu, warm)
        self._pending = []

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._settle()
        self._reduce(trainer, pl_module)
        tokens = torch.tensor(float(self.all_tok), dtype=torch.float64, device=pl_module.device)
        self.train_tokens = int(trainer.strategy.reduce(tokens, reduce_op="sum").item())

    def _reduce(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """All ranks' tokens over the slowest rank's seconds and over all ranks' CPU seconds (after the
        warm-up steps when there are any)."""
        timed = self.sec > 0
        tokens, seconds = (self.tok, self.sec) if timed else (self.all_tok, self.all_sec)
        device = pl_module.device

        def reduce(value: float, op: str) -> float:
            return trainer.strategy.reduce(torch.tensor(value, dtype=torch.float64, device=device), reduce_op=op).item()

        tok, sec = reduce(float(tokens), "sum"), reduce(seconds, "max")
        cpu = reduce(self.cpu if timed else self.all_cpu, "sum")  # NaN on any rank: unknown
        if sec > 0:
            self.tokens_per_sec = tok / sec
        self.cpu_seconds = cpu
        self.tokens_per_cpu_sec = tok / cpu if cpu > 0 else float("nan")

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        self._settle()
        state = {"tok": self.tok, "sec": self.sec, "all_tok": self.all_tok, "all_sec": self.all_sec, "skip": self.skip}
        # an unknown CPU time (NaN) is left out, so it stays unknown after the next resume
        return state | {k: v for k in CPU_COUNTERS if math.isfinite(v := getattr(self, k))}

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
            self.all_cpu = float("nan")  # those tokens' CPU time was not measured

    def _restore(self, state: Any) -> None:
        """Take the counters when all are finite and non-negative (a checkpoint may be someone else's)."""
        counts = {k: nonnegative(state.get(k)) for k in COUNTERS} if isinstance(state, dict) else {}
        if not counts or any(v is None for v in counts.values()):
            return
        self.tok, self.all_tok, self.skip = int(counts["tok"]), int(counts["all_tok"]), int(counts["skip"])
        self.sec, self.all_sec = float(counts["sec"]), float(counts["all_sec"])
        self.cpu = _cpu_counter(state.get("cpu"), counted=self.tok > 0 or self.sec > 0)
        self.all_cpu = _cpu_counter(state.get("all_cpu"), counted=self.all_tok > 0 or self.all_sec > 0)
        if self.sec > 0 or self.all_sec > 0:
            self.tokens_per_sec = self.tok / self.sec if self.sec > 0 else self.all_tok / self.all_sec
            self.cpu_seconds = self.cpu if self.sec > 0 else self.all_cpu
            tokens = self.tok if self.sec > 0 else self.all_tok
            self.tokens_per_cpu_sec = tokens / self.cpu_seconds if self.cpu_seconds > 0 else float("nan")


def _cpu_counter(value: Any, counted: bool) -> float:
    """A checkpoint's CPU seconds; NaN (unknown) where it has none for steps it counted, 0 where it counted none."""
    seconds = nonnegative(value)
    if seconds is not None:
        return seconds
    return float("nan") if counted else 0.0
