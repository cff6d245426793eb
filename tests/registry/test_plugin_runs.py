"""A plugin's score through real runs: training, a parallel sweep in fresh processes, translate, export."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from ablate import cli
from ablate.sweep import commands
from ablate.utils.plugins import PluginError, sha256

from tests.helpers.plugin import TINY, write_cosine

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_trained_run_records_its_plugin_translates_elsewhere_and_names_a_missing_one(
    tmp_path, cache_dir, monkeypatch
):
    plugin = write_cosine(tmp_path / "lab")
    config = tmp_path / "lab" / "cosine.yaml"
    config.write_text(yaml.safe_dump({**TINY, "plugins": ["cosine.py"], "model.attention.score": "cosine"}))
    run = tmp_path / "run"
    result = CliRunner().invoke(cli.app, ["train", "--config", str(config), "--run-dir", str(run)])
    assert result.exit_code == 0, result.output
    record = {"kind": "file", "name": "cosine", "path": str(plugin.resolve()), "sha256": sha256(plugin)}
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished"
    assert summary["config"]["plugins"] == [record]
    assert yaml.safe_load((run / "config.yaml").read_text())["plugins"] == [record]

    # a fresh process knows nothing of the plugin but what the run folder says, and imports it only when
    # the user names that code (a record is not the user's say-so)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(ROOT)}  # this checkout

    def translate(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "ablate", "translate", str(run), "--beam", "1", *flags],
            input="the cat sees a dog .\n",
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    done = translate()
    assert done.returncode == 2 and f"--plugins {plugin.resolve()} or --trust-plugins" in done.stderr, done.stderr
    done = translate("--plugins", "lab/cosine.py")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1

    plugin.rename(plugin.with_suffix(".bak"))
    from ablate.training.module import TranslationModule
    from ablate.utils import plugins

    monkeypatch.setattr(plugins, "_LOADED", {})  # as in a new process: the plugin's code is not loaded
    with pytest.raises(PluginError) as err:
        TranslationModule.load_from_checkpoint(str(run / "checkpoints" / "best.ckpt"), weights_only=True)
    assert str(err.value) == (
        f"plugin 'cosine' is missing: {plugin.resolve()} (sha256 {record['sha256'][:16]}...) is not there; "
        "copy that file back, or change that path in the config that records it"
    )
    done = subprocess.run(
        [sys.executable, "-m", "ablate", "translate", str(run), "--input", str(config)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2 and str(err.value) in done.stdout + done.stderr


def as_if_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Progress lines from the first item on, as a loaded machine gets them once a loop passes a few seconds."""
    from ablate.utils import commands

    real = commands.Progress.__init__

    def eager(self, what, total, logger, after_s=3.0, every_s=5.0, clock=None):
        real(self, what, total, logger, 0.0, every_s, clock)

    monkeypatch.setattr(commands.Progress, "__init__", eager)


SWEEP = """\
# the cosine score at two temperatures, two trials at once
method: grid
metric: {name: val/bleu, goal: maximize}
parameters:
  plugins: {value: [cosine.py]}
  model.attention.score: {value: cosine}
  model.attention.params.temperature: {values: [1, 5]}
  base: {value: {model.attention.params.temperature: 1}}  # neither is the default: say which row is the base
"""


@pytest.mark.slow
def test_a_parallel_sweep_loads_the_plugin_in_every_trial_and_tabulates_its_parameter(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setattr(commands, "console", Console(width=250))
    lab = tmp_path / "lab"
    plugin = write_cosine(lab)
    sweep = lab / "cosine-sweep.yaml"
    tiny = "".join(
        f"  {key}: {{value: {json.dumps(value)}}}\n" for key, value in TINY.items() if key != "tracking.wandb"
    )
    sweep.write_text(SWEEP + tiny)
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)  # not the sweep file's folder
    args = ["run", str(sweep), "--out", str(out), "--devices", "cpu", "--parallel", "2", "tracking.wandb=disabled"]
    result = CliRunner().invoke(commands.app, args)
    assert result.exit_code == 0, result.output
    state = json.loads((out / "sweep.json").read_text())
    assert [t["status"] for t in state["trials"]] == ["finished", "finished"], state["trials"]
    temperatures = set()
    for trial in state["trials"]:
        config = json.loads((out / trial["name"] / "summary.json").read_text())["config"]
        assert config["plugins"] == [
            {"kind": "file", "name": "cosine", "path": str(plugin.resolve()), "sha256": sha256(plugin)}
        ]
        temperatures.add(config["model"]["attention"]["params"]["temperature"])
    assert temperatures == {1.0, 5.0}

    as_if_loaded(monkeypatch)  # the status lines a slow `ablate table` writes go to stderr, never into the table
    table = CliRunner().invoke(cli.app, ["table", str(out), "--format", "csv"])
    assert table.exit_code == 0, table.output
    assert "read " in table.stderr  # a status line was written ...
    header = table.stdout.splitlines()[0]  # ... and the table is stdout alone (.output mixes stderr in)
    assert "temperature" in header, table.output

    results = tmp_path / "results"
    exported = CliRunner().invoke(cli.app, ["export", str(out), str(results)])
    assert exported.exit_code == 0, exported.output
    (copy,) = (results / "plugins").iterdir()
    assert copy.read_bytes() == plugin.read_bytes()
    trial = state["trials"][0]["name"]
    record = json.loads((results / trial / "summary.json").read_text())["config"]["plugins"][0]
    assert record["path"] == f"../plugins/{copy.name}" and record["sha256"] == sha256(copy)
    assert (results / trial / record["path"]).resolve() == copy.resolve()
    again = CliRunner().invoke(cli.app, ["table", str(results), "--format", "csv"])
    assert again.exit_code == 0 and again.stdout.splitlines()[0] == header
