"""What a finished run leaves: its summary (metrics, throughput, cost) and its text files (hypotheses, references, sources)."""

from __future__ import annotations

import resource
from pathlib import Path
from typing import Any

from ablate.config import Config
from ablate.utils.io import write_lines


def peak_memory_mb(accelerator: str) -> float:
    import torch

    if accelerator == "gpu" and torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def summarise(
    module, throughput, trainer, cfg: Config, params: int, seconds: float, accelerator: str
) -> dict[str, Any]:
    import torch

    best = module.best_val_record
    out: dict[str, Any] = {
        "params": params,
        "step": int(trainer.global_step),  # what a time budget (train.max_time) actually bought
        "threads": torch.get_num_threads(),
        "epoch": int(trainer.current_epoch),
        "history": module.history,
        "accelerator": accelerator,  # what trained it: "cpu" or "gpu" (config's "auto" resolved)
        "train/tokens_per_sec": throughput.tokens_per_sec,
        # process CPU seconds of the same steps (all ranks), and tokens per CPU-second: little moved by machine load
        "train/cpu_seconds": throughput.cpu_seconds,
        "train/tokens_per_cpu_sec": throughput.tokens_per_cpu_sec,
        "train/loss": None if module.last_loss is None else float(module.last_loss),
        "train/grad_norm": module.grad_norm_value(),  # of the last step, before clipping to train.clip_norm
        "train/step_time_s": throughput.step_seconds / max(1, trainer.global_step),
        "peak_memory_mb": round(peak_memory_mb(accelerator), 1),
        # validation scores of the checkpoint that was tested (the best by BLEU), all from one validation
        "val/bleu": best.get("val/bleu"),
        "val/ppl": best.get("val/ppl"),
        "val/chrf": best.get("val/chrf"),
        "val/step": best.get("step"),
        "train/tokens": throughput.train_tokens,
        "train_seconds": round(seconds, 2),
    }
    out.update(module.test_metrics)
    first = next(iter(module.test_results.values()), None)
    if first is not None:
        out["bleu_signature"] = first["signature"]
        out["chrf_signature"] = first.get("chrf_signature")
        for name, signature in (first.get("signatures") or {}).items():  # chrf++_signature, ter_signature
            out.setdefault(f"{name}_signature", signature)
    return out


def save_outputs(run_dir: Path, module, data) -> str | None:
    """:func:`write_outputs`, or one line saying why they could not be written (a full disk, a
    read-only folder), so the run is recorded as failed with that reason instead of staying running."""
    try:
        write_outputs(run_dir, module, data)
    except OSError as err:
        return (
            f"could not write the test outputs (hyps, refs, sources) in {run_dir}: {err.strerror or err}; "
            "free space and rerun the same command"
        )
    return None


def write_outputs(run_dir: Path, module, data) -> None:
    for split, result in module.test_results.items():
        write_lines(run_dir / "hyps" / f"{split}.txt", result["hypotheses"])
        write_lines(run_dir / "refs" / f"{split}.txt", data.references(split))
    hyps = module.best_val_record.get("hypotheses")
    if hyps is not None:  # from the validation whose scores summary.json reports
        write_lines(run_dir / "hyps" / f"{data.val_split}.txt", hyps)
        write_lines(run_dir / "refs" / f"{data.val_split}.txt", data.references(data.val_split))
    for split in [data.val_split, *module.test_results]:  # for BLEU by source length (ablate plot)
        write_lines(run_dir / "sources" / f"{split}.txt", data.sources(split))
