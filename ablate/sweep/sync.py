"""``ablate sync runs/<sweep>``: upload every trial's offline W&B run with ``wandb sync``, once.

A trial's offline runs are ``<trial>/wandb/offline-run-*/run-<id>.wandb`` (a resumed trial has
one per attempt, all with the same run id; W&B joins them). ``wandb sync`` marks each record
log it uploaded with a ``run-<id>.wandb.synced`` file beside it; those are skipped, so running
the command again uploads only what is new. Trials still running are left for later (syncing
half a run would mark it synced and lose the rest); a trial whose summary says running but whose
run lock is free was killed (:func:`ablate.training.run_folder.is_held`), and is synced like any other.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ablate.errors import AblateError
from ablate.record import RunFiles, RunStatus, RunSummary
from ablate.training.run_folder import running_status


class SyncError(AblateError):
    """A user-facing sync mistake (no such folder, no W&B runs); one line."""


@dataclass
class SyncPlan:
    """Offline runs to upload, already uploaded, and trials skipped because they still run."""

    pending: list[Path] = field(default_factory=list)
    synced: list[Path] = field(default_factory=list)
    running: list[Path] = field(default_factory=list)


def is_synced(record_log: Path) -> bool:
    """W&B's own marker: ``run-<id>.wandb.synced`` beside the record log."""
    return record_log.with_suffix(".wandb.synced").exists()


def _trial_dirs(folder: Path) -> list[Path]:
    if (folder / "wandb").is_dir():
        return [folder]
    return sorted(p for p in folder.iterdir() if p.is_dir() and (p / "wandb").is_dir())


def plan(folder: str | Path) -> SyncPlan:
    """What ``ablate sync`` would do for a sweep folder (or one run directory)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SyncError(f"folder not found: {folder} (pass a sweep output folder such as runs/<sweep>)")
    out = SyncPlan()
    for trial in _trial_dirs(folder):
        logs = sorted(trial.glob("wandb/offline-run-*/run-*.wandb"))
        if not logs:
            continue
        summary = RunSummary.peek(RunFiles(trial).summary)
        status = str(summary.status if summary is not None else None)
        if running_status(trial, status) == RunStatus.RUNNING:  # a free run lock: killed, so its logs are whole
            out.running.append(trial)
            continue
        for log in logs:
            (out.synced if is_synced(log) else out.pending).append(log.parent)
    if not (out.pending or out.synced or out.running):
        raise SyncError(f"no offline W&B runs under {folder} (trials write them to <trial>/wandb/offline-run-*)")
    return out


def wandb_command() -> list[str]:
    """W&B's command line: the ``wandb`` script next to this Python, else on PATH."""
    here = Path(sys.executable).parent / "wandb"
    found = str(here) if here.exists() else shutil.which("wandb")
    return [found] if found else [sys.executable, "-c", "from wandb.cli.cli import cli; cli()"]


def sync(
    folder: str | Path,
    project: Optional[str] = None,
    entity: Optional[str] = None,
    run: Optional[Callable[..., subprocess.CompletedProcess]] = None,
    echo=print,
) -> SyncPlan:
    """Upload every pending offline run of ``folder`` with one ``wandb sync`` call.

    Raises:
        SyncError: no folder, nothing to sync, or ``wandb sync`` failed (its last line).
    """
    todo = plan(folder)
    for trial in todo.running:
        echo(f"skipped (still running): {trial}")
    if todo.synced:
        echo(f"already synced: {len(todo.synced)} run(s)")
    if not todo.pending:
        return todo
    argv = [*wandb_command(), "sync"]
    for flag, value in (("--project", project), ("--entity", entity)):
        if value:
            argv += [flag, value]
    argv += [str(p.resolve()) for p in todo.pending]  # absolute: W&B resolves nothing against our folder
    proc = (run or subprocess.run)(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [line for line in (proc.stderr or proc.stdout or "").splitlines() if line.strip()]
        raise SyncError(f"wandb sync failed: {lines[-1].strip() if lines else f'exit code {proc.returncode}'}")
    left = [p for p in todo.pending if not all(is_synced(log) for log in p.glob("run-*.wandb"))]
    if left:
        raise SyncError(f"wandb sync did not upload {len(left)} run(s), e.g. {left[0]}; see `wandb sync {left[0]}`")
    echo(f"synced {len(todo.pending)} run(s) from {folder}")
    return todo
