"""``ablate translate``, ``evaluate``, ``export-model`` and ``sync``, mounted on the main app.

A run is a run folder, a sweep's trial named by what it is (``SWEEP --variant NAME --seed N``, as its
``summary.json`` records them: :func:`trial_folder`), or ``wandb:<entity>/<project>/<run id>[:<version or alias>]``
(:func:`fetch_run`)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any, List, Optional

import typer

from ablate.config import ConfigError
from ablate.errors import AblateError
from ablate.inference import CHECKPOINTS, InputError, check_checkpoint, check_decoding, read_sentences
from ablate.record import RunFiles, RunSummary, SweepFiles
from ablate.utils.commands import (
    fail as _fail,  # the one handler: one red line, exit 2
    plugins_option,
    trust_plugins_option,
)
from ablate.utils.io import cache_root, check_apart, one_line, write_output_text


class TrialLookupError(AblateError, ValueError):
    """No trial, or more than one, of the sweep matches ``--variant`` / ``--seed``."""


def _trained(out: Path) -> list[tuple[str, Optional[str], Optional[int], Path]]:
    """``(folder name, variant, seed, folder)`` of every trial folder of ``out`` that has a summary, by name."""
    found = []
    for folder in sorted(p for p in out.iterdir() if p.is_dir()):
        summary = RunSummary.peek(RunFiles(folder).summary)
        if summary is None:
            continue
        seed = (summary.config or {}).get("seed")
        variant = summary.variant.get("name") if isinstance(summary.variant, dict) else summary.variant
        found.append((folder.name, variant, seed if isinstance(seed, int) else None, folder))
    return found


def trial_folder(out: Path, variant: Optional[str], seed: Optional[int]) -> Path:
    """The folder of the trial of sweep ``out`` whose variant is ``variant`` and whose seed is ``seed`` (either may
    be left out where it leaves one trial); :class:`TrialLookupError` in one line otherwise."""
    if not SweepFiles(out).state.is_file():
        raise TrialLookupError(
            f"{out} is not a sweep folder (no {SweepFiles(out).state.name}); --variant and --seed "
            "pick a trial of a sweep, pass a run folder without them"
        )
    trials = _trained(out)
    matches = [t for t in trials if (variant is None or t[1] == variant) and (seed is None or t[2] == seed)]
    if len(matches) == 1:
        return matches[0][3]
    asked = " ".join(f"--{name} {value}" for name, value in (("variant", variant), ("seed", seed)) if value is not None)
    if not matches:
        variants = sorted({str(t[1]) for t in trials})
        seeds = sorted({t[2] for t in trials if t[2] is not None and (variant is None or t[1] == variant)})
        raise TrialLookupError(
            f"no trained trial of {out} matches {asked}; variants: {', '.join(variants) or 'none'}; "
            f"seeds{' of ' + variant if variant else ''}: {', '.join(map(str, seeds)) or 'none'}"
        )
    names = ", ".join(t[0] for t in matches)
    missing = " or ".join(f"--{name}" for name, value in (("variant", variant), ("seed", seed)) if value is None)
    hint = f"add {missing}" if missing else "pass the trial's folder instead"
    raise TrialLookupError(f"{asked} matches {len(matches)} trials of {out} ({names}); {hint}")


PREFIX = "wandb:"


def fetch_run(ref: str, api: Any = None, root: Optional[Path] = None) -> Path:
    """Download the model artifact ``model-<run id>`` of ``wandb:<entity>/<project>/<run id>[:<version or alias>]``
    (logged with ``tracking.log_checkpoints=true``, laid out as a run folder; W&B's ``name:v3`` or ``name:latest``,
    default ``best``) once into ``~/.cache/ablate/wandb/<entity>/<project>/<run id>[:<version or alias>]``
    (``ABLATE_CACHE`` moves it); returns its folder. ConfigError for a malformed reference, no such artifact, or one
    of an older ablate without config and tokenizer."""
    parts = str(ref)[len(PREFIX) :].strip("/").split("/")
    run, _, alias = parts[-1].partition(":")
    if len(parts) != 3 or not all(parts) or not run or ":" in alias or parts[-1].endswith(":"):
        raise ConfigError(f"bad W&B run '{ref}': use wandb:<entity>/<project>/<run id>[:<version or alias>]")
    entity, project = parts[:2]
    if api is None:
        import wandb

        api = wandb.Api()
    if root is None:
        root = cache_root() / "wandb" / entity / project / parts[-1]
    name = f"{entity}/{project}/model-{run}:{alias or 'best'}"
    try:
        artifact = api.artifact(name, type="model")
        folder = Path(artifact.download(root=str(root)))
    except Exception as err:  # noqa: BLE001 - no login, no network, no such artifact: all one line
        reason = " ".join(str(err).split())[:200] or type(err).__name__
        raise ConfigError(
            f"could not download the W&B artifact {name} ({reason}); the run logs it with tracking.log_checkpoints=true"
        ) from None
    if not (folder / "config.yaml").exists() or not (folder / "tokenizer").is_dir():
        raise ConfigError(
            f"the W&B artifact {name} holds a checkpoint without config.yaml and tokenizer/ (logged by an older "
            f"ablate); translate from the run folder instead"
        )
    return folder


log = logging.getLogger(__name__)

RUN_HELP = (
    "A run directory written by `ablate train`, a sweep folder with --variant/--seed, "
    "or wandb:<entity>/<project>/<run id>[:<version or alias>] (its model artifact, default :best)."
)


def _picked(
    run_dir: Path, variant: Optional[str], seed: Optional[int], checkpoint: str, raw: Optional[str] = None
) -> Path:
    """``run_dir``, the trial of sweep ``run_dir`` that ``variant`` and ``seed`` name, or the folder of a ``wandb:``
    run's (``raw``, default ``run_dir``) downloaded model artifact, which holds best.ckpt alone (``checkpoint``
    last is refused before the download); a sweep folder without either says they pick a trial."""
    raw = str(run_dir) if raw is None else raw
    if raw.startswith(PREFIX) and checkpoint != "best":
        raise InputError(
            f"--checkpoint {checkpoint}: the W&B model artifact of {raw} holds best.ckpt alone; pass the run's folder "
            f"(its checkpoints/{checkpoint}.ckpt) instead"
        )
    if raw.startswith(PREFIX) and (variant is not None or seed is not None):
        raise InputError(
            f"{'--variant' if variant is not None else '--seed'} picks a trial of a sweep folder, not of the W&B run "
            f"{raw}; pass the trial's own run id"
        )
    if variant is not None or seed is not None:
        return trial_folder(run_dir, variant, seed)
    if raw.startswith(PREFIX):
        return fetch_run(raw)
    if SweepFiles(run_dir).state.is_file() and not RunFiles(run_dir).config.is_file():
        from ablate.training.checkpoints import a_sweep

        raise a_sweep(run_dir, "pick a trial with --variant NAME and/or --seed N")
    return run_dir


def _load(run_dir: Path, checkpoint: str, variant, seed, plugins, trust_plugins: bool):
    """The run ``run_dir`` (:func:`_picked`) names, loaded."""
    from ablate.inference import translate as inference

    folder = _picked(run_dir, variant, seed, checkpoint)
    return inference.load_run(folder, checkpoint, plugins=plugins or [], trust_plugins=trust_plugins)


def variant_option():
    return typer.Option(None, "--variant", help="With a sweep folder: the trial of this variant (its summary's name).")


def seed_option():
    return typer.Option(None, "--seed", help="With a sweep folder: the trial of this seed.")


def translate(
    run_dir: Path = typer.Argument(..., help=RUN_HELP),
    input: Optional[Path] = typer.Option(
        None, "--input", "-i", help="Source sentences, one per line, gzipped or not (default, or -: stdin)."
    ),
    beam: Optional[int] = typer.Option(None, "--beam", help="Beam size (default: the run's eval.beam; 1 = greedy)."),
    len_penalty: Optional[float] = typer.Option(
        None, "--len-penalty", help="Length-normalisation exponent (default: eval.len_penalty)."
    ),
    checkpoint: str = typer.Option("best", "--checkpoint", help="best or last."),
    variant: Optional[str] = variant_option(),
    seed: Optional[int] = seed_option(),
    plugins: Optional[List[str]] = plugins_option(),
    trust_plugins: bool = trust_plugins_option(),
) -> None:
    """Translate text with a trained run: one source sentence per line in, one translation per line out."""
    check_decoding(beam, len_penalty)
    check_checkpoint(checkpoint)
    if input is not None and str(input) == "-":  # stdin, as fairseq-interactive and sacrebleu read it
        input = None
    if input is not None and input.is_dir():
        _fail(f"--input {input} is a folder; give a file of sentences")
    if input is not None and not input.exists():  # a pipe (--input <(zcat ...)) exists, and reads as a file
        _fail(f"input file not found: {input}")
    try:
        raw = input.read_bytes() if input is not None else sys.stdin.buffer.read()
    except OSError as err:
        _fail(f"cannot read {input or 'stdin'}: {err.strerror or err}")
    sentences = read_sentences(raw, str(input) if input is not None else "stdin")
    from ablate.inference import translate as inference

    run = _load(run_dir, checkpoint, variant, seed, plugins, trust_plugins)
    for line in inference.translate(run, sentences, beam, len_penalty):
        typer.echo(one_line(line))  # one translation per line, as evaluate --hyps writes them


def evaluate(
    run_dir: Path = typer.Argument(..., help=RUN_HELP),
    data: Optional[str] = typer.Option(
        None, "--data", help="A corpus as data.source takes it (default: the run's, a relative path read from here)."
    ),
    split: Optional[str] = typer.Option(
        None, "--split", help="Split to score (default: the first test split of the pair, else the validation split)."
    ),
    beam: Optional[int] = typer.Option(
        None, "--beam", help="Beam size (default: the run's eval.beam; for its validation split, eval.val_beam)."
    ),
    len_penalty: Optional[float] = typer.Option(None, "--len-penalty", help="Length-normalisation exponent."),
    checkpoint: str = typer.Option("best", "--checkpoint", help="best or last."),
    hyps: Optional[Path] = typer.Option(None, "--hyps", help="Also write the translations to this file."),
    variant: Optional[str] = variant_option(),
    seed: Optional[int] = seed_option(),
    plugins: Optional[List[str]] = plugins_option(),
    trust_plugins: bool = trust_plugins_option(),
) -> None:
    """Score a trained run on any test set (sacreBLEU BLEU and chrF, with their signatures)."""
    check_decoding(beam, len_penalty)  # as translate: before any work
    check_checkpoint(checkpoint)
    if hyps is not None and str(hyps) == "-":  # never a file named "-"; stdout holds the score line
        raise InputError("--hyps - would write a file named '-'; give a file name (ablate translate writes to stdout)")
    if hyps is not None:
        check_apart(hyps, [run_dir], "--hyps", file=True)
    from ablate.inference import translate as inference

    run = _load(run_dir, checkpoint, variant, seed, plugins, trust_plugins)
    name, sources, references = inference.load_split(run, data, split)
    beam = _validation_beam(run.cfg, data, name) if beam is None else beam
    scores, out = inference.evaluate(run, sources, references, beam, len_penalty)
    if hyps is not None:
        write_output_text(hyps, "".join(one_line(h) + "\n" for h in out), [run_dir])
    typer.echo(
        f"{name}: BLEU {scores.bleu:.2f}  chrF {scores.chrf:.2f}  ({len(sources)} sentences)  "
        f"BLEU: {scores.signature}  chrF: {scores.chrf_signature}"
    )


def _validation_beam(cfg: Any, data: Optional[str], split: str) -> Optional[int]:
    """``eval.val_beam`` for the run's own validation split (its corpus however ``data`` spells the folder), as its
    recorded val BLEU decoded it (a line says so), else None (``eval.beam``)."""
    from ablate.data.sources import canonical_split

    e, folders = cfg.eval, [Path(f).expanduser() for f in (data or "", cfg.data.source)]
    same = data in (None, cfg.data.source) or (folders[0].is_dir() and folders[0].resolve() == folders[1].resolve())
    if not same or canonical_split(split) != "val" or e.val_beam == e.beam:
        return None
    log.info(
        "%s is the run's validation split: decoded with eval.val_beam=%d as its recorded val BLEU was, not "
        "eval.beam=%d (--beam N picks another)",
        split,
        e.val_beam,
        e.beam,
    )
    return e.val_beam


def _run_and_checkpoint(
    raw: str, checkpoint: Optional[str], variant: Optional[str] = None, seed: Optional[int] = None
) -> tuple[Path, str]:
    """``(run folder, checkpoint name)`` of a run folder, a sweep's trial (``variant``, ``seed``), a ``wandb:`` run
    (``checkpoint``, default best), or ``<run>/checkpoints/<name>.ckpt`` (a ``checkpoint`` naming another refused)."""
    path = Path(raw)
    if path.suffix != ".ckpt":
        return _picked(path, variant, seed, checkpoint or "best", raw=raw), checkpoint or "best"
    if variant is not None or seed is not None:
        raise InputError(f"--variant and --seed pick a trial of a sweep folder, not of the checkpoint {raw}")
    if checkpoint is not None and checkpoint != path.stem:
        raise InputError(f"--checkpoint {checkpoint} names another checkpoint than {raw}; pass one of them")
    if path.parent.name != "checkpoints" or path.stem not in CHECKPOINTS:
        raise InputError(
            f"{raw} is not a run's checkpoint; pass a run folder or <run>/checkpoints/{{{','.join(CHECKPOINTS)}}}.ckpt"
        )
    if not path.is_file():
        raise InputError(f"checkpoint {raw} not found; pass a run folder or one of its checkpoints")
    return path.parent.parent, path.stem


def export_model(
    run: str = typer.Argument(
        ..., help=RUN_HELP.removesuffix(".") + ", or a checkpoint in one (<run>/checkpoints/best.ckpt)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="The file to write, e.g. model.pt."),
    format: str = typer.Option(
        "torchscript", "--format", help="torchscript (ONNX and CTranslate2 are not supported; the error says why)."
    ),
    checkpoint: Optional[str] = typer.Option(
        None, "--checkpoint", help="best or last (for a run folder; default best)."
    ),
    variant: Optional[str] = variant_option(),
    seed: Optional[int] = seed_option(),
    plugins: Optional[List[str]] = plugins_option(),
    trust_plugins: bool = trust_plugins_option(),
) -> None:
    """Write a trained model as one TorchScript file (greedy decoding, tokenizers and config inside) that
    `torch.jit.load` runs without ablate."""
    from ablate.inference.torchscript import check_format, describe, export
    from ablate.inference.translate import load_run

    check_format(format)
    if checkpoint is not None:
        check_checkpoint(checkpoint)
    run_dir, which = _run_and_checkpoint(run, checkpoint, variant, seed)
    check_apart(out, [run_dir], "--out", file=True)
    loaded = load_run(run_dir, which, plugins=plugins or [], trust_plugins=trust_plugins)
    export(loaded, out)
    size = out.stat().st_size / 2**20
    log.info(
        "wrote %s (%.1f MB, %s, %s, %s, greedy decoding)", out, size, format, describe(loaded), loaded.checkpoint.name
    )


def sync(
    folder: Path = typer.Argument(..., help="A sweep output folder (runs/<sweep>) or one run directory."),
    project: Optional[str] = typer.Option(None, "--project", help="Upload into this W&B project."),
    entity: Optional[str] = typer.Option(None, "--entity", help="Upload into this W&B entity."),
) -> None:
    """Upload every trial's offline W&B run (`wandb sync`), skipping those already uploaded."""
    from ablate.sweep.wandb_server import sync as run_sync

    run_sync(folder, project, entity, echo=log.info)


def register(app: typer.Typer) -> None:
    """Mount the commands on the ``ablate`` app."""
    app.command()(translate)
    app.command()(evaluate)
    app.command("export-model")(export_model)
    app.command()(sync)
