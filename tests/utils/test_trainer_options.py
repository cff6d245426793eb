"""``trainer.callbacks`` and ``tracking.loggers`` class paths: ``lightning.pytorch.*`` as Lightning's
docs spell them, and one line for what cannot be built."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from pytorch_lightning.callbacks import EarlyStopping
from pytorch_lightning.loggers import CSVLogger

from ablate.config import ConfigError, load_config
from ablate.utils.trainer_options import build, import_class


def test_lightning_pytorch_class_paths_name_the_pytorch_lightning_classes():
    assert import_class("lightning.pytorch.callbacks.EarlyStopping") is EarlyStopping
    _, callbacks = build(
        {"callbacks": [{"class_path": "lightning.pytorch.callbacks.EarlyStopping", "init_args": {"monitor": "x"}}]}
    )
    assert [type(c) for c in callbacks] == [EarlyStopping]  # a callback of the Trainer ablate builds
    cfg = load_config(None, ["trainer.callbacks=[lightning.pytorch.callbacks.EarlyStopping]"])
    assert cfg.trainer["callbacks"] == ["lightning.pytorch.callbacks.EarlyStopping"]


def test_loggers_are_names_or_class_paths_checked_when_the_config_is_read():
    cfg = load_config(None, ["tracking.loggers=[wandb,csv,tensorboard,lightning.pytorch.loggers.CSVLogger]"])
    assert cfg.tracking.loggers == ("wandb", "csv", "tensorboard", "lightning.pytorch.loggers.CSVLogger")
    with pytest.raises(ConfigError, match="unknown logger tracking.loggers='tensorbord'; did you mean 'tensorboard'"):
        load_config(None, ["tracking.loggers=[tensorbord]"])
    with pytest.raises(ConfigError, match="names 'csv' twice"):
        load_config(None, ["tracking.loggers=[csv,csv]"])
    with pytest.raises(ConfigError, match="trainer.logger is set by ablate; use tracking.loggers instead"):
        load_config(None, ["trainer.logger=tensorboard"])


def test_each_logger_is_built_in_the_run_folder_and_a_missing_package_is_one_line(tmp_path):
    from ablate.config_checks import LOGGERS
    from ablate.training.tracking import FACTORIES, make_loggers, uses_wandb

    assert set(FACTORIES) | {"wandb"} == set(LOGGERS)  # one list of names
    cfg = load_config(
        None, ["tracking.loggers=[csv,{class_path: lightning.pytorch.loggers.CSVLogger, init_args: {save_dir: x}}]"]
    )
    built = make_loggers(cfg, tmp_path)
    assert [type(b) for b in built] == [CSVLogger, CSVLogger] and not uses_wandb(cfg)
    assert Path(built[0].log_dir) == tmp_path / "csv"
    if importlib.util.find_spec("mlflow") is None:
        with pytest.raises(ConfigError, match="tracking.loggers=mlflow needs the mlflow package: pip install mlflow"):
            make_loggers(load_config(None, ["tracking.loggers=[mlflow]"]), tmp_path)
