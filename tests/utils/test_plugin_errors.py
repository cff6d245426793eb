"""A plugin's errors are one line naming the plugin: its AblateError's message, or its plain exception's class and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import assert_one_error_line, run_cli

SOURCE = """\
import ablate
from ablate.errors import AblateError


@ablate.register("source", "{kind}")
class Broken:
    def __init__(self, cfg, cache_root):
        if {plain}:
            raise ValueError("no shard for split train")
        raise AblateError("the lab server is down; try again later")

    def fingerprint(self):
        return "x"

    def load(self, workdir):
        raise AssertionError("unreachable")
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "plain,expected",
    [
        (False, "error: plugin 'labdata_ablate': the lab server is down; try again later"),
        (True, "error: plugin 'labdata_plain' raised ValueError at labdata_plain.py:9: no shard for split train"),
    ],
)
def test_a_plugin_source_error_is_one_line_naming_the_plugin(tmp_path: Path, plain, expected):
    name = "labdata_plain" if plain else "labdata_ablate"
    (tmp_path / f"{name}.py").write_text(SOURCE.format(kind=name, plain=plain))
    proc = run_cli(
        "train",
        f"plugins=[{name}.py]",
        f"data.source={name}:x",
        "--run-dir",
        str(tmp_path / "run"),
        cwd=tmp_path,
        ABLATE_CACHE=str(tmp_path / "cache"),
    )
    assert_one_error_line(proc, expected)
