"""``sweep create`` / ``sweep agent`` up to the network: wandb.sweep and wandb.agent are faked."""

from __future__ import annotations

import json
import os
import warnings

import pytest
import wandb
import yaml
from typer.testing import CliRunner

from ablate.sweep import wandb_server
from ablate.sweep.commands import app
from ablate.sweep.spec import SweepError, load_spec

from tests.helpers.sweep import fake_command, small_spec

SWEEPS = os.path.join(os.path.dirname(__file__), "..", "..", "sweeps")
AGENT_ENV = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONUNBUFFERED")


def test_create_registers_the_file_as_a_valid_wandb_sweep(monkeypatch):
    sent = {}

    def fake_sweep(sweep, project=None, entity=None):
        sent.update(sweep=sweep, project=project, entity=entity)
        return "abc123"

    monkeypatch.setattr(wandb, "sweep", fake_sweep)
    result = CliRunner().invoke(app, ["create", os.path.join(SWEEPS, "table3.yaml"), "--project", "p"])
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == "abc123" and "ablate sweep agent abc123" in result.output
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sweeps import SweepConfig
    SweepConfig(sent["sweep"])  # what reaches W&B passes W&B's validation
    assert sent["project"] == "p" and sent["sweep"]["name"] == "table3"
    variants = sent["sweep"]["parameters"]["variant"]["values"]
    assert "A-heads1" in variants and len(variants) == 19  # names: every run's config.variant is one
    assert sent["sweep"]["parameters"]["variants"]["value"]["A-heads1"] == {"model.heads": 1}


class FakeAgent:
    """Stands in for ``wandb.agent``: hands out runs the way W&B's python agent does."""

    def __init__(self, tmp_path, points):
        self.tmp_path, self.points, self.errors, self.calls = tmp_path, points, [], []

    def __call__(self, sweep_id, function=None, entity=None, project=None, count=None):
        self.calls.append(
            {"sweep_id": sweep_id, "project": project, "count": count, "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}
        )
        for i, point in enumerate(self.points):
            path = self.tmp_path / f"config-run{i}.yaml"
            path.write_text(yaml.safe_dump({"wandb_version": 1, **{k: {"value": v} for k, v in point.items()}}))
            os.environ.update(WANDB_RUN_ID=f"run{i}", WANDB_SWEEP_ID=sweep_id, WANDB_SWEEP_PARAM_PATH=str(path))
            try:
                function()
            except Exception as err:  # W&B marks the run failed and carries on
                self.errors.append(str(err))
            finally:
                for key in ("WANDB_RUN_ID", "WANDB_SWEEP_ID", "WANDB_SWEEP_PARAM_PATH"):
                    os.environ.pop(key, None)


def test_agent_trains_each_wandb_run_in_a_subprocess(tmp_path, monkeypatch, events):
    for key in AGENT_ENV:
        monkeypatch.setenv(key, "unset")
    spec = small_spec(
        {"variant": {"values": ["base", {"name": "three", "model.heads": 3}]}, "seed": {"values": [1, 2]}},
        name="remote",
    )
    agent = FakeAgent(
        tmp_path,
        [
            {"variant": "base", "seed": 1, "model.d_model": 32},
            {"variant": {"name": "three", "model.heads": 3}, "seed": 1, "model.d_model": 32},
            {"variant": "base", "seed": 2, "model.d_model": 32},
        ],
    )
    monkeypatch.setattr(wandb, "agent", agent)
    monkeypatch.setattr(wandb_server, "fetch_spec", lambda sweep_id, project, entity: spec)
    monkeypatch.setattr(
        wandb_server, "trainer_command", lambda config=None: fake_command(events, {"base-seed=2-run2": "crash"})
    )
    result = CliRunner().invoke(
        app, ["agent", "sw1", "--devices", "3", "--out", str(tmp_path / "runs"), "--count", "3", "train.max_steps=2"]
    )
    assert result.exit_code == 0, result.output
    assert agent.calls == [{"sweep_id": "sw1", "project": "ablate", "count": 3, "cuda": "3"}]
    summary = json.loads((tmp_path / "runs" / "remote" / "base-seed=1-run0" / "summary.json").read_text())
    assert summary["status"] == "finished"
    config = summary["config"]
    assert config["tracking.group"] == "remote" and config["tracking.name"] == "base-seed=1"
    assert config["train.max_steps"] == "2" and config["model.d_model"] == "32"
    assert len(agent.errors) == 2
    assert "three-seed=1: invalid config: model.heads=3 does not divide" in agent.errors[0]
    assert "base-seed=2 failed: RuntimeError: CUDA out of memory" in agent.errors[1]
    assert events.count("start") == 2  # the impossible run never started a trainer


def test_an_agent_refuses_an_override_of_a_key_the_sweep_varies(tmp_path, monkeypatch, events):
    for key in AGENT_ENV:  # the agent sets its slot's variables in this process before it refuses
        monkeypatch.setenv(key, "unset")
    spec = small_spec({"seed": {"values": [1, 2]}}, name="remote")
    agent = FakeAgent(tmp_path, [{"seed": 2, "model.d_model": 32}])
    monkeypatch.setattr(wandb, "agent", agent)
    monkeypatch.setattr(wandb_server, "fetch_spec", lambda sweep_id, project, entity: spec)
    monkeypatch.setattr(wandb_server, "trainer_command", lambda config=None: fake_command(events))
    result = CliRunner().invoke(app, ["agent", "sw1", "--devices", "cpu", "--out", str(tmp_path), "seed=1"])
    assert result.exit_code == 2 and "the sweep varies seed" in result.output, result.output
    assert agent.calls == [] and events.count("start") == 0  # it trained run seed=2 with seed=1 appended last


def test_agent_outside_a_wandb_run_is_a_clear_error(tmp_path):
    monkeypatch_free = wandb_server.trial_function(
        small_spec({"seed": {"values": [1]}}), wandb_server.Slot(0, None, 1), wandb_server.AgentOptions(out=tmp_path)
    )
    os.environ.pop("WANDB_SWEEP_PARAM_PATH", None)
    with pytest.raises(SweepError, match="not inside a W&B agent run"):
        monkeypatch_free()


def test_one_agent_process_per_device_slot(tmp_path, monkeypatch):
    spawned = []

    class Child:
        def __init__(self, argv, env):
            spawned.append(argv)

        def wait(self):
            return 0

    monkeypatch.setattr(wandb_server.subprocess, "Popen", Child)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")  # --devices must name GPUs that exist
    result = CliRunner().invoke(
        app,
        [
            "agent",
            "sw9",
            "--devices",
            "0,1,2,3",
            "--gpus-per-trial",
            "2",
            "--entity",
            "me",
            "--out",
            str(tmp_path),
            "seed=3",
        ],
    )
    assert result.exit_code == 0, result.output
    assert len(spawned) == 2
    for argv, gpus in zip(spawned, ["0,1", "2,3"]):
        assert argv[1:7] == ["-m", "ablate", "sweep", "agent", "sw9", "--devices"] and argv[7] == gpus
        assert argv[argv.index("--gpus-per-trial") + 1] == "2" and argv[argv.index("--entity") + 1] == "me"
        assert argv[-1] == "seed=3"


AGENTS = """
import sys
from pathlib import Path
from ablate.sweep import wandb_server
from ablate.sweep.local import Slot

child = "import os, sys, time; open(os.path.join(sys.argv[1], str(os.getpid())), 'w').close(); time.sleep(120)"
wandb_server.agent_argv = lambda sweep_id, slot, opts: [sys.executable, "-c", child, sys.argv[1]]
sys.exit(wandb_server.run_agents("sw9", [Slot(0, (), 1), Slot(1, (), 1)], wandb_server.AgentOptions(Path("."))))
"""


def test_sigterm_to_an_agent_of_several_slots_stops_its_agents(tmp_path):
    # `kill PID` of `ablate sweep agent --devices 0,1` ended it at once and left its two agents training W&B runs
    # until the sweep was done, with nothing to stop them; it now passes SIGTERM on to them and waits
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    parent = subprocess.Popen([sys.executable, "-c", AGENTS, str(tmp_path)], env={**os.environ, "PYTHONPATH": root})
    deadline = time.monotonic() + 60
    while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    children = [int(p.name) for p in tmp_path.iterdir()]
    parent.send_signal(signal.SIGTERM)
    parent.wait(timeout=30)
    time.sleep(0.5)
    alive = [pid for pid in children if os.path.exists(f"/proc/{pid}")]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert len(children) == 2 and not alive


def test_a_fetched_sweep_config_is_validated_like_a_file(monkeypatch):
    class Api:
        def sweep(self, path):
            assert path == "me/p/sw1"
            return type(
                "Sweep",
                (),
                {"config": {"name": "heads", "method": "grid", "parameters": {"model.heads": {"values": [2, 4]}}}},
            )()

    monkeypatch.setattr(wandb, "Api", Api)
    spec = wandb_server.fetch_spec("sw1", "p", "me")
    assert spec.name == "heads" and spec.varying == ["model.heads"]
    assert wandb_server.wandb_sweep_config(load_spec(os.path.join(SWEEPS, "heads.yaml")))["name"] == "heads"


def test_wandb_errors_are_one_line_not_a_traceback(monkeypatch):
    def no_key(**kwargs):
        raise wandb.errors.UsageError("No API key configured. Use `wandb login` to log in.")

    monkeypatch.setattr(wandb, "sweep", no_key)
    result = CliRunner().invoke(app, ["create", os.path.join(SWEEPS, "heads.yaml")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.strip() == "error: W&B: No API key configured. Use `wandb login` to log in."


SMALL = """\
name: tiny
method: grid
parameters:
  variant: {values: [base, {name: wide, model.d_ff: 128}]}
  model.d_model: {value: 32}
  model.heads: {value: 2}
"""


def test_wandb_sweep_registers_a_local_sweep_once_per_folder(tmp_path, monkeypatch, events):
    """``ablate sweep run --wandb-sweep`` online: one W&B sweep object, its id in every trial's environment."""
    from ablate.sweep import launcher

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)  # a stand-in key: online needs one (wandb.sweep is stubbed)
    # the command sets WANDB_SWEEP_ID in this process for its trials: setenv first, so monkeypatch restores
    # the variable's absence afterwards (delenv of an unset name records nothing, and later tests' W&B runs
    # would attach to the fake sweep and ignore their run ids)
    monkeypatch.setenv("WANDB_SWEEP_ID", "")
    monkeypatch.delenv("WANDB_SWEEP_ID")
    monkeypatch.setattr(launcher, "trainer_command", lambda config=None: fake_command(events))
    created = []

    def fake_sweep(sweep, project=None, entity=None):
        created.append((sweep, project, entity))
        return f"sw{len(created)}"

    monkeypatch.setattr(wandb, "sweep", fake_sweep)
    (tmp_path / "tiny.yaml").write_text(SMALL)
    args = ["run", "tiny.yaml", "--devices", "cpu", "--wandb-sweep", "train.max_steps=2", "tracking.entity=me"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "W&B sweep me/ablate/sw1" in result.output and os.environ["WANDB_SWEEP_ID"] == "sw1"
    sweep, project, entity = created[0]
    assert (project, entity) == ("ablate", "me") and sweep["parameters"]["variant"]["values"] == ["base", "wide"]
    assert json.loads((tmp_path / "runs" / "tiny" / "sweep.json").read_text())["wandb_sweep"] == "me/ablate/sw1"
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and len(created) == 1  # the folder's sweep is reused

    monkeypatch.setenv("WANDB_MODE", "offline")
    offline = CliRunner().invoke(app, [*args, "--out", "runs/off"])
    assert offline.exit_code == 0 and "W&B is not online" in offline.output and len(created) == 1


def test_a_sweep_for_wandb_agents_on_a_plain_test_score_is_refused_naming_the_per_split_key():
    """W&B's agents read the metric from each run's W&B summary, which holds a test score per split only:
    ``test/bleu`` would never be found there, so such a sweep is refused in one line naming the key to use."""
    spec = small_spec({"model.heads": {"values": [1, 2]}}, method="bayes", metric={"name": "test/bleu"})
    with pytest.raises(SweepError, match=r"name test_<split>/bleu \(e\.g\. test_test_2016_flickr/bleu\)"):
        wandb_server.wandb_sweep_config(spec)
    assert (
        wandb_server.wandb_sweep_config(spec, agents=False)["metric"]["name"] == "test/bleu"
    )  # a local sweep's panels
    per_split = small_spec({"model.heads": {"values": [1, 2]}}, method="bayes", metric={"name": "test_test/bleu"})
    assert wandb_server.wandb_sweep_config(per_split)["metric"]["name"] == "test_test/bleu"


def test_a_sweep_created_from_a_file_without_a_command_runs_under_a_plain_wandb_agent(tmp_path):
    """A sweep file without ``command`` (``ablate sweep run`` needs none) was registered as it was, so W&B's default
    ``${program} ${args}`` had no program: every run of a plain ``wandb agent`` failed. It gets ablate's command;
    a file's own command is kept."""
    from ablate.sweep.spec import SWEEP_COMMAND

    path = tmp_path / "bare.yaml"
    path.write_text("method: grid\nparameters:\n  model.heads: {values: [2, 4]}\n")
    assert wandb_server.wandb_sweep_config(load_spec(path))["command"] == SWEEP_COMMAND
    own = ["${env}", "python", "wrap.py", "${args_no_hyphens}"]
    path.write_text(yaml.safe_dump({"method": "grid", "command": own, "parameters": {"model.heads": {"value": 2}}}))
    assert wandb_server.wandb_sweep_config(load_spec(path))["command"] == own


def test_each_agent_of_several_on_cpu_trains_with_its_share_of_the_cores(tmp_path, monkeypatch):
    """``ablate sweep agent ID --devices cpu --parallel 2`` on 8 cores: the parent planned 4 threads per agent, but
    each spawned agent was ``--devices cpu`` and planned its own slot again with all 8 (OMP_NUM_THREADS=8 twice on 8
    cores), as ``--parallel`` and docs/sweeps.md ("cores / N torch threads") say it does not."""
    from ablate.sweep import local

    spawned, served = [], []

    class Child:
        def __init__(self, argv, env):
            spawned.append(argv)

        def wait(self):
            return 0

    monkeypatch.setattr(local, "cpu_count", lambda: 8)
    monkeypatch.setattr(wandb_server.subprocess, "Popen", Child)
    monkeypatch.setattr(wandb_server, "run_agent", lambda sweep_id, slot, opts: served.append(slot))
    args = ["agent", "sw9", "--devices", "cpu", "--parallel", "2", "--out", str(tmp_path)]
    assert CliRunner().invoke(app, args).exit_code == 0 and len(spawned) == 2
    for argv in spawned:  # each child, as its own `ablate sweep agent` would plan its one slot
        assert argv[1:4] == ["-m", "ablate", "sweep"]
        result = CliRunner().invoke(app, argv[4:])
        assert result.exit_code == 0, result.output
    assert [slot.threads for slot in served] == [4, 4]
