"""Runs started by a W&B sweep agent record their resolved config, not the sweep's values.

For every run it hands out, W&B's agent (``wandb agent`` and ``wandb.agent``) writes the run's
parameters to the file named by ``WANDB_SWEEP_PARAM_PATH`` (``{key: {value: v}}``), and
``wandb.init`` reads it and *locks* each of those keys for the user ``sweep``: any later
``config.update`` of them, ``allow_val_change=True`` included, is ignored ("locked by sweep").
A named variant that changes a base key (``{name: A-heads1, model.heads: 1}`` over the sweep's
``model.heads: {value: 8}``) would then show the base's 8 in every dashboard view.

W&B takes the sweep's values at ``wandb.init``; so the values are set before it: the trainer
hands ``wandb.init`` a copy of the agent's file in which every parameter that is an ablate config
key holds the resolved value. The lock then agrees with the run, and nothing is ignored. The
parameters that are not config keys (``variant``) keep the value the sweep chose, so W&B's grid
bookkeeping, which matches a run to its grid point by the categorical parameters (``variant``,
``seed``), sees the run where it put it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, MutableMapping, Optional

PARAM_PATH = "WANDB_SWEEP_PARAM_PATH"


def read_params(path: str | Path) -> dict[str, Any]:
    """``{key: value}`` of a W&B sweep parameter file (``wandb_version: 1`` + ``{key: {value: v}}``)."""
    from wandb.sdk.lib import config_util

    return config_util.dict_from_config_file(str(path), must_exist=True) or {}


def write_params(path: str | Path, params: dict[str, Any]) -> None:
    """Write ``{key: value}`` in the agent's format (what ``wandb.init`` reads)."""
    from wandb.sdk.lib import config_util

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    config_util.save_config_file_from_dict(str(path), {k: {"value": v} for k, v in params.items()})


def aligned(params: dict[str, Any], resolved: dict[str, Any]) -> dict[str, Any]:
    """The sweep's parameters with every config key replaced by its resolved value."""
    return {key: resolved.get(key, value) for key, value in params.items()}


def align_sweep_params(
    resolved: dict[str, Any], folder: Path, environ: MutableMapping[str, str] = os.environ
) -> Optional[Path]:
    """Point W&B at parameters that agree with ``resolved`` (dotted keys) before ``wandb.init``.

    Does nothing outside a sweep agent run, or when the sweep's values already agree. Returns
    the file written (``<folder>/sweep-params.yaml``), else ``None``.
    """
    source = environ.get(PARAM_PATH)
    if not source or not Path(source).exists():
        return None
    params = read_params(source)
    fixed = aligned(params, resolved)
    if fixed == params:
        return None
    target = Path(folder).resolve() / "sweep-params.yaml"
    write_params(target, fixed)
    environ[PARAM_PATH] = str(target)
    import wandb

    wandb.setup(settings=wandb.Settings(sweep_param_path=str(target)))  # a W&B already set up reads it too
    return target
