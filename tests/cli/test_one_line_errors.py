"""Bad input to ``cli.py`` ends in one ``error:`` line, exit 2, no traceback, and nothing half-written.

The cases of :data:`REAL` run ``cli.py`` in a subprocess (one per command, and the hub case, whose offline
setting the hub library reads when imported); the others run the same command line in this process
(:func:`invoke_cli`, judged by the same :func:`assert_one_error_line`), which spares a torch and Lightning
import per case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import assert_one_error_line, invoke_cli, run_cli
from tests.helpers.tiny import tiny_checkpointing

TINY = tiny_checkpointing()
REAL = {"hub offline", "seed -1", "sweep.json []", "attention garbled", "translate garbled"}
"""The cases run as a user runs them, in a process of their own: the real entry point for each command."""
PAIRS = {f"{s}.{lang}": [f"{lang} sentence {i}" for i in range(20)] for s in ("train", "val") for lang in ("en", "de")}


def corpus(folder: Path, files: dict[str, list[str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, lines in files.items():
        (folder / name).write_text("".join(line + "\n" for line in lines))
    return folder


def bad_config_and_data(tmp: Path) -> dict[str, tuple[list[str], str]]:
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
def test_bad_config_or_data_is_one_line_without_traceback(tmp_path):
    for case, (args, expected) in bad_config_and_data(tmp_path).items():
        proc = (run_cli if case in REAL else invoke_cli)(
            "train", "--run-dir", str(tmp_path / "run"), *args, cwd=tmp_path, ABLATE_CACHE=str(tmp_path / "cache")
        )
        assert_one_error_line(proc, expected, case)


def bad_values_and_files(tmp: Path) -> dict[str, tuple[list[str], str]]:
    (tmp / "a_file").write_text("x")
    (tmp / "latin1.yaml").write_bytes(b"seed: 1\nmodel:\n  heads: 4 # \xe9t\xe9\n")
    garbled, listed = tmp / "garbled", tmp / "listed"
    for folder, text in ((garbled, "model: [\n  heads"), (listed, "- 1\n- 2\n")):
        folder.mkdir()
        (folder / "config.yaml").write_text(text)
    sweep_files = {}
    for name, content in {
        "empty-list": b"[]",
        "null": b"null",
        "latin1": b'{"x": "\xe9"}',
        "status": b'{"name": "t", "source": "s", "signature": "x", "version": 1, '
        b'"trials": [{"name": "a", "point": {}, "status": "exploded"}]}',
    }.items():
        (tmp / f"sweep-{name}").mkdir()
        (tmp / f"sweep-{name}" / "sweep.json").write_bytes(content)
        sweep_files[name] = tmp / f"sweep-{name}"
    train = ["train", "--run-dir", str(tmp / "run"), *TINY]
    return {
        "seed -1": ([*train, "seed=-1"], "seed=-1 must be in [0, 2**32 - 1]"),
        "seed huge": ([*train, "seed=99999999999"], "seed=99999999999 must be in"),
        "devices 0": ([*train, "train.devices=0"], "train.devices=0 must be at least 1"),
        "devices -1": ([*train, "train.devices=-1"], "train.devices=-1 must be at least 1"),
        "val_every": ([*train, "train.val_every=-3"], "train.val_every=-3 must be at least 1"),
        "log_every": ([*train, "tracking.log_every=0"], "tracking.log_every=0 must be at least 1"),
        "run dir is a file": (["train", "--run-dir", str(tmp / "a_file"), *TINY], "is an existing file"),
        "config not utf-8": ([*train, "--config", str(tmp / "latin1.yaml")], "is not UTF-8 text"),
        "garbled config.yaml": (["train", "--run-dir", str(garbled), *TINY], "holds an unreadable config.yaml"),
        "list config.yaml": (["train", "--run-dir", str(listed), *TINY], "holds an unreadable config.yaml"),
        "sweep.json []": (["sweep", "status", str(sweep_files["empty-list"])], "is not a sweep state file"),
        "sweep.json null": (["sweep", "status", str(sweep_files["null"])], "is not a sweep state file"),
        "sweep.json latin1": (["sweep", "status", str(sweep_files["latin1"])], "is not a sweep state file"),
        "sweep.json status": (["sweep", "status", str(sweep_files["status"])], "unknown status 'exploded'"),
        "attention garbled": (["attention", str(garbled), "--text", "hi"], "unusable config.yaml"),
        "translate garbled": (["translate", str(garbled), "--input", str(tmp / "a_file")], "unusable config.yaml"),
    }


@pytest.mark.slow
def test_bad_values_and_files_give_one_line_and_leave_nothing_half_written(tmp_path):
    """Each case stops before a run record (config.yaml, summary.json) or any data cache is written."""
    import torch

    cases = bad_values_and_files(tmp_path)
    if not torch.cuda.is_available():
        cases["accelerator gpu"] = (
            ["train", "--run-dir", str(tmp_path / "run"), *TINY, "train.accelerator=gpu"],
            "train.accelerator=gpu but no GPU is visible",
        )
    for case, (args, expected) in cases.items():
        proc = (run_cli if case in REAL else invoke_cli)(*args, cwd=tmp_path, ABLATE_CACHE=str(tmp_path / "cache"))
        assert_one_error_line(proc, expected, case)
        assert not (tmp_path / "run" / "config.yaml").exists() and not (tmp_path / "run" / "summary.json").exists(), (
            case
        )
    assert not (tmp_path / "cache").exists()  # every case stopped before preparing any data


def test_resume_and_overwrite_together_are_refused(tmp_path):
    """``--resume`` (require a run to continue) with ``--overwrite`` deleted the resumable run and trained anew."""
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    last.parent.mkdir(parents=True)
    last.write_bytes(b"a checkpoint to resume from")
    args = [
        "train",
        "--run-dir",
        str(tmp_path / "run"),
        "--resume",
        "--overwrite",
        *tiny_checkpointing("train.max_steps=2"),
    ]
    assert_one_error_line(
        invoke_cli(*args, cwd=tmp_path), "--resume continues the run in --run-dir and --overwrite deletes it"
    )
    assert last.read_bytes() == b"a checkpoint to resume from"


@pytest.mark.slow
def test_ctrl_c_says_what_running_again_does(tmp_path, monkeypatch):
    """Ctrl-C before the first checkpoint said "run the same command again to resume from .../checkpoints", where
    there was nothing to resume from (the same command starts over); after one, it resumes. (Ctrl-C inside a step
    finishes that step and checkpoints it: before the first step, nothing can be resumed.)"""
    import json
    import signal

    from ablate.training.module import TranslationModule

    real_start, stop_at = TranslationModule.on_train_batch_start, [0]

    def interrupt(self, batch, batch_idx):
        real_start(self, batch, batch_idx)
        if self.global_step == stop_at[0]:
            signal.raise_signal(signal.SIGINT)

    def interrupt_before_training(self):
        if stop_at[0] is None:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(TranslationModule, "on_train_batch_start", interrupt)
    monkeypatch.setattr(TranslationModule, "on_fit_start", interrupt_before_training)
    args = ["train", "--run-dir", str(tmp_path / "run"), *tiny_checkpointing("train.max_steps=40")]
    checkpoints = tmp_path / "run" / "checkpoints"
    for stop_at[0], again, recorded in (
        (None, "start over (no checkpoint yet)", "start over"),
        (7, f"resume from {checkpoints}", "resume"),
    ):
        proc = invoke_cli(*args, cwd=tmp_path, ABLATE_CACHE=str(tmp_path / "cache"))
        assert proc.returncode == 130, proc.stderr[-2000:]
        assert proc.stderr.splitlines()[-1] == f"error: interrupted; run the same command again to {again}"
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert summary["status"] == "interrupted" and summary["error"].startswith(
            f"interrupted; run the same command again to {recorded}"
        )
