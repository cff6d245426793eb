"""Damaged or stale checkpoints are never used silently: the zip's CRCs and the record's sha256 are
checked by every loader, and after a failed write the record names the step that is on disk.

A tiny run is trained once per module and copied for each test that damages it.
"""

from __future__ import annotations

import errno
import json
import logging
import shutil
import struct
import zipfile
from pathlib import Path
from typing import Iterator

import pytest
from pytorch_lightning import Trainer
from pytorch_lightning.plugins.io import TorchCheckpointIO

from ablate.config import ConfigError, load_config
from ablate.training.checkpoints import CheckpointError, load_checkpoint_file, resumable_checkpoint
from ablate.training.train import train

from tests.helpers.cli import invoke_cli, run_cli
from tests.helpers.tiny import tiny_checkpointing, trained_once

pytestmark = pytest.mark.slow  # every test trains (seconds each)

TINY = tiny_checkpointing("train.max_steps=10", "train.val_every=5")


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Iterator[Path]:
    """The tiny run, trained once; its data cache stays ``ABLATE_CACHE`` for the module's tests."""
    with trained_once(tmp_path_factory, TINY) as run:
        yield run


@pytest.fixture()
def run(trained, tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(trained, copy, ignore=shutil.ignore_patterns(".lock"))
    return copy


def flip_inside_largest_tensor(path: Path, count: int = 400) -> None:
    """Invert ``count`` bytes in the middle of the largest tensor's storage (every zip header intact)."""
    with zipfile.ZipFile(path) as archive:
        member = max((m for m in archive.infolist() if "/data/" in m.filename), key=lambda m: m.file_size)
    data = bytearray(path.read_bytes())
    name_len, extra_len = struct.unpack("<HH", data[member.header_offset + 26 : member.header_offset + 30])
    start = member.header_offset + 30 + name_len + extra_len + member.file_size // 2 - count // 2
    assert member.file_size > count
    data[start : start + count] = bytes(b ^ 0xFF for b in data[start : start + count])
    path.write_bytes(bytes(data))


def test_the_record_holds_each_checkpoints_step_and_sha256(trained):
    import hashlib

    summary = json.loads((trained / "summary.json").read_text())
    for name in ("best.ckpt", "last.ckpt"):
        path = trained / "checkpoints" / name
        entry = summary["checkpoints"][name]
        assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert entry["step"] == load_checkpoint_file(path)["global_step"]


def test_translate_refuses_a_checkpoint_flipped_inside_a_tensor(run, tmp_path):
    flip_inside_largest_tensor(run / "checkpoints" / "best.ckpt")
    (tmp_path / "in.txt").write_text("a man rides a bike .\n")
    # in this process (no torch import); the pipe test below runs translate as a real command
    proc = invoke_cli("translate", str(run), "--input", str(tmp_path / "in.txt"), cwd=tmp_path)
    # it printed an empty line per source, rc 0
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert "best.ckpt is damaged" in line and "fails its CRC check" in line and "--overwrite" in line
    assert proc.stdout == ""


def test_every_loader_refuses_a_damaged_checkpoint(run):
    from ablate.inference.translate import load_run
    from ablate.training.checkpoints import load_trained
    from ablate.training.module import TranslationModule

    best = run / "checkpoints" / "best.ckpt"
    flip_inside_largest_tensor(best)
    with pytest.raises(CheckpointError, match="best.ckpt is damaged"):
        TranslationModule.load_from_checkpoint(str(best), weights_only=True)
    for load in (load_run, load_trained):  # translate, evaluate, export-model; attention
        with pytest.raises(ConfigError, match="best.ckpt is damaged"):
            load(run)


def test_a_checkpoint_with_good_crcs_but_not_the_recorded_bytes_is_refused(run):
    from ablate.inference.translate import load_run

    best, last = run / "checkpoints" / "best.ckpt", run / "checkpoints" / "last.ckpt"
    best.write_bytes(last.read_bytes())  # a valid checkpoint, but not the one the run tested
    with pytest.raises(ConfigError, match=r"best.ckpt is damaged: its sha256 is not the [0-9a-f]{12}\.\.\. the run"):
        load_run(run)


@pytest.mark.parametrize("planted", ["checkpoints/best.ckpt", "tokenizer/tokenizer.json"])
def test_a_checkpoint_or_tokenizer_that_is_a_pipe_is_one_line_never_a_hang(run, tmp_path, planted):
    """A received run folder whose checkpoint or tokenizer is a FIFO (or a link to ``/dev/zero``): translate,
    evaluate, export-model and attention waited forever for a writer."""
    import os

    from ablate.errors import AblateError
    from ablate.training.checkpoints import load_trained

    (run / planted).unlink()
    os.mkfifo(run / planted)
    (tmp_path / "in.txt").write_text("a man rides a bike .\n")
    proc = run_cli("translate", str(run), "--input", str(tmp_path / "in.txt"), cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert planted in line and "not a regular file (a device or a pipe)" in line
    with pytest.raises(AblateError, match="not a regular file"):
        load_trained(run)  # attention's loader


def test_a_resume_skips_a_damaged_last_checkpoint_and_init_from_refuses_it(run):
    from ablate.training.checkpoints import initialise

    warnings: list[str] = []
    flip_inside_largest_tensor(run / "checkpoints" / "last.ckpt")
    chosen = resumable_checkpoint(run / "checkpoints", warn=warnings.append)
    assert chosen is not None and chosen.name != "last.ckpt"
    assert "last.ckpt is damaged" in warnings[0]
    flip_inside_largest_tensor(run / "checkpoints" / "best.ckpt")
    cfg = load_config(None, [*TINY, f"train.init_from={run}"])
    with pytest.raises(ConfigError, match="best.ckpt is damaged"):
        initialise(None, cfg, None)


def test_after_a_failed_best_write_the_record_names_the_step_on_disk_and_translate_says_so(
    tmp_path, monkeypatch, caplog
):
    from ablate.inference.translate import load_run

    save = TorchCheckpointIO.save_checkpoint

    def full_disk(self, checkpoint, path, storage_options=None):
        if Path(path).name == ".best.ckpt.tmp" and checkpoint["global_step"] >= 10:
            raise OSError(errno.ENOSPC, "No space left on device")
        return save(self, checkpoint, path, storage_options)

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(TorchCheckpointIO, "save_checkpoint", full_disk)
    validate = Trainer.validate

    def final_weights_best(self, model, *args, **kwargs):  # the final weights are tested: best.ckpt is rewritten
        out = validate(self, model, *args, **kwargs)
        model.last_val["val/bleu"] = 1e9
        return out

    monkeypatch.setattr(Trainer, "validate", final_weights_best)
    summary = train(load_config(None, TINY), tmp_path / "run")
    best = tmp_path / "run" / "checkpoints" / "best.ckpt"
    on_disk = load_checkpoint_file(best)["global_step"]
    assert summary["checkpoints"]["best.ckpt"]["step"] == on_disk == 5
    assert summary["val/step"] == 10 and "best.ckpt not written at step 10" in summary["checkpoint_failures"][0]
    caplog.set_level(logging.INFO)
    load_run(tmp_path / "run")
    said = [r.getMessage() for r in caplog.records if "using best.ckpt" in r.getMessage()]
    assert said == [
        "using best.ckpt from step 5, not step 10 that the run tested (that write failed: see "
        "checkpoint_failures in summary.json)"
    ]


@pytest.mark.parametrize("keep", [0, 1000])
def test_a_torn_checkpoint_is_one_whole_sentence_that_says_what_to_do(tmp_path, keep):
    """A checkpoint cut short (a copy that stopped): the line quoted torch's 300-character hint cut at 200 characters,
    "... there is a high likelihood that your checkpoint file is", and said nothing of what to do."""
    import torch

    path = tmp_path / "best.ckpt"
    torch.save({"state_dict": {"w": torch.zeros(64, 64)}}, path)
    path.write_bytes(path.read_bytes()[:keep])
    with pytest.raises(CheckpointError) as err:
        load_checkpoint_file(path)
    line = str(err.value)
    assert line.startswith(f"checkpoint {path} is unreadable (") and line.endswith(
        "); restore it from a copy, or train the run again (--overwrite)"
    ), line
    assert "If you are seeing" not in line and "\n" not in line
