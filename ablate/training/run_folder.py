"""A run's folder (layout: :class:`ablate.record.RunFiles`): where it goes, the lock that claims it, whether
it is new, resumable or finished, its record (``summary.json``, :class:`RunRecord`) and the texts a finished
run leaves. One process per folder: the ``flock`` (:class:`~ablate.utils.io.HolderLock`) names its holder and
dies with it, even by SIGKILL, so readers ask :func:`is_held` whether a ``running`` record is alive. ``report``
and ``sweep`` import this module: no torch or Lightning at module level."""

from __future__ import annotations

import errno
import logging
import math
import os
import resource
import time
from contextlib import suppress
from pathlib import Path
from typing import Any, Optional

import yaml

from ablate.config import Config, ConfigError, fingerprint, flatten, from_flat, head_dims, peak_lr, read_yaml, to_dict
from ablate.record import (
    DEV_BLEU,
    DEV_CHRF,
    DEV_PPL,
    LOCK_FILE,
    LOG_FILE,
    SUMMARY_FILE,
    SWEEP_FILE,
    TESTED_STEP,
    TEXT_KINDS,
    TOKENS_PER_CPU_SEC,
    TOKENS_PER_SEC,
    TRAIN_CPU_SECONDS,
    TRAIN_TOKENS,
    RunFiles,
    RunStatus,
    RunSummary,
    SweepFiles,
)
from ablate.utils.io import (
    HolderLock,
    LockHeld,
    atomic_write_text,
    is_folder_name,
    is_held as lock_is_held,
    write_lines,
)
from ablate.utils.provenance import ENVIRONMENT_FILE, environment, freeze, freeze_text, git_commit


class UnwritableRunDir(ConfigError):
    """The run folder cannot be written (read-only, no permission); one line naming it."""


class RunLock(HolderLock):
    """``with RunLock(run_dir):`` holds ``run_dir`` for this process. ConfigError when another live process
    holds it (naming its pid and host) or it cannot be created or written. Taking it is the first write into the
    folder, so an unwritable folder fails before any data is prepared."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        super().__init__(self.run_dir / LOCK_FILE)

    def acquire(self) -> RunLock:
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            super().acquire()
        except LockHeld as held:
            pid, _, host = held.holder.partition("@")
            raise ConfigError(
                f"run dir {self.run_dir} is in use by another training (pid {pid} on "
                f"{host or 'this host'}); wait for it, stop it, or choose another --run-dir"
            ) from None
        except FileExistsError:
            raise ConfigError(
                f"--run-dir {self.run_dir} is an existing file, not a folder; choose another path"
            ) from None
        except OSError as err:
            if err.errno == errno.ENOTDIR:
                raise ConfigError(
                    f"--run-dir {self.run_dir}: a part of the path is a file; choose another path"
                ) from None
            raise UnwritableRunDir(
                f"cannot write to run dir {self.run_dir}: {err.strerror or err}; choose a writable --run-dir"
            ) from None
        return self


def is_held(run_dir: Path) -> Optional[bool]:
    """:func:`ablate.utils.io.is_held` of ``run_dir``'s lock: True (a live holder), False (its holder ended, even
    by SIGKILL) or None (no lock file: liveness cannot be told)."""
    return lock_is_held(Path(run_dir) / LOCK_FILE)


def running_status(run_dir: Path, status: str) -> str:
    """A record's status with liveness from the lock: ``running`` whose lock is free is ``interrupted``."""
    return RunStatus.INTERRUPTED if status == RunStatus.RUNNING and is_held(run_dir) is False else status


RESUME_ORDER = ("last.ckpt", "last.prev.ckpt", "best.ckpt")
"""Checkpoints a run resumes from, newest first: the last one, the one before it, the best one."""


def default_run_dir(cfg: Config) -> Path:
    """``runs/<name>``: the tracking name, else the architecture and a config fingerprint; a W&B sweep agent's
    run goes to ``runs/sweep-<sweep id>/<name>-<run id>``, so two sweeps of one config never share a folder."""
    name = cfg.tracking.name or f"{cfg.model.arch}-{fingerprint(cfg)}"
    if not is_folder_name(name):  # "..": the working directory itself; "a/b": a folder nested in runs/a
        raise ConfigError(
            f"tracking.name {name!r} is not one folder name (the default run folder is runs/<name>); "
            "name it without '/', or pass --run-dir"
        )
    sweep_id, run_id = os.environ.get("WANDB_SWEEP_ID"), os.environ.get("WANDB_RUN_ID")
    if not (sweep_id and run_id):
        return Path("runs") / name
    variant = cfg.tracking.variant
    if variant and not is_folder_name(variant):  # plain `wandb agent`: no ablate check of the sweep file
        raise ConfigError(
            f"tracking.variant {variant!r} is not one folder name (a W&B sweep run's default folder is "
            "runs/sweep-<id>/<variant>-<run id>); name the variant without '/', or pass --run-dir"
        )
    return Path("runs") / f"sweep-{sweep_id}" / f"{variant or name}-{run_id}"


def is_launcher_process() -> bool:
    """False inside the extra processes Lightning's DDP launcher starts (they re-run the CLI)."""
    return int(os.environ.get("LOCAL_RANK", "0")) == 0 and int(os.environ.get("NODE_RANK", "0")) == 0


def prepare_run_dir(cfg: Config, run_dir: Path, overwrite: bool = False) -> str:
    """Check ``run_dir``; returns ``new`` | ``resume`` | ``finished``. A folder of a different config is refused
    rather than mixed, unless that run failed before it trained: then it is the new config's."""
    config_path = RunFiles(run_dir).config
    if overwrite and is_launcher_process() and run_dir.is_dir():
        import shutil

        for child in run_dir.iterdir():  # everything but the lock this process holds
            if child == RunFiles(run_dir).console and child.is_file() and not child.is_symlink():
                os.truncate(child, 0)  # open since the run began (capture): emptied, so it goes on logging
            elif child.name != LOCK_FILE:
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    for name in sorted(RUN_ENTRIES):  # a received folder's link: the run would write over what it leads to
        entry = run_dir / name
        if entry.is_symlink() and run_dir.resolve() not in entry.resolve().parents:
            raise ConfigError(
                f"{entry} is a link to {entry.resolve()}, outside the run folder, and a run writes there; replace the "
                f"link by the {'folder' if entry.is_dir() else 'file'} itself, or choose another --run-dir"
            )
    if not config_path.exists():
        return "new"
    try:
        recorded = flatten(read_yaml(config_path))
    except ConfigError as err:
        recorded, old, reason = None, "unreadable", f"an unreadable config.yaml ({err})"
    if recorded is not None:
        _refuse_unnamed_plugins(recorded, run_dir)
        try:
            old = fingerprint(from_flat(recorded, base=run_dir, trust="recorded"), resume=True)
            reason = "a run of a different config"
        except ConfigError as err:
            old, reason = "unreadable", f"an unreadable config.yaml ({err})"
    summary = read_summary(run_dir) or {}
    if old != fingerprint(cfg, resume=True):
        # a run that failed before it trained (bad data, a model too large; no step, no checkpoint): nothing to keep
        if summary.get("status") == RunStatus.FAILED and summary.get("step") is None and not has_checkpoint(run_dir):
            config_path.unlink()
            return "new"
        further = ""
        if summary.get("status") == RunStatus.FINISHED:  # e.g. a larger train.max_steps: a new run from its weights
            further = f"; to train it further, start a new run from it: --run-dir <new> train.init_from={run_dir}"
        raise ConfigError(f"run dir {run_dir} holds {reason}; choose another --run-dir or pass --overwrite{further}")
    if summary.get("status") == RunStatus.FINISHED:
        return RunStatus.FINISHED
    return "resume" if has_checkpoint(run_dir) else "new"


def device_change(cfg: Config, run_dir: Path) -> Optional[str]:
    """The warning for resuming ``run_dir`` on another number of devices than its last attempt's: each step's batch
    is ``train.max_tokens`` per device, so the rest of the run trains on other batches (``None``: the same, or
    ``auto`` on either side). The count is a resource (:data:`~ablate.config.NOT_TRAINING`), so it is allowed."""
    config = (read_summary(run_dir) or {}).get("config")
    train = config.get("train") if isinstance(config, dict) else None
    old, new = train.get("devices") if isinstance(train, dict) else None, cfg.train.devices
    if not isinstance(old, int) or isinstance(old, bool) or not isinstance(new, int) or old == new:
        return None
    return (
        f"train.devices={new} resumes a run last trained with train.devices={old}: train.max_tokens is per device, "
        f"so each step from here holds {new} x train.max_tokens tokens instead of {old} x (resume with "
        f"train.devices={old} to keep it)"
    )


RUN_ENTRIES = frozenset(
    {"config.yaml", "tokenizer", "checkpoints", "wandb", "wandb_id.txt", "console.log", "csv", "tensorboard", "mlruns"}
    | {SUMMARY_FILE, ENVIRONMENT_FILE, LOG_FILE, *TEXT_KINDS}
)
"""What a run writes in its folder (:class:`~ablate.record.RunFiles`, and ``tracking.loggers``' folders), besides
hidden files (the lock, fault markers, requeue counts, atomic writes' temporary files)."""


def check_run_dir(run_dir: Path, overwrite: bool) -> None:
    """Before the lock and console.log are written into ``run_dir``: refuse a sweep's folder (its trials are its
    runs), one holding Lightning's own ``hpc_ckpt_*.ckpt`` (a received folder's, resumed from under SLURM), and with
    ``overwrite`` a folder holding what no run writes (:func:`check_overwrite`)."""
    if SweepFiles(run_dir).state.is_file():
        raise ConfigError(
            f"run dir {run_dir} is a sweep's folder (it holds {SWEEP_FILE}); a trial's folder is {run_dir}/<trial>, "
            "else choose another --run-dir"
        )
    hpc = sorted(run_dir.glob("hpc_ckpt_*.ckpt"))
    if hpc:  # Lightning resumes from its own under SLURM whatever checkpoint ablate names (ablate writes none)
        raise ConfigError(
            f"run dir {run_dir} holds {hpc[-1].name}, Lightning's SLURM checkpoint, which it would resume from in "
            "place of this run's checkpoints/; ablate writes none: delete it"
        )
    if overwrite:
        check_overwrite(run_dir)


def check_overwrite(run_dir: Path) -> None:
    """Refuse ``--overwrite`` of a folder holding what no run writes (:data:`RUN_ENTRIES`): a corpus, a project,
    which :func:`prepare_run_dir` would delete."""
    names = sorted(child.name for child in run_dir.iterdir()) if run_dir.is_dir() else []
    foreign = [name for name in names if name not in RUN_ENTRIES and not name.startswith(".")]
    if foreign:
        raise ConfigError(
            f"--overwrite deletes a run's folder, and {run_dir} also holds {', '.join(foreign[:5])} (not written by "
            "a run); choose another --run-dir"
        )


def has_checkpoint(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a checkpoint to resume from (else the same command starts it over)."""
    return any((RunFiles(run_dir).checkpoints / name).exists() for name in RESUME_ORDER)


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


log = logging.getLogger(__name__)


def machine() -> dict[str, Any]:
    """What ran the trial: the CPU model, its logical cores and torch's intra-op threads."""
    import platform

    import torch

    cpu = platform.processor() or platform.machine()
    with suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
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
        # user + system CPU seconds of this attempt's process since it started (imports and data loading included)
        # and of its finished children (data workers, DDP ranks)
        self.summary.cpu_time_s = round(self.cpu_before + sum(os.times()[:4]), 2)  # os.times()[4] is wall-clock
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


def nonnegative(value: Any) -> float | None:
    """``value`` as a float when it is a finite, non-negative number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def checked_record(record: Any, history: list[dict[str, float]]) -> dict[str, Any]:
    """A checkpoint's best-validation record if well formed and one of the (checked) ``history``, else ``{}``."""
    scores = checked_history([record])  # empty unless ``record`` is a well-formed entry
    seen = {(h["step"], h[DEV_BLEU.key]) for h in history}
    if not scores or (scores[0]["step"], scores[0][DEV_BLEU.key]) not in seen:
        return {}
    hyps = record.get("hypotheses")
    if not isinstance(hyps, list) or not all(isinstance(h, str) for h in hyps):
        return {}
    return {**scores[0], "hypotheses": list(hyps)}


def checked_history(history: Any) -> list[dict[str, float]]:
    """A checkpoint's validation history, keeping only well-formed entries (``step`` int >= 0, BLEU and chrF in
    [0, 100], ppl >= 1 or None, ``train/grad_norm`` >= 0 where recorded): a planted or damaged entry is dropped."""
    if not isinstance(history, list):
        return []
    out = []
    for entry in history:
        if not isinstance(entry, dict) or isinstance(entry.get("step"), bool) or not isinstance(entry.get("step"), int):
            continue
        bleu, chrf, ppl = (nonnegative(entry.get(k)) for k in (DEV_BLEU.key, DEV_CHRF.key, DEV_PPL.key))
        if entry["step"] < 0 or bleu is None or bleu > 100 or chrf is None or chrf > 100:
            continue
        checked = {"step": entry["step"], DEV_BLEU.key: bleu, DEV_CHRF.key: chrf, DEV_PPL.key: ppl}
        if (norm := nonnegative(entry.get("train/grad_norm"))) is not None:
            checked["train/grad_norm"] = norm
        out.append(checked)
    return out


def resolved(cfg: Config) -> dict[str, Any]:
    """The values a run uses where its config leaves them implicit (dotted keys): ``model.d_k``, ``model.d_v``,
    the encoder and decoder layers, ``train.lr`` (the peak of Eq. 3 of Vaswani et al.) and
    ``model.attention.scale`` (``[self, cross]`` when they differ; absent for an RNN without attention). The
    record keeps them in ``summary.json``; the report derives them with this function for older runs."""
    from ablate.model.build import resolved_scale

    m = cfg.model
    d_k, d_v = head_dims(m)
    depth = m.rnn.layers if m.arch == "rnn" else m.layers
    out: dict[str, Any] = {
        "model.d_k": d_k,
        "model.d_v": d_v,
        "model.encoder_layers": m.encoder_layers or depth,
        "model.decoder_layers": m.decoder_layers or depth,
        "train.lr": peak_lr(cfg),
    }
    scales = [resolved_scale(m), resolved_scale(m, cross=True)]
    if not any(math.isnan(s) for s in scales):
        out["model.attention.scale"] = scales[0] if scales[0] == scales[1] else scales
    return out


def summarise(module, throughput, trainer, params: int, seconds: float, accelerator: str) -> dict[str, Any]:
    """What the record keeps of a trained and tested run: size, steps, speed, memory, losses and scores."""
    import torch

    best = module.best_val_record
    if accelerator == "gpu" and torch.cuda.is_available():  # peak GPU memory allocated, else the peak RSS
        peak_mb = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out: dict[str, Any] = {
        "params": params,
        "step": int(trainer.global_step),  # what a time budget (train.max_time) actually bought
        "threads": torch.get_num_threads(),
        "epoch": int(trainer.current_epoch),
        "history": module.history,
        "accelerator": accelerator,  # what trained it: "cpu" or "gpu" (config's "auto" resolved)
        "precision": str(trainer.precision),  # Lightning's: "32-true", "bf16-mixed" (train.precision=auto resolved)
        TOKENS_PER_SEC.key: throughput.tokens_per_sec,
        # process CPU seconds of the same steps (all ranks), and tokens per CPU-second: little moved by machine load
        TRAIN_CPU_SECONDS.key: throughput.cpu_seconds,
        TOKENS_PER_CPU_SEC.key: throughput.tokens_per_cpu_sec,
        "train/loss": None if module.last_loss is None else float(module.last_loss),
        "train/grad_norm": module.grad_norm_value(),  # of the last step, before clipping to train.clip_norm
        "train/step_time_s": throughput.step_seconds / max(1, trainer.global_step),
        "peak_memory_mb": round(peak_mb, 1),
        # validation scores of the checkpoint that was tested (the best by BLEU), all from one validation
        DEV_BLEU.key: best.get(DEV_BLEU.key),
        DEV_PPL.key: best.get(DEV_PPL.key),
        DEV_CHRF.key: best.get(DEV_CHRF.key),
        TESTED_STEP.key: best.get("step"),
        TRAIN_TOKENS.key: throughput.train_tokens,
        "train_seconds": round(seconds, 2),
    }
    out.update(module.test_metrics)
    first: dict[str, Any] = next(iter(module.test_results.values()), {"signatures": {}})
    for name, signature in first["signatures"].items():  # bleu_signature, chrf_signature, chrf++_signature, ...
        out[f"{name}_signature"] = signature
    return out


def write_outputs(run_dir: Path, module, data) -> str | None:
    """The test and validation hypotheses, references and sources; None, or one line saying why they could not be
    written (a full disk, a read-only folder), so the run is recorded as failed with that reason."""
    try:
        for split, result in module.test_results.items():
            write_lines(run_dir / "hyps" / f"{split}.txt", result["hypotheses"])
            write_lines(run_dir / "refs" / f"{split}.txt", data.references(split))
        hyps = module.best_val_record.get("hypotheses")
        if hyps is not None:  # from the validation whose scores summary.json reports
            write_lines(run_dir / "hyps" / f"{data.val_split}.txt", hyps)
            write_lines(run_dir / "refs" / f"{data.val_split}.txt", data.references(data.val_split))
        for split in [data.val_split, *module.test_results]:  # for BLEU by source length (ablate plot)
            write_lines(run_dir / "sources" / f"{split}.txt", data.sources(split))
    except OSError as err:
        return (
            f"could not write the test outputs (hyps, refs, sources) in {run_dir}: {err.strerror or err}; "
            "free space and rerun the same command"
        )
    return None
