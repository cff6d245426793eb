"""Weights & Biases and the local run record (``summary.json``).

W&B is reached only through Lightning's ``WandbLogger`` on global rank 0, so a DDP training is
one W&B run. ``tracking.wandb=auto`` goes online only when credentials exist; otherwise the run
is written offline under ``<run_dir>/wandb`` for a later ``wandb sync``. A W&B failure never
stops training: the local record is always written.
"""

from __future__ import annotations

import netrc
import os
import time
import uuid
from pathlib import Path
from typing import Any

from ablate.config import Config, TrackingConfig, flatten, to_dict
from ablate.utils.io import atomic_write_json, atomic_write_text, read_json

SUMMARY = "summary.json"


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


def resolve_mode(cfg: TrackingConfig) -> str:
    """``online`` | ``offline`` | ``disabled`` from the config, the environment and credentials."""
    if cfg.wandb != "auto":
        return cfg.wandb
    env = os.environ.get("WANDB_MODE")
    if env in ("online", "offline", "disabled"):
        return env
    if env == "dryrun":
        return "offline"
    return "online" if has_wandb_credentials() else "offline"


def run_id(run_dir: Path) -> str:
    """The W&B run id of ``run_dir``: created once, reused on resume (same W&B run)."""
    path = run_dir / "wandb_id.txt"
    if path.exists():
        return path.read_text().strip()
    rid = uuid.uuid4().hex[:8]
    atomic_write_text(path, rid + "\n")
    return rid


def _resilient_logger_class():
    from pytorch_lightning.loggers import WandbLogger

    class ResilientWandbLogger(WandbLogger):
        """A ``WandbLogger`` whose failures (network, full disk, dead service) never stop training."""

        _warned = False

        def _guard(self, fn, *args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as err:  # noqa: BLE001 - tracking is best effort; summary.json is the record
                if not self._warned:
                    print(f"warning: W&B logging failed, training goes on: {str(err).splitlines()[0] if str(err) else err!r}")
                    self._warned = True
                return None

        def log_metrics(self, metrics, step=None):
            return self._guard(super().log_metrics, metrics, step)

        def log_hyperparams(self, params, *args, **kwargs):
            return self._guard(super().log_hyperparams, params, *args, **kwargs)

        def after_save_checkpoint(self, checkpoint_callback):
            return self._guard(super().after_save_checkpoint, checkpoint_callback)

    return ResilientWandbLogger


def make_logger(cfg: Config, run_dir: Path, mode: str):
    """A W&B logger (or None when disabled) logging the config with dotted keys."""
    if mode == "disabled":
        return None
    WandbLogger = _resilient_logger_class()

    t = cfg.tracking
    os.environ.setdefault("WANDB_SILENT", "true")
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
        config=flatten(to_dict(cfg)),
        settings=_settings(),
    )
    return logger


def _settings():
    import wandb

    return wandb.Settings(silent=True, console="off", x_disable_stats=True)


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
    print(f"warning: W&B could not start ({reason}); training without it, summary.json is still written")
    logger._experiment = None
    return None


def define_metrics(logger) -> None:
    """Summaries W&B should keep: the best validation BLEU, the last of everything else."""
    if logger is None:
        return
    try:
        exp = logger.experiment
        exp.define_metric("val/bleu", summary="max")
        exp.define_metric("val/ppl", summary="min")
    except Exception:  # noqa: BLE001 - tracking must never stop training
        pass


def offline_hint(run_dir: Path) -> str:
    return f"W&B offline: upload later with `wandb sync {run_dir}/wandb/offline-run-*`"


class RunRecord:
    """``<run_dir>/summary.json``: status, best and final metrics, and the resolved config."""

    def __init__(self, run_dir: Path, cfg: Config):
        self.path = run_dir / SUMMARY
        self.started = time.time()
        previous = read_json(self.path) or {}
        self.data: dict[str, Any] = {"config": to_dict(cfg)}
        self.wall_before = float(previous.get("wall_time_s", 0.0)) if previous else 0.0
        for key in ("history",):
            if key in previous:
                self.data[key] = previous[key]

    def update(self, **values: Any) -> None:
        self.data.update(values)

    def write(self, status: str, error: str | None = None) -> None:
        self.data["status"] = status
        self.data["error"] = error
        self.data["wall_time_s"] = round(self.wall_before + time.time() - self.started, 2)
        try:
            atomic_write_json(self.path, self.data)
        except OSError as err:  # a full disk must not hide the training result from the caller
            print(f"warning: could not write {self.path}: {err}")


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    return read_json(Path(run_dir) / SUMMARY)


def read_offline_run(path: str | Path) -> dict[str, dict[str, Any]]:
    """Metrics recorded in an offline W&B run file (``run-<id>.wandb``), without the network.

    The file is W&B's record log: a 7-byte header, then LevelDB-style 32 KiB blocks of chunks
    (crc32, length, type) holding protobuf ``Record`` messages. Returns ``{"history": last value
    of each logged key, "summary": the run summary}``, values decoded from JSON.
    """
    import json
    import struct

    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    block, pos, pending = 32768, 7, b""
    history: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    while pos + 7 <= len(data):
        room = block - pos % block
        if room < 7:
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind not in (1, 4):
            continue
        record = pb.Record()
        record.ParseFromString(pending)
        which = record.WhichOneof("record_type")
        items = record.history.item if which == "history" else record.summary.update if which == "summary" else []
        target = history if which == "history" else summary
        for item in items:
            key = item.key or "/".join(item.nested_key)
            target[key] = json.loads(item.value_json)
    return {"history": history, "summary": summary}
