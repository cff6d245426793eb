"""Test helper: the last logged value of each key in an offline W&B run file (what a test checks was logged)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ablate.training.offline_run import read_run


def read_offline_run(path: str | Path) -> dict[str, dict[str, Any]]:
    """``{"history": last value of each logged key, "summary": the run summary}`` of ``run-<id>.wandb``."""
    run = read_run(path)
    history: dict[str, Any] = {}
    for row in run.history:
        history.update(row)
    return {"history": history, "summary": run.summary}
