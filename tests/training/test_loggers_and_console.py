"""One ``ablate train`` as a script runs it: stdout holds only the result line,
stderr one status line per validation, CSV and TensorBoard hold ``val/bleu`` at every validation with W&B
disabled, and the run folder keeps the console log."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest

from ablate.record import DEV_BLEU, RunFiles, RunSummary

from tests.helpers.cli import run_cli
from tests.helpers.corpus import make_folder, read_lines
from tests.helpers.tiny import EVAL_PAIRS, tiny

pytestmark = pytest.mark.slow

SPLITS = {"train": ("train", 200), "val": ("val", 20), "test": ("test_2016_flickr", 20)}


@pytest.fixture(scope="module")
def trained(multi30k: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """A 12-step run validating every 4 steps, logging to CSV and TensorBoard, W&B off, its stderr not a terminal."""
    tmp = tmp_path_factory.mktemp("loggers")
    files = {
        f"{ours}.{lang}": read_lines(multi30k / f"{theirs}.{lang}.gz", n)
        for ours, (theirs, n) in SPLITS.items()
        for lang in ("en", "de")
    }
    corpus = make_folder(tmp, files)
    run_dir = tmp / "run"
    overrides = tiny(
        f"data.source={corpus}",
        f"data.cache_dir={tmp / 'cache'}",
        "train.max_steps=12",
        "train.val_every=4",
        "train.max_tokens=512",
        "eval.beam=1",
        "tracking.loggers=[csv,tensorboard]",
        "tracking.log_every=4",
        eval_pairs=EVAL_PAIRS,
    )
    proc = run_cli("train", *overrides, "--run-dir", str(run_dir), cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir, proc


def test_stdout_holds_only_the_result_line(trained):
    run_dir, proc = trained
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout[-2000:]  # no progress bar, no Lightning chatter
    assert lines[0].startswith("test BLEU") and str(RunFiles(run_dir).summary) in lines[0]


def test_stderr_gets_one_status_line_per_validation(trained):
    _, proc = trained
    status = [line for line in proc.stderr.splitlines() if line.startswith("step ")]
    assert [line.split(" · ")[0] for line in status] == ["step 4/12", "step 8/12", "step 12/12"], proc.stderr
    for line in status:
        assert " · loss " in line and " tok/s · " in line and f" · {DEV_BLEU.key} " in line
    assert all(" · ETA " in line for line in status[:2])  # nothing is left at the end of the budget


def test_csv_and_tensorboard_hold_val_bleu_at_every_validation(trained):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, _ = trained
    history = RunSummary.read(RunFiles(run_dir).summary).history
    assert history is not None and len(history) >= 3
    # Lightning logs a validation at the index of the last training batch it followed (step 4 -> 3)
    expected = [(h["step"] - 1, round(h[DEV_BLEU.key], 4)) for h in history]

    with open(run_dir / "csv" / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get(DEV_BLEU.key)]
    from_csv = [(int(r["step"]), round(float(r[DEV_BLEU.key]), 4)) for r in rows]

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    from_tb = [(e.step, round(e.value, 4)) for e in events.Scalars(DEV_BLEU.key)]

    # the validations of the fit, then the final validation of the tested weights (the same step as the last)
    assert from_csv[: len(expected)] == expected and from_tb[: len(expected)] == expected
    assert from_csv == from_tb
    with open(run_dir / "csv" / "metrics.csv") as f:
        columns = next(csv.reader(f))
    for key in ("train/loss", "train/lr", "test/bleu"):  # the train and test metrics too
        assert key in columns and key in events.Tags()["scalars"], key


def test_the_run_folder_keeps_the_console_log(trained):
    run_dir, proc = trained
    text = RunFiles(run_dir).console.read_text()
    assert "run dir: " in text and "step 4/12 · loss " in text
    summary = json.loads(RunFiles(run_dir).summary.read_text())
    assert summary["wandb"]["mode"] == "disabled"  # tracking.loggers without wandb: no W&B run


def test_training_metrics_reach_the_loggers_every_log_every_steps_above_50(tmp_path, cache_dir):
    """``tracking.log_every=60``: loss, learning rate, throughput and gradient norm are written at steps 60 and 120
    (Lightning's ``step`` column: 59, 119). Lightning's interval was capped at 50: the loss went out at 50 and 100,
    and what the steps of 60 logged (lr, tokens/s, grad norm) was dropped, as Lightning wrote nothing there."""
    from ablate.config import load_config
    from ablate.training.train import train

    cfg = load_config(
        None,
        tiny(
            "train.max_steps=120",
            "train.max_tokens=128",
            "train.warmup=4",
            "eval.beam=1",
            "tracking.wandb=disabled",
            "tracking.loggers=[csv]",
            "tracking.log_every=60",
            "train.val_every=100000",
            eval_pairs=10,
        ),
    )
    train(cfg, tmp_path / "run")
    with open(tmp_path / "run" / "csv" / "metrics.csv") as f:
        rows = [row for row in csv.DictReader(f) if any(v for k, v in row.items() if k.startswith("train/"))]
    steps = {key: [int(r["step"]) for r in rows if r.get(key)] for key in rows[0] if key.startswith("train/")}
    assert {"train/loss", "train/lr", "train/tokens_per_sec", "train/grad_norm"} <= steps.keys()
    assert all(at == [59, 119] for at in steps.values()), steps
