"""``ablate``'s commands beyond ``train`` are imported when run: listed from their names and help alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer

from ablate.cli import Commands, app

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(Commands.lazy))
def test_a_listed_command_shows_the_help_it_has_when_loaded(name):
    group = typer.main.get_group(app)
    command = group.load(name)
    assert command.name == name
    first_paragraph = " ".join((command.help or "").split("\n\n")[0].split())
    assert Commands.lazy[name][1] == first_paragraph


def test_help_lists_every_command_without_importing_them():
    probe = (
        "import contextlib, io, sys\n"
        "from ablate.cli import app\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        "        app(['--help'], standalone_mode=False)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('ablate.report', 'ablate.sweep', 'ablate.bench', "
        "'ablate.inference'))))\n"
        "print(out.getvalue())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    loaded, listing = out.split("\n", 1)
    assert loaded == "[]", loaded
    for name in Commands.lazy:
        assert f" {name} " in listing, (name, listing)


def test_a_lazy_command_runs_and_completes():
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["sweep", "run", "--help"], terminal_width=160)
    assert result.exit_code == 0 and "--dry-run" in result.output, result.output
    group = typer.main.get_group(app)
    ctx = group.make_context("ablate", ["sweep"], resilient_parsing=True)
    name, command, _ = group.resolve_command(ctx, ["sweep"])
    assert name == "sweep" and "run" in command.commands  # what shell completion descends into
