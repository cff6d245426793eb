"""``python log_trials.py SWEEP_DIR``: give every trial of a sweep folder its offline W&B run,
through the trainer's own calls (``make_logger``, ``start_logger``, ``define_metrics``, logged
validation history, then ``publish`` for a finished trial or ``log_summary`` otherwise)."""

import json
import sys
from pathlib import Path

import wandb

from ablate.config import flatten, from_flat, replace
from ablate.training.tracking import define_metrics, log_summary, make_logger, publish, start_logger

if __name__ == "__main__":
    for trial in sorted(p for p in Path(sys.argv[1]).iterdir() if p.is_dir()):
        summary = json.loads((trial / "summary.json").read_text())
        cfg = replace(from_flat(flatten(summary["config"])), **{"tracking.variant": summary.get("variant")})
        logger = start_logger(make_logger(cfg, trial, "offline"))
        define_metrics(logger)
        for row in summary.get("history", []):
            logger.log_metrics({k: v for k, v in row.items() if k != "step"}, step=row["step"])
        if summary["status"] == "finished":
            publish(logger.experiment, trial, summary)
        else:
            log_summary(logger.experiment, summary, trial)
        wandb.finish(exit_code=0 if summary["status"] == "finished" else 1)
