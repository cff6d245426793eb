"""Issue 17 items 4 and 12: one training per run folder; bad input is one line and writes nothing."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tiny_run import tiny

ROOT = Path(__file__).resolve().parents[1]
TINY = tiny(
    "train.max_tokens=512",
    "train.warmup=4",
    "eval.beam=1",
    "tracking.wandb=disabled",
    "train.val_every=1000",
    "train.checkpoint_every=5",
    pairs=200,
)


def cli(*args: str, cwd: Path, cache: Path, **popen) -> subprocess.Popen:
    env = {**os.environ, "WANDB_MODE": "disabled", "ABLATE_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, str(ROOT / "cli.py"), *args],
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **popen,
    )


def _train_until_killed(run: Path, cwd: Path, cache: Path) -> subprocess.Popen:
    """``ablate train --run-dir run`` of a tiny model with a budget it never reaches."""
    return cli(
        "train", "--run-dir", str(run), *TINY, "train.max_steps=100000", "train.max_epochs=null", cwd=cwd, cache=cache
    )


@pytest.mark.slow
def test_a_second_training_of_the_same_folder_is_refused_and_a_dead_holder_is_taken_over(tmp_path):
    """Item 4: two concurrent ``ablate train --run-dir same``: the second is refused naming the first."""
    run, cache = tmp_path / "run", tmp_path / "cache"
    first = _train_until_killed(run, tmp_path, cache)
    try:
        deadline = time.time() + 300
        while not (run / "checkpoints" / "last.ckpt").exists():
            assert first.poll() is None, first.communicate()[1][-2000:]
            assert time.time() < deadline
            time.sleep(0.2)
        second = _train_until_killed(run, tmp_path, cache)
        _, err = second.communicate(timeout=120)
        assert second.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err[-2000:]
        assert f"run dir {run} is in use by another training (pid {first.pid} on " in err
        assert first.poll() is None  # the holder trains on, undisturbed
    finally:
        first.kill()
        first.wait()
    assert (run / ".lock").read_text().startswith(f"{first.pid}@")  # a stale lock: its holder is dead
    third = _train_until_killed(run, tmp_path, cache)
    try:
        deadline = time.time() + 300
        while not (run / ".lock").read_text().startswith(f"{third.pid}@"):
            assert third.poll() is None, third.communicate()[1][-2000:]
            assert time.time() < deadline
            time.sleep(0.2)
    finally:
        third.send_signal(signal.SIGTERM)
        third.wait(timeout=120)


def test_a_run_folder_that_cannot_be_written_is_refused_before_any_data_work(tmp_path, monkeypatch):
    """Item 12: a read-only file system fails in one line at the lock, before data is prepared."""
    from ablate.config import ConfigError
    from ablate.training.run_lock import RunLock

    real_open = os.open

    def read_only(path, flags, mode=0o777, *args, **kwargs):
        if str(path).startswith(str(tmp_path / "ro")):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, mode, *args, **kwargs)

    (tmp_path / "ro").mkdir()
    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(
        ConfigError, match="cannot write to run dir .*Read-only file system; choose a writable --run-dir"
    ):
        RunLock(tmp_path / "ro" / "run").acquire()


def _bad_inputs(tmp: Path) -> dict[str, tuple[list[str], str]]:
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
    for name, content in {"table-list": "[]", "table-null": "null"}.items():
        (tmp / name / "trial").mkdir(parents=True)
        (tmp / name / "trial" / "summary.json").write_text(content)
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
    }


@pytest.mark.slow
def test_bad_inputs_give_one_line_and_leave_nothing_half_written(tmp_path):
    """Item 12: each case ends in one ``error:`` line, exit 2, no traceback, and no run record written."""
    import torch

    cases = _bad_inputs(tmp_path)
    if not torch.cuda.is_available():
        cases["accelerator gpu"] = (
            ["train", "--run-dir", str(tmp_path / "run"), *TINY, "train.accelerator=gpu"],
            "train.accelerator=gpu but no GPU is visible",
        )
    for case, (args, expected) in cases.items():
        proc = cli(*args, cwd=tmp_path, cache=tmp_path / "cache")
        out, err = proc.communicate(timeout=300)
        lines = err.strip().splitlines()
        assert proc.returncode == 2, (case, err[-2000:])
        assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], (case, err[-2000:])
        assert "Traceback" not in out + err, case
        assert not (tmp_path / "run" / "config.yaml").exists() and not (tmp_path / "run" / "summary.json").exists(), (
            case
        )
    assert not (tmp_path / "cache").exists()  # every case stopped before preparing any data


@pytest.mark.slow
def test_table_and_attention_over_damaged_files_are_one_line(tmp_path):
    """Item 12: ``ablate table`` over a summary.json of [] or null, ``ablate attention`` on a torn checkpoint."""
    from ablate.config import load_config
    from ablate.training.train import train

    os.environ["ABLATE_CACHE"] = str(tmp_path / "cache")
    train(load_config(None, [*TINY, "train.max_steps=3"]), tmp_path / "sweep" / "good")
    for name, content in {"as-list": "[]", "as-null": "null"}.items():
        (tmp_path / "sweep" / name).mkdir()
        (tmp_path / "sweep" / name / "summary.json").write_text(content)
    proc = cli("table", str(tmp_path / "sweep"), cwd=tmp_path, cache=tmp_path / "cache")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "Traceback" not in out + err, err[-2000:]
    for ckpt in (tmp_path / "sweep" / "good" / "checkpoints").glob("*.ckpt"):
        ckpt.write_bytes(ckpt.read_bytes()[:500])
    proc = cli(
        "attention",
        str(tmp_path / "sweep" / "good"),
        "--text",
        "hi",
        "--out",
        str(tmp_path / "png"),
        cwd=tmp_path,
        cache=tmp_path / "cache",
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1 and "is unreadable" in err, err[-2000:]
    assert "Traceback" not in out + err
