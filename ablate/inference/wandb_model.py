"""A run folder from W&B alone: ``wandb:<entity>/<project>/<run id>`` -> the run's model artifact, downloaded.

The trainer logs ``model-<run id>`` (``tracking.log_checkpoints=true``) laid out as a run folder:
``checkpoints/best.ckpt``, ``config.yaml`` and ``tokenizer/`` (:mod:`ablate.training.publish`).
Its ``best`` version is downloaded once into ``~/.cache/ablate/wandb/<entity>/<project>/<run id>``
(``ABLATE_CACHE`` moves it) and loaded like any run folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from ablate.config import ConfigError

PREFIX = "wandb:"


def is_wandb_ref(ref: Any) -> bool:
    return str(ref).startswith(PREFIX)


def cache_root() -> Path:
    return Path(os.environ.get("ABLATE_CACHE") or "~/.cache/ablate").expanduser() / "wandb"


def fetch_run(ref: str, api: Any = None, root: Optional[Path] = None) -> Path:
    """Download the model artifact of ``wandb:<entity>/<project>/<run id>``; returns its folder.

    Raises:
        ConfigError: a malformed reference, no such artifact (the run logged no checkpoint), or an
            artifact of an older ablate that holds the checkpoint without config and tokenizer.
    """
    parts = str(ref)[len(PREFIX) :].strip("/").split("/")
    if len(parts) != 3 or not all(parts):
        raise ConfigError(f"bad W&B run '{ref}': use wandb:<entity>/<project>/<run id>")
    entity, project, run = parts
    if api is None:
        import wandb

        api = wandb.Api()
    name = f"{entity}/{project}/model-{run}:best"
    try:
        artifact = api.artifact(name, type="model")
        folder = Path(artifact.download(root=str(root or cache_root() / entity / project / run)))
    except Exception as err:  # noqa: BLE001 - no login, no network, no such artifact: all one line
        reason = " ".join(str(err).split())[:200] or type(err).__name__
        raise ConfigError(
            f"could not download the W&B artifact {name} ({reason}); the run logs it with tracking.log_checkpoints=true"
        ) from None
    if not (folder / "config.yaml").exists() or not (folder / "tokenizer").is_dir():
        raise ConfigError(
            f"the W&B artifact {name} holds a checkpoint without config.yaml and tokenizer/ (logged by an older "
            f"ablate); translate from the run folder instead"
        )
    return folder
