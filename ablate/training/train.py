"""One training run, end to end, read top to bottom: lock the folder, check it (new, resume, finished), build
the data and the model, open the record and the loggers, build the Trainer, fit, validate and test, write
the outputs and the record, publish to W&B. Running the same command again resumes an interrupted run
from ``last.ckpt`` (same W&B run, step and schedule); a finished run is not trained again."""

from __future__ import annotations

import logging
import os
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytorch_lightning as pl
import torch

from ablate.config import Config, ConfigError, unused_keys
from ablate.errors import AblateError, first_line
from ablate.record import DEV_BLEU, RunFiles, RunStatus
from ablate.training.checkpoints import (
    ResilientCheckpointIO,
    checkpoint_of,
    initialise,
    load_checkpoint_file,
    resumable_checkpoint,
    saved_checkpoints,
)
from ablate.training.module import TranslationModule
from ablate.training.run_folder import (
    RunLock,
    RunRecord,
    UnwritableRunDir,
    check_run_dir,
    claim_run_dir,
    default_run_dir,
    device_change,
    has_checkpoint,
    is_launcher_process,
    prepare_run_dir,
    read_summary,
    resolved,
    summarise,
    write_outputs,
)
from ablate.training.tracking import (
    define_metrics,
    log_summary,
    make_logger,
    make_loggers,
    publish,
    resolve_mode,
    start_logger,
    uses_wandb,
)
from ablate.training.trainer import (
    FaultInjection,
    LiveRecord,
    Milestones,
    Throughput,
    TrainClock,
    accelerator_and_precision,
    check_devices,
    make_trainer,
    quiet,
    sigint_once,
)
from ablate.utils.commands import capture, environment_kept
from ablate.utils.plugins import blame, user_error_line

__all__ = ["RunError", "train"]

log = logging.getLogger(__name__)


class RunError(AblateError, RuntimeError):
    """A training run failed; the message is one line and the run record says the same."""


def train(
    cfg: Config,
    run_dir: Path | None = None,
    overwrite: bool = False,
    callbacks: list | None = None,
    milestone: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Train, validate and test one configuration; returns the run summary.

    ``callbacks``: extra Lightning callbacks (``trainer.*`` keys pass more by name,
    :mod:`ablate.utils.typed`). ``milestone`` is called with ``data``, ``model``, ``fit_start`` and
    ``first_step`` as the run reaches each (``ablate bench`` times start-up with it). Raises ConfigError /
    DataError for bad input, before any training; RunError when training failed (``summary.json`` says why)."""
    from ablate.data.cache import check_cache_root
    from ablate.utils.io import cache_root

    check_devices(cfg)
    check_cache_root(cache_root(cfg.data.cache_dir))  # before the run folder is made: a bad cache leaves none
    run_dir = Path(run_dir or default_run_dir(cfg))
    check_run_dir(run_dir, overwrite)  # before the lock and console.log are written into it
    launcher = is_launcher_process()
    try:
        lock = RunLock(run_dir).acquire() if launcher else None  # also: is the folder writable?
    except UnwritableRunDir:
        try:  # a read-only finished run of cfg: nothing to write, nothing to do
            finished = not overwrite and prepare_run_dir(cfg, run_dir) == RunStatus.FINISHED
        except ConfigError:
            finished = False
        if finished:
            return _already_finished(run_dir)
        raise
    threads = torch.get_num_threads()  # train.threads is this run's: a notebook's next run starts from these
    try:
        with (
            sigint_once(),
            environment_kept(RUN_ENV),
            capture(RunFiles(run_dir).console) if launcher else nullcontext(),
        ):
            return _train(cfg, run_dir, overwrite, callbacks, milestone or (lambda name: None))
    finally:
        torch.set_num_threads(threads)
        if lock is not None:
            lock.release()


RUN_ENV = ("WANDB_MODE", "PL_GLOBAL_SEED", "PL_SEED_WORKERS")
"""Variables a run sets for itself, put back afterwards so a notebook's next run or ``wandb.init`` starts as the
first did: Lightning's offline ``WandbLogger`` sets ``WANDB_MODE=dryrun`` (and :func:`make_logger` ``offline``
where online has no key), which kept later runs offline after a ``wandb.login()``; ``seed_everything`` sets the
other two, which a later ``seed_everything()`` without a seed would read."""


def _already_finished(run_dir: Path) -> dict[str, Any]:
    log.info("run already finished: %s (pass --overwrite to train it again)", run_dir)
    return read_summary(run_dir) or {}


@dataclass
class _Run:
    """What the stages of one training hand each other."""

    cfg: Config
    run_dir: Path
    data: Any  # TranslationDataModule
    module: Any  # TranslationModule
    clock: TrainClock
    params: int
    record: RunRecord
    mode: str = "disabled"
    logger: Any = None  # the W&B logger, on the launcher process only
    loggers: list = field(default_factory=list)  # tracking.loggers besides W&B, on the launcher process only
    launcher: bool = True
    accelerator: str = "cpu"
    checkpoint_io: ResilientCheckpointIO = field(default_factory=lambda: ResilientCheckpointIO(warn=log.warning))
    throughput: Throughput | None = None  # set with the trainer


def _train(
    cfg: Config, run_dir: Path, overwrite: bool, callbacks: list | None, mark: Callable[[str], None]
) -> dict[str, Any]:
    """The story of a run: resume point, data, model, run record, trainer, fit and test, outputs."""
    quiet()
    state = prepare_run_dir(cfg, run_dir, overwrite)
    if state == RunStatus.FINISHED:
        return _already_finished(run_dir)
    # the newest checkpoint that loads: a damaged last.ckpt falls back to an earlier one
    resume_from = resumable_checkpoint(RunFiles(run_dir).checkpoints, log.warning) if state == "resume" else None
    if resume_from is not None and is_launcher_process() and (change := device_change(cfg, run_dir)):
        log.warning(change)  # allowed (a resource), but the rest of the run trains on other batches
    start_from = cfg.train.init_from if resume_from is None else None  # a resumed run has its own weights
    run = _start(cfg, run_dir, state, start_from, mark)
    try:
        trainer = _build_trainer(run, callbacks, mark)
    except Exception as err:  # noqa: BLE001 - a trainer.* option or callback that cannot be built: recorded, raised
        if run.launcher:
            run.record.write(RunStatus.FAILED, user_error_line(err) or _describe_failure(err, cfg))
        _end_wandb(run)
        raise
    try:
        _fit_and_test(trainer, run, resume_from)
    except (KeyboardInterrupt, SystemExit) as err:  # Ctrl-C, SIGTERM (Lightning raises SystemExit)
        again = "resume" if has_checkpoint(run.run_dir) else "start over (no checkpoint yet)"
        _record_end(run, trainer, RunStatus.INTERRUPTED, f"interrupted; run the same command again to {again}")
        raise KeyboardInterrupt from err
    except Exception as err:  # noqa: BLE001 - every failure is recorded, then reported in one line
        message = _describe_failure(err, cfg)
        _record_end(run, trainer, RunStatus.FAILED, message)
        raise RunError(message) from err
    if trainer.global_rank != 0:
        return {}
    _write_outputs(run, trainer)
    _publish(run)
    return run.record.data


def _start(cfg: Config, run_dir: Path, state: str, start_from: str | None, mark: Callable[[str], None]) -> _Run:
    """Data, model and run record, up to training. Whatever stops it leaves ``summary.json`` saying ``failed``
    and why: bad input (an :class:`AblateError`, a plugin's included) is raised as it was, one line; a data
    source's own exception (a plugin's) unwrapped, for the command line to name the plugin; any other crash
    (out of memory) as a :class:`RunError`."""
    from ablate.data.datamodule import TranslationDataModule

    try:
        if start_from:  # a wrong train.init_from fails before the data is prepared
            checkpoint_of(start_from)
        if cfg.train.threads > 0:
            torch.set_num_threads(cfg.train.threads)
        pl.seed_everything(cfg.seed, workers=True, verbose=False)
        data = TranslationDataModule(cfg.data, cfg.train, cfg.eval, cfg.seed)  # corpus, tokenizer, batches
        data.setup()
        if state == "resume":
            _check_same_tokenizer(cfg, run_dir, data.tokenizer)
    except Exception as err:  # noqa: BLE001 - recorded as the command line will show it, then raised unchanged
        _record_failed_start(cfg, run_dir, user_error_line(err) or _describe_failure(err, cfg))
        raise
    mark("data")
    try:
        run = _build_run(cfg, run_dir, data, start_from)
        mark("model")
        _open_record(run, state)
    except AblateError as err:  # bad input: one line, and the record says the same
        _record_failed_start(cfg, run_dir, user_error_line(err) or str(err))
        raise
    except Exception as err:  # noqa: BLE001 - a crash before training (out of memory) still leaves its record
        message = _describe_failure(err, cfg)
        _record_failed_start(cfg, run_dir, message)
        raise RunError(message) from err
    return run


def _check_same_tokenizer(cfg: Config, run_dir: Path, tokenizer: Any) -> None:
    """A resumed run's corpus must still give the tokenizer the run started with: the data cache follows a corpus
    edited on disk, but the checkpoint's embeddings learnt the old ids. A missing or damaged one is replaced."""
    from ablate.data.sources import DataError
    from ablate.data.tokenizer import SubwordTokenizer, TokenizerError

    saved = RunFiles(run_dir).tokenizer
    try:
        started = SubwordTokenizer.load(saved).to_json()
    except TokenizerError:
        return
    if started != tokenizer.to_json():
        raise DataError(
            f"data.source={cfg.data.source} no longer gives the tokenizer this run started with ({saved}): its corpus "
            f"changed since; restore the corpus to resume, or pass --overwrite to train the run afresh on the new one"
        )


def _build_run(cfg: Config, run_dir: Path, data, start_from: str | None) -> _Run:
    """The model (with ``train.init_from``'s weights, if any), its LightningModule and the run record."""
    from ablate.model.build import build_model

    tok = data.tokenizer
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, tok.pad_id, tok.joint)
    fits = getattr(model, "max_input", None)  # where learned positions end; the decoder's end there too
    if fits is not None and fits < cfg.data.max_len:  # else a long sentence fails mid-run, or at the test
        raise ConfigError(
            f"model.max_positions={cfg.model.max_positions} positions sentences of up to {fits} subwords, fewer than "
            f"the data.max_len={cfg.data.max_len} this run keeps: raise model.max_positions to "
            f"{cfg.model.max_positions - fits + cfg.data.max_len} or lower data.max_len to {fits}"
        )
    init = initialise(model, cfg, tok, log.warning) if start_from else None
    claim_run_dir(cfg, run_dir)
    record = RunRecord(run_dir, cfg)
    if init:
        record.update(init_from=init)
    splits = [data.val_split, *data.test_splits]
    t = cfg.train
    clock = TrainClock(t.max_time, t.max_steps, t.max_epochs, t.accumulate, log_every=cfg.tracking.log_every)
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
    params = sum(p.numel() for p in model.parameters())
    return _Run(cfg, run_dir, data, module, clock, params, record, launcher=is_launcher_process())


def _open_record(run: _Run, state: str) -> None:
    """The launcher saves the tokenizer, starts W&B and the other loggers and writes the record as ``running``."""
    echo = log.warning if run.launcher else None  # the DDP ranks resolve the same mode quietly
    run.mode = resolve_mode(run.cfg.tracking, echo) if uses_wandb(run.cfg) else "disabled"
    if not run.launcher:
        return
    run.loggers = make_loggers(run.cfg, run.run_dir)
    run.data.tokenizer.save(RunFiles(run.run_dir).tokenizer)
    run.logger = start_logger(make_logger(run.cfg, run.run_dir, run.mode))
    id_file = RunFiles(run.run_dir).wandb_id
    run.record.update(
        params=run.params,
        data=run.data.stats,
        wandb={"mode": run.mode, "id": id_file.read_text().strip() if id_file.exists() else None},
    )
    run.record.write(RunStatus.RUNNING)
    log.info("run dir: %s  (%s; %.2fM parameters; W&B %s)", run.run_dir, state, run.params / 1e6, run.mode)
    if unused := unused_keys(run.cfg):
        log.warning(
            "model.arch=%s does not read %s: they change nothing in this run", run.cfg.model.arch, ", ".join(unused)
        )


def _build_trainer(run: _Run, extra: list | None, mark: Callable[[str], None]):
    """The Lightning Trainer with our callbacks (clock, throughput, live record, faults, milestones)."""
    run.accelerator, precision = accelerator_and_precision(run.cfg)
    run.throughput = Throughput(run.data.tokenizer.pad_id, log_every=run.cfg.tracking.log_every)
    callbacks = [run.clock, run.throughput, LiveRecord(run.record), *(extra or [])]
    if fault := run.cfg.train.inject_fault or os.environ.get("ABLATE_INJECT_FAULT"):
        callbacks.append(FaultInjection(fault, run.run_dir))
    callbacks.append(Milestones(mark))
    loggers = [logger for logger in (run.logger, *run.loggers) if logger is not None]
    return make_trainer(run.cfg, run.run_dir, loggers, run.accelerator, precision, callbacks, run.checkpoint_io)


def _fit_and_test(trainer, run: _Run, resume_from: Path | None) -> None:
    """Fit, validate the final weights, and test the better of the final and the best checkpoint."""
    module, data, files = run.module, run.data, RunFiles(run.run_dir)
    if run.logger is not None and trainer.global_rank == 0:
        define_metrics(run.logger)
    trainer.fit(module, datamodule=data, ckpt_path=str(resume_from) if resume_from is not None else None)
    if trainer.interrupted:
        raise KeyboardInterrupt
    trainer.save_checkpoint(files.last, weights_only=False)
    trainer.validate(module, datamodule=data, verbose=False)
    final_bleu = module.last_val.get(DEV_BLEU.key, -1.0)
    if files.best.exists() and module.best_val_bleu > final_bleu:
        module.load_state_dict(load_checkpoint_file(files.best)["state_dict"])
    else:  # collective: every rank calls it, rank 0 writes
        trainer.save_checkpoint(files.best, weights_only=False)
        module.best_val_record = module.last_val_record  # the weights tested are the final ones
    trainer.test(module, datamodule=data, verbose=False)


def _record_failed_start(cfg: Config, run_dir: Path, message: str) -> None:
    """Record a run that failed before training (data, model, record): ``failed`` and why, in its folder."""
    if not is_launcher_process():
        return
    try:
        claim_run_dir(cfg, run_dir)
    except OSError:
        return
    RunRecord(run_dir, cfg).write(RunStatus.FAILED, message)


def _record_checkpoints(run: _Run) -> None:
    """The step and sha256 of each checkpoint now on disk, into the record (what loading it verifies)."""
    steps, recorded = run.checkpoint_io.steps, run.record.summary
    run.record.update(checkpoints=saved_checkpoints(RunFiles(run.run_dir).checkpoints, steps, recorded))


def _record_end(run: _Run, trainer, status: RunStatus, message: str) -> None:
    """Record an interrupted or failed run (the launcher only), with the step it reached and its checkpoints."""
    if not run.launcher:
        return
    if trainer.global_step > 0:  # a run stopped before it restored its checkpoint keeps its recorded step
        run.record.update(step=trainer.global_step)
    _record_checkpoints(run)
    run.record.write(status, message)
    if status == RunStatus.FAILED and run.logger is not None and run.logger.started:  # the failure is on W&B too
        run.logger.guarded(log_summary, run.logger.experiment, run.record.data, run.run_dir, ending=True)
    _end_wandb(run)


def _end_wandb(run: _Run) -> None:
    """Finish the W&B run of a run that failed or was interrupted (exit code 1, as W&B's exit hook would): in a
    process that trains again (a notebook, the tests), Lightning's WandbLogger would log the next run into it.
    Then W&B's service is let go here, not in its atexit hook: SLURM's scancel and requeue stop it with the
    trainer, and the hook printed a traceback ('Connection lost') where the logger had warned once already."""
    if run.logger is not None and run.logger.started:
        import wandb

        run.logger.guarded(run.logger.experiment.finish, exit_code=1, ending=True)
        run.logger.guarded(wandb.teardown, exit_code=1, ending=True)


def _write_outputs(run: _Run, trainer) -> None:
    """The summary, hypotheses and references; the record says ``finished`` (or ``failed`` on a full disk)."""
    cfg, record = run.cfg, run.record
    summary = summarise(run.module, run.throughput, trainer, run.params, run.clock.seconds, run.accelerator)
    summary["resolved"] = resolved(cfg)
    problem = write_outputs(run.run_dir, run.module, run.data)
    _record_checkpoints(run)
    if problem:  # a full disk: the run failed, said in one line, never left "running"
        record.update(**summary)
        record.write(RunStatus.FAILED, problem)
        raise RunError(problem)
    if run.checkpoint_io.failures:
        summary["checkpoint_failures"] = run.checkpoint_io.failures
    sweep = {"name": cfg.tracking.group} if cfg.tracking.group else None
    record.update(**summary, variant=cfg.tracking.variant, sweep=sweep)
    record.write(RunStatus.FINISHED)


def _publish(run: _Run) -> None:
    """Send the record, texts and (optionally) checkpoints to the W&B run; W&B trouble is a warning."""
    if run.logger is None:
        return
    try:
        publish(run.logger.experiment, run.run_dir, run.record.data, run.cfg.tracking.log_checkpoints)
        run.logger.finalize("success")
        import wandb

        wandb.finish()
    except Exception as err:  # noqa: BLE001 - W&B trouble never loses the local record
        log.warning("W&B logging failed: %s", err)
    if run.mode == "offline":
        log.info("W&B offline: upload later with `wandb sync %s/wandb/offline-run-*`", run.run_dir)


def _describe_failure(err: BaseException, cfg: Config) -> str:
    text = first_line(err)
    if isinstance(err, (MemoryError, torch.OutOfMemoryError)) or any(
        sign in text.lower() for sign in ("out of memory", "tried to allocate", "not enough memory")
    ):  # CPU allocator: "DefaultCPUAllocator: not enough memory: you tried to allocate 256000000000 bytes"
        return f"out of memory with train.max_tokens={cfg.train.max_tokens} (lower it, or train.accumulate)"

    culprit = blame(err)
    if culprit is not None:  # the plugin's author needs its name and line, not ablate's stack
        kind = "" if isinstance(err, AblateError) else f"{type(err).__name__} at {culprit[1]}: "
        return f"plugin '{culprit[0]}': {kind}{text}"
    return text
