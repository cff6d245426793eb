"""The Lightning loggers of a run besides W&B (``tracking.loggers``): TensorBoard, CSV, MLflow, any class.

Every logger the Trainer holds receives the same metrics (what the LightningModule and the callbacks
log: ``train/loss``, ``train/lr``, ``val/bleu`` at every validation, ``test/bleu`` ...), so a
TensorBoard or CSV user reads what a W&B user reads. Each built-in logger writes inside the run
folder, so a resumed run continues the same files:

* ``tensorboard``: ``<run_dir>/tensorboard/`` event files (``tensorboard --logdir runs``);
* ``csv``: ``<run_dir>/csv/metrics.csv``, one row per logged step;
* ``mlflow``: an MLflow run in ``<run_dir>/mlruns`` (``pip install mlflow``; refused in one line without it).

A class path (``lightning.pytorch.loggers.CometLogger`` or ``{class_path, init_args}``) is built with
its ``init_args``. W&B is ``wandb`` in the list and is built by :mod:`ablate.training.tracking`.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Callable

from ablate.config import Config, ConfigError
from ablate.utils.typed import class_spec, import_class

WANDB = "wandb"


def _needs(package: str, logger: str) -> None:
    if importlib.util.find_spec(package) is None:
        raise ConfigError(f"tracking.loggers={logger} needs the {package} package: pip install {package}")


def tensorboard(cfg: Config, run_dir: Path):
    from pytorch_lightning.loggers import TensorBoardLogger

    if importlib.util.find_spec("tensorboard") is None and importlib.util.find_spec("tensorboardX") is None:
        _needs("tensorboard", "tensorboard")
    return TensorBoardLogger(save_dir=str(run_dir), name="tensorboard", version="", default_hp_metric=False)


def csv(cfg: Config, run_dir: Path):
    from pytorch_lightning.loggers import CSVLogger

    return CSVLogger(save_dir=str(run_dir), name="csv", version="")


def mlflow(cfg: Config, run_dir: Path):
    _needs("mlflow", "mlflow")
    from pytorch_lightning.loggers import MLFlowLogger

    t = cfg.tracking
    return MLFlowLogger(
        experiment_name=t.project,
        run_name=t.name or run_dir.name,
        tracking_uri=(run_dir / "mlruns").resolve().as_uri(),
    )


FACTORIES: dict[str, Callable[[Config, Path], Any]] = {"tensorboard": tensorboard, "csv": csv, "mlflow": mlflow}
"""Logger name -> its builder (``wandb`` aside); the names are :data:`ablate.config.LOGGERS`."""


def make_loggers(cfg: Config, run_dir: Path) -> list:
    """The loggers ``tracking.loggers`` lists, W&B excepted, in its order."""
    loggers = []
    for entry in cfg.tracking.loggers:
        name, args = class_spec(entry, "tracking.loggers")
        if name == WANDB:
            continue
        if name in FACTORIES:
            loggers.append(FACTORIES[name](cfg, run_dir))
            continue
        try:
            loggers.append(import_class(name, "tracking.loggers")(**args))
        except TypeError as err:
            raise ConfigError(f"tracking.loggers: {name}: {err}") from None
    return loggers


def uses_wandb(cfg: Config) -> bool:
    """Whether ``tracking.loggers`` lists W&B (``tracking.wandb`` then says how it runs)."""
    return any(class_spec(entry, "tracking.loggers")[0] == WANDB for entry in cfg.tracking.loggers)
