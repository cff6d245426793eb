"""``ablate table wandb:...`` gives the local table, † and footnote included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.report import table as report_table

from tests.helpers.offline_api import OfflineApi
from tests.helpers.records import make_variant_sweep

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def logged_sweep(tmp_path_factory) -> Path:
    """The Table-3-style sweep folder of the report tests, each trial with its offline W&B run."""
    root = make_variant_sweep(tmp_path_factory.mktemp("wandb-table") / "table3")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_SILENT="true", PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "helpers" / "log_trials.py"), str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["md", "csv", "latex"])
def test_wandb_table_equals_the_local_table(logged_sweep, tmp_path, fmt):
    api = OfflineApi(logged_sweep)
    remote = report_table("wandb:me/ablate/table3", samples=200, api=api).render(fmt)
    local = report_table(str(logged_sweep), samples=200).render(fmt)
    assert remote == local
    if fmt == "md":
        assert "†" in local and "paired bootstrap" in local.lower()
