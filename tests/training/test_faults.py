"""Faults inside a training run are recorded, never lost: NaN and OOM fail the run, W&B and disk failures do not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import wandb

from ablate.config import load_config
from ablate.data.sources import DataError
from ablate.training.train import RunError, train

from tests.helpers.tiny import EVAL_PAIRS, tiny

pytestmark = pytest.mark.slow  # every test trains (seconds each)

TINY = tiny(
    "train.max_steps=12",
    "train.max_tokens=512",
    "train.warmup=4",
    "eval.beam=1",
    "tracking.wandb=offline",
    "train.val_every=1000",
    pairs=200,
    eval_pairs=EVAL_PAIRS,
)


@pytest.mark.parametrize(
    "fault, reason", [("nan:5", "non-finite loss at step 5"), ("oom:3", "out of memory with train.max_tokens=512")]
)
def test_fault_in_training_is_recorded(fault, reason, tmp_path, cache_dir, monkeypatch):
    monkeypatch.setenv("ABLATE_INJECT_FAULT", fault)
    with pytest.raises(RunError, match=reason):
        train(load_config(None, TINY), tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed" and reason in summary["error"]
    assert wandb.run is None  # finished: the next run in this process would log into it (Lightning reuses it)


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


def test_a_model_too_large_for_memory_is_out_of_memory_with_a_failed_record(tmp_path, cache_dir, monkeypatch):
    """The CPU allocator's own words, raised where the model is built (before any record was written)."""

    def too_large(*args, **kwargs):
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: "
            "you tried to allocate 256000000000 bytes."
        )

    monkeypatch.setattr("ablate.model.build.build_model", too_large)
    reason = "out of memory with train.max_tokens=512 (lower it, or train.accumulate)"
    with pytest.raises(RunError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        train(load_config(None, TINY), tmp_path / "run")  # was the raw allocator error, and no summary.json
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["error"] == reason


@pytest.mark.parametrize(
    "error", [DataError("val.de has 19 lines, val.en has 20"), ValueError("no shard for split val")]
)
def test_data_that_fails_before_training_leaves_a_failed_record_and_frees_the_folder(
    error, tmp_path, cache_dir, monkeypatch
):
    """A data error before any training (ablate's one-line error, or a source's own exception) is raised as
    it was and leaves ``summary.json`` saying ``failed`` and why; the folder then trains a corrected config."""
    from ablate.data.datamodule import TranslationDataModule

    real_setup = TranslationDataModule.setup

    def broken(self, *args, **kwargs):
        raise error

    monkeypatch.setattr(TranslationDataModule, "setup", broken)
    run = tmp_path / "run"
    with pytest.raises(type(error), match=str(error)):
        train(load_config(None, [*TINY, "train.max_steps=2"]), run)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and str(error) in summary["error"] and "step" not in summary

    monkeypatch.setattr(TranslationDataModule, "setup", real_setup)
    fixed = train(load_config(None, [*TINY, "train.max_steps=3", "tracking.wandb=disabled"]), run)
    assert fixed["status"] == "finished" and fixed["step"] == 3 and fixed["config"]["train"]["max_steps"] == 3


def test_a_callback_that_cannot_be_built_leaves_a_failed_record_not_running(tmp_path, cache_dir):
    """``trainer.callbacks=[...EarlyStopping]`` without its ``monitor`` stops with one line once the record says
    ``running``: the record then says ``failed`` and why, never ``running`` for a process that has ended."""
    from ablate.utils.typed import ConfigError

    run = tmp_path / "run"
    config = load_config(None, [*TINY, "trainer.callbacks=[lightning.pytorch.callbacks.EarlyStopping]"])
    with pytest.raises(ConfigError, match="missing 1 required positional argument: 'monitor'"):
        train(config, run)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and "EarlyStopping" in summary["error"], summary["status"]
    assert wandb.run is None  # finished: the next run in this process logged into this run's folder


def test_a_kill_fault_under_ddp_fires_once_whichever_rank_reaches_the_step_first(tmp_path, monkeypatch):
    # rank 1 reaching the step first killed the process group before rank 0 wrote the marker: the rerun that
    # should resume was killed again
    from types import SimpleNamespace

    from ablate.training.trainer import FaultInjection

    kills = []
    monkeypatch.setattr("ablate.training.trainer.os.killpg", lambda group, sig: kills.append(sig))
    trainer = SimpleNamespace(global_step=12, global_rank=1, world_size=2)
    FaultInjection("kill:12", tmp_path).on_train_batch_start(trainer, None, None, 0)
    FaultInjection("kill:12", tmp_path).on_train_batch_start(trainer, None, None, 0)  # the rerun
    assert len(kills) == 1
