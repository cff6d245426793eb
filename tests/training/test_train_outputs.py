"""A disk that fills while the test outputs are written: one line, and the run recorded as failed."""

from __future__ import annotations

import errno
import json

import pytest

from ablate.config import load_config
from ablate.training import run_folder as outputs
from ablate.training.train import RunError, train

from tests.helpers.tiny import EVAL_PAIRS, tiny

TINY = tiny(
    "train.max_steps=2",
    "train.max_tokens=512",
    "train.warmup=1",
    "eval.beam=1",
    "eval.max_len_a=0.5",
    "eval.max_len_b=2",
    "tracking.wandb=disabled",
    pairs=100,
    eval_pairs=EVAL_PAIRS,
)


@pytest.mark.slow
def test_a_full_disk_while_writing_test_outputs_fails_the_run_in_one_line(tmp_path, cache_dir, monkeypatch):
    def full(path, lines):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(outputs, "write_lines", full)
    run_dir = tmp_path / "run"
    with pytest.raises(RunError) as err:
        train(load_config(None, TINY), run_dir)
    message = str(err.value)
    assert "\n" not in message and message.startswith(
        f"could not write the test outputs (hyps, refs, sources) in {run_dir}"
    )
    assert "No space left on device" in message
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["error"] == message  # not left "running"
