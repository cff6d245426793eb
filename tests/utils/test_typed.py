"""ablate.utils.typed: safe YAML (no alias bombs, duplicate keys or deep nesting), shell completion of
overrides, and the ``trainer.*`` pass-through (Trainer options and callbacks by class path)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional, Union

import pytest
from pytorch_lightning.callbacks import EarlyStopping
from pytorch_lightning.loggers import CSVLogger
from typer.testing import CliRunner

from ablate import cli
from ablate.config import ConfigError, complete_overrides, load_config, valid_keys
from ablate.utils.typed import build_trainer_options as build, choices, complete_override, import_class


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
    from ablate.config import LOGGERS
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


def mapping_bomb(levels: int = 5) -> str:
    """A YAML mapping whose aliases expand to 10**levels leaves (about 1 KB of text)."""
    lines = ["l0: &l0 {" + ", ".join(f"k{i}: 1" for i in range(10)) + "}"]
    for n in range(1, levels + 1):
        lines.append(f"l{n}: &l{n} {{" + ", ".join(f"k{i}: *l{n - 1}" for i in range(10)) + "}")
    return "\n".join(lines) + "\n"


def test_a_config_alias_bomb_is_refused_with_its_line(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(mapping_bomb())
    with pytest.raises(ConfigError, match=r"line \d+: aliases expand .* alias bomb"):
        load_config(path)


def test_duplicate_config_keys_are_refused_with_line_and_key(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("model:\n  heads: 8\nseed: 2\nmodel:\n  d_model: 64\n")
    with pytest.raises(ConfigError, match=r"line 4: duplicate key 'model' \(first given on line 1\)"):
        load_config(path)


def test_ordinary_anchors_and_merge_keys_still_load(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("base: &base {heads: 8}\nmodel:\n  <<: *base\n  d_model: 64\n")
    from ablate.utils.typed import read_yaml

    assert read_yaml(path)["model"] == {"heads": 8, "d_model": 64}


def test_a_folder_given_as_a_yaml_file_is_called_a_folder(tmp_path):
    """``ablate train --config DIR`` (or a sweep file that is a folder) said "config file not found: DIR"."""
    from ablate.utils.typed import read_yaml

    with pytest.raises(ConfigError, match=f"^config file {tmp_path} is a folder; give a YAML file$"):
        read_yaml(tmp_path)
    with pytest.raises(ConfigError, match="^config file not found: "):
        read_yaml(tmp_path / "missing.yaml")


def test_a_pipe_given_as_a_yaml_file_is_called_a_pipe(tmp_path):
    """A FIFO as a run folder's config.yaml (or ``--config``) said "config file not found", though it is there."""
    import os

    from ablate.utils.typed import read_yaml

    os.mkfifo(tmp_path / "config.yaml")
    with pytest.raises(ConfigError, match=f"^config file {tmp_path}/config.yaml is a device or a pipe; give a YAML"):
        read_yaml(tmp_path / "config.yaml")


def test_nesting_past_the_limit_is_refused_with_its_line_and_nesting_up_to_it_loads():
    from ablate.utils import typed

    with pytest.raises(typed.YAMLRefused, match=r"^line 2: lists and mappings nest more than 100 levels deep"):
        typed.load_yaml("a: 1\nb: " + "[" * 5000 + "]" * 5000 + "\n")  # was a RecursionError
    value = typed.load_yaml("[" * 100 + "]" * 100)  # the document's mapping or list counts as one level
    for _ in range(99):
        (value,) = value
    assert value == []


def names(items: list[tuple[str, str]]) -> list[str]:
    return [name for name, _ in items]


def test_a_key_prefix_completes_to_dotted_keys_ending_in_equals():
    got = names(complete_overrides("model.att"))
    assert "model.attention.score=" in got and "model.attention.scale=" in got
    assert all(g.startswith("model.att") and g.endswith("=") for g in got)
    assert len(names(complete_overrides(""))) == len(valid_keys())


def test_after_the_equals_sign_the_choices_of_the_key():
    scores = names(complete_overrides("model.attention.score="))
    assert {"model.attention.score=dot", "model.attention.score=additive", "model.attention.score=none"} <= set(scores)
    assert names(complete_overrides("tracking.wandb=of")) == ["tracking.wandb=offline"]
    assert names(complete_overrides("data.joint_vocab=")) == ["data.joint_vocab=true", "data.joint_vocab=false"]
    assert complete_overrides("model.heads=") == []  # an int: nothing to offer
    assert complete_overrides("model.nope=") == [] and complete_overrides("model=") == []


@pytest.mark.parametrize(
    "tp, expected",
    [
        (Literal["a", "b"], ["a", "b"]),
        (Union[Literal["auto"], bool, float], ["auto", "true", "false"]),
        (Optional[bool], ["true", "false", "null"]),
        (int, []),
    ],
)
def test_choices_of_an_annotation(tp, expected):
    assert choices(tp) == expected


def test_the_shell_asks_the_cli_and_gets_the_keys(monkeypatch):
    """What ``ablate train model.att<TAB>`` runs: click's completion protocol through the real app."""
    monkeypatch.setenv("_ABLATE_COMPLETE", "complete_zsh")
    monkeypatch.setenv("_TYPER_COMPLETE_ARGS", "ablate train model.attention.sc")
    result = CliRunner().invoke(cli.app, [], prog_name="ablate")
    assert "model.attention.score=" in result.output and "model.attention.scale=" in result.output
    assert "model.heads" not in result.output


@dataclass(frozen=True)
class Inner:
    mode: Literal["x", "y"] = "x"


@dataclass(frozen=True)
class Outer:
    inner: Inner = field(default_factory=Inner)
    n: int = 1


def test_a_dataclass_of_its_own():
    assert names(complete_override(Outer, "")) == ["inner.mode=", "n="]
    assert names(complete_override(Outer, "inner.mode=y")) == ["inner.mode=y"]


def test_a_scheme_with_nothing_after_it_stays_text_not_a_mapping():
    """``data.source=hf:`` (YAML: the mapping ``{hf: null}``) said "data.source={'hf': None} is not valid (expected
    a string)"; the text reaches the source, which names the form it wants (tests/data/test_hub.py)."""
    from ablate.config import parse_override

    assert parse_override("data.source=hf:") == ("data.source", "hf:")
    assert load_config(None, ["data.source=hf:"]).data.source == "hf:"
    assert parse_override("model.positions_params={base: 500}") == ("model.positions_params", {"base": 500})


@pytest.mark.parametrize(
    "option, expected",
    [("trainer.deterministic=maybe", "bool or warn or null"), ("trainer.benchmark=sometimes", "true or false"),
     ("trainer.detect_anomaly=1", "true or false")],
)  # fmt: skip
def test_a_trainer_option_of_the_wrong_type_is_refused_when_the_config_is_read(option, expected):
    """``trainer.deterministic=maybe`` trained without a word: Lightning took the truthy text as half of True
    (cuDNN benchmark off, CUBLAS_WORKSPACE_CONFIG set) but never called torch.use_deterministic_algorithms."""
    key, value = option.split("=")
    with pytest.raises(ConfigError, match=rf"^{key}='?{value}'? is not valid \(expected {expected}\)$"):
        load_config(None, [option])
    for good in ("trainer.deterministic=warn", "trainer.deterministic=true", "trainer.limit_val_batches=0.5"):
        load_config(None, [good])


def test_fast_dev_run_is_refused_when_the_config_is_read():
    """``trainer.fast_dev_run=true`` trained a step, then recorded the run failed: 'decoding covered 19 of 20
    sentences' (Lightning cut validation and test to one batch and turned checkpoints off)."""
    with pytest.raises(ConfigError, match=r"^trainer.fast_dev_run is managed by ablate \(checkpoints and batching"):
        load_config(None, ["trainer.fast_dev_run=true"])


@pytest.mark.parametrize("option", ["trainer.barebones=true", "trainer.devices=2", "trainer.plugins=[x]"])
def test_an_option_ablate_refuses_fails_when_the_config_is_read_without_importing_lightning(option):
    """``ablate train trainer.barebones=true`` built the data and the model, then failed in make_trainer (24 s on a
    busy 2-core machine); a key ablate owns failed at the config, after importing Lightning (18-26 s there). Both are
    one line at the config edge now, before Lightning is imported (1 s)."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom ablate.config import ConfigError, load_config\n"
        f"try:\n    load_config(None, [{option!r}])\nexcept ConfigError as err:\n    print(err)\n"
        "print('pytorch_lightning' in sys.modules)\n"
    )
    said, imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.splitlines()
    assert said.startswith(option.split("=")[0]) and imported == "False"
    if option == "trainer.barebones=true":
        assert "tracking.log_every" in said and "drop trainer.barebones" in said
    load_config(None, ["trainer.barebones=false"])
