"""``cli.py`` in a subprocess, as a user runs it: exit code, stdout and stderr (one ``error:`` line for bad input).

:func:`invoke_cli` runs the same command line in this process (no torch and Lightning import per call) and
answers in the same form, so :func:`assert_one_error_line` judges both alike; a test keeps at least one
:func:`run_cli` per command to pin the real entry point.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "cli.py"


OFFLINE = {"WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
"""What a command line under test runs with: offline (no W&B, no HF hub) and on one thread."""


def cli_env(**env: str) -> dict[str, str]:
    """This process's environment with :data:`OFFLINE`, then ``env``."""
    return {**os.environ, **OFFLINE, **env}


def run_cli(*args: str, cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """``python cli.py ARGS`` in ``cwd`` to the end; ``env`` adds to :func:`cli_env`."""
    return subprocess.run(
        [sys.executable, str(CLI), *args], cwd=cwd, env=cli_env(**env), capture_output=True, text=True, timeout=timeout
    )


def invoke_cli(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """``ablate ARGS`` run in this process by typer's ``CliRunner``, in ``cwd`` with :data:`OFFLINE` and ``env`` set
    while it runs, answered as :func:`run_cli` answers: exit code, stdout, stderr. An exception that escapes the
    command ends as it would in a process of its own: exit 1 and its traceback on stderr. A variable that a
    library reads once, when imported (``HF_HUB_OFFLINE`` once ``huggingface_hub`` is loaded), needs :func:`run_cli`."""
    import pytest
    from typer.testing import CliRunner

    from ablate.cli import app

    with pytest.MonkeyPatch.context() as patch:  # the directory and variables come back after the command
        patch.chdir(cwd)
        for key, value in {**OFFLINE, **env}.items():
            patch.setenv(key, value)
        result = CliRunner().invoke(app, list(args))
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["ablate", *args], result.exit_code, result.stdout, stderr)


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
