"""Sweep files are read as safely as configs: duplicate keys and list alias bombs are refused, in one CLI line."""

from __future__ import annotations

import pytest

from ablate.sweep.spec import SweepError, load_spec

from tests.helpers.cli import run_cli


def test_sweep_files_refuse_duplicate_keys_and_list_bombs(tmp_path):
    dup = tmp_path / "dup.yaml"
    dup.write_text("method: grid\nparameters:\n  seed:\n    values: [1, 2]\n  seed:\n    values: [3]\n")
    with pytest.raises(SweepError, match=r"line 5: duplicate key 'seed'"):
        load_spec(dup)
    bomb = tmp_path / "bomb.yaml"
    lists = ["a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"] + [
        f"{c}: &{c} [" + ", ".join([f"*{p}"] * 10) + "]" for p, c in zip("abcde", "bcdef")
    ]
    bomb.write_text(
        "method: grid\nx:\n" + "".join(f"  {line}\n" for line in lists) + "parameters:\n  seed:\n    values: *f\n"
    )
    with pytest.raises(SweepError, match="alias bomb"):
        load_spec(bomb)
    proc = run_cli("sweep", "run", str(bomb), "--dry-run", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "alias bomb" in proc.stderr and "Traceback" not in proc.stderr
