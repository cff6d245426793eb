"""A trainer stand-in that starts W&B exactly as ``ablate.training.train.train`` does, then stops.

``python wandb_start.py RUN_DIR key=value ...``: the config is read as ``ablate train`` reads it
(``variant=...`` included), the W&B run is created by ``make_logger`` + ``start_logger`` in
offline mode, and a finished ``summary.json`` is written so a launcher sees a finished trial.
"""

import json
import sys
from pathlib import Path

import wandb

from ablate.config import load_config
from ablate.sweep.spec import expand_variant
from ablate.training.tracking import make_logger, start_logger

if __name__ == "__main__":
    run_dir = Path(sys.argv[1])
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = load_config(None, expand_variant(sys.argv[2:]))
    logger = start_logger(make_logger(cfg, run_dir, "offline"))
    assert logger is not None, "W&B did not start"
    logger.experiment.log({"val/bleu": 1.0})
    wandb.finish()
    (run_dir / "summary.json").write_text(json.dumps({"status": "finished", "val/bleu": 1.0, "test/bleu": 1.0}))
