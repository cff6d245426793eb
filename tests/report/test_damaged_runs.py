"""``ablate table`` and ``ablate attention`` over damaged run files: a skipped record, or one line, never a traceback."""

from __future__ import annotations

import os
import shutil

import pytest

from ablate.config import load_config
from ablate.training.train import train

from tests.helpers.cli import invoke_cli, run_cli
from tests.helpers.tiny import tiny_checkpointing

TINY = tiny_checkpointing("train.max_steps=3")


@pytest.mark.slow
def test_table_and_attention_over_damaged_files_are_one_line(tmp_path, cache_dir):
    """A summary.json of ``[]`` or ``null`` beside a good run; then a torn checkpoint under ``ablate attention``."""
    train(load_config(None, TINY), tmp_path / "sweep" / "good")
    for name, content in {"as-list": "[]", "as-null": "null"}.items():
        (tmp_path / "sweep" / name).mkdir()
        (tmp_path / "sweep" / name / "summary.json").write_text(content)
    # both commands in this process (no torch import); the pipe test below and
    # tests/training/test_untrusted_checkpoints.py run table and attention as real commands
    proc = invoke_cli("table", str(tmp_path / "sweep"), cwd=tmp_path, ABLATE_CACHE=str(cache_dir))
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
    for ckpt in (tmp_path / "sweep" / "good" / "checkpoints").glob("*.ckpt"):
        ckpt.write_bytes(ckpt.read_bytes()[:500])
    proc = invoke_cli(
        "attention",
        str(tmp_path / "sweep" / "good"),
        "--text",
        "hi",
        "--out",
        str(tmp_path / "png"),
        cwd=tmp_path,
        ABLATE_CACHE=str(cache_dir),
    )
    err = proc.stderr
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1 and "is unreadable" in err, err[-2000:]
    assert "Traceback" not in proc.stdout + err


@pytest.mark.parametrize("planted", ["base-s1/summary.json", "base-s1/hyps/test_2016_flickr.txt", "sweep.json"])
def test_a_record_file_that_is_a_pipe_is_listed_unreadable_never_a_hang(variant_sweep, tmp_path, planted):
    """A received sweep folder whose file is a FIFO (or a link to ``/dev/zero``): ``ablate table`` waited forever
    (or read until memory ran out)."""
    sweep = tmp_path / "sweep"
    shutil.copytree(variant_sweep, sweep)
    (sweep / planted).unlink()
    os.mkfifo(sweep / planted)
    proc = run_cli("table", str(sweep), cwd=tmp_path, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert planted.rpartition("/")[2] in proc.stdout and "not a regular file" in proc.stdout, proc.stdout
