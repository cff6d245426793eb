"""Shell completion of config overrides: dotted keys, then a key's choices (typer's autocompletion=)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional, Union

import pytest
from typer.testing import CliRunner

from ablate import cli
from ablate.config import complete_overrides, valid_keys
from ablate.utils.typed import choices, complete_override


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
