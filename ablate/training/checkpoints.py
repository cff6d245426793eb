"""Checkpoints: written atomically, verified on load, the point a run resumes from, and ``train.init_from``.

A checkpoint is loaded with ``weights_only=True`` (no code from the file runs); its zip members' CRC32s and,
where the run record holds it, the file's sha256 must match, or it is refused in one line. A damaged
``last.ckpt`` falls back to ``last.prev.ckpt`` or ``best.ckpt``. ``train.init_from`` takes only the weights,
which must fit this run's model and vocabulary; otherwise the differing ``model.*``/``data.*`` keys are named.
"""

from __future__ import annotations

import logging
import os
import zipfile
from contextlib import suppress
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch
from pytorch_lightning.plugins.io import TorchCheckpointIO
from torch import nn

from ablate.config import Config, ConfigError, flatten, from_flat, read_yaml, to_dict
from ablate.data.tokenizer import SubwordTokenizer
from ablate.errors import first_line
from ablate.model.build import build_model
from ablate.record import RunFiles, RunStatus, RunSummary, SweepFiles
from ablate.training.run_folder import RESUME_ORDER
from ablate.utils import io, plugins as plugin_loader
from ablate.utils.io import file_sha256

log = logging.getLogger(__name__)

REQUIRED = ("state_dict", "global_step", "loops", "optimizer_states")


class CheckpointError(ConfigError):
    """A checkpoint cannot be used; the message is one line naming the file and what to do."""


RESTORE = "restore it from a copy, or train the run again (--overwrite)"
"""What to do about a damaged checkpoint."""


def verify_checkpoint(path: str | Path) -> None:
    """Refuse (CheckpointError) a checkpoint whose bytes changed since it was written: a zip member that fails
    its CRC32 (a file that is not a zip is left to ``torch.load``), or a sha256 other than the run record's."""
    _check_crcs(Path(path))
    _check_digest(Path(path))


def _check_crcs(path: Path) -> None:
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return
    if bad is not None:
        raise CheckpointError(f"checkpoint {path} is damaged: {bad} fails its CRC check; {RESTORE}")


def _check_digest(path: Path) -> None:
    """Compare with the run record beside ``<run>/checkpoints/<name>``, where there is one that has finished or
    stopped (a running run's checkpoints move on) and holds digests."""
    summary = RunSummary.peek(path.parent.parent) if path.parent.name == "checkpoints" else None
    if summary is None or summary.status in (None, RunStatus.RUNNING):
        return
    recorded = summary.checkpoint(path.name)
    if recorded is not None and file_sha256(path) != recorded.sha256:
        raise CheckpointError(
            f"checkpoint {path} is damaged: its sha256 is not the {recorded.sha256[:12]}... the run recorded "
            f"for it (summary.json); {RESTORE}"
        )


PICKLED = "it holds pickled objects other than tensors (refused: loading them could run code)"
"""Why a checkpoint that ``torch.load(weights_only=True)`` refuses is not used."""


def refused_pickle(err: BaseException) -> bool:
    """Whether ``err`` is ``torch.load(weights_only=True)`` refusing a pickled object."""
    return "weights_only" in str(err) or "Unsupported global" in str(err)


def load_checkpoint_file(path: str | Path, required: tuple[str, ...] = ("state_dict",)) -> dict[str, Any]:
    """The checkpoint at ``path``, verified and loaded without running any code from it; CheckpointError when
    damaged, unreadable, holding pickled objects, or missing ``required`` keys."""
    try:
        _check_crcs(io.regular(Path(path)))  # a pipe or a device would never finish (or start) reading
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except CheckpointError:
        raise
    except Exception as err:  # noqa: BLE001 - torch raises many types for a damaged or hostile file
        if refused_pickle(err):
            raise CheckpointError(f"checkpoint {path} is unreadable: {PICKLED}") from None
        why = first_line(err).split(". ")[0][:200]  # torch's first sentence, not its hint about miniz
        raise CheckpointError(f"checkpoint {path} is unreadable ({why}); {RESTORE}") from None
    if not isinstance(checkpoint, dict) or any(key not in checkpoint for key in required):
        raise CheckpointError(f"checkpoint {path} is not an ablate checkpoint (missing {', '.join(required)})")
    _check_digest(Path(path))  # after the load, so a planted pickle is named as such
    return checkpoint


def resumable_checkpoint(ckpt_dir: Path, warn: Callable[[str], None] = log.warning) -> Optional[Path]:
    """The newest checkpoint in ``ckpt_dir`` that loads (a damaged one skipped with a warning), or None when
    there is none; CheckpointError when some exist but none loads."""
    damaged = []
    for name in RESUME_ORDER:
        path = Path(ckpt_dir) / name
        if not path.exists():
            continue
        try:
            step = load_checkpoint_file(path, REQUIRED)["global_step"]
        except CheckpointError as err:
            damaged.append(str(err))
            continue
        for message in damaged:
            warn(f"{message}; resuming from {path} (step {step}) instead")
        return path
    if damaged:
        raise CheckpointError(
            f"{damaged[0]}, and no earlier checkpoint is readable; pass --overwrite to start this run over"
        )
    return None


class ResilientCheckpointIO(TorchCheckpointIO):
    """Lightning's ``torch.save`` checkpoint I/O, made safe for long runs on shared disks.

    Each checkpoint is written to a temporary file and renamed over its target, so a kill or a full disk
    mid-write leaves the previous one intact. One that cannot be written is skipped with a warning and
    counted in :attr:`failures`; training goes on."""

    def __init__(self, warn: Callable[[str], None] = log.warning):
        super().__init__()
        self.warn = warn
        self.failures: list[str] = []
        self.steps: dict[str, int] = {}  # file name -> the step of its last successful write in this process

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | Path, storage_options: Optional[Any] = None
    ) -> None:
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            super().save_checkpoint(checkpoint, tmp, storage_options)
            if path.name == "last.ckpt" and path.exists():  # keep the one before it, should this one go bad
                previous = path.with_name("last.prev.ckpt")
                link = path.with_name(".last.prev.ckpt.tmp")
                with suppress(OSError):  # no hard links on this file system: keep going without the spare
                    link.unlink(missing_ok=True)
                    os.link(path, link)  # a second name, not a copy: no extra disk until last.ckpt is replaced
                    io.replace(link, previous)
                    if path.name in self.steps:
                        self.steps[previous.name] = self.steps[path.name]
            io.replace(tmp, path)
            self.steps[path.name] = int(checkpoint.get("global_step", -1))
        except OSError as err:
            with suppress(OSError):
                tmp.unlink()
            message = (
                f"checkpoint {path.name} not written at step {checkpoint.get('global_step', '?')}: "
                f"{err.strerror or err}"
            )
            self.failures.append(message)
            self.warn(f"{message}; training goes on")

    def load_checkpoint(
        self, path: str | Path, map_location: Optional[Any] = None, weights_only: Optional[bool] = None
    ) -> dict[str, Any]:
        """Lightning's resume goes through here: always ``weights_only=True`` (never runs pickled code), and the
        checkpoint callbacks' paths moved to where the file is now (:func:`relocated`)."""
        return relocated(load_checkpoint_file(path), Path(path).parent)


OWN_FILES = ("best.ckpt", "last.ckpt")
"""The files the checkpoint callbacks write (``checkpoint_callbacks()`` in ``trainer.py``)."""


def relocated(checkpoint: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``checkpoint`` with each ``ModelCheckpoint`` state's paths moved into ``folder``, where it is resumed: Lightning
    restores best.ckpt's score only where the recorded folder is this one, so a run folder moved, copied or requeued
    on another mount let the first validation after the resume replace best.ckpt, however bad. A path to any other
    file is dropped: a planted state cannot name a file for Lightning to delete as an older checkpoint."""
    here = os.path.realpath(folder)

    def moved(path: Any) -> str:
        name = Path(str(path)).name
        return os.path.join(here, name) if name in OWN_FILES else ""

    for state in (checkpoint.get("callbacks") or {}).values():
        if isinstance(state, dict) and "dirpath" in state:
            state["dirpath"] = here
            for key in ("best_model_path", "kth_best_model_path", "last_model_path"):
                state[key] = moved(state[key]) if state.get(key) else state.get(key, "")
            best = state.get("best_k_models")
            state["best_k_models"] = (
                {moved(p): v for p, v in best.items() if moved(p)} if isinstance(best, dict) else {}
            )
    return checkpoint


def saved_checkpoints(ckpt_dir: Path, steps: dict[str, int], recorded: Optional[RunSummary]) -> dict[str, Any]:
    """``{name: {step, sha256}}`` of the checkpoints in ``ckpt_dir``, for the run record. The step is the one
    the file holds: from this process's writes, else the ``recorded`` summary's where the digest matches, else
    read from the file (one that does not load is left out)."""
    out: dict[str, Any] = {}
    for name in RESUME_ORDER:
        path = Path(ckpt_dir) / name
        if not path.exists():
            continue
        try:
            digest = file_sha256(path)
        except OSError:
            continue
        step: Optional[int] = steps.get(name)
        known = recorded.checkpoint(name) if recorded is not None else None
        if step is None and known is not None and known.sha256 == digest:
            step = known.step
        if step is None:
            try:
                step = load_checkpoint_file(path).get("global_step")
            except CheckpointError:
                continue
        out[name] = {"step": step, "sha256": digest}
    return out


PREFIX = "model."  # the LightningModule holds the plain model as ``.model``
VOCAB_KEYS = ("data.source", "data.src_lang", "data.tgt_lang", "data.vocab_size", "data.joint_vocab")
"""The keys that decide a run's vocabulary (its tokenizer is trained on ``data.source``'s train split)."""


def checkpoint_of(ref: str) -> Path:
    """The checkpoint ``train.init_from`` names: a file, or a run folder's ``checkpoints/best.ckpt``."""
    path = Path(ref).expanduser()
    if path.is_dir():
        best = path / "checkpoints" / "best.ckpt"
        if not best.is_file():
            raise ConfigError(
                f"train.init_from={ref}: the folder has no checkpoints/best.ckpt (is it a finished run?); "
                f"give a run folder or a .ckpt file"
            )
        return best
    if not path.is_file():
        raise ConfigError(f"train.init_from={ref} is neither a run folder nor a checkpoint file")
    return path


def initialise(model: nn.Module, cfg: Config, tokenizer, echo: Callable[[str], Any] = log.warning) -> dict[str, Any]:
    """Load ``cfg.train.init_from``'s weights into ``model``; returns what the run record keeps of it.
    ConfigError: no such run or checkpoint, an unreadable one, or weights that do not fit (one line)."""
    ref = str(cfg.train.init_from)
    path = checkpoint_of(ref)
    try:
        checkpoint = load_checkpoint_file(path)
    except CheckpointError as err:
        raise ConfigError(f"train.init_from: {err}") from None
    weights = {k.removeprefix(PREFIX): v for k, v in checkpoint["state_dict"].items() if k.startswith(PREFIX)}
    their_cfg, our_cfg = _trained_with(checkpoint), flatten(to_dict(cfg))
    differ = [k for k in sorted(set(their_cfg) | set(our_cfg)) if their_cfg.get(k) != our_cfg.get(k)]
    model_keys = [k for k in differ if k.startswith("model.")]
    vocab_keys = [k for k in VOCAB_KEYS if k in differ]
    own = model.state_dict()
    unfit = [k for k in own if k not in weights or weights[k].shape != own[k].shape]
    unfit += [k for k in weights if k not in own]
    if unfit:
        what = ", ".join(model_keys + vocab_keys) or f"parameters {', '.join(unfit[:3])}"
        raise ConfigError(
            f"train.init_from={ref}: its weights do not fit this model ({what} differ); "
            f"use the same model.* keys and vocabulary as that run"
        )
    tok_dir = path.parent.parent / "tokenizer"
    if (tok_dir / "tokenizer.json").is_file():
        if SubwordTokenizer.load(tok_dir).vocabularies() != tokenizer.vocabularies():
            raise ConfigError(
                f"train.init_from={ref}: its vocabulary is not this run's ({', '.join(vocab_keys) or 'the tokenizers'} "
                f"differ): the same ids would mean other tokens; train on the same data.* keys as that run"
            )
    else:
        echo(f"train.init_from: no tokenizer beside {path}; its vocabulary is taken to be this run's")
    model.load_state_dict(weights)
    if model_keys:  # the weights fit, but the model is not quite the same: worth a line
        echo(f"train.init_from: {', '.join(model_keys)} differ from that run (the weights fit)")
    step = checkpoint.get("global_step")
    return {"checkpoint": str(path.resolve()), "step": step if isinstance(step, int) else None}


def trained_run(
    run_dir: Path, which: str = "best", plugins: Sequence[str] = (), trust_plugins: bool = False
) -> tuple[Config, Path, dict[str, Any]]:
    """``(config, checkpoint path, checkpoint)`` of the trained run in ``run_dir``: its ``config.yaml`` (read first, so
    an unusable one is named before a missing tokenizer or checkpoint) and its ``<which>.ckpt``, else its other
    checkpoint, loaded without running code from it and checked against the config's model (:func:`check_fits`).

    Only plugins the user vouched for are imported: ``plugins`` (``--plugins``, imported first), installed
    modules, or all with ``trust_plugins``. PluginError names the flag; ConfigError a folder that is not a
    trained run (no or an unusable config.yaml, no tokenizer, no checkpoint)."""
    if not (run_dir / "config.yaml").exists():
        if SweepFiles(run_dir).state.is_file():
            raise a_sweep(run_dir, "pass one of its trial folders")
        raise ConfigError(f"{run_dir} is not a run directory (no config.yaml); pass a folder written by `ablate train`")
    plugin_loader.load(list(plugins))
    try:
        cfg = from_flat(
            flatten(read_yaml(run_dir / "config.yaml")), base=run_dir, trust="import" if trust_plugins else "recorded"
        )
    except ConfigError as err:
        raise ConfigError(f"{run_dir} holds an unusable config.yaml: {err}") from None
    if not (run_dir / "tokenizer" / "tokenizer.json").exists():
        raise ConfigError(f"{run_dir} has no saved tokenizer; was it trained by this version of ablate?")
    names = [f"{which}.ckpt", "best.ckpt", "last.ckpt"]
    path = next((run_dir / "checkpoints" / n for n in names if (run_dir / "checkpoints" / n).exists()), None)
    if path is None:
        raise ConfigError(f"{run_dir}/checkpoints holds no checkpoint yet; train the run first")
    checkpoint = load_checkpoint_file(path)
    check_fits(path, run_dir, checkpoint, cfg)
    return cfg, path, checkpoint


def a_sweep(folder: Path, how: str) -> ConfigError:
    """The error for a sweep folder given where a run is: its trials (the first six) and ``how`` to pick one."""
    names = sorted(p.name for p in folder.iterdir() if RunFiles(p).summary.is_file())
    shown = ", ".join(names[:6]) + (f", ... ({len(names)} trials)" if len(names) > 6 else "")
    return ConfigError(f"{folder} is a sweep folder, not a run (trials: {shown or 'none trained yet'}); {how}")


def _trained_with(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """The flat config ``checkpoint``'s run trained with (its hyperparameters' ``cfg``); {} where it holds none."""
    hparams = found if isinstance(found := checkpoint.get("hyper_parameters"), dict) else {}
    return flatten(theirs) if isinstance(theirs := hparams.get("cfg"), dict) else {}


def check_fits(path: Path, run_dir: Path, checkpoint: dict[str, Any], cfg: Config) -> None:
    """:func:`unfit`'s error where a ``model.*`` key ``checkpoint`` trained with differs from ``cfg``'s (a resume never
    changes one): weights of the same shapes (another model.heads, position scheme or score) would load and decode
    another model than the one trained."""
    theirs, ours = _trained_with(checkpoint), flatten(to_dict(cfg))
    if any(k.startswith("model.") and k in ours and theirs[k] != ours[k] for k in theirs):
        raise unfit(path, run_dir, ValueError("its model keys differ"), checkpoint, cfg)


def unfit(path: Path, run_dir: Path, err: BaseException, checkpoint: dict[str, Any], cfg: Config) -> ConfigError:
    """The error for a checkpoint whose weights do not fit the model of ``run_dir``'s config ``cfg``: the model and
    vocabulary keys it trained with otherwise (the first three), else torch's first problem, not its header."""
    theirs, ours = _trained_with(checkpoint), flatten(to_dict(cfg))
    keys = [k for k in sorted(theirs) if k.startswith("model.") or k in ("data.vocab_size", "data.joint_vocab")]
    differ = [
        f"{k}: {theirs[k]} in the checkpoint, {ours.get(k)} in config.yaml" for k in keys if theirs[k] != ours.get(k)
    ]
    problems = [line.strip() for line in str(err).splitlines()[1:] if line.strip()] or [first_line(err)]
    reason = io.printable("; ".join(differ[:3]) or problems[0])  # the checkpoint's values may be anyone's
    return ConfigError(f"checkpoint {path} does not fit the model of {run_dir}/config.yaml ({reason[:240]})")


def source_limit(model: Any, cfg: Config) -> int:
    """The most source subwords ``model`` reads: ``data.max_len``, as the test sets were clipped, or fewer where its
    positions end (:attr:`~ablate.model.transformer.Transformer.max_input`: learned positions)."""
    cap = getattr(model, "max_input", None)
    return cfg.data.max_len if cap is None else min(cfg.data.max_len, cap)


def load_trained(
    run_dir: str | Path, which: str = "best", plugins: Sequence[str] = (), trust_plugins: bool = False
) -> tuple[Config, nn.Module, SubwordTokenizer]:
    """``(config, model in eval mode, tokenizer)`` of the run in ``run_dir`` from its ``which`` checkpoint (else the
    other), importing only the plugins the user vouched for (:func:`trained_run`)."""
    run_dir = Path(run_dir)
    cfg, path, checkpoint = trained_run(run_dir, which, plugins, trust_plugins)
    tok = SubwordTokenizer.load(run_dir / "tokenizer")
    model = build_model(cfg.model, tok.src_vocab_size, tok.tgt_vocab_size, tok.pad_id, tok.joint)
    try:
        model.load_state_dict(
            {k.removeprefix(PREFIX): v for k, v in checkpoint["state_dict"].items() if k.startswith(PREFIX)}
        )
    except (RuntimeError, AttributeError) as err:
        raise unfit(path, run_dir, err, checkpoint, cfg) from None
    return cfg, model.eval(), tok
