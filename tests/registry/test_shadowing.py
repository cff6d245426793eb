"""A plugin may take a name ablate ships, by an explicit rule that keeps every saved config's meaning."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ablate.config import load_config
from ablate.model.build import build_model
from ablate.model.scores import SCORES, DotScore

ROOT = Path(__file__).resolve().parents[2]


class ShippedCosine(DotScore):
    """Stands for a ``cosine`` score promoted into ablate."""

    __module__ = "ablate.model.scores"


@pytest.fixture()
def shipped_cosine(monkeypatch):
    monkeypatch.setitem(SCORES, "cosine", ShippedCosine)  # the registries are restored after each test


def _scores(cfg):
    return {type(m).__module__ for m in build_model(cfg.model, 20, 20).modules() if "Cosine" in type(m).__name__}


def test_the_tutorial_plugin_and_a_shipped_cosine_coexist(tmp_path, shipped_cosine):
    tutorial = shutil.copytree(ROOT / "examples" / "cosine_score", tmp_path / "cosine_score") / "cosine.py"
    cfg = load_config(
        None, [f"plugins={tutorial}", "model.attention.score=cosine", "model.attention.params.temperature=30"]
    )
    assert cfg.model.attention.score == "cosine:cosine"  # the resolved config records which one
    assert cfg.model.attention.params == {"temperature": 30.0}
    assert _scores(cfg) == {"cosine"}  # the tutorial's class, from its file
    shipped = load_config(None, ["model.attention.score=cosine"])  # a config without the plugin
    assert shipped.model.attention.score == "cosine" and _scores(shipped) == {"ablate.model.scores"}
    again = load_config(None, [f"plugins={tutorial}", "model.attention.score=cosine:cosine"])
    assert again.model.attention == cfg.model.attention.__class__(score="cosine:cosine")  # its record reloads


def test_override_replaces_the_shipped_component(tmp_path, shipped_cosine):
    (tmp_path / "mine.py").write_text(
        "import ablate\nfrom ablate.model.scores import DotScore\n\n"
        "@ablate.register('score', 'cosine', override=True)\n"
        "class MyCosine(DotScore):\n    pass\n"
    )
    cfg = load_config(None, [f"plugins={tmp_path / 'mine.py'}", "model.attention.score=cosine"])
    assert cfg.model.attention.score == "cosine" and SCORES["cosine"].__module__ == "mine"
    assert [r["name"] for r in cfg.plugins] == ["mine"]  # the record says whose cosine it was
