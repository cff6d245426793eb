"""The Lightning ``Trainer`` of a run: its devices, precision, checkpoints, budget and validation cadence."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ablate.config import Config, ConfigError
from ablate.record import DEV_BLEU


def check_devices(cfg: Config) -> None:
    """Refuse a GPU request this machine cannot meet, in one line, before any work."""
    import torch

    t = cfg.train
    if t.accelerator != "gpu" and not (t.accelerator == "auto" and torch.cuda.is_available()):
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


def accelerator_and_precision(cfg: Config) -> tuple[str, Any, str]:
    import torch

    t = cfg.train
    accelerator = t.accelerator
    if accelerator == "auto":
        accelerator = "gpu" if torch.cuda.is_available() else "cpu"
    devices: Any = t.devices
    precision = t.precision
    if precision == "auto":
        bf16 = accelerator == "gpu" and torch.cuda.is_bf16_supported()
        precision = "bf16-mixed" if bf16 else "32-true"
    return accelerator, devices, precision


def quiet() -> None:
    """Silence library chatter that says nothing about this run (:mod:`ablate.utils.commands`)."""
    import logging

    from ablate.utils import commands

    commands.ignore_warnings()
    logging.getLogger("pytorch_lightning.utilities.rank_zero").setLevel(logging.WARNING)


def checkpoint_callbacks(ckpt_dir: Path, every: int) -> list:
    """``best.ckpt`` (by validation BLEU) and ``last.ckpt`` (every ``every`` optimizer steps, for resuming)."""
    from pytorch_lightning.callbacks import ModelCheckpoint

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
    last = ModelCheckpoint(
        dirpath=ckpt_dir, save_top_k=0, save_last=True, every_n_train_steps=every, enable_version_counter=False
    )
    return [best, last]


def make_trainer(
    cfg: Config,
    run_dir: Path,
    loggers: list,
    accelerator: str,
    devices: Any,
    precision: str,
    extra_callbacks: list,
    checkpoint_io=None,
):
    import pytorch_lightning as pl

    from ablate.training.progress_bar import progress_bar
    from ablate.utils.typed import build_trainer_options as trainer_options

    options, user_callbacks = trainer_options(cfg.trainer)
    t = cfg.train
    multi = devices == "auto" or (isinstance(devices, int) and devices > 1) or t.nodes > 1
    strategy = "ddp" if multi else "auto"
    val_kwargs: dict[str, Any] = {}
    if t.val_every:
        val_kwargs = {"val_check_interval": t.val_every, "check_val_every_n_epoch": None}
    kwargs = dict(
        accelerator=accelerator,
        devices=devices,
        num_nodes=t.nodes,
        strategy=strategy,
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
        log_every_n_steps=min(cfg.tracking.log_every, 50),
        num_sanity_val_steps=0,
        use_distributed_sampler=False,
        enable_model_summary=False,
        default_root_dir=str(run_dir),
        plugins=[checkpoint_io] if checkpoint_io is not None else None,
        **val_kwargs,
    )
    kwargs.update(options)  # trainer.* keys (those ablate owns are refused when the config is read)
    return pl.Trainer(**kwargs)
