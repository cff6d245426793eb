"""One training run, end to end: data, model, Lightning trainer, test decoding, run record.

Run directory layout::

    <run_dir>/config.yaml          the resolved config (a run dir never mixes two configs)
    <run_dir>/summary.json         status, metrics, throughput, params, config, package versions (see tracking.py)
    <run_dir>/environment.txt      the installed packages (name==version), whose sha256 summary.json records
    <run_dir>/checkpoints/         best.ckpt (by validation BLEU) and last.ckpt (for resuming)
    <run_dir>/hyps/<split>.txt     detokenized hypotheses, one line per source sentence, in order
    <run_dir>/refs/<split>.txt     the references they were scored against
    <run_dir>/wandb/               the W&B run (offline runs are synced from here)

Running the same command again resumes an interrupted run from ``last.ckpt`` (same W&B run,
step and learning-rate schedule); a finished run is not trained again.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable

from ablate.config import Config, ConfigError
from ablate.errors import AblateError
from ablate.record import DEV_BLEU, RunFiles, RunStatus
from ablate.training.callbacks import FaultInjection, InterruptCheckpoint, LiveRecord, Milestones, TrainClock
from ablate.training.checkpoint_io import (
    CheckpointError,
    ResilientCheckpointIO,
    load_checkpoint_file,
    resumable_checkpoint,
)
from ablate.training.init_from import checkpoint_of, initialise
from ablate.training.interrupts import SigintGuard
from ablate.training.outputs import save_outputs, summarise
from ablate.training.publish import log_summary, publish
from ablate.training.resolved import resolved
from ablate.training.run_dir import claim_run_dir, default_run_dir, is_launcher_process, prepare_run_dir
from ablate.training.run_lock import RunLock
from ablate.training.throughput import Throughput
from ablate.training.tracking import (
    RunRecord,
    define_metrics,
    make_logger,
    offline_hint,
    read_summary,
    resolve_mode,
    start_logger,
)
from ablate.training.trainer import accelerator_and_precision, check_devices, make_trainer, quiet

__all__ = ["RunError", "train"]


class RunError(AblateError, RuntimeError):
    """A training run failed; the message is one line and the run record says the same."""


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
    from ablate.data.cache import cache_root, check_cache_root

    check_devices(cfg)
    check_cache_root(cache_root(cfg.data.cache_dir))  # before the run folder is made: a bad cache leaves none
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

    quiet()
    mark = milestone or (lambda name: None)
    files = RunFiles(run_dir)
    state = prepare_run_dir(cfg, run_dir, overwrite)
    if state == RunStatus.FINISHED:
        echo(f"run already finished: {run_dir} (pass --overwrite to train it again)")
        return read_summary(run_dir) or {}
    launcher = is_launcher_process()
    resume_from = None
    if state == "resume":  # the newest checkpoint that loads; a damaged last.ckpt falls back to an earlier one
        try:
            resume_from = resumable_checkpoint(files.checkpoints, warn=echo if launcher else (lambda _: None))
        except CheckpointError as err:
            raise ConfigError(str(err)) from None
    start_from = cfg.train.init_from if resume_from is None else None  # a resumed run has its own weights
    if start_from:
        checkpoint_of(start_from)  # a wrong path fails now, not after the data is prepared
    if cfg.train.threads > 0:
        torch.set_num_threads(cfg.train.threads)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)

    data = TranslationDataModule(cfg.data, cfg.train, cfg.eval, cfg.seed)
    data.setup()
    mark("data")
    tok = data.tokenizer
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, tok.pad_id, tok.joint)
    init = initialise(model, cfg, tok, echo if launcher else (lambda _: None)) if start_from else None
    mark("model")
    claim_run_dir(cfg, run_dir)
    record = RunRecord(run_dir, cfg)
    if launcher:
        tok.save(files.tokenizer)
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
    mode = resolve_mode(cfg.tracking, echo if launcher else None)
    logger = start_logger(make_logger(cfg, run_dir, mode)) if launcher else None
    record.update(
        params=params,
        data=data.stats,
        **({"init_from": init} if init else {}),
        wandb={
            "mode": mode,
            "id": files.wandb_id.read_text().strip() if files.wandb_id.exists() else None,
        },
    )
    if launcher:
        record.write(RunStatus.RUNNING)
        echo(f"run dir: {run_dir}  ({state}; {params / 1e6:.2f}M parameters; W&B {mode})")

    accelerator, devices, precision = accelerator_and_precision(cfg)
    throughput = Throughput(tok.pad_id, log_every=cfg.tracking.log_every)
    callbacks = [
        clock,
        throughput,
        InterruptCheckpoint(files.last),
        LiveRecord(record),
        *(callbacks or []),
    ]
    fault = t.inject_fault or os.environ.get("ABLATE_INJECT_FAULT")
    if fault:
        callbacks.append(FaultInjection(fault, run_dir))
    if milestone is not None:
        callbacks.append(Milestones(milestone))
    checkpoint_io = ResilientCheckpointIO(warn=echo if launcher else (lambda _: None))
    trainer = make_trainer(cfg, run_dir, logger, accelerator, devices, precision, callbacks, checkpoint_io)
    try:
        if logger is not None and trainer.global_rank == 0:
            define_metrics(logger)
        ckpt = files.last
        trainer.fit(module, datamodule=data, ckpt_path=str(resume_from) if resume_from is not None else None)
        if trainer.interrupted:
            raise KeyboardInterrupt
        trainer.save_checkpoint(ckpt, weights_only=False)
        trainer.validate(module, datamodule=data, verbose=False)
        final_bleu = module.last_val.get(DEV_BLEU.key, -1.0)
        best_path = files.best
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
            record.write(RunStatus.INTERRUPTED, "interrupted; run the same command again to resume")
        raise KeyboardInterrupt from err
    except Exception as err:  # noqa: BLE001 - every failure is recorded, then reported in one line
        message = _describe_failure(err, cfg)
        if launcher:
            if trainer.global_step > 0:
                record.update(step=trainer.global_step)
            record.write(RunStatus.FAILED, message)
            if logger is not None and logger.started:  # the failure is on W&B too
                logger.guarded(log_summary, logger.experiment, record.data)
        raise RunError(message) from err
    if trainer.global_rank != 0:
        return {}

    summary = summarise(module, throughput, trainer, cfg, params, clock.seconds, accelerator)
    summary["resolved"] = resolved(cfg)
    problem = save_outputs(run_dir, module, data)
    if problem:  # a full disk: the run failed, said in one line, never left "running"
        record.update(**summary)
        record.write(RunStatus.FAILED, problem)
        raise RunError(problem)
    if checkpoint_io.failures:
        summary["checkpoint_failures"] = checkpoint_io.failures
    record.update(
        **summary, variant=cfg.tracking.variant, sweep={"name": cfg.tracking.group} if cfg.tracking.group else None
    )
    record.write(RunStatus.FINISHED)
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


def _describe_failure(err: BaseException, cfg: Config) -> str:
    import torch

    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if isinstance(err, (MemoryError, torch.OutOfMemoryError)) or "out of memory" in text.lower():
        return f"out of memory with train.max_tokens={cfg.train.max_tokens} (lower it, or train.accumulate)"
    return text


if __name__ == "__main__":  # pragma: no cover - use `ablate train`
    sys.exit("use: ablate train")
