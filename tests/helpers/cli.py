"""``cli.py`` in a subprocess, as a user runs it: exit code, stdout and stderr (one ``error:`` line for bad input)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "cli.py"


def cli_env(**env: str) -> dict[str, str]:
    """This process's environment, offline (no W&B, no HF hub) and on one thread, then ``env``."""
    return {
        **os.environ,
        "WANDB_MODE": "disabled",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        **env,
    }


def run_cli(*args: str, cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """``python cli.py ARGS`` in ``cwd`` to the end; ``env`` adds to :func:`cli_env`."""
    return subprocess.run(
        [sys.executable, str(CLI), *args], cwd=cwd, env=cli_env(**env), capture_output=True, text=True, timeout=timeout
    )


def start_cli(*args: str, cwd: Path, **env: str) -> subprocess.Popen:
    """``python cli.py ARGS`` started in ``cwd`` (text pipes for stdout and stderr); ``env`` adds to :func:`cli_env`."""
    return subprocess.Popen(
        [sys.executable, str(CLI), *args],
        cwd=cwd,
        env=cli_env(**env),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def assert_one_error_line(proc: subprocess.CompletedProcess, expected: str, case: str = "") -> None:
    """Exit 2, stderr exactly one ``error: ...`` line holding ``expected``, and no traceback anywhere."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (case, proc.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), (case, proc.stderr[-2000:])
    assert expected in lines[0], (case, lines[0])
    assert "Traceback" not in proc.stderr + proc.stdout, case
