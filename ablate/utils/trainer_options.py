"""Lightning ``Trainer`` options and extra callbacks from the config (``trainer.*`` keys).

``ablate train trainer.profiler=simple trainer.deterministic=true`` passes those keyword
arguments to ``pytorch_lightning.Trainer``; ``trainer.callbacks`` adds callbacks in
LightningCLI's notation (a class path, or ``{class_path: ..., init_args: {...}}``)::

    trainer:
      profiler: simple
      callbacks:
        - class_path: pytorch_lightning.callbacks.EarlyStopping
          init_args: {monitor: val/bleu, mode: max, patience: 3}

Options that ablate already sets from its own keys are refused with the key to use instead
(``trainer.max_steps`` -> ``train.max_steps``), so a run's budget has one source. Class paths of the
``lightning`` package (``lightning.pytorch.callbacks.EarlyStopping``, as Lightning's own docs spell
them) name the same classes in ``pytorch_lightning``, the package ablate trains with, and are read
so: a callback of the other package would not be a callback of this Trainer. From Python,
``ablate.training.train.train(cfg, callbacks=[...])`` takes callback objects directly.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from typing import Any

from ablate.utils.typed import ConfigError

OWNED = {
    "max_steps": "train.max_steps",
    "max_epochs": "train.max_epochs",
    "max_time": "train.max_time",
    "accelerator": "train.accelerator",
    "devices": "train.devices",
    "num_nodes": "train.nodes",
    "precision": "train.precision",
    "gradient_clip_val": "train.clip_norm",
    "accumulate_grad_batches": "train.accumulate",
    "val_check_interval": "train.val_every",
    "check_val_every_n_epoch": "train.val_every",
    "log_every_n_steps": "tracking.log_every",
    "logger": "tracking.loggers",
    "default_root_dir": "--run-dir",
}
"""Trainer arguments ablate derives from its own config key (named here)."""
INTERNAL = ("plugins", "use_distributed_sampler", "enable_checkpointing")
"""Trainer arguments ablate's run record depends on (checkpoints, batches per rank)."""


def _trainer_arguments() -> list[str]:
    import pytorch_lightning as pl

    return [n for n in inspect.signature(pl.Trainer.__init__).parameters if n != "self"]


def class_spec(item: Any, key: str = "trainer.callbacks") -> tuple[str, dict[str, Any]]:
    """``(class path or name, init_args)`` of a ``key`` entry in LightningCLI's notation; one-line error else."""
    if isinstance(item, str):
        return item, {}
    if isinstance(item, dict) and isinstance(item.get("class_path"), str):
        args = item.get("init_args") or {}
        if isinstance(args, dict) and set(item) <= {"class_path", "init_args"}:
            return item["class_path"], dict(args)
    raise ConfigError(
        f"{key} entry {item!r} must be a class path or {{class_path: package.module.Class, init_args: {{...}}}}"
    )


LIGHTNING = "lightning.pytorch."
"""The ``lightning`` package's prefix of the classes ``pytorch_lightning`` holds."""


def import_class(path: str, key: str = "trainer.callbacks") -> type:
    """The class at ``path`` (``package.module.Class``; ``lightning.pytorch.*`` read as ``pytorch_lightning.*``)."""
    if path.startswith(LIGHTNING):
        path = "pytorch_lightning." + path[len(LIGHTNING) :]
    module, _, name = path.replace(":", ".").rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        raise ConfigError(f"{key}: cannot import '{path}' (use package.module.Class)") from None


def check(options: dict[str, Any]) -> None:
    """Raise :class:`ConfigError` (one line) for an option the Trainer or ablate cannot take."""
    known = _trainer_arguments()
    for key, value in options.items():
        if key in OWNED:
            raise ConfigError(f"trainer.{key} is set by ablate; use {OWNED[key]} instead")
        if key in INTERNAL:
            raise ConfigError(f"trainer.{key} is managed by ablate (checkpoints and batching depend on it)")
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean 'trainer.{close[0]}'?" if close else ""
            raise ConfigError(f"unknown Lightning Trainer option 'trainer.{key}'{hint}")
        if key == "callbacks":
            if not isinstance(value, (list, tuple)):
                raise ConfigError("trainer.callbacks must be a list of class paths or {class_path, init_args}")
            for item in value:
                import_class(class_spec(item)[0])


def build(options: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """``(Trainer keyword arguments, callback objects)`` from ``trainer.*`` options."""
    check(options)
    kwargs = {k: v for k, v in options.items() if k != "callbacks"}
    callbacks = []
    for item in options.get("callbacks") or []:
        path, args = class_spec(item)
        try:
            callbacks.append(import_class(path)(**args))
        except TypeError as err:
            raise ConfigError(f"trainer.callbacks: {path}: {err}") from None
    return kwargs, callbacks
