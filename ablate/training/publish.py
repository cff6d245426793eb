"""What a finished (or failed) run leaves in W&B: enough to rebuild its table from W&B alone.

* every ``summary.json`` field in the run summary (status, error, BLEU per split, chrF, the
  BLEU signature, tokens/s, peak memory, wall time, decode speed, the validation history), the
  config excepted (it is the run config);
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

HYPOTHESES = "hypotheses"
NOT_SUMMARY = ("config", "version")  # the run config; the layout of summary.json


def log_summary(run: Any, summary: dict[str, Any]) -> None:
    """Every field of ``summary`` (``summary.json``) except the config and its layout version, in the W&B run summary."""
    run.summary.update({k: v for k, v in summary.items() if k not in NOT_SUMMARY})


def texts_artifact(run_dir: Path, run_id: str, summary: dict[str, Any]):
    """The ``hypotheses`` artifact of ``run_dir`` (``None`` when it wrote no texts)."""
    import wandb

    folders = [run_dir / kind for kind in ("hyps", "refs") if (run_dir / kind).is_dir()]
    if not folders:
        return None
    metadata = {
        k: v
        for k, v in summary.items()
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
    log_summary(run, summary)
    for art, aliases in (
        (texts_artifact(run_dir, run.id, summary), ["latest"]),
        (checkpoint_artifact(run_dir, run.id) if log_checkpoints else None, ["best", "latest"]),
    ):
        if art is not None:
            run.log_artifact(art, aliases=aliases)
