"""``--help`` of every command: flags show no ``<bool>`` type (they take no value); options keep theirs."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from ablate import cli


def command_paths(command, path=()):
    """Every command's path; a command mounted lazily (:class:`~ablate.utils.commands.LazyGroup`) is loaded."""
    yield list(path)
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        if name in getattr(command, "lazy", {}):
            sub = command.load(name)
        yield from command_paths(sub, (*path, name))


def test_no_help_page_shows_a_bool_metavar(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    paths = list(command_paths(typer.main.get_command(cli.app)))
    assert ["sweep", "run"] in paths and ["train"] in paths and len(paths) > 10
    runner = CliRunner()
    for path in paths:
        result = runner.invoke(cli.app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "<bool>" not in result.output, path
    train = runner.invoke(cli.app, ["train", "--help"]).output
    assert "--overwrite" in train and "<path>" in train  # flags listed; a valued option keeps its type
