"""A training killed at any moment continues from its last checkpoint, in the same W&B run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "data.builtin_pairs=300", "data.vocab_size=300", "model.d_model=32", "model.layers=1",
    "model.heads=2", "model.d_ff=64", "train.max_steps=60", "train.max_tokens=512",
    "train.warmup=10", "train.checkpoint_every=5", "eval.beam=1", "tracking.wandb=offline",
    "train.val_every=1000",
]


def _start(run_dir: Path, cache: Path) -> subprocess.Popen:
    env = {**os.environ, "WANDB_MODE": "offline", "ABLATE_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, str(ROOT / "cli.py"), "train", "--run-dir", str(run_dir), *TINY],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_for_checkpoint(proc: subprocess.Popen, run_dir: Path, timeout: float = 300) -> None:
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    deadline = time.time() + timeout
    while not ckpt.exists():
        assert proc.poll() is None, f"training ended before its first checkpoint: {proc.stderr.read()[-2000:]}"
        assert time.time() < deadline, "no checkpoint in time"
        time.sleep(0.2)


def _wandb_ids(run_dir: Path) -> set[str]:
    return {p.name.rsplit("-", 1)[-1] for p in run_dir.glob("wandb/offline-run-*")}


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killed_training_resumes_to_the_same_end(tmp_path, sig):
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    proc = _start(run_dir, cache)
    _wait_for_checkpoint(proc, run_dir)
    proc.send_signal(sig)
    proc.wait(timeout=120)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] in ("running", "interrupted")
    if sig == signal.SIGTERM:  # a clean stop says so and saves where it was
        assert summary["status"] == "interrupted" and proc.returncode != 0
    run_id = (run_dir / "wandb_id.txt").read_text().strip()

    again = _start(run_dir, cache)
    assert again.wait(timeout=600) == 0, again.stderr.read()[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished"
    assert summary["step"] == 60
    assert (run_dir / "wandb_id.txt").read_text().strip() == run_id
    assert _wandb_ids(run_dir) == {run_id}
