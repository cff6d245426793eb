"""The documentation: a generated configuration reference that matches the code, a README that stays a front page."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_config_docs", ROOT / "scripts" / "gen_config_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_reference_matches_the_code():
    gen = _generator()
    assert gen.PAGE.read_text() == gen.render(), "run python scripts/gen_config_docs.py"
    assert gen.main(["--check"]) == 0


def test_the_reference_lists_every_key_with_its_whole_docstring():
    from ablate.config import TrainConfig, valid_keys

    page = _generator().render()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([\w.]+)` \|.*$", page, re.M)}
    assert sorted(rows) == sorted(valid_keys())
    # the full docstring, not only the first sentence that `ablate train --help` prints
    assert "Default: d_model^-0.5 * warmup^-0.5" in rows["train.lr"]
    assert "`inverse_sqrt`, `linear`, `cosine`" in rows["train.schedule"]  # choices from the registry
    assert TrainConfig.__doc__ in page


def test_a_new_config_field_appears_in_the_reference(monkeypatch):
    """What makes the page unable to drift: it is rendered from the dataclasses, so a field added there is listed."""
    from ablate import config
    from ablate.utils import fields

    @dataclasses.dataclass(frozen=True)
    class Eval(config.EvalConfig):
        sampling_topk: int = 0
        """Sample from the k most likely tokens. A made-up key of this test."""

    fields.field_types.cache_clear()
    monkeypatch.setattr(config, "EvalConfig", Eval)  # what Config's (string) annotation `eval: EvalConfig` resolves to
    try:
        page = _generator().render()
    finally:
        fields.field_types.cache_clear()
    assert (
        "| `eval.sampling_topk` | int | `0` | Sample from the k most likely tokens. A made-up key of this test. |"
        in page
    )
    assert page != _generator().PAGE.read_text()  # so the check above would fail until the page is regenerated


@pytest.mark.parametrize("text", ["a | b", "x\n   y"])
def test_a_table_cell_is_one_line_with_pipes_escaped(text):
    cell = _generator()._cell(text)
    assert "\n" not in cell and "|" not in cell.replace("\\|", "")
