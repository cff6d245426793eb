"""examples/cosine_score, copied out of the repository, does what its tutorial says."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ablate import cli
from ablate.sweep import commands
from ablate.sweep.spec import load_spec

from tests.helpers.plugin import TINY

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cosine_score"


def test_the_examples_own_test_passes_outside_the_repository(tmp_path):
    folder = shutil.copytree(EXAMPLE, tmp_path / "cosine_score")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder / "test_cosine.py")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_the_example_sweep_is_valid():
    spec = load_spec(EXAMPLE / "sweep.yaml")
    assert spec.parameters["plugins"] == {"value": ["cosine.py"]}
    assert [v if isinstance(v, str) else v["name"] for v in spec.parameters["variant"]["values"]] == [
        "base",
        "cosine",
        "cosine-t30",
    ]


@pytest.mark.slow
def test_the_example_sweep_runs_end_to_end_from_a_copy(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setattr(commands, "console", Console(width=250))
    folder = shutil.copytree(EXAMPLE, tmp_path / "cosine_score")
    sweep = folder / "sweep.yaml"
    sweep.write_text(sweep.read_text().replace("seed: {values: [1, 2, 3]}", "seed: {values: [1]}"))
    monkeypatch.chdir(tmp_path)
    tiny = [f"{key}={json.dumps(value) if value is None else value}" for key, value in TINY.items()]
    out = tmp_path / "runs" / "cosine"
    args = ["run", str(sweep), "--out", str(out), "--devices", "cpu", "--parallel", "2", *tiny]
    result = CliRunner().invoke(commands.app, args)
    assert result.exit_code == 0, result.output
    state = json.loads((out / "sweep.json").read_text())
    assert sorted(t["status"] for t in state["trials"]) == ["finished"] * 3, state["trials"]
    table = CliRunner().invoke(cli.app, ["table", str(out), "--format", "csv"])
    assert table.exit_code == 0, table.output
    rows = table.output.splitlines()
    assert "temperature" in rows[0] and any(",cosine-t30," in r for r in rows), table.output
