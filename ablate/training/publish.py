"""What a finished (or failed) run leaves in W&B: enough to rebuild its table from W&B alone.

* one key per number in the run summary (status, error, BLEU / chrF / chrF++ / TER per test split
  as ``test_<split>/<name>``, the BLEU signature, tokens/s, peak memory, wall time, decode speed):
  every ``summary.json`` field that is a number or a text, less the plain ``test/<name>`` that
  ``summary.json`` also keeps for its first split (:func:`one_key_per_score`), so no score is
  there twice; the config is the run config;
* ``summary.json`` itself as a run file: what the run summary leaves out (the validation history,
  the data statistics, the machine, the environment, the checkpoints' digests, ``resolved``) is
  there, whole, and :mod:`ablate.report.trials` reads it back;
* an artifact ``texts-<run id>`` of type ``hypotheses`` holding ``hyps/<split>.txt`` and
  ``refs/<split>.txt``: what ``ablate table`` needs for its paired-bootstrap marks (†);
* with ``tracking.log_checkpoints=true``, an artifact ``model-<run id>`` of type ``model`` laid out
  as a run folder: ``checkpoints/best.ckpt``, ``config.yaml`` and ``tokenizer/``, so
  ``ablate translate wandb:<entity>/<project>/<run id>`` works from W&B alone.

Artifact files are referenced where the run wrote them (W&B's ``immutable`` policy: no copy in
W&B's staging area), by absolute path, so an offline run holds them in its own folder until
``wandb sync`` uploads them from whatever folder it is called in (a relative path would resolve
against the caller's folder, not the training's). The calls are W&B's public ones, the same online
and offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ablate.record import SUMMARY_FILE

HYPOTHESES = "hypotheses"
RECORD_FILE = SUMMARY_FILE
"""The run file holding the whole ``summary.json`` (what the run summary leaves out: its nested fields)."""
NOT_SUMMARY = ("config", "version")  # the run config; the layout of summary.json


def one_key_per_score(metrics: dict[str, Any]) -> dict[str, Any]:
    """``metrics`` without the plain ``test/<name>`` of a score also there per split (``test_<split>/<name>``).

    ``summary.json`` and the trainer's test metrics keep both (``test/bleu`` is the first test split's
    ``test_<split>/bleu``, what tables of old folders read); W&B gets each score once, per split.
    ``test/sents_per_sec`` (no per-split twin) stays.
    """
    per_split = {key.partition("/")[2] for key in metrics if key.startswith("test_") and "/" in key}
    return {k: v for k, v in metrics.items() if not (k.startswith("test/") and k.partition("/")[2] in per_split)}


def summary_fields(summary: dict[str, Any]) -> dict[str, Any]:
    """What of ``summary`` (``summary.json``) goes in the W&B run summary: each number and text once
    (:func:`one_key_per_score`); no config, no layout version, nothing nested (that is in :data:`RECORD_FILE`)."""
    flat = {k: v for k, v in summary.items() if k not in NOT_SUMMARY and not isinstance(v, (dict, list, tuple))}
    return one_key_per_score(flat)


def log_summary(run: Any, summary: dict[str, Any], run_dir: Path | None = None) -> None:
    """``summary`` (``summary.json``) in the W&B run: :func:`summary_fields` in the run summary and, given
    ``run_dir``, its ``summary.json`` as the run file :data:`RECORD_FILE` (uploaded with the run, offline too)."""
    run.summary.update(summary_fields(summary))
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
        type=HYPOTHESES,
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
    """Log ``summary``, the texts and (optionally) the best checkpoint of ``run_dir`` to ``run``."""
    run_dir = run_dir.resolve()  # artifact entries keep this path until `wandb sync`, called from anywhere
    log_summary(run, summary, run_dir)
    for art, aliases in (
        (texts_artifact(run_dir, run.id, summary), ["latest"]),
        (checkpoint_artifact(run_dir, run.id) if log_checkpoints else None, ["best", "latest"]),
    ):
        if art is not None:
            run.log_artifact(art, aliases=aliases)
