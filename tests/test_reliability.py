"""Bad input fails in one line; faults inside a trial are recorded, never lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.config import load_config
from ablate.training.train import RunError, train

from tiny_run import tiny

ROOT = Path(__file__).resolve().parents[1]
TINY = tiny(
    "train.max_steps=12",
    "train.max_tokens=512",
    "train.warmup=4",
    "eval.beam=1",
    "tracking.wandb=offline",
    "train.val_every=1000",
    pairs=200,
)


def cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=300
    )


def corpus(folder: Path, files: dict[str, list[str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, lines in files.items():
        (folder / name).write_text("".join(line + "\n" for line in lines))
    return folder


PAIRS = {f"{s}.{lang}": [f"{lang} sentence {i}" for i in range(20)] for s in ("train", "val") for lang in ("en", "de")}


def bad_inputs(tmp: Path) -> dict[str, tuple[list[str], str]]:
    (tmp / "broken.yaml").write_text("model:\n  heads: 4\n   d_model: [\n")
    return {
        "malformed yaml": (["--config", str(tmp / "broken.yaml")], "malformed YAML in"),
        "unknown key": (["model.head=4"], "did you mean 'model.heads'"),
        "unknown component": (["model.attention.score=cosine"], "choose from: dot, additive, general, gaussian"),
        "heads do not divide": (["model.heads=3"], "model.heads=3 does not divide model.d_model=128"),
        "missing folder": ([f"data.source={tmp / 'nowhere'}"], "nowhere"),
        "missing split": (
            [f"data.source={corpus(tmp / 'nosplit', {k: v for k, v in PAIRS.items() if k.startswith('train')})}"],
            "val",
        ),
        "misaligned": ([f"data.source={corpus(tmp / 'mis', {**PAIRS, 'train.de': ['x'] * 19})}"], "20"),
        "empty corpus": ([f"data.source={corpus(tmp / 'empty', {k: [] for k in PAIRS})}"], "empty"),
        "hub offline": (["data.source=hf:bentrevett/multi30k"], "a folder of {split}.{lang} files"),
    }


@pytest.mark.slow
def test_bad_input_is_one_line_without_traceback(tmp_path):
    for case, (args, expected) in bad_inputs(tmp_path).items():
        proc = cli(
            "train",
            "--run-dir",
            str(tmp_path / "run"),
            *args,
            cwd=tmp_path,
            env={"ABLATE_CACHE": str(tmp_path / "cache")},
        )
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, (case, proc.stderr[-2000:])
        assert len(lines) == 1 and lines[0].startswith("error: "), (case, proc.stderr[-2000:])
        assert expected in lines[0], (case, lines[0])
        assert "Traceback" not in proc.stderr + proc.stdout


def test_misaligned_error_names_both_files_and_counts(tmp_path, cache_dir):
    from ablate.data.errors import DataError

    folder = corpus(tmp_path / "mis", {**PAIRS, "train.de": ["x"] * 19})
    with pytest.raises(DataError) as err:
        train(load_config(None, [*TINY, f"data.source={folder}"]), tmp_path / "run")
    message = str(err.value)
    assert "train.en" in message and "train.de" in message and "20" in message and "19" in message


@pytest.mark.parametrize(
    "fault, reason", [("nan:5", "non-finite loss at step 5"), ("oom:3", "out of memory with train.max_tokens=512")]
)
def test_fault_in_training_is_recorded(fault, reason, tmp_path, cache_dir, monkeypatch):
    monkeypatch.setenv("ABLATE_INJECT_FAULT", fault)
    with pytest.raises(RunError, match=reason):
        train(load_config(None, TINY), tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed" and reason in summary["error"]


def test_wandb_failure_does_not_stop_training(tmp_path, cache_dir, monkeypatch):
    from pytorch_lightning.loggers import WandbLogger

    def broken(self, metrics, step=None):
        raise OSError("No space left on device")

    monkeypatch.setattr(WandbLogger, "log_metrics", broken)
    summary = train(load_config(None, TINY), tmp_path / "run")
    assert summary["status"] == "finished" and summary["test/bleu"] is not None
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "finished"


def test_full_disk_for_checkpoints_does_not_stop_training(tmp_path, cache_dir, monkeypatch):
    """Checkpoints that cannot be written are skipped with a warning; the last good one stays intact."""
    import errno

    import torch
    from pytorch_lightning.plugins.io import TorchCheckpointIO

    real_save = TorchCheckpointIO.save_checkpoint
    calls = {"n": 0}

    def filling_disk(self, checkpoint, path, storage_options=None):
        calls["n"] += 1
        if calls["n"] > 1:  # the first checkpoint fits, then the disk is full
            Path(path).write_bytes(b"partial")  # a torn write ...
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(self, checkpoint, path, storage_options)

    monkeypatch.setattr(TorchCheckpointIO, "save_checkpoint", filling_disk)
    cfg = load_config(None, [*TINY, "train.checkpoint_every=10"])
    summary = train(cfg, tmp_path / "run")
    assert summary["status"] == "finished" and summary["test/bleu"] is not None
    assert calls["n"] > 2 and summary["checkpoint_failures"]
    assert "No space left on device" in summary["checkpoint_failures"][0]
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert torch.load(last, map_location="cpu", weights_only=False)["global_step"] == 10  # ... never replaces it
    assert not list((tmp_path / "run" / "checkpoints").glob(".*.tmp"))
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "finished"
