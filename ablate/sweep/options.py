"""What a sweep run is given (options, the trial command, checked overrides) and what it returns.

Shared by the planner, the loop and the executors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ablate.config import ConfigError, parse_override, valid_keys
from ablate.errors import did_you_mean
from ablate.sweep.process import ablate_argv
from ablate.sweep.slots import Slot
from ablate.sweep.spec import SweepSpec
from ablate.sweep.state import SweepState

TrialCommand = Callable[[Path, list[str]], list[str]]
"""``(run_dir, overrides) -> argv`` of one trial process."""

GRID_LIMIT = 100_000  # the most trials one sweep plans (its launcher holds them all in sweep.json)
TRIAL_LIMIT = 10_000
"""A sweep planning more trials than this is refused (``--trial-limit`` raises it): it is a typo far more often than a plan."""
STALL_S = 600.0
"""Seconds of silence (no change to a running trial's log or record) before the launcher warns."""
LOG_LIMIT = 64 * 2**20
"""Bytes of ``trial.log`` one attempt may fill (a trainer printing in a loop cannot fill the disk)."""


def trainer_command(config: Optional[Path] = None) -> TrialCommand:
    """The real trial: ``python -m ablate train --run-dir RUN_DIR [--config BASE] key=value ...``."""

    def command(run_dir: Path, overrides: list[str]) -> list[str]:
        argv = ablate_argv("train", "--run-dir", str(run_dir))
        if config is not None:
            argv += ["--config", str(config)]
        return argv + list(overrides)

    return command


def default_out(spec: SweepSpec) -> Path:
    return Path("runs") / spec.name


@dataclass
class LaunchOptions:
    """How to run a sweep locally.

    Attributes:
        out: the sweep folder (state, lock, one sub-folder per trial).
        slots: where trials run (see :func:`ablate.sweep.slots.plan_slots`).
        overrides: ``key=value`` applied to every trial, after the sweep's parameters.
        axes: comma-list overrides (``model.heads=4,8``) already made parameters of the spec
            (:mod:`ablate.sweep.axes`); recorded in ``sweep.json`` beside ``overrides``.
        config: a base YAML config for every trial.
        command: builds a trial's argv (default: the real trainer; tests inject a fake).
        wandb_sweep: ``entity/project/id`` of the W&B sweep object the trials attach to
            (``--wandb-sweep``), recorded in ``sweep.json``.
        retry_failed: run failed trials again.
        retries: times a trial that was stopped from outside (killed by a signal: preempted,
            OOM-killed; or SIGTERM'd and checkpointed) is relaunched at once; it resumes from its
            last checkpoint. Errors inside a trial (NaN, out of memory, a bad config) are not retried.
        max_trials: stop after this many trials (overrides the file's ``run_cap``).
        trial_limit: refuse to plan a sweep of more trials than this (a typo in a grid, usually).
        grace_s: seconds a stopped trial gets to save its checkpoint before SIGKILL.
        trial_timeout_s: seconds an attempt may run before it is stopped and recorded ``timeout``
            (``--trial-timeout``); ``None``: derived from each trial's budget
            (:func:`ablate.sweep.trial.time_limit`); ``0``: no limit.
        stall_s: seconds without a change to a running trial's log or ``summary.json`` before the launcher
            warns on stderr (``--stall-warning``); ``0``: never.
        log_limit: bytes of ``trial.log`` one attempt may fill; past it the log keeps the attempt's first half
            and last quarter of that (:func:`ablate.sweep.process.bound_log`).
        poll_s: scheduler tick.
    """

    out: Path
    slots: list[Slot]
    overrides: list[str] = field(default_factory=list)
    axes: list[str] = field(default_factory=list)
    config: Optional[Path] = None
    command: Optional[TrialCommand] = None
    wandb_sweep: Optional[str] = None
    retry_failed: bool = False
    retries: int = 2
    max_trials: Optional[int] = None
    trial_limit: int = TRIAL_LIMIT
    grace_s: float = 30.0
    trial_timeout_s: Optional[float] = None
    stall_s: float = STALL_S
    log_limit: int = LOG_LIMIT
    poll_s: float = 0.2


@dataclass
class SweepResult:
    """What a launcher run did: the final state and counts for its report."""

    state: SweepState
    launched: int
    skipped: int
    interrupted: bool


def check_overrides(overrides: list[str]) -> list[str]:
    """Each ``key=value`` is well formed and names a config key (so no trial fails for a typo)."""
    keys = set(valid_keys())
    for item in overrides:
        key, _ = parse_override(item)
        if key not in keys:
            hint = did_you_mean(key, sorted(keys), cutoff=0.5) or "; see `ablate train --help` for the keys"
            raise ConfigError(f"override '{item}': unknown config key '{key}'{hint}")
    return list(overrides)
