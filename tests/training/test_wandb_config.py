"""The W&B config of a run equals its resolved config, whatever started it.

W&B's agent locks every key the sweep sets; a Table 3 variant ``{name: A-heads1,
model.heads: 1}`` over the sweep's ``model.heads: {value: 8}`` used to show 8. Each launch path is
started here for real up to the network, and the run is read back from its offline record log.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ablate.config import flatten, load_config, to_dict
from ablate.sweep import wandb_server
from ablate.sweep.launcher import Launcher
from ablate.sweep.local import Slot
from ablate.sweep.planner import LaunchOptions
from ablate.sweep.spec import load_spec, spec_from_dict, trial_overrides

from tests.helpers.wandb_agent import agent_env, proposal
from tests.helpers.wandb_offline import offline_runs, read_run

ROOT = Path(__file__).resolve().parents[2]
START = ROOT / "tests" / "helpers" / "wandb_start.py"
TABLE3 = ROOT / "sweeps" / "table3.yaml"


def _table3() -> dict:
    return yaml.safe_load(TABLE3.read_text())


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_SILENT="true", PYTHONPATH=str(ROOT), **extra)
    return env


def _start(run_dir: Path, overrides: list[str], env: dict[str, str], cwd: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(START), str(run_dir), *overrides],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def _recorded(run_dir: Path) -> dict:
    folders = offline_runs(run_dir)
    assert len(folders) == 1, folders
    return read_run(folders[0])


def _assert_resolved(run, overrides: list[str]) -> None:
    from ablate.sweep.spec import expand_variant

    resolved = flatten(to_dict(load_config(None, expand_variant(overrides))))
    assert run.config["model.heads"] == 1  # the variant's value, not the base's 8
    wrong = {
        k: (run.config.get(k), v)
        for k, v in resolved.items()
        if k in run.config and run.config[k] != v and not (isinstance(v, tuple) and list(v) == run.config[k])
    }
    missing = [k for k in resolved if k not in run.config and resolved[k] != {}]
    assert not wrong and not missing, (wrong, missing)


@pytest.mark.slow
def test_sweep_agent_run_records_the_variant_not_the_locked_base(tmp_path):
    """The agent's own mechanism, directly: the run is initialised with the agent's env and
    parameter file (``model.heads: 8`` locked by the sweep) and the trial's resolved overrides."""
    config = _table3()
    args = proposal(config, "A-heads1")
    assert args["model.heads"] == {"value": 8}  # what W&B hands out and locks
    spec = load_spec(TABLE3)
    point = {k: v["value"] for k, v in args.items()}
    overrides = trial_overrides(spec, point, "A-heads1-seed=1")
    env = _env(**agent_env(tmp_path, "sw1", "run123", args))
    _start(tmp_path / "trial", overrides, env, tmp_path)
    run = _recorded(tmp_path / "trial")
    assert run.id == "run123"  # the trainer logs into the run the sweep created
    assert run.config["variant"] == "A-heads1"  # the top-level name reports group by, not the agent's dict
    assert run.config["tracking.variant"] == "A-heads1"
    _assert_resolved(run, overrides)


@pytest.mark.slow
def test_ablate_sweep_agent_path(tmp_path, monkeypatch):
    """``ablate sweep agent``: W&B's agent calls our trial function, which starts the trainer."""
    args = proposal(_table3(), "A-heads1")
    run, overrides = agent_trial(load_spec(TABLE3), args, "A-heads1-seed=1", "run456", tmp_path, monkeypatch)
    assert run.id == "run456"
    _assert_resolved(run, overrides)


def agent_trial(spec, args: dict, trial: str, run_id: str, tmp_path: Path, monkeypatch) -> tuple:
    """One run of ``ablate sweep agent`` as W&B's agent starts it (its environment, ``args`` proposed):
    the trial function starts the trainer stand-in; returns what W&B recorded of the run (its folder
    ``runs/<sweep>/<trial>-<run_id>``) and the overrides the trainer got."""
    for key, value in _env(**agent_env(tmp_path, f"sw-{run_id}", run_id, args)).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    seen = []

    def command(run_dir, overrides):
        seen.append(overrides)
        return [sys.executable, str(START), str(run_dir), *overrides]

    opts = wandb_server.AgentOptions(out=tmp_path / "runs", command=command)
    wandb_server.trial_function(spec, Slot(0, None, 1), opts)()
    return _recorded(tmp_path / "runs" / spec.name / f"{trial}-{run_id}"), seen[0]


@pytest.mark.slow
def test_local_launcher_path(tmp_path):
    """``ablate sweep run``: no W&B agent; the launcher's trial gets the resolved config too."""
    config = {
        "name": "t3",
        "method": "grid",
        "parameters": {
            "variant": {"values": ["base", {"name": "A-heads1", "model.heads": 1}]},
            "model.heads": {"value": 8},
            "model.d_model": {"value": 64},
            "train.max_steps": {"value": 2},
        },
    }
    spec = spec_from_dict(config, name="t3")

    def command(run_dir, overrides):
        return [sys.executable, str(START), str(run_dir), *overrides]

    opts = LaunchOptions(out=tmp_path / "t3", slots=[Slot(0, None, 1)], command=command, poll_s=0.05)
    Launcher(spec, opts).run()
    run = _recorded(tmp_path / "t3" / "A-heads1")
    assert run.config["model.heads"] == 1 and run.config["tracking.variant"] == "A-heads1"


@pytest.mark.parametrize("planted", ["pipe", "a/../../escape", ""])
def test_a_received_wandb_id_that_is_a_pipe_or_no_run_id_gets_a_new_one(tmp_path, planted):
    """``wandb_id.txt`` of a received run folder: as a FIFO, resuming the run waited forever to read it; text that
    is no W&B run id (a path) was handed to ``wandb.init(id=...)``, which names its folders after it."""
    from ablate.training.tracking import run_id

    path = tmp_path / "wandb_id.txt"
    os.mkfifo(path) if planted == "pipe" else path.write_text(planted + "\n")
    code = (
        f"from pathlib import Path; from ablate.training.tracking import run_id; print(run_id(Path({str(tmp_path)!r})))"
    )
    env = {k: v for k, v in os.environ.items() if k != "WANDB_RUN_ID"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=env)
    rid = proc.stdout.strip()
    assert len(rid) == 8 and rid.isalnum(), proc.stderr[-2000:]
    assert path.is_file() and path.read_text() == rid + "\n" and run_id(tmp_path) == rid  # kept for the next resume
