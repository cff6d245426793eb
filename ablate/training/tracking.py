"""Tracking: Weights & Biases and the other Lightning loggers (``tracking.loggers``), and what a run leaves in W&B.

W&B is reached only through Lightning's ``WandbLogger`` on global rank 0 (a DDP training is one W&B run), online
only with credentials, else offline under ``<run_dir>/wandb``; its failures never stop training. The other
loggers (TensorBoard, CSV, MLflow, any class path) write inside the run folder, so a resume continues them."""

from __future__ import annotations

import importlib.util
import logging
import netrc
import os
import re
import time
import uuid
from contextlib import suppress
from pathlib import Path
from typing import Any, Callable, MutableMapping, Optional

from ablate.config import Config, ConfigError, TrackingConfig, flatten, to_dict
from ablate.record import DEV_BLEU, DEV_PPL, SUMMARY_FILE, RunFiles
from ablate.utils.io import atomic_write_text, regular
from ablate.utils.typed import class_spec, import_class

WANDB = "wandb"


def _needs(package: str, *alternatives: str) -> None:
    """ConfigError unless ``package`` (the logger's name) or one of ``alternatives`` is installed."""
    if all(importlib.util.find_spec(name) is None for name in (package, *alternatives)):
        raise ConfigError(f"tracking.loggers={package} needs the {package} package: pip install {package}")


def tensorboard(cfg: Config, run_dir: Path):
    from pytorch_lightning.loggers import TensorBoardLogger

    _needs("tensorboard", "tensorboardX")
    return TensorBoardLogger(save_dir=str(run_dir), name="tensorboard", version="", default_hp_metric=False)


def csv(cfg: Config, run_dir: Path):
    from pytorch_lightning.loggers import CSVLogger

    return CSVLogger(save_dir=str(run_dir), name="csv", version="")


def mlflow(cfg: Config, run_dir: Path):
    _needs("mlflow")
    from pytorch_lightning.loggers import MLFlowLogger

    t = cfg.tracking
    return MLFlowLogger(
        experiment_name=t.project, run_name=t.name or run_dir.name, tracking_uri=(run_dir / "mlruns").resolve().as_uri()
    )


FACTORIES: dict[str, Callable[[Config, Path], Any]] = {"tensorboard": tensorboard, "csv": csv, "mlflow": mlflow}
"""Logger name -> its builder (``wandb`` aside); the names are :data:`ablate.config.LOGGERS`."""


def make_loggers(cfg: Config, run_dir: Path) -> list:
    """The loggers ``tracking.loggers`` lists, W&B excepted, in its order."""
    loggers = []
    for entry in cfg.tracking.loggers:
        name, args = class_spec(entry, "tracking.loggers")
        if name in FACTORIES:
            loggers.append(FACTORIES[name](cfg, run_dir))
        elif name != WANDB:
            try:
                loggers.append(import_class(name, "tracking.loggers")(**args))
            except TypeError as err:
                raise ConfigError(f"tracking.loggers: {name}: {err}") from None
    return loggers


def uses_wandb(cfg: Config) -> bool:
    """Whether ``tracking.loggers`` lists W&B (``tracking.wandb`` then says how it runs)."""
    return any(class_spec(entry, "tracking.loggers")[0] == WANDB for entry in cfg.tracking.loggers)


PARAM_PATH = "WANDB_SWEEP_PARAM_PATH"


def align_sweep_params(
    resolved: dict[str, Any], folder: Path, environ: MutableMapping[str, str] = os.environ
) -> Optional[Path]:
    """Point W&B at sweep parameters that agree with ``resolved`` (dotted keys) before ``wandb.init``.

    W&B's agent writes each run's parameters to ``$WANDB_SWEEP_PARAM_PATH`` and ``wandb.init`` locks those
    keys: a later ``config.update`` of them is ignored, so a named variant that changes a base key would show
    the base's value in every dashboard. The trainer hands ``wandb.init`` a copy (in the agent's format) in
    which every config key holds the resolved value; the others (``variant``, by which W&B's grid matches
    runs) keep the sweep's. Returns the file written (``<folder>/sweep-params.yaml``), or None outside a
    sweep run or when all agree."""
    source = environ.get(PARAM_PATH)
    if not source or not Path(source).exists():
        return None
    import wandb
    from wandb.sdk.lib import config_util

    params = config_util.dict_from_config_file(source, must_exist=True) or {}
    fixed = {key: resolved.get(key, value) for key, value in params.items()}
    if fixed == params:
        return None
    target = Path(folder).resolve() / "sweep-params.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    config_util.save_config_file_from_dict(str(target), {k: {"value": v} for k, v in fixed.items()})
    environ[PARAM_PATH] = str(target)

    wandb.setup(settings=wandb.Settings(sweep_param_path=str(target)))  # a W&B already set up reads it too
    return target


RECORD_FILE = SUMMARY_FILE
"""The run file holding the whole ``summary.json`` (what the run summary leaves out: its nested fields)."""
NOT_SUMMARY = ("config", "version")  # the run config; the layout of summary.json


def one_key_per_score(metrics: dict[str, Any]) -> dict[str, Any]:
    """``metrics`` without the plain ``test/<name>`` of a score also there per split (``test_<split>/<name>``):
    ``summary.json`` keeps both (``test/bleu`` is the first split's, what old folders' tables read); W&B gets each
    score once."""
    per_split = {key.partition("/")[2] for key in metrics if key.startswith("test_") and "/" in key}
    return {k: v for k, v in metrics.items() if not (k.startswith("test/") and k.partition("/")[2] in per_split)}


def log_summary(run: Any, summary: dict[str, Any], run_dir: Path | None = None) -> None:
    """``summary`` (``summary.json``) in the W&B run: each number and text once (:func:`one_key_per_score`) in the run
    summary (no config, no layout version, nothing nested) and, given ``run_dir``, its ``summary.json`` as the run
    file :data:`RECORD_FILE` (uploaded with the run, offline too)."""
    flat = {k: v for k, v in summary.items() if k not in NOT_SUMMARY and not isinstance(v, (dict, list, tuple))}
    run.summary.update(one_key_per_score(flat))
    if run_dir is not None and (Path(run_dir) / RECORD_FILE).is_file():
        base = Path(run_dir).resolve()
        run.save(str(base / RECORD_FILE), base_path=str(base), policy="now")


def texts_artifact(run_dir: Path, run_id: str, summary: dict[str, Any]):
    """The ``hypotheses`` artifact of ``run_dir`` (``None`` when it wrote no texts)."""
    import wandb

    folders = [run_dir / kind for kind in ("hyps", "refs") if (run_dir / kind).is_dir()]
    if not folders:
        return None
    metadata = {
        k: v
        for k, v in one_key_per_score(summary).items()
        if k.endswith("_signature") or k.endswith(("/bleu", "/chrf", "/chrf++", "/ter"))
    }
    art = wandb.Artifact(
        f"texts-{run_id}",
        type="hypotheses",
        metadata=metadata,
        description="detokenized hypotheses and references, one line per source sentence",
    )
    for folder in folders:
        art.add_dir(str(folder), name=folder.name, policy="immutable")
    return art


def checkpoint_artifact(run_dir: Path, run_id: str):
    """The best checkpoint, the config and the tokenizer as a ``model`` artifact in the run folder's
    layout (``None`` when there is no checkpoint): a download of it is a run folder ablate loads."""
    import wandb

    best = run_dir / "checkpoints" / "best.ckpt"
    if not best.exists():
        return None
    art = wandb.Artifact(
        f"model-{run_id}",
        type="model",
        description="best checkpoint by validation BLEU, config.yaml and tokenizer/: a run folder for "
        "`ablate translate` / `ablate evaluate` (or TranslationModule.load_from_checkpoint(checkpoints/best.ckpt))",
    )
    art.add_file(str(best), name="checkpoints/best.ckpt", policy="immutable")
    for name in ("config.yaml", "tokenizer"):
        path = run_dir / name
        if path.is_dir():
            art.add_dir(str(path), name=name, policy="immutable")
        elif path.exists():
            art.add_file(str(path), name=name, policy="immutable")
    return art


def publish(run: Any, run_dir: Path, summary: dict[str, Any], log_checkpoints: bool = False) -> None:
    """Log to ``run`` what rebuilds the run's table from W&B alone: :func:`log_summary`, the ``texts-<run id>``
    artifact (hypotheses and references, for the paired-bootstrap marks) and, with ``log_checkpoints``, the
    ``model-<run id>`` artifact laid out as a run folder (``ablate translate wandb:...`` loads it). Artifact files
    are referenced by absolute path where the run wrote them (``immutable``: no copy), so an offline run holds
    them until ``wandb sync`` uploads them, from whatever folder it is called in."""
    run_dir = run_dir.resolve()  # artifact entries keep this path until `wandb sync`, called from anywhere
    log_summary(run, summary, run_dir)
    for art, aliases in (
        (texts_artifact(run_dir, run.id, summary), ["latest"]),
        (checkpoint_artifact(run_dir, run.id) if log_checkpoints else None, ["best", "latest"]),
    ):
        if art is not None:
            run.log_artifact(art, aliases=aliases)


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
    """``online`` | ``offline`` | ``disabled`` from the config, the environment and credentials. Online without an
    API key would fail inside W&B and leave nothing to sync: it is offline instead, said through ``echo``."""
    mode: str = cfg.wandb
    env = os.environ.get("WANDB_MODE")
    if mode == "auto" and env in ("online", "offline", "disabled", "dryrun"):
        mode = "offline" if env == "dryrun" else env
    elif mode == "auto":
        mode = "online" if has_wandb_credentials() else "offline"
    if mode == "online" and not has_wandb_credentials():
        if echo is not None:
            echo(NO_CREDENTIALS)
        return "offline"
    return mode


NO_CREDENTIALS = (
    "W&B online needs an API key (WANDB_API_KEY or `wandb login`) and none was found: "
    "logging offline instead, to upload later with `ablate sync`"
)


def run_id(run_dir: Path) -> str:
    """The W&B run id of ``run_dir``: made once, reused on resume; a sweep agent's ``WANDB_RUN_ID`` when set."""
    path = RunFiles(run_dir).wandb_id
    with suppress(OSError, ValueError):  # a received folder's pipe, or text that is no run id: a new id
        if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", rid := regular(path).read_text(encoding="utf-8").strip()):
            return rid
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

        def guarded(self, fn, *args, ending: bool = False, **kwargs):
            """``fn(*args, **kwargs)``, or None with one warning per run when it fails (``ending``: as the run
            of a failure or an interrupt ends, when that warning does not say training goes on)."""
            try:
                return fn(*args, **kwargs)
            except Exception as err:  # noqa: BLE001 - tracking is best effort; summary.json is the record
                if not self._warned:
                    then = " as the run ended (summary.json has its record)" if ending else ", training goes on"
                    log.warning("W&B logging failed%s: %s", then, str(err).splitlines()[0] if str(err) else repr(err))
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
    return WandbLogger(
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


def _settings(system_metrics: bool = True):
    import wandb

    return wandb.Settings(silent=True, console="off", x_disable_stats=not system_metrics)


def start_logger(logger, attempts: int = 20, wait_s: float = 1.0):
    """Start the W&B run now, or None (with a warning): training goes on. Retried while the id is "in use"
    (a run resumed right after a kill, whose old W&B service still holds it for a few seconds)."""
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
    with suppress(Exception):  # tracking must never stop training
        logger.experiment.define_metric(DEV_BLEU.key, summary="max")
        logger.experiment.define_metric(DEV_PPL.key, summary="min")
