"""Idle OpenMP threads sleep (``OMP_WAIT_POLICY=PASSIVE``) in every process that imports ablate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("preset, expected", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_importing_ablate_before_torch_makes_idle_threads_sleep_unless_the_user_chose(preset, expected):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if preset:
        env["OMP_WAIT_POLICY"] = preset
    env["PYTHONPATH"] = str(ROOT)
    probe = "import os, ablate, torch; torch.ones(1); print(os.environ['OMP_WAIT_POLICY'])"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected
