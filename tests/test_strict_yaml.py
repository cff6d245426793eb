"""Issue 17 item 3: alias bombs and duplicate keys are refused with the line and the key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.config import ConfigError, load_config
from ablate.sweep.spec import SweepError, load_spec

ROOT = Path(__file__).resolve().parents[1]


def mapping_bomb(levels: int = 5) -> str:
    """A YAML mapping whose aliases expand to 10**levels leaves (about 1 KB of text)."""
    lines = ["l0: &l0 {" + ", ".join(f"k{i}: 1" for i in range(10)) + "}"]
    for n in range(1, levels + 1):
        lines.append(f"l{n}: &l{n} {{" + ", ".join(f"k{i}: *l{n - 1}" for i in range(10)) + "}")
    return "\n".join(lines) + "\n"


def test_a_config_alias_bomb_is_refused_with_its_line(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(mapping_bomb())
    with pytest.raises(ConfigError, match=r"line \d+: aliases expand .* alias bomb"):
        load_config(path)


def test_duplicate_config_keys_are_refused_with_line_and_key(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("model:\n  heads: 8\nseed: 2\nmodel:\n  d_model: 64\n")
    with pytest.raises(ConfigError, match=r"line 4: duplicate key 'model' \(first given on line 1\)"):
        load_config(path)


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
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "sweep", "run", str(bomb), "--dry-run"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "WANDB_MODE": "disabled"},
    )
    assert proc.returncode == 2 and "alias bomb" in proc.stderr and "Traceback" not in proc.stderr


def test_ordinary_anchors_and_merge_keys_still_load(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("base: &base {heads: 8}\nmodel:\n  <<: *base\n  d_model: 64\n")
    from ablate.utils.typed import read_yaml

    assert read_yaml(path)["model"] == {"heads": 8, "d_model": 64}
