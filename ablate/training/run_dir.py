"""A run's folder: where it goes, whether it is new, resumable or finished, and when it is claimed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ablate.config import Config, ConfigError, fingerprint, read_yaml, to_dict
from ablate.record import RunFiles, RunStatus
from ablate.training.checkpoint_io import RESUME_ORDER
from ablate.training.run_lock import LOCK_FILE
from ablate.training.tracking import read_summary
from ablate.utils.io import atomic_write_text


def default_run_dir(cfg: Config) -> Path:
    """``runs/<name>``: the tracking name, else the architecture and a config fingerprint.

    A run handed out by a W&B sweep agent goes to ``runs/sweep-<sweep id>/<name>-<run id>``, so
    two sweeps of the same configuration never share a folder.
    """
    name = cfg.tracking.name or f"{cfg.model.arch}-{fingerprint(cfg)}"
    sweep_id, run_id = os.environ.get("WANDB_SWEEP_ID"), os.environ.get("WANDB_RUN_ID")
    if sweep_id and run_id:
        return Path("runs") / f"sweep-{sweep_id}" / f"{cfg.tracking.variant or name}-{run_id}"
    return Path("runs") / name


def is_launcher_process() -> bool:
    """False inside the extra processes Lightning's DDP launcher starts (they re-run the CLI)."""
    return int(os.environ.get("LOCAL_RANK", "0")) == 0 and int(os.environ.get("NODE_RANK", "0")) == 0


def prepare_run_dir(cfg: Config, run_dir: Path, overwrite: bool = False) -> str:
    """Check ``run_dir``; returns ``new`` | ``resume`` | ``finished``.

    A run dir written by a different config is refused rather than mixed, unless that run failed before
    it trained (its data or model could not be built): then the folder is the new config's.
    """
    config_path = RunFiles(run_dir).config
    if overwrite and is_launcher_process() and run_dir.is_dir():
        import shutil

        for child in run_dir.iterdir():  # everything but the lock this process holds
            if child.name != LOCK_FILE:
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    if config_path.exists():
        from ablate.config import flatten, from_flat

        try:
            recorded = flatten(read_yaml(config_path))
        except ConfigError as err:
            recorded, old, reason = None, "unreadable", f"an unreadable config.yaml ({err})"
        if recorded is not None:
            _refuse_unnamed_plugins(recorded, run_dir)
            try:
                old = fingerprint(from_flat(recorded, base=run_dir, trust="recorded"))
                reason = "a run of a different config"
            except ConfigError as err:
                old, reason = "unreadable", f"an unreadable config.yaml ({err})"
        summary = read_summary(run_dir) or {}
        if old != fingerprint(cfg) and _never_trained(run_dir, summary):  # its data or model failed: nothing to keep
            config_path.unlink()
            return "new"
        if old != fingerprint(cfg):
            further = ""
            if summary.get("status") == RunStatus.FINISHED:  # e.g. a larger train.max_steps: a new run from its weights
                further = f"; to train it further, start a new run from it: --run-dir <new> train.init_from={run_dir}"
            raise ConfigError(
                f"run dir {run_dir} holds {reason}; choose another --run-dir or pass --overwrite{further}"
            )
        if summary.get("status") == RunStatus.FINISHED:
            return RunStatus.FINISHED
        return "resume" if any((RunFiles(run_dir).checkpoints / n).exists() for n in RESUME_ORDER) else "new"
    return "new"


def _never_trained(run_dir: Path, summary: dict[str, Any]) -> bool:
    """Whether ``run_dir`` holds a run that failed before it trained (bad data, a model too large): no
    step recorded, no checkpoint. Another config may take the folder; a run with a step keeps it."""
    checkpoints = RunFiles(run_dir).checkpoints
    return (
        summary.get("status") == RunStatus.FAILED
        and summary.get("step") is None
        and not any((checkpoints / n).exists() for n in RESUME_ORDER)
    )


def _refuse_unnamed_plugins(recorded: dict[str, Any], run_dir: Path) -> None:
    """Refuse to resume a run whose ``config.yaml`` names a plugin the user's config does not: reading
    that config would import code someone else may have put there (:func:`ablate.utils.plugins.unvouched`)."""
    from ablate.utils.plugins import describe_unvouched, unvouched

    stranger = unvouched(recorded.get("plugins"), run_dir)
    if stranger:
        raise ConfigError(
            f"run dir {run_dir} was trained with {describe_unvouched(stranger[0])}, which your config does not "
            f"name; add it to plugins to resume, or choose another --run-dir or pass --overwrite"
        )


def claim_run_dir(cfg: Config, run_dir: Path) -> None:
    """Write ``config.yaml``: from now on ``run_dir`` belongs to ``cfg`` (after the input checked out)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if is_launcher_process() and not RunFiles(run_dir).config.exists():
        atomic_write_text(RunFiles(run_dir).config, yaml.safe_dump(to_dict(cfg), sort_keys=False))
