"""A tiny real sweep through ``cli.py train`` on the built-in task (slow: two real trainings)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ablate.sweep import commands
from ablate.sweep.commands import app
from ablate.sweep.local import cpu_count

from tests.helpers.tiny import EVAL_PAIRS, tiny_sweep_yaml

SWEEP = (
    """\
# two seeds of a tiny Transformer, two trials at once
method: grid
metric: {name: val/bleu, goal: maximize}
parameters:
  seed: {values: [1, 2]}
"""
    + tiny_sweep_yaml()
    + """\
  train.max_steps: {value: 20}
  data.builtin_pairs: {value: 300}
  eval.beam: {value: 1}
"""
)


@pytest.mark.slow
def test_a_tiny_real_sweep_trains_every_trial_then_skips_them(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setattr(commands, "console", Console(width=250))
    path = tmp_path / "tiny-real.yaml"
    path.write_text(SWEEP)
    out = tmp_path / "out"
    args = ["run", str(path), "--out", str(out), "--devices", "cpu", "--parallel", "2", "tracking.wandb=disabled"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    state = json.loads((out / "sweep.json").read_text())
    assert [t["status"] for t in state["trials"]] == ["finished", "finished"], state["trials"]
    for trial in state["trials"]:
        summary = json.loads((out / trial["name"] / "summary.json").read_text())
        assert summary["status"] == "finished" and trial["metric"] == summary["val/bleu"]
        assert summary["threads"] == max(1, cpu_count() // 2)  # --parallel 2 splits the cores
        assert summary["step"] == 20
        assert summary["config"]["tracking"]["group"].startswith("tiny-real-")  # each sweep folder its own W&B group
        assert summary["config"]["tracking"]["name"] == trial["name"]
        assert summary["config"]["seed"] == trial["point"]["seed"]
        assert (out / trial["name"] / "checkpoints").is_dir()
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "nothing to train: all 2 trials of tiny-real are done" in again.output


DDP_SWEEP = (
    """\
# one tiny trial trained with DDP over two CPU processes
method: grid
parameters:
  seed: {values: [1]}
  train.devices: {value: 2}
  train.accelerator: {value: cpu}
"""
    + tiny_sweep_yaml()
    + """\
  train.max_steps: {value: 12}
  data.builtin_pairs: {value: 300}
  eval.beam: {value: 1}
"""
)


@pytest.mark.slow
def test_a_ddp_trial_with_two_processes_runs_in_a_sweep(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setattr(commands, "console", Console(width=250))
    path = tmp_path / "ddp.yaml"
    path.write_text(DDP_SWEEP)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["run", str(path), "--out", str(out), "--devices", "cpu", "tracking.wandb=offline"]
    )
    assert result.exit_code == 0, result.output
    (trial,) = json.loads((out / "sweep.json").read_text())["trials"]
    assert trial["status"] == "finished", trial
    run = out / trial["name"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["config"]["train"]["devices"] == 2
    assert len(list(run.glob("wandb/offline-run-*"))) == 1  # one W&B run, from rank 0 only
    assert len((run / "hyps" / "test.txt").read_text().splitlines()) == EVAL_PAIRS
