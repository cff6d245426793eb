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
from typing import Any

import yaml

from ablate.training.callbacks import FaultInjection, InterruptCheckpoint, LiveRecord, TrainClock
from ablate.training.checkpoint_io import ResilientCheckpointIO
from ablate.config import Config, ConfigError, fingerprint, to_dict
from ablate.utils.io import atomic_write_text
from ablate.training.resolved import resolved
from ablate.training.tracking import (RunRecord, define_metrics, make_logger, offline_hint, read_summary, resolve_mode,
                             start_logger)


class RunError(RuntimeError):
    """A training run failed; the message is one line and the run record says the same."""


def default_run_dir(cfg: Config) -> Path:
    """``runs/<name>``: the tracking name, else the architecture and a config fingerprint."""
    return Path("runs") / (cfg.tracking.name or f"{cfg.model.arch}-{fingerprint(cfg)}")


def is_launcher_process() -> bool:
    """False inside the extra processes Lightning's DDP launcher starts (they re-run the CLI)."""
    return int(os.environ.get("LOCAL_RANK", "0")) == 0 and int(os.environ.get("NODE_RANK", "0")) == 0


def prepare_run_dir(cfg: Config, run_dir: Path, overwrite: bool = False) -> str:
    """Check ``run_dir``; returns ``new`` | ``resume`` | ``finished``.

    A run dir written by a different config is refused rather than mixed.
    """
    config_path = run_dir / "config.yaml"
    if overwrite and is_launcher_process() and run_dir.exists():
        import shutil

        shutil.rmtree(run_dir)
    if config_path.exists():
        previous = yaml.safe_load(config_path.read_text()) or {}
        from ablate.config import from_flat, flatten

        try:
            old = fingerprint(from_flat(flatten(previous)))
        except ConfigError:
            old = "unreadable"
        if old != fingerprint(cfg):
            raise ConfigError(
                f"run dir {run_dir} holds a run of a different config; "
                f"choose another --run-dir or pass --overwrite"
            )
        summary = read_summary(run_dir) or {}
        if summary.get("status") == "finished":
            return "finished"
        return "resume" if (run_dir / "checkpoints" / "last.ckpt").exists() else "new"
    return "new"


def claim_run_dir(cfg: Config, run_dir: Path) -> None:
    """Write ``config.yaml``: from now on ``run_dir`` belongs to ``cfg`` (after the input checked out)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if is_launcher_process() and not (run_dir / "config.yaml").exists():
        atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))


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

    for pattern in (".*sync_dist=True.*", ".*does not have many workers.*", ".*LeafSpec.*",
                    ".*weights_only.*", ".*The number of training batches.*", ".*anonymous setting.*",
                    ".*`srun` command is available.*", ".*resuming from a checkpoint that ended before the epoch.*"):
        warnings.filterwarnings("ignore", message=pattern)
    logging.getLogger("pytorch_lightning.utilities.rank_zero").setLevel(logging.WARNING)


def train(cfg: Config, run_dir: Path | None = None, overwrite: bool = False, echo=print) -> dict[str, Any]:
    """Train, validate and test one configuration; returns the run summary.

    Raises:
        ConfigError / DataError: bad input, before any training.
        RunError: training failed (diverged, out of memory, ...); ``summary.json`` says why.
    """
    import pytorch_lightning as pl
    import torch

    from ablate.data.datamodule import TranslationDataModule
    from ablate.model.build import build_model
    from ablate.training.module import TranslationModule

    _quiet()
    run_dir = Path(run_dir or default_run_dir(cfg))
    state = prepare_run_dir(cfg, run_dir, overwrite)
    if state == "finished":
        echo(f"run already finished: {run_dir} (pass --overwrite to train it again)")
        return read_summary(run_dir) or {}
    launcher = is_launcher_process()
    if cfg.train.threads > 0:
        torch.set_num_threads(cfg.train.threads)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)

    data = TranslationDataModule(cfg.data, cfg.train, cfg.eval, cfg.seed)
    data.setup()
    tok = data.tokenizer
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, tok.pad_id, tok.joint)
    claim_run_dir(cfg, run_dir)
    record = RunRecord(run_dir, cfg)
    if launcher:
        tok.save(run_dir / "tokenizer")
    params = sum(p.numel() for p in model.parameters())
    splits = [data.val_split, *data.test_splits]
    module = TranslationModule(
        model, cfg, tok.decode_tgt, {s: data.references(s) for s in splits},
        bos_id=tok.bos_id, eos_id=tok.eos_id, pad_id=tok.pad_id,
        val_split=data.val_split, test_splits=tuple(data.test_splits),
    )
    mode = resolve_mode(cfg.tracking)
    logger = start_logger(make_logger(cfg, run_dir, mode)) if launcher else None
    record.update(params=params, data=data.stats, wandb={"mode": mode, "id": (run_dir / "wandb_id.txt").read_text().strip()
                                                      if (run_dir / "wandb_id.txt").exists() else None})
    if launcher:
        record.write("running")
        echo(f"run dir: {run_dir}  ({state}; {params / 1e6:.2f}M parameters; W&B {mode})")

    accelerator, devices, precision = _accelerator_and_precision(cfg)
    t = cfg.train
    clock = TrainClock(max_time=t.max_time, max_steps=t.max_steps, max_epochs=t.max_epochs, accumulate=t.accumulate)
    module.clock = clock
    callbacks = [clock, InterruptCheckpoint(run_dir / "checkpoints" / "last.ckpt"), LiveRecord(record)]
    fault = t.inject_fault or os.environ.get("ABLATE_INJECT_FAULT")
    if fault:
        callbacks.append(FaultInjection(fault, run_dir))
    checkpoint_io = ResilientCheckpointIO(warn=echo if launcher else (lambda _: None))
    trainer = _make_trainer(cfg, run_dir, logger, accelerator, devices, precision, callbacks, checkpoint_io)
    try:
        if logger is not None and trainer.global_rank == 0:
            define_metrics(logger)
        ckpt = run_dir / "checkpoints" / "last.ckpt"
        trainer.fit(module, datamodule=data, ckpt_path=str(ckpt) if state == "resume" else None)
        if trainer.interrupted:
            raise KeyboardInterrupt
        trainer.save_checkpoint(ckpt)
        trainer.validate(module, datamodule=data, verbose=False)
        final_bleu = module.last_val.get("val/bleu", -1.0)
        best_path = run_dir / "checkpoints" / "best.ckpt"
        if best_path.exists() and module.best_val_bleu > final_bleu:
            state_dict = torch.load(best_path, map_location="cpu", weights_only=False)["state_dict"]
            module.load_state_dict(state_dict)
        else:  # collective: every rank calls it, rank 0 writes
            trainer.save_checkpoint(best_path)
            module.best_val_record = module.last_val_record  # the weights tested are the final ones
        trainer.test(module, datamodule=data, verbose=False)
    except (KeyboardInterrupt, SystemExit) as err:  # Ctrl-C, SIGTERM (Lightning raises SystemExit)
        if launcher:
            record.update(step=trainer.global_step)
            record.write("interrupted", "interrupted; run the same command again to resume")
        raise KeyboardInterrupt from err
    except Exception as err:  # noqa: BLE001 - every failure is recorded, then reported in one line
        message = _describe_failure(err, cfg)
        if launcher:
            record.update(step=trainer.global_step)
            record.write("failed", message)
        raise RunError(message) from err
    if trainer.global_rank != 0:
        return {}

    summary = _summarise(module, trainer, cfg, params, clock.seconds, accelerator)
    summary["resolved"] = resolved(cfg)
    _write_outputs(run_dir, module, data)
    if checkpoint_io.failures:
        summary["checkpoint_failures"] = checkpoint_io.failures
    record.update(**summary, variant=cfg.tracking.variant,
                  sweep={"name": cfg.tracking.group} if cfg.tracking.group else None)
    record.write("finished")
    if logger is not None:
        try:
            logger.experiment.summary.update({k: v for k, v in summary.items()
                                              if "/" in k or k in ("params", "resolved")})
            logger.finalize("success")
            import wandb

            wandb.finish()
        except Exception as err:  # noqa: BLE001 - W&B trouble never loses the local record
            echo(f"warning: W&B logging failed: {err}")
        if mode == "offline":
            echo(offline_hint(run_dir))
    return record.data


def _make_trainer(cfg: Config, run_dir: Path, logger, accelerator: str, devices: Any, precision: str,
                  extra_callbacks: list, checkpoint_io=None):
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import ModelCheckpoint

    t = cfg.train
    ckpt_dir = run_dir / "checkpoints"
    best = ModelCheckpoint(dirpath=ckpt_dir, filename="best", monitor="val/bleu", mode="max",
                           save_top_k=1, save_last=False, enable_version_counter=False)
    last = ModelCheckpoint(dirpath=ckpt_dir, save_top_k=0, save_last=True,
                           every_n_train_steps=t.checkpoint_every, enable_version_counter=False)
    multi = devices == "auto" or (isinstance(devices, int) and devices > 1) or t.nodes > 1
    strategy = "ddp" if multi else "auto"
    val_kwargs: dict[str, Any] = {}
    if t.val_every:
        val_kwargs = {"val_check_interval": t.val_every, "check_val_every_n_epoch": None}
    return pl.Trainer(
        accelerator=accelerator,
        devices=devices,
        num_nodes=t.nodes,
        strategy=strategy,
        precision=precision,
        logger=logger if logger is not None else False,
        callbacks=[best, last, *extra_callbacks],
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
        "train/step_time_s": module._all_sec / max(1, trainer.global_step),
        "peak_memory_mb": round(_peak_memory_mb(accelerator), 1),
        # validation scores of the checkpoint that was tested (the best by BLEU), all from one validation
        "val/bleu": best.get("val/bleu"),
        "val/ppl": best.get("val/ppl"),
        "val/chrf": best.get("val/chrf"),
        "val/step": best.get("step"),
        "train/tokens": module.train_tokens,
        "train_seconds": round(seconds, 2),
    }
    out.update(getattr(module, "test_metrics", {}))
    first = next(iter(module.test_results.values()), None)
    if first is not None:
        out["bleu_signature"] = first["signature"]
    return out


def _write_outputs(run_dir: Path, module, data) -> None:
    for split, result in module.test_results.items():
        atomic_write_text(run_dir / "hyps" / f"{split}.txt", "\n".join(result["hypotheses"]) + "\n")
        atomic_write_text(run_dir / "refs" / f"{split}.txt", "\n".join(data.references(split)) + "\n")
    hyps = module.best_val_record.get("hypotheses")
    if hyps is not None:  # from the validation whose scores summary.json reports
        atomic_write_text(run_dir / "hyps" / f"{data.val_split}.txt", "\n".join(hyps) + "\n")
        atomic_write_text(run_dir / "refs" / f"{data.val_split}.txt", "\n".join(data.references(data.val_split)) + "\n")
    for split in [data.val_split, *module.test_results]:  # for BLEU by source length (ablate plot)
        atomic_write_text(run_dir / "sources" / f"{split}.txt", "\n".join(data.sources(split)) + "\n")


if __name__ == "__main__":  # pragma: no cover - use `ablate train`
    sys.exit("use: ablate train")
