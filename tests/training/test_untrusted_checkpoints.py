"""Checkpoints from elsewhere run no code, damaged ones recover, nothing in them is half-believed.

A tiny run is trained once per module and copied for each test that tampers with it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path
from typing import Iterator

import pytest
import torch

from ablate.config import ConfigError, load_config
from ablate.training.train import train

from tests.helpers.cli import invoke_cli, run_cli
from tests.helpers.tiny import tiny_checkpointing, trained_once

pytestmark = pytest.mark.slow  # every test trains (seconds each)

TINY = tiny_checkpointing("train.max_steps=12")


class Payload:
    """Pickles to a call of ``os.system``: loading it with ``weights_only=False`` runs a shell command."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Iterator[Path]:
    """The tiny run, trained once; its data cache stays ``ABLATE_CACHE`` for the module's tests."""
    with trained_once(tmp_path_factory, TINY) as run:
        yield run


@pytest.fixture()
def run(trained, tmp_path) -> Path:
    """A copy of the trained run, marked unfinished so that training it again resumes it."""
    copy = tmp_path / "run"
    shutil.copytree(trained, copy, ignore=shutil.ignore_patterns(".lock"))
    summary = json.loads((copy / "summary.json").read_text())
    summary["status"] = "running"
    (copy / "summary.json").write_text(json.dumps(summary))
    return copy


def test_a_pickled_payload_in_a_checkpoint_never_runs(run, tmp_path):
    """``ablate attention`` and a resumed ``ablate train`` load checkpoints with weights_only=True."""
    marker = tmp_path / "pwned"
    real = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    planted = dict(
        real, ablate={"history": [{"step": 12, "val/bleu": 1e9, "val/chrf": 1e9, "val/ppl": 1.0}], "best_val_bleu": 1e9}
    )
    torch.save(planted, run / "checkpoints" / "last.ckpt")  # a believable checkpoint with a planted best BLEU ...
    torch.save({"state_dict": real["state_dict"], "payload": Payload(marker)}, run / "checkpoints" / "best.ckpt")

    invoke_cli("attention", str(run), "--text", "hello", "--out", str(tmp_path / "png"), cwd=tmp_path)  # in here
    assert not marker.exists()
    summary = train(load_config(None, TINY), run)  # ... and a best.ckpt that runs a command when unpickled
    assert not marker.exists()
    assert summary["status"] == "finished"
    assert summary["val/bleu"] is not None and 0 <= summary["val/bleu"] <= 100  # 1e9 is not believed
    assert all(h["val/bleu"] <= 100 for h in summary["history"])

    for name in ("best.ckpt", "last.ckpt"):
        torch.save({"state_dict": real["state_dict"], "payload": Payload(marker)}, run / "checkpoints" / name)
    proc = run_cli("attention", str(run), "--text", "hello", "--out", str(tmp_path / "png"), cwd=tmp_path)
    assert not marker.exists()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "pickled objects" in proc.stderr


def test_a_damaged_last_checkpoint_falls_back_to_the_previous_one(run, caplog):
    """a torn last.ckpt resumes from last.prev.ckpt with a warning (the ablate logger) naming the damaged file."""
    last = run / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:1000])
    summary = train(load_config(None, TINY), run)
    assert summary["status"] == "finished" and summary["step"] == 12
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(f"{last} is unreadable" in w and "last.prev.ckpt" in w for w in warnings), warnings


def test_resume_accepts_the_checkpoints_a_plain_rerun_resumes_from(run, tmp_path):
    """``ablate train --resume`` said "nothing to resume ... (no checkpoints/last.ckpt)" for a run whose last.ckpt
    went missing, though the same command without it resumed from last.prev.ckpt; it now accepts any of them."""
    (run / "checkpoints" / "last.ckpt").unlink()
    proc = invoke_cli("train", "--resume", "--run-dir", str(run), *TINY, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((run / "summary.json").read_text())["status"] == "finished"
    proc = invoke_cli("train", "--resume", "--run-dir", str(run / "x"), *TINY, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"error: nothing to resume in {run / 'x'} (no last.ckpt, last.prev.ckpt or best.ckpt in checkpoints)"
    ]


def test_without_a_readable_checkpoint_the_error_says_how_to_start_over(run):
    """no fallback left: one line that says --overwrite, and the recorded step is kept."""
    for name in ("last.prev.ckpt", "best.ckpt"):
        (run / "checkpoints" / name).unlink(missing_ok=True)
    (run / "checkpoints" / "last.ckpt").write_bytes(b"\x00garbage")
    with pytest.raises(ConfigError, match="pass --overwrite to start this run over"):
        train(load_config(None, TINY), run)
    assert json.loads((run / "summary.json").read_text())["step"] == 12


def test_a_rerun_that_only_decodes_keeps_the_measured_training_metrics(run):
    """killed during the test decoding, the rerun keeps tokens/s and loss; the JSON is strict."""
    before = json.loads((run / "summary.json").read_text())
    summary = train(load_config(None, TINY), run)  # resumes at the last step: nothing left to train
    text = (run / "summary.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    after = json.loads(text)
    assert after["step"] == 12 and summary["status"] == "finished"
    assert after["train/tokens_per_sec"] == pytest.approx(before["train/tokens_per_sec"])
    assert before["train/tokens_per_cpu_sec"] > 0
    assert after["train/tokens_per_cpu_sec"] == pytest.approx(before["train/tokens_per_cpu_sec"])
    assert after["train/loss"] == pytest.approx(before["train/loss"])


def test_a_second_sigint_cannot_cut_short_the_interrupt_checkpoint(tmp_path, cache_dir, monkeypatch):
    """a SIGINT landing while a Ctrl-C is handled still saves last.ckpt and records it.

    Two Ctrl-Cs stop inside the step (one alone waits for its end); the third is raised exactly where it used to
    escape: as Lightning starts its graceful shutdown, before it ignores further SIGINTs.
    """
    import pytorch_lightning.trainer.call as call

    from ablate.training.module import TranslationModule

    real_start = TranslationModule.on_train_batch_start

    def first(self, batch, batch_idx):
        real_start(self, batch, batch_idx)
        if self.global_step == 7:
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)

    def second(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)  # 50 ms after the first: inside the shutdown

    monkeypatch.setattr(TranslationModule, "on_train_batch_start", first)
    monkeypatch.setattr(call, "rank_zero_info", second)
    previous = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(KeyboardInterrupt):
            train(load_config(None, [*TINY, "train.max_steps=40", "train.checkpoint_every=100"]), tmp_path / "run")
    finally:
        signal.signal(signal.SIGINT, previous)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["step"] == 7
    ckpt = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert ckpt["global_step"] == 7


def test_a_sigint_the_process_was_started_to_ignore_stays_ignored():
    """A background job of a script (``ablate train ... &``) starts with SIGINT ignored, as ``nohup``-style
    wrappers arrange; Python keeps that, and so does the run: a Ctrl-C meant for the foreground must not stop it."""
    from ablate.training.trainer import sigint_once

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with sigint_once():
            signal.raise_signal(signal.SIGINT)  # raised KeyboardInterrupt: the handler replaced SIG_IGN
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with pytest.raises(KeyboardInterrupt), sigint_once():  # a Ctrl-C the process does take still stops it
            signal.raise_signal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)


def test_load_from_checkpoint_never_unpickles_even_where_torch_is_told_to(tmp_path, monkeypatch):
    """Without ``weights_only``, Lightning leaves the choice to torch, whose default a user's environment
    (``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``, set for some older checkpoint) turns into unpickling anything."""
    from ablate.training.checkpoints import CheckpointError
    from ablate.training.module import TranslationModule

    marker = tmp_path / "pwned"
    path = tmp_path / "theirs" / "checkpoints" / "best.ckpt"
    path.parent.mkdir(parents=True)
    torch.save({"state_dict": {}, "payload": Payload(marker)}, path)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(CheckpointError) as err:
        TranslationModule.load_from_checkpoint(str(path))
    assert "\n" not in str(err.value) and str(path) in str(err.value) and "pickled" in str(err.value)
    assert not marker.exists()
