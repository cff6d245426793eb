"""A plugin's errors are one line naming the plugin: its AblateError's message, or its plain exception's class and line."""

from __future__ import annotations

import json
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
def test_a_plugin_source_error_is_one_line_naming_the_plugin_and_recorded(tmp_path: Path, plain, expected):
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
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())  # the run's record: the line printed
    assert summary["status"] == "failed" and summary["error"] == proc.stderr.strip().removeprefix("error: ")


QUITTER = """\
import os
import sys

{call}
"""


@pytest.mark.parametrize("call", ["os._exit(0)", "sys.exit(0)"])
def test_a_plugin_that_exits_at_import_fails_the_dry_run_in_one_line(tmp_path: Path, call):
    """A plugin quitting while it is imported cannot pass a sweep's ``--dry-run`` as valid (status 0,
    nothing checked): the dry run fails and its one error line blames the plugin."""
    (tmp_path / "quitter.py").write_text(QUITTER.format(call=call))
    (tmp_path / "sweep.yaml").write_text(
        "method: grid\nparameters:\n  plugins: {value: [quitter.py]}\n  seed: {values: [1, 2]}\n"
    )
    proc = run_cli("sweep", "run", "sweep.yaml", "--dry-run", "--out", str(tmp_path / "out"), cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert f"plugin 'quitter' called {call} while it was imported" in output, output
    assert "Traceback" not in output
