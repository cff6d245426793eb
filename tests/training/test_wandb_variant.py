"""Every W&B run carries a top-level ``variant`` name, whatever started it.

W&B Report panels and dashboards group by ``config.variant``. A local or SLURM trial used to hold
the name only under ``tracking.variant``; a W&B agent's run held the sweep's whole mapping
(``{name: A-heads1, model.heads: 1}``). Each path is started here for real up to the network and
read back from its offline record log.
"""

from __future__ import annotations

import sys

import pytest
from test_wandb_config import START, _assert_resolved, _env, _recorded, _start, _table3, agent_trial

from ablate.config import load_config
from ablate.sweep.launcher import Launcher
from ablate.sweep.local import Slot
from ablate.sweep.planner import LaunchOptions
from ablate.sweep.spec import expand_variant, from_wandb, point_from_wandb, spec_from_dict, to_wandb

from tests.helpers.wandb_agent import agent_command, agent_env, proposal, proposals


def test_the_registered_form_names_variants_and_round_trips():
    config = _table3()
    sent = to_wandb(config)
    names = sent["parameters"]["variant"]["values"]
    assert all(isinstance(v, str) for v in names) and "A-heads1" in names and len(names) == 19
    assert sent["parameters"]["variants"]["value"]["A-heads1"] == {"model.heads": 1}
    assert "base" not in sent["parameters"]["variants"]["value"]  # no overrides, no entry
    assert from_wandb(sent) == config and config["parameters"]["variant"]["values"] != names  # the input untouched
    assert len(proposals(sent)) == len(proposals(config))  # W&B's grid: the same points


def test_the_trainer_reads_a_registered_variant_from_its_arguments():
    sent = to_wandb(_table3())
    argv = agent_command(sent["command"], proposal(sent, "A-heads1", seed=2))
    assert "variant=A-heads1" in argv
    cfg = load_config(None, expand_variant(argv[5:]))
    assert cfg.model.heads == 1 and cfg.seed == 2 and cfg.tracking.variant == "A-heads1"
    base = load_config(None, expand_variant(agent_command(sent["command"], proposal(sent, "base"))[5:]))
    assert base.model.heads == 8 and base.tracking.variant == "base"


@pytest.mark.slow
def test_agent_run_of_a_registered_sweep_has_the_name_as_variant(tmp_path, monkeypatch):
    """``ablate sweep create`` + ``ablate sweep agent``: the run's ``config.variant`` is a name."""
    sent = to_wandb(_table3())
    args = proposal(sent, "A-heads1")
    spec = spec_from_dict(from_wandb(sent), name="table3")
    run, overrides = agent_trial(spec, args, "A-heads1-seed=1", "run789", tmp_path, monkeypatch)
    assert run.config["variant"] == "A-heads1"
    _assert_resolved(run, overrides)


@pytest.mark.slow
def test_plain_wandb_agent_of_a_registered_sweep(tmp_path):
    """``wandb agent`` on a sweep ablate registered: its command line trains the variant, named."""
    sent = to_wandb(_table3())
    args = proposal(sent, "A-heads1")
    argv = agent_command(sent["command"], args)
    _start(tmp_path / "trial", argv[5:], _env(**agent_env(tmp_path, "sw4", "run1", args)), tmp_path)
    run = _recorded(tmp_path / "trial")
    assert run.config["variant"] == "A-heads1" and run.config["model.heads"] == 1


@pytest.mark.slow
def test_a_local_trial_carries_the_variant_name(tmp_path):
    config = {
        "name": "t3",
        "method": "grid",
        "parameters": {
            "variant": {"values": [{"name": "A-heads1", "model.heads": 1}]},
            "model.d_model": {"value": 64},
            "train.max_steps": {"value": 2},
        },
    }
    spec = spec_from_dict(config, name="t3")

    def command(run_dir, overrides):
        return [sys.executable, str(START), str(run_dir), *overrides]

    opts = LaunchOptions(out=tmp_path / "t3", slots=[Slot(0, None, 1)], command=command, poll_s=0.05)
    state = Launcher(spec, opts).run().state
    run = _recorded(tmp_path / "t3" / state.trials[0].name)
    assert run.config["variant"] == "A-heads1" and run.config["model.heads"] == 1
    assert run.config["tracking.group"] == state.group


def test_point_from_wandb_leaves_plain_names_and_file_mappings_alone():
    assert point_from_wandb({"variant": "base", "seed": 1}) == {"variant": "base", "seed": 1}
    mapping = {"name": "x", "model.heads": 2}
    assert point_from_wandb({"variant": mapping}) == {"variant": mapping}
    assert point_from_wandb({"variant": "x", "variants": {"x": {"model.heads": 2}}}) == {"variant": mapping}
