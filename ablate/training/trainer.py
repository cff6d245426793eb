"""The Lightning ``Trainer`` of a run and its callbacks: devices, precision, checkpoints, budget clock,
throughput, the interrupt checkpoint, the live record, deliberate faults, Ctrl-C and the progress display."""

from __future__ import annotations

import logging
import math
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, TextIO

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint, ProgressBar, RichProgressBar
from pytorch_lightning.utilities.exceptions import MisconfigurationException, SIGTERMException

from ablate.config import Config, ConfigError
from ablate.record import DEV_BLEU, TOKENS_PER_CPU_SEC, TOKENS_PER_SEC, RunStatus
from ablate.training.module import TranslationModule, batch_tokens, gather_objects
from ablate.training.run_folder import nonnegative


@contextmanager
def sigint_once() -> Iterator[None]:
    """Inside the block the first SIGINT raises ``KeyboardInterrupt`` and later ones are ignored: a second Ctrl-C
    would otherwise land inside Lightning's graceful stop and abort it (no interrupt checkpoint, a record left
    ``running``). Outside the main thread, or where SIGINT is ignored (a script's background job), it does nothing."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield
        return

    def handle(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the later ones
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


COUNTERS = ("tok", "sec", "all_tok", "all_sec", "skip")
"""What :class:`Throughput` keeps: tokens and seconds after the warm-up steps, of every step, warm-up steps left."""
CPU_COUNTERS = ("cpu", "all_cpu")
"""Process CPU seconds of the same steps as ``sec`` and ``all_sec`` (absent from checkpoints older than them)."""


class Throughput(pl.Callback):
    """Tokens per second of training, summed over devices, and the tokens and seconds spent.

    A step is timed from batch start to end (on a GPU by CUDA events, read only at the steps that log, so
    nothing waits for the device); the first ``skip`` batches (allocator, kernel selection; a step has
    ``train.accumulate``) are left out unless there are no others; the rate is logged once per ``log_every``
    steps; across devices, all ranks' tokens over the slowest rank's seconds. The same steps in
    process CPU seconds give :attr:`tokens_per_cpu_sec`, far less moved by machine load than wall-clock.
    Saved in checkpoints, so a resumed run reports the whole run."""

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
        self._rank, self._world = 0, 1  # of the run being resumed (set when a checkpoint loads)
        self._logged = 0  # the last step whose rate was logged (none at 0: no optimizer step yet)

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
        step = trainer.global_step  # under train.accumulate, several batches end at one step: the first logs
        if step % self.log_every == 0 and step != self._logged:
            self._logged = step
            self._settle()
            if self.all_sec <= 0:
                return
            self._rates(_over_ranks(trainer, pl_module))
            metrics = {TOKENS_PER_SEC.key: self.tokens_per_sec}
            if math.isfinite(self.tokens_per_cpu_sec):
                metrics[TOKENS_PER_CPU_SEC.key] = self.tokens_per_cpu_sec
            if trainer.lr_scheduler_configs:
                metrics["train/lr"] = float(trainer.lr_scheduler_configs[0].scheduler.get_last_lr()[0])
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
        reduce = _over_ranks(trainer, pl_module)
        self._rates(reduce)
        self.train_tokens = int(reduce(float(self.all_tok), "sum"))

    def _rates(self, reduce: Callable[[float, str], float] = lambda value, op: value) -> None:
        """All ranks' tokens over the slowest rank's seconds and over all ranks' CPU seconds (after the warm-up
        steps when there are any); ``reduce(value, "sum" | "max")`` combines a value over the ranks."""
        timed = self.sec > 0
        tok = reduce(float(self.tok if timed else self.all_tok), "sum")
        sec = reduce(self.sec if timed else self.all_sec, "max")
        cpu = reduce(self.cpu if timed else self.all_cpu, "sum")  # NaN on any rank: unknown
        if sec > 0:
            self.tokens_per_sec = tok / sec
        self.cpu_seconds = cpu
        self.tokens_per_cpu_sec = tok / cpu if cpu > 0 else float("nan")

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        self._settle()
        # an unknown CPU time (NaN) is left out, so it stays unknown after the next resume
        cpu = {k: v for k in CPU_COUNTERS if math.isfinite(v := getattr(self, k))}
        own = {k: getattr(self, k) for k in COUNTERS} | cpu
        return own | {"ranks": gather_objects(own)}  # under DDP each rank resumes its own counters

    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        # checkpoints written before this callback existed keep the counters in ablate.measured;
        # a newer checkpoint's own state (load_state_dict, called after this) takes precedence
        self._rank, self._world = getattr(trainer, "global_rank", 0), getattr(trainer, "world_size", 1)
        state = checkpoint.get("ablate")
        measured = state.get("measured") if isinstance(state, dict) else None
        if isinstance(measured, dict):
            self.load_state_dict(measured)
        elif isinstance(state, dict) and nonnegative(state.get("train_tokens")) is not None:
            self.all_tok = int(state["train_tokens"])
            self.all_cpu = float("nan")  # those tokens' CPU time was not measured

    def load_state_dict(self, state_dict: Any) -> None:
        """Take the counters when all are finite and non-negative (a checkpoint may be someone else's)."""
        ranks = state_dict.get("ranks") if isinstance(state_dict, dict) else None
        if isinstance(ranks, list) and len(ranks) == self._world > 1:
            state_dict = ranks[self._rank]  # this rank's own counters, not rank 0's
        if not isinstance(state_dict, dict) or any(nonnegative(state_dict.get(k)) is None for k in COUNTERS):
            return
        self.tok, self.all_tok, self.skip = (int(state_dict[k]) for k in ("tok", "all_tok", "skip"))
        self.sec, self.all_sec = float(state_dict["sec"]), float(state_dict["all_sec"])
        # CPU seconds: NaN (unknown) where the checkpoint has none for steps it counted, 0 where it counted none
        for key, counted in (("cpu", self.tok > 0 or self.sec > 0), ("all_cpu", self.all_tok > 0 or self.all_sec > 0)):
            seconds = nonnegative(state_dict.get(key))
            setattr(self, key, seconds if seconds is not None else float("nan") if counted else 0.0)
        if self.sec > 0 or self.all_sec > 0:
            self._rates()


def _over_ranks(trainer: pl.Trainer, pl_module: pl.LightningModule) -> Callable[[float, str], float]:
    """``reduce(value, "sum" | "max")``: a number combined over the ranks (in float64)."""

    def reduce(value: float, op: str) -> float:
        tensor = torch.tensor(value, dtype=torch.float64, device=pl_module.device)
        return trainer.strategy.reduce(tensor, reduce_op=op).item()

    return reduce


class LiveRecord(pl.Callback):
    """Rewrite ``summary.json`` (``running``) after every validation on rank 0: sweep schedulers read the
    history from it for early termination, and a killed run still leaves its progress on disk."""

    def __init__(self, record):
        self.record = record

    # Lightning's hook names any LightningModule; this callback is only ever given a TranslationModule
    def on_validation_end(self, trainer: pl.Trainer, pl_module: TranslationModule) -> None:  # type: ignore[override]
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
    """Reports ``fit_start`` and the first ``first_step`` to ``mark`` (start-up timing,
    :func:`ablate.bench.processes.bench_startup`)."""

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

    ``nan:STEP`` poisons the weights so the real non-finite-loss check fires; ``oom:STEP`` raises out of
    memory; ``kill:STEP`` SIGKILLs the run (its process group under DDP) and ``term:STEP`` sends SIGTERM,
    each once per run folder, so the rerun that resumes it goes through."""

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
        self.marker.touch()  # by every rank: whichever gets here first kills the others
        if self.kind == "term":
            os.kill(os.getpid(), signal.SIGTERM)
        elif trainer.world_size > 1:
            os.killpg(os.getpgid(0), signal.SIGKILL)
        else:
            os.kill(os.getpid(), signal.SIGKILL)


class TrainClock(pl.Callback):
    """Seconds spent training (validation and decoding excluded): the budget ``train.max_time`` spends, so
    variants whose decoding is slow are not charged for it, and the clock the budget-aware schedules read
    (:meth:`progress`). Saved in checkpoints, so a resumed run spends only what is left. Under DDP rank 0's
    clock is broadcast every ``log_every`` steps and before each validation (a collective per step would wait
    for every rank), so the ranks stop together and use the same learning rate, overrunning by at most
    ``log_every`` steps."""

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
        self._shared_step = 0  # the last step whose clock was broadcast (train.accumulate: a step ends once)

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
            used.append(step / (self.max_epochs * -(-batches // max(self.accumulate, 1))))  # a step ends each epoch
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
        step = trainer.global_step  # under train.accumulate, several batches end at one step: the first shares
        share = step % self.log_every == 0 and step != self._shared_step
        if share:
            self._shared_step = step
        self._tick(trainer, share=share)
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

    def _get_train_description(self, current_epoch: int) -> str:  # Lightning's label, on each epoch start
        t = self.trainer
        return train_description(current_epoch, t.max_epochs, t.global_step, t.max_steps)

    def get_metrics(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        return {**super().get_metrics(trainer, pl_module), **getattr(pl_module, "bar_metrics", {})}

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        if self.progress is not None and self.train_progress_bar_id is not None:
            self.progress.update(
                self.train_progress_bar_id, description=self._get_train_description(trainer.current_epoch)
            )


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


class StatusLines(ProgressBar):
    """One plain line per validation of the fit (:func:`status_line`), and one where training ends after the
    last validation, logged; in a notebook the same line rewritten in place on stderr. The ETA is the training
    time left by the budget the run spends fastest (:meth:`~ablate.training.trainer.TrainClock.progress`),
    validation and decoding excluded."""

    def __init__(self, stream: TextIO | None = None, rewrite: bool | None = None) -> None:
        super().__init__()
        self.stream = stream
        if rewrite is None:  # a Jupyter kernel, whose cell output renders "\r" as "rewrite the line"
            get = getattr(sys.modules.get("IPython"), "get_ipython", None)
            rewrite = get is not None and type(get()).__name__ == "ZMQInteractiveShell"
        self.rewrite = rewrite
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
        clock = next((c for c in trainer.callbacks if isinstance(c, TrainClock)), None)  # type: ignore[attr-defined]
        meter = next((c for c in trainer.callbacks if isinstance(c, Throughput)), None)  # type: ignore[attr-defined]
        rate = meter.tokens_per_sec if meter is not None else None  # every device's, as the summary: at each log
        if meter is not None and not math.isfinite(meter.tokens_per_sec):  # before the first log, one device's own
            rate = meter.all_tok / meter.step_seconds if trainer.world_size == 1 and meter.step_seconds > 0 else None
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


MULTI_NODE_ENV = ("SLURM_NTASKS", "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "NODE_RANK")
"""Variables of a launch on several machines (SLURM's srun, torchrun, or set by hand on each), one of which
Lightning's cluster environments need to find the other nodes."""


def check_devices(cfg: Config) -> None:
    """Refuse a GPU request (fp16 included) this machine cannot meet, or several nodes without a launch that starts them, in one
    line, before any work (else rank 0 waits for the others for torch's 30 minutes)."""
    t = cfg.train
    if t.nodes > 1 and not any(name in os.environ for name in MULTI_NODE_ENV):
        raise ConfigError(
            f"train.nodes={t.nodes} needs a launch on {t.nodes} machines (a SLURM job: ablate sweep run --launcher "
            "slurm --nodes-per-trial, or srun; torchrun; or MASTER_ADDR and NODE_RANK set on each); on one "
            "machine use train.devices"
        )
    if t.accelerator != "gpu" and not (t.accelerator == "auto" and torch.cuda.is_available()):
        if t.precision == "16-mixed":  # else Lightning trains in bf16 under a config that says fp16
            raise ConfigError("train.precision=16-mixed (fp16 autocast) needs a GPU; on the CPU use bf16-mixed or 32")
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    where = f" (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else ""
    if count == 0:
        raise ConfigError(f"train.accelerator=gpu but no GPU is visible{where}; use train.accelerator=auto or cpu")
    if isinstance(t.devices, int) and t.devices > count:
        raise ConfigError(
            f"train.devices={t.devices} but only {count} GPU(s) are visible{where}; "
            f"lower train.devices or use train.devices=auto"
        )


def accelerator_and_precision(cfg: Config) -> tuple[str, str]:
    """``(accelerator, precision)`` for Lightning, ``auto`` resolved for this machine."""
    t = cfg.train
    accelerator = t.accelerator
    if accelerator == "auto":
        accelerator = "gpu" if torch.cuda.is_available() else "cpu"
    precision: str = t.precision
    if precision == "auto":
        precision = "bf16-mixed" if accelerator == "gpu" and torch.cuda.is_bf16_supported() else "32-true"
    return accelerator, precision


def quiet() -> None:
    """Silence library chatter that says nothing about this run (:mod:`ablate.utils.commands`)."""
    from ablate.utils import commands

    commands.ignore_warnings()
    logging.getLogger("pytorch_lightning.utilities.rank_zero").setLevel(logging.WARNING)


def checkpoint_callbacks(ckpt_dir: Path, every: int) -> list:
    """``best.ckpt`` (by validation BLEU) and ``last.ckpt`` (every ``every`` optimizer steps, for resuming)."""
    # best.ckpt is judged on validation BLEU, so only a validation's end considers it: a budget spent
    # before the first validation ends an epoch with nothing to compare (Lightning would warn)
    best = ModelCheckpoint(
        dirpath=ckpt_dir,
        filename="best",
        monitor=DEV_BLEU.key,
        mode="max",
        save_top_k=1,
        save_last=False,
        save_on_train_epoch_end=False,
        enable_version_counter=False,
    )
    return [
        best,
        LastCheckpoint(ckpt_dir, save_top_k=0, save_last=True, every_n_train_steps=every, enable_version_counter=False),
    ]


class LastCheckpoint(ModelCheckpoint):
    """``last.ckpt`` every n steps; at a step that validates, written after that validation. Lightning writes it
    before, and a resume from it skips the validation: its history entry, and best.ckpt's choice, were lost.
    Lightning 2.6 has no public way to defer it (its own deferral needs a monitor): the private members used here
    are pinned by ``test_last_checkpoint_of_a_validating_step_holds_that_validation``.

    Also written at every epoch's end, and when SIGTERM or Ctrl-C stops a run, so it resumes from there; failures
    never overwrite the last good checkpoint. Both stop at the end of a step (Lightning turns SIGTERM into an exception there; Ctrl-C while
    training sets the same flag; a second one before the step ends stops inside it, and one while the stop is saved
    is ignored): inside one, last.ckpt held the random stream of a half-run step, and the resumed run ended elsewhere.
    Not inside a validation: a resume from there skipped the rest of it (its history entry, best.ckpt's choice); the
    run resumes from the last.ckpt before it and validates that step whole."""

    _after_validation = False
    _sigint: Any = None  # the SIGINT handler training replaced, put back when it ends
    _stopping = False

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
        ):

            def stop(signum: int, frame: Any) -> None:
                if self._stopping:  # saving and recording the stop: not cut short
                    return
                if trainer.received_sigterm:  # a second Ctrl-C before the step ended: stop now, inside it
                    self._stopping = True
                    raise KeyboardInterrupt
                trainer._signal_connector.received_sigterm = True

            self._sigint = signal.signal(signal.SIGINT, stop)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._sigint is not None:
            signal.signal(signal.SIGINT, self._sigint)
            self._sigint = None
        super().on_train_end(trainer, pl_module)

    @property
    def state_key(self) -> str:  # ModelCheckpoint's, so checkpoints written before this class resume as they did
        return "ModelCheckpoint" + super().state_key.removeprefix(type(self).__qualname__)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        every, fetcher = self._every_n_train_steps, trainer.fit_loop._data_fetcher
        due = every > 0 and trainer.global_step % every == 0
        self._after_validation = (
            due and fetcher is not None and trainer.fit_loop.epoch_loop._should_check_val_fx(fetcher)
        )
        if not self._after_validation:
            super().on_train_batch_end(trainer, pl_module, *args)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Lightning 2.6 writes last.ckpt at an epoch's end only beside another save: every epoch's end here, after
        # the epoch's validation (which runs before this hook), as train.checkpoint_every says; not where a step
        # budget or a stop ends training (train() saves it then)
        super().on_train_epoch_end(trainer, pl_module)
        if not trainer.fit_loop.done and not self._should_skip_saving_checkpoint(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self._stopping = True  # the handler stays, ignoring Ctrl-C; train's sigint_once puts the user's back
        stopped = isinstance(exception, (KeyboardInterrupt, SIGTERMException))
        if stopped and trainer.global_step > 0 and not trainer.validating:  # the full training state, to resume
            trainer.save_checkpoint(Path(self.dirpath or ".") / "last.ckpt", weights_only=False)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._after_validation and not self._should_skip_saving_checkpoint(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))
        self._after_validation = False
        super().on_validation_end(trainer, pl_module)


def make_trainer(
    cfg: Config,
    run_dir: Path,
    loggers: list,
    accelerator: str,
    precision: str,
    extra_callbacks: list,
    checkpoint_io=None,
):
    from lightning_fabric.plugins.environments import SLURMEnvironment

    from ablate.utils.typed import build_trainer_options

    options, user_callbacks = build_trainer_options(cfg.trainer)
    t = cfg.train
    devices = t.devices
    multi = devices == "auto" or (isinstance(devices, int) and devices > 1) or t.nodes > 1
    # under SLURM, without Lightning's own auto-requeue (SIGUSR1: hpc_ckpt_*.ckpt and scontrol requeue), which would
    # fire beside the job's (SIGUSR2, ablate.sweep.slurm.TrialJob)
    slurm = SLURMEnvironment(auto_requeue=False) if SLURMEnvironment.detect() else None
    val_kwargs = {"val_check_interval": t.val_every, "check_val_every_n_epoch": None} if t.val_every else {}
    kwargs: dict[str, Any] = dict(
        accelerator=accelerator,
        devices=devices,
        num_nodes=t.nodes,
        strategy="ddp" if multi else "auto",
        precision=precision,
        logger=loggers or False,
        callbacks=[
            *checkpoint_callbacks(run_dir / "checkpoints", t.checkpoint_every),
            *extra_callbacks,
            *user_callbacks,
            *progress_bar(options, extra_callbacks + user_callbacks),
        ],
        max_epochs=t.max_epochs if t.max_epochs is not None else (-1 if t.max_steps < 0 else None),
        max_steps=t.max_steps,
        gradient_clip_val=t.clip_norm or None,
        accumulate_grad_batches=t.accumulate,
        log_every_n_steps=cfg.tracking.log_every,  # Lightning writes to the loggers at these steps alone
        num_sanity_val_steps=0,
        use_distributed_sampler=False,
        enable_model_summary=False,
        default_root_dir=str(run_dir),
        plugins=[p for p in (checkpoint_io, slurm) if p is not None] or None,
        **val_kwargs,
    )
    kwargs.update(options)  # trainer.* keys (those ablate owns are refused when the config is read)
    try:
        return pl.Trainer(**kwargs)
    except (ValueError, TypeError, MisconfigurationException) as err:  # a trainer.* value Lightning refuses
        if not options:
            raise
        given = ", ".join(f"trainer.{k}={v}" for k, v in options.items())
        raise ConfigError(f"Lightning's Trainer refused {given}: {str(err).strip().splitlines()[0]}") from None
