"""One training run, end to end: data, model, Lightning trainer, test decoding, run record.

Run directory layout::

    <run_dir>/config.yaml          the resolved config (a run dir never mixes two configs)
    <run_dir>/summary.json         status, metrics, throughput, params, config (see tracking.py)
    <run_dir>/checkpoints/         best.ckpt (by validation BLEU) and last.ckpt (for resuming)
    <run_dir>/hyps/<split>.txt     detokenized hypotheses, one line per source sentence, in order
    <run_dir>/refs/<split>.txt     the references they were scored against
    <run_dir>/wandb/               the W&B run (offline runs are synced from here)

Running the same command again resumes an interrupted run from ``last.ckpt`` (same W&B run,
step and learning-rate schedule); a finished run is not trained again.
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path
from typing import Any, Callable

import yaml

from ablate.config import Config, ConfigError, fingerprint, read_yaml, to_dict
from ablate.errors import AblateError
from ablate.training.callbacks import FaultInjection, InterruptCheckpoint, LiveRecord, Milestones, TrainClock
from ablate.training.checkpoint_io import (
    RESUME_ORDER,
    CheckpointError,
    ResilientCheckpointIO,
    load_checkpoint_file,
    resumable_checkpoint,
)
from ablate.training.interrupts import SigintGuard
from ablate.training.publish import log_summary, publish
from ablate.training.resolved import resolved
from ablate.training.run_lock import LOCK_FILE, RunLock
from ablate.training.tracking import (
    RunRecord,
    define_metrics,
    make_logger,
    offline_hint,
    read_summary,
    resolve_mode,
    start_logger,
)
from ablate.utils.io import atomic_write_text, write_lines


class RunError(AblateError, RuntimeError):
    """A training run failed; the message is one line and the run record says the same."""


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

    A run dir written by a different config is refused rather than mixed.
    """
    config_path = run_dir / "config.yaml"
    if overwrite and is_launcher_process() and run_dir.is_dir():
        import shutil

        for child in run_dir.iterdir():  # everything but the lock this process holds
            if child.name != LOCK_FILE:
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    if config_path.exists():
        from ablate.config import flatten, from_flat

        try:
            old = fingerprint(from_flat(flatten(read_yaml(config_path))))
            reason = "a run of a different config"
        except ConfigError as err:
            old, reason = "unreadable", f"an unreadable config.yaml ({err})"
        if old != fingerprint(cfg):
            raise ConfigError(f"run dir {run_dir} holds {reason}; choose another --run-dir or pass --overwrite")
        summary = read_summary(run_dir) or {}
        if summary.get("status") == "finished":
            return "finished"
        return "resume" if any((run_dir / "checkpoints" / n).exists() for n in RESUME_ORDER) else "new"
    return "new"


def claim_run_dir(cfg: Config, run_dir: Path) -> None:
    """Write ``config.yaml``: from now on ``run_dir`` belongs to ``cfg`` (after the input checked out)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if is_launcher_process() and not (run_dir / "config.yaml").exists():
        atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))


def check_devices(cfg: Config) -> None:
    """Refuse a GPU request this machine cannot meet, in one line, before any work."""
    import torch

    t = cfg.train
    if t.accelerator != "gpu" and not (t.accelerator == "auto" and torch.cuda.is_available()):
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    where = f" (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else ""
    if count == 0:
        raise ConfigError(f"train.accelerator=gpu but no GPU is visible{where}; use train.accelerator=auto or cpu")
    if isinstance(t.devices, int) and t.devices > count:
        raise ConfigError(
            f"train.devices={t.devices} but only {count} GPU(s) are visible{where}; "
            f"lower train.devices or use train.devices=auto"
        )


def _accelerator_and_precision(cfg: Config) -> tuple[str, Any, str]:
    import torch

    t = cfg.train
    accelerator = t.accelerator
    if accelerator == "auto":
        accelerator = "gpu" if torch.cuda.is_available() else "cpu"
    devices: Any = t.devices
    precision = t.precision
    if precision == "auto":
        bf16 = accelerator == "gpu" and torch.cuda.is_bf16_supported()
        precision = "bf16-mixed" if bf16 else "32-true"
    return accelerator, devices, precision


def _peak_memory_mb(accelerator: str) -> float:
    import torch

    if accelerator == "gpu" and torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _quiet() -> None:
    """Silence library chatter that says nothing about this run."""
    import logging
    import warnings

    for pattern in (
        ".*sync_dist=True.*",
        ".*does not have many workers.*",
        ".*LeafSpec.*",
        ".*The number of training batches.*",
        ".*anonymous setting.*",
        ".*`srun` command is available.*",
        ".*resuming from a checkpoint that ended before the epoch.*",
    ):
        warnings.filterwarnings("ignore", message=pattern)
    logging.getLogger("pytorch_lightning.utilities.rank_zero").setLevel(logging.WARNING)


def train(
    cfg: Config,
    run_dir: Path | None = None,
    overwrite: bool = False,
    echo=print,
    callbacks: list | None = None,
    milestone: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train, validate and test one configuration; returns the run summary.

    The run folder is locked for the whole run (a second training of it is refused, naming this
    one), and a second Ctrl-C cannot cut short the interrupt checkpoint of the first.
    ``callbacks`` are extra Lightning callbacks (EarlyStopping, a profiler, ...); ``trainer.*``
    config keys pass Trainer options and callbacks by name (:mod:`ablate.utils.trainer_options`).
    ``milestone``, when given, is called with ``data``, ``model``, ``fit_start`` and ``first_step``
    as the run reaches each (what ``ablate bench`` times start-up with).

    Raises:
        ConfigError / DataError: bad input, before any training.
        RunError: training failed (diverged, out of memory, ...); ``summary.json`` says why.
    """
    check_devices(cfg)
    run_dir = Path(run_dir or default_run_dir(cfg))
    lock = RunLock(run_dir).acquire() if is_launcher_process() else None  # also: is the folder writable?
    try:
        with SigintGuard():
            return _train(cfg, run_dir, overwrite, echo, callbacks, milestone)
    finally:
        if lock is not None:
            lock.release()


def _train(
    cfg: Config,
    run_dir: Path,
    overwrite: bool,
    echo,
    callbacks: list | None,
    milestone: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    import pytorch_lightning as pl
    import torch

    from ablate.data.datamodule import TranslationDataModule
    from ablate.model.build import build_model
    from ablate.training.module import TranslationModule

    _quiet()
    mark = milestone or (lambda name: None)
    state = prepare_run_dir(cfg, run_dir, overwrite)
    if state == "finished":
        echo(f"run already finished: {run_dir} (pass --overwrite to train it again)")
        return read_summary(run_dir) or {}
    launcher = is_launcher_process()
    resume_from = None
    if state == "resume":  # the newest checkpoint that loads; a damaged last.ckpt falls back to an earlier one
        try:
            resume_from = resumable_checkpoint(run_dir / "checkpoints", warn=echo if launcher else (lambda _: None))
        except CheckpointError as err:
            raise ConfigError(str(err)) from None
    if cfg.train.threads > 0:
        torch.set_num_threads(cfg.train.threads)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)

    data = TranslationDataModule(cfg.data, cfg.train, cfg.eval, cfg.seed)
    data.setup()
    mark("data")
    tok = data.tokenizer
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, tok.pad_id, tok.joint)
    mark("model")
    claim_run_dir(cfg, run_dir)
    record = RunRecord(run_dir, cfg)
    if launcher:
        tok.save(run_dir / "tokenizer")
    params = sum(p.numel() for p in model.parameters())
    splits = [data.val_split, *data.test_splits]
    t = cfg.train
    clock = TrainClock(max_time=t.max_time, max_steps=t.max_steps, max_epochs=t.max_epochs, accumulate=t.accumulate)
    module = TranslationModule(
        model,
        cfg,
        tok.decode_tgt,
        {s: data.references(s) for s in splits},
        bos_id=tok.bos_id,
        eos_id=tok.eos_id,
        pad_id=tok.pad_id,
        val_split=data.val_split,
        test_splits=tuple(data.test_splits),
        clock=clock,
        vocab={"src": tok.src_vocab_size, "tgt": tok.tgt_vocab_size, "joint": tok.joint},
    )
    mode = resolve_mode(cfg.tracking)
    logger = start_logger(make_logger(cfg, run_dir, mode)) if launcher else None
    record.update(
        params=params,
        data=data.stats,
        wandb={
            "mode": mode,
            "id": (run_dir / "wandb_id.txt").read_text().strip() if (run_dir / "wandb_id.txt").exists() else None,
        },
    )
    if launcher:
        record.write("running")
        echo(f"run dir: {run_dir}  ({state}; {params / 1e6:.2f}M parameters; W&B {mode})")

    accelerator, devices, precision = _accelerator_and_precision(cfg)
    callbacks = [
        clock,
        InterruptCheckpoint(run_dir / "checkpoints" / "last.ckpt"),
        LiveRecord(record),
        *(callbacks or []),
    ]
    fault = t.inject_fault or os.environ.get("ABLATE_INJECT_FAULT")
    if fault:
        callbacks.append(FaultInjection(fault, run_dir))
    if milestone is not None:
        callbacks.append(Milestones(milestone))
    checkpoint_io = ResilientCheckpointIO(warn=echo if launcher else (lambda _: None))
    trainer = _make_trainer(cfg, run_dir, logger, accelerator, devices, precision, callbacks, checkpoint_io)
    try:
        if logger is not None and trainer.global_rank == 0:
            define_metrics(logger)
        ckpt = run_dir / "checkpoints" / "last.ckpt"
        trainer.fit(module, datamodule=data, ckpt_path=str(resume_from) if resume_from is not None else None)
        if trainer.interrupted:
            raise KeyboardInterrupt
        trainer.save_checkpoint(ckpt, weights_only=False)
        trainer.validate(module, datamodule=data, verbose=False)
        final_bleu = module.last_val.get("val/bleu", -1.0)
        best_path = run_dir / "checkpoints" / "best.ckpt"
        if best_path.exists() and module.best_val_bleu > final_bleu:
            state_dict = load_checkpoint_file(best_path)["state_dict"]
            module.load_state_dict(state_dict)
        else:  # collective: every rank calls it, rank 0 writes
            trainer.save_checkpoint(best_path, weights_only=False)
            module.best_val_record = module.last_val_record  # the weights tested are the final ones
        trainer.test(module, datamodule=data, verbose=False)
    except (KeyboardInterrupt, SystemExit) as err:  # Ctrl-C, SIGTERM (Lightning raises SystemExit)
        if launcher:
            if trainer.global_step > 0:  # a run stopped before it restored its checkpoint keeps its recorded step
                record.update(step=trainer.global_step)
            record.write("interrupted", "interrupted; run the same command again to resume")
        raise KeyboardInterrupt from err
    except Exception as err:  # noqa: BLE001 - every failure is recorded, then reported in one line
        message = _describe_failure(err, cfg)
        if launcher:
            if trainer.global_step > 0:
                record.update(step=trainer.global_step)
            record.write("failed", message)
            if logger is not None and logger._experiment is not None:  # the failure is on W&B too
                logger._guard(log_summary, logger.experiment, record.data)
        raise RunError(message) from err
    if trainer.global_rank != 0:
        return {}

    summary = _summarise(module, trainer, cfg, params, clock.seconds, accelerator)
    summary["resolved"] = resolved(cfg)
    _write_outputs(run_dir, module, data)
    if checkpoint_io.failures:
        summary["checkpoint_failures"] = checkpoint_io.failures
    record.update(
        **summary, variant=cfg.tracking.variant, sweep={"name": cfg.tracking.group} if cfg.tracking.group else None
    )
    record.write("finished")
    if logger is not None:
        try:
            publish(logger.experiment, run_dir, record.data, cfg.tracking.log_checkpoints)
            logger.finalize("success")
            import wandb

            wandb.finish()
        except Exception as err:  # noqa: BLE001 - W&B trouble never loses the local record
            echo(f"warning: W&B logging failed: {err}")
        if mode == "offline":
            echo(offline_hint(run_dir))
    return record.data


def _make_trainer(
    cfg: Config,
    run_dir: Path,
    logger,
    accelerator: str,
    devices: Any,
    precision: str,
    extra_callbacks: list,
    checkpoint_io=None,
):
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import ModelCheckpoint

    from ablate.utils.trainer_options import build as trainer_options

    options, user_callbacks = trainer_options(cfg.trainer)
    t = cfg.train
    ckpt_dir = run_dir / "checkpoints"
    best = ModelCheckpoint(
        dirpath=ckpt_dir,
        filename="best",
        monitor="val/bleu",
        mode="max",
        save_top_k=1,
        save_last=False,
        enable_version_counter=False,
    )
    last = ModelCheckpoint(
        dirpath=ckpt_dir,
        save_top_k=0,
        save_last=True,
        every_n_train_steps=t.checkpoint_every,
        enable_version_counter=False,
    )
    multi = devices == "auto" or (isinstance(devices, int) and devices > 1) or t.nodes > 1
    strategy = "ddp" if multi else "auto"
    val_kwargs: dict[str, Any] = {}
    if t.val_every:
        val_kwargs = {"val_check_interval": t.val_every, "check_val_every_n_epoch": None}
    kwargs = dict(
        accelerator=accelerator,
        devices=devices,
        num_nodes=t.nodes,
        strategy=strategy,
        precision=precision,
        logger=logger if logger is not None else False,
        callbacks=[best, last, *extra_callbacks, *user_callbacks],
        max_epochs=t.max_epochs if t.max_epochs is not None else (-1 if t.max_steps < 0 else None),
        max_steps=t.max_steps,
        gradient_clip_val=t.clip_norm or None,
        accumulate_grad_batches=t.accumulate,
        log_every_n_steps=min(cfg.tracking.log_every, 50),
        num_sanity_val_steps=0,
        use_distributed_sampler=False,
        enable_model_summary=False,
        default_root_dir=str(run_dir),
        plugins=[checkpoint_io] if checkpoint_io is not None else None,
        **val_kwargs,
    )
    kwargs.update(options)  # trainer.* keys (those ablate owns are refused when the config is read)
    return pl.Trainer(**kwargs)


def _describe_failure(err: BaseException, cfg: Config) -> str:
    import torch

    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if isinstance(err, (MemoryError, torch.OutOfMemoryError)) or "out of memory" in text.lower():
        return f"out of memory with train.max_tokens={cfg.train.max_tokens} (lower it, or train.accumulate)"
    return text


def _summarise(module, trainer, cfg: Config, params: int, seconds: float, accelerator: str) -> dict[str, Any]:
    import torch

    best = module.best_val_record
    out: dict[str, Any] = {
        "params": params,
        "step": int(trainer.global_step),  # what a time budget (train.max_time) actually bought
        "threads": torch.get_num_threads(),
        "epoch": int(trainer.current_epoch),
        "history": module.history,
        "train/tokens_per_sec": module.tokens_per_sec,
        "train/loss": None if module.last_loss is None else float(module.last_loss),
        "train/step_time_s": module.step_seconds / max(1, trainer.global_step),
        "peak_memory_mb": round(_peak_memory_mb(accelerator), 1),
        # validation scores of the checkpoint that was tested (the best by BLEU), all from one validation
        "val/bleu": best.get("val/bleu"),
        "val/ppl": best.get("val/ppl"),
        "val/chrf": best.get("val/chrf"),
        "val/step": best.get("step"),
        "train/tokens": module.train_tokens,
        "train_seconds": round(seconds, 2),
    }
    out.update(module.test_metrics)
    first = next(iter(module.test_results.values()), None)
    if first is not None:
        out["bleu_signature"] = first["signature"]
    return out


def _write_outputs(run_dir: Path, module, data) -> None:
    for split, result in module.test_results.items():
        write_lines(run_dir / "hyps" / f"{split}.txt", result["hypotheses"])
        write_lines(run_dir / "refs" / f"{split}.txt", data.references(split))
    hyps = module.best_val_record.get("hypotheses")
    if hyps is not None:  # from the validation whose scores summary.json reports
        write_lines(run_dir / "hyps" / f"{data.val_split}.txt", hyps)
        write_lines(run_dir / "refs" / f"{data.val_split}.txt", data.references(data.val_split))
    for split in [data.val_split, *module.test_results]:  # for BLEU by source length (ablate plot)
        write_lines(run_dir / "sources" / f"{split}.txt", data.sources(split))


if __name__ == "__main__":  # pragma: no cover - use `ablate train`
    sys.exit("use: ablate train")
