"""Emulate W&B's sweep agent without the server: its proposals, parameter file, env and command.

Everything here is W&B's own code or format: proposals from the ``sweeps`` engine (what the
server runs), the parameter file written with ``config_util.save_config_file_from_dict`` at
``wandb/sweep-<id>/config-<run id>.yaml`` (what ``wandb agent`` writes), the environment
(``WANDB_SWEEP_ID``, ``WANDB_RUN_ID``, ``WANDB_SWEEP_PARAM_PATH``), and the command line built
with ``sweep_utils.create_sweep_command`` / ``create_sweep_command_args`` and the agent's macro
values.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any


def proposals(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every run W&B's grid would hand out, as ``{param: {"value": v}}`` (the agent's ``args``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import sweeps
    runs = sweeps.next_runs(config, [], validate=True, n=10_000)  # a grid: every point, in order
    return [r.config for r in runs if r is not None]


def proposal(config: dict[str, Any], variant: str, seed: int = 1) -> dict[str, Any]:
    """The proposal of ``variant`` (by name) and ``seed``."""
    for args in proposals(config):
        value = args["variant"]["value"]
        name = value if isinstance(value, str) else value["name"]
        if name == variant and args.get("seed", {}).get("value", seed) == seed:
            return args
    raise KeyError(variant)


def agent_env(base: Path, sweep_id: str, run_id: str, args: dict[str, Any]) -> dict[str, str]:
    """Write the agent's parameter file for ``run_id``; return the variables the agent sets."""
    from wandb.sdk.lib import config_util

    path = base / "wandb" / f"sweep-{sweep_id}" / f"config-{run_id}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    config_util.save_config_file_from_dict(str(path), args)
    return {"WANDB_SWEEP_ID": sweep_id, "WANDB_RUN_ID": run_id, "WANDB_SWEEP_PARAM_PATH": str(path)}


def agent_command(command: list[str], args: dict[str, Any]) -> list[str]:
    """The argv ``wandb agent`` starts for a run (``wandb_agent.Agent._command_run``)."""
    from wandb.sdk.launch.sweeps import utils as sweep_utils

    sweep_vars = sweep_utils.create_sweep_command_args({"args": args})
    sweep_vars["interpreter"] = ["python"]
    sweep_vars["env"] = ["/usr/bin/env"]
    argv: list[str] = []
    for chunk in sweep_utils.create_sweep_command(list(command)):
        chunk = str(chunk)
        if chunk.startswith("${") and chunk.endswith("}"):
            argv += sweep_vars.get(chunk[2:-1]) or []
        else:
            argv.append(chunk)
    return argv


def python_on_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this interpreter first on PATH (an activated virtual environment)."""
    return dict(env, PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}")
