"""``ablate table`` and ``ablate attention`` over damaged run files: a skipped record, or one line, never a traceback."""

from __future__ import annotations

import pytest

from ablate.config import load_config
from ablate.training.train import train

from tests.helpers.cli import run_cli
from tests.helpers.tiny import tiny_checkpointing

TINY = tiny_checkpointing("train.max_steps=3")


@pytest.mark.slow
def test_table_and_attention_over_damaged_files_are_one_line(tmp_path, cache_dir):
    """A summary.json of ``[]`` or ``null`` beside a good run; then a torn checkpoint under ``ablate attention``."""
    train(load_config(None, TINY), tmp_path / "sweep" / "good")
    for name, content in {"as-list": "[]", "as-null": "null"}.items():
        (tmp_path / "sweep" / name).mkdir()
        (tmp_path / "sweep" / name / "summary.json").write_text(content)
    proc = run_cli("table", str(tmp_path / "sweep"), cwd=tmp_path, ABLATE_CACHE=str(cache_dir))
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
    for ckpt in (tmp_path / "sweep" / "good" / "checkpoints").glob("*.ckpt"):
        ckpt.write_bytes(ckpt.read_bytes()[:500])
    proc = run_cli(
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
