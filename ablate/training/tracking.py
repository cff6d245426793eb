"""Weights & Biases and the local run record (``summary.json``).

W&B is reached only through Lightning's ``WandbLogger`` on global rank 0, so a DDP training is
one W&B run. ``tracking.wandb=auto`` goes online only when credentials exist; otherwise the run
is written offline under ``<run_dir>/wandb`` for a later ``wandb sync``. A W&B failure never
stops training: the local record is always written.
"""

from __future__ import annotations

import logging
import netrc
import os
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from ablate.config import Config, TrackingConfig, flatten, to_dict
from ablate.record import DEV_BLEU, DEV_PPL, RunFiles, RunStatus, RunSummary
from ablate.training.publish import one_key_per_score
from ablate.training.sweep_params import align_sweep_params
from ablate.utils.io import atomic_write_text
from ablate.utils.provenance import environment, freeze, freeze_text, git_commit

log = logging.getLogger(__name__)


def has_wandb_credentials() -> bool:
    """True when an API key is available (environment, ``wandb login``'s netrc entry)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    base = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai").split("//")[-1].split("/")[0]
    try:
        auth = netrc.netrc(os.environ.get("NETRC")).authenticators(base)
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False
    return bool(auth and auth[2])


def resolve_mode(cfg: TrackingConfig, echo: Callable[[str], Any] | None = None) -> str:
    """``online`` | ``offline`` | ``disabled`` from the config, the environment and credentials.

    Online without an API key (``tracking.wandb=online``, or ``auto`` under ``WANDB_MODE=online``)
    would fail inside W&B with a validation error and leave no run to sync: it is offline instead,
    said in one line through ``echo``, so the run is kept for ``wandb sync``.
    """
    mode = _requested_mode(cfg)
    if mode == "online" and not has_wandb_credentials():
        if echo is not None:
            echo(NO_CREDENTIALS)
        return "offline"
    return mode


NO_CREDENTIALS = (
    "W&B online needs an API key (WANDB_API_KEY or `wandb login`) and none was found: "
    "logging offline instead, to upload later with `ablate sync`"
)


def _requested_mode(cfg: TrackingConfig) -> str:
    if cfg.wandb != "auto":
        return cfg.wandb
    env = os.environ.get("WANDB_MODE")
    if env in ("online", "offline", "disabled"):
        return env
    if env == "dryrun":
        return "offline"
    return "online" if has_wandb_credentials() else "offline"


def run_id(run_dir: Path) -> str:
    """The W&B run id of ``run_dir``: created once, reused on resume (same W&B run).

    Inside a W&B sweep agent run it is the agent's ``WANDB_RUN_ID``, so the trainer logs to the
    run the sweep created.
    """
    path = RunFiles(run_dir).wandb_id
    if path.exists():
        return path.read_text().strip()
    rid = os.environ.get("WANDB_RUN_ID") or uuid.uuid4().hex[:8]
    atomic_write_text(path, rid + "\n")
    return rid


def _resilient_logger_class():
    from pytorch_lightning.loggers import WandbLogger

    class ResilientWandbLogger(WandbLogger):
        """A ``WandbLogger`` whose failures (network, full disk, dead service) never stop training."""

        _warned = False

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            # Lightning always passes wandb.init(anonymous=None), which W&B (0.31 here) answers with
            # "The anonymous setting has no effect" on every run: leave the deprecated setting unset
            self._wandb_init.pop("anonymous", None)

        def guarded(self, fn, *args, **kwargs):
            """``fn(*args, **kwargs)``, or None with one warning per run when it fails."""
            try:
                return fn(*args, **kwargs)
            except Exception as err:  # noqa: BLE001 - tracking is best effort; summary.json is the record
                if not self._warned:
                    log.warning(
                        "W&B logging failed, training goes on: %s", str(err).splitlines()[0] if str(err) else repr(err)
                    )
                    self._warned = True
                return None

        @property
        def started(self) -> bool:
            """Whether the W&B run exists (a failure before it started has nothing to log to)."""
            return self._experiment is not None

        def log_metrics(self, metrics, step=None):
            # each test score once, per split: not also as the first split's plain test/<name>
            return self.guarded(super().log_metrics, one_key_per_score(dict(metrics)), step)

        def log_hyperparams(self, params, *args, **kwargs):
            return self.guarded(super().log_hyperparams, params, *args, **kwargs)

        def after_save_checkpoint(self, checkpoint_callback):
            return self.guarded(super().after_save_checkpoint, checkpoint_callback)

    return ResilientWandbLogger


def make_logger(cfg: Config, run_dir: Path, mode: str):
    """A W&B logger (or None when disabled) logging the config with dotted keys."""
    if mode == "disabled":
        return None
    WandbLogger = _resilient_logger_class()

    t = cfg.tracking
    os.environ.setdefault("WANDB_SILENT", "true")
    if mode == "offline" and os.environ.get("WANDB_MODE") == "online":  # online without a key (resolve_mode)
        os.environ["WANDB_MODE"] = "offline"
    config = flatten(to_dict(cfg))
    if t.variant:  # what reports and dashboards group by: a name in every path (local, SLURM, agent)
        config["variant"] = t.variant
    align_sweep_params(config, run_dir / "wandb")  # a sweep agent's locked keys get the resolved values
    logger = WandbLogger(
        project=t.project,
        entity=t.entity,
        group=t.group,
        name=t.name or run_dir.name,
        tags=list(t.tags) or None,
        save_dir=str(run_dir),
        offline=(mode == "offline"),
        id=run_id(run_dir),
        resume="allow",
        config=config,
        settings=_settings(system_metrics=t.system_metrics),
    )
    return logger


def _settings(system_metrics: bool = True):
    import wandb

    return wandb.Settings(silent=True, console="off", x_disable_stats=not system_metrics)


def start_logger(logger, attempts: int = 20, wait_s: float = 1.0):
    """Start the W&B run now; ``None`` (with a warning) if W&B cannot start: training goes on.

    A run resumed right after its process was killed can find the run id still held by the old
    process's W&B service for a few seconds ("run ID ... is in use"), so starting is retried.
    """
    if logger is None:
        return None
    error: Exception | None = None
    for _ in range(attempts):
        try:
            logger.experiment  # noqa: B018 - creates the run
            return logger
        except Exception as err:  # noqa: BLE001 - tracking must never stop training
            error = err
            if "in use" not in str(err):
                break
            time.sleep(wait_s)
    reason = str(error).splitlines()[0] if error and str(error) else repr(error)
    log.warning("W&B could not start (%s); training without it, summary.json is still written", reason)
    logger._experiment = None
    return None


def define_metrics(logger) -> None:
    """Summaries W&B should keep: the best validation BLEU, the last of everything else."""
    if logger is None:
        return
    try:
        exp = logger.experiment
        exp.define_metric(DEV_BLEU.key, summary="max")
        exp.define_metric(DEV_PPL.key, summary="min")
    except Exception:  # noqa: BLE001 - tracking must never stop training
        pass


def offline_hint(run_dir: Path) -> str:
    return f"W&B offline: upload later with `wandb sync {run_dir}/wandb/offline-run-*`"


def cpu_seconds() -> float:
    """User + system CPU seconds of this process since it started (imports and data loading included) and of
    its finished children (data workers, DDP ranks)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def machine() -> dict[str, Any]:
    """What ran the trial: the CPU model, its logical cores and torch's intra-op threads."""
    import platform

    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads()}


class RunRecord:
    """``<run_dir>/summary.json`` (:class:`~ablate.record.RunSummary`): status, best and final metrics, the
    resolved config, and what produced them (commits, package versions and the freeze's digest; the freeze
    itself in ``environment.txt``)."""

    def __init__(self, run_dir: Path, cfg: Config):
        self.path = RunFiles(run_dir).summary
        self.started = time.time()
        previous = RunSummary.peek(self.path) or RunSummary()
        # the environment of this attempt (a resumed run records the one that finished it)
        self.summary = RunSummary(config=to_dict(cfg), extra={"machine": machine(), "environment": environment()})
        self._environment_written = False
        self.wall_before = previous.number("wall_time_s") or 0.0
        self.cpu_before = previous.number("cpu_time_s") or 0.0
        before = previous.to_json()
        # a rerun that fails before restoring its checkpoint keeps them
        self.update(**{key: before[key] for key in ("history", "step", "init_from", "checkpoints") if key in before})
        # the code of every attempt, so a run resumed after a code change says so
        commits = [c for c in previous.commits or [] if isinstance(c, str)]
        self.summary.commits = commits + [c for c in [git_commit()] if c not in commits]

    @property
    def data(self) -> dict[str, Any]:
        """The record as ``summary.json`` holds it."""
        return self.summary.to_json()

    def update(self, **values: Any) -> None:
        self.summary.update(values)

    def write(self, status: RunStatus, error: str | None = None) -> None:
        self.summary.status = status
        self.summary.error = error
        self.summary.wall_time_s = round(self.wall_before + time.time() - self.started, 2)
        self.summary.cpu_time_s = round(self.cpu_before + cpu_seconds(), 2)  # this attempt's process, start-up included
        try:
            if not self._environment_written:
                atomic_write_text(RunFiles(self.path.parent).environment, freeze_text(freeze()))
                self._environment_written = True
            self.summary.write(self.path)
        except OSError as err:  # a full disk must not hide the training result from the caller
            log.warning("could not write %s: %s", self.path, err)


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """The run's ``summary.json`` as a JSON object, or None where there is none (or it cannot be read)."""
    summary = RunSummary.peek(RunFiles(run_dir).summary)
    return None if summary is None else summary.to_json()
