"""ablate.utils.commands: status lines on stderr (once per handler, rank zero, -q/-v), warning filters
in one place with their causes, and ``--help`` flags without a ``<bool>`` type."""

from __future__ import annotations

import ast
import json
import logging
import warnings
from pathlib import Path

import lightning_utilities.core.rank_zero as rank_zero
import pytest
import typer
from typer.testing import CliRunner

import ablate
from ablate import cli
from ablate.utils import commands

from tests.helpers.cli import ROOT, assert_one_error_line, invoke_cli, run_cli


@pytest.fixture
def ablate_logger():
    """The ``ablate`` logger as a test found it, restored afterwards (setup() changes it)."""
    logger = logging.getLogger("ablate")
    saved = logger.handlers[:], logger.level, logger.propagate
    yield logger
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


def test_status_goes_to_stderr_one_line_each_and_warnings_say_so(ablate_logger, capsys):
    commands.setup_logging()
    commands.setup_logging()  # again: still one handler, so no line twice
    log = logging.getLogger("ablate.training.train")
    log.info("run dir: %s", "runs/" + "x" * 300)
    log.warning("W&B could not start ([red]no network[/red])")
    log.debug("not shown by default")
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == ["run dir: runs/" + "x" * 300, "warning: W&B could not start ([red]no network[/red])"]


def test_quiet_keeps_warnings_and_verbose_adds_debug(ablate_logger, capsys):
    log = logging.getLogger("ablate.data.cache")
    commands.setup_logging(commands.verbosity_of(quiet=True, verbose=False))
    log.info("hidden")
    log.warning("kept")
    commands.setup_logging(commands.verbosity_of(quiet=False, verbose=True))
    log.debug("detail")
    assert capsys.readouterr().err.splitlines() == ["warning: kept", "detail"]


def test_only_global_rank_zero_speaks(ablate_logger, capsys, monkeypatch):
    commands.setup_logging()
    monkeypatch.setattr(rank_zero.rank_zero_only, "rank", 1, raising=False)  # what Lightning sets on DDP rank 1
    logging.getLogger("ablate.training.train").warning("said once, by rank zero")
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(rank_zero.rank_zero_only, "rank", 0, raising=False)
    logging.getLogger("ablate.training.train").warning("said once, by rank zero")
    assert capsys.readouterr().err == "warning: said once, by rank zero\n"


def test_the_cli_sends_status_to_stderr_and_quiet_silences_it(ablate_logger, tmp_path):
    run = tmp_path / "sweep" / "a-seed=1"
    (run / "wandb" / "offline-run-1").mkdir(parents=True)
    (run / "wandb" / "offline-run-1" / "run-a.wandb").write_bytes(b":W&B")
    (run / "wandb" / "offline-run-1" / "run-a.wandb.synced").touch()
    (run / "summary.json").write_text(json.dumps({"status": "finished"}))
    result = CliRunner().invoke(cli.app, ["sync", str(tmp_path / "sweep")])
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and result.stderr == "already synced: 1 run(s)\n"
    quiet = CliRunner().invoke(cli.app, ["-q", "sync", str(tmp_path / "sweep")])
    assert quiet.exit_code == 0 and quiet.output == ""


def test_a_console_log_that_links_out_of_a_received_run_folder_is_replaced_not_appended_to(ablate_logger, tmp_path):
    thesis = tmp_path / "thesis.tex"
    thesis.write_text("my thesis\n")
    console = tmp_path / "run" / "console.log"
    console.parent.mkdir()
    console.symlink_to(thesis)
    with commands.capture(console):
        logging.getLogger("ablate.training.train").warning("run dir: run (resume)")
    assert thesis.read_text() == "my thesis\n"
    assert not console.is_symlink() and "run dir: run (resume)" in console.read_text()


def test_progress_is_silent_for_a_short_loop_and_counts_a_long_one(caplog):
    """Nothing in the first ``after_s`` seconds; then the count at most every ``every_s``, and the last."""
    now = [0.0]
    logger = logging.getLogger("ablate.test_progress")
    with caplog.at_level(logging.INFO, logger="ablate.test_progress"):
        short = commands.Progress("short", 3, logger, clock=lambda: now[0])
        for _ in range(3):
            short.step()
        assert caplog.messages == []
        long = commands.Progress("read", 10, logger, after_s=3.0, every_s=5.0, clock=lambda: now[0])
        for _ in range(10):
            now[0] += 1.0
            long.step()
    assert caplog.messages == ["read: 3/10 (3 s)", "read: 8/10 (8 s)", "read: 10/10 (10 s)"]


PACKAGE = Path(ablate.__file__).parent
HOME = PACKAGE / "utils" / "commands.py"


def test_every_filter_says_why_and_silences_only_its_warning():
    assert commands.WARNING_FILTERS and all(len(cause) > 40 for cause in commands.WARNING_FILTERS.values())
    with warnings.catch_warnings(record=True) as seen:
        warnings.resetwarnings()
        warnings.simplefilter("always")
        commands.ignore_warnings()
        warnings.warn(
            "The 'train_dataloader' does not have many workers which may be a bottleneck.", UserWarning, stacklevel=1
        )
        warnings.warn("Checkpoint directory /r/checkpoints exists and is not empty.", UserWarning, stacklevel=1)
        warnings.warn("train.max_tokens is smaller than the longest sentence", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["train.max_tokens is smaller than the longest sentence"]


def test_the_sweeps_engine_block_silences_only_inside_it():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with commands.sweeps_engine():
            warnings.warn("Valid config keys have changed in V2", UserWarning, stacklevel=1)
        warnings.warn("after", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["after"]


def test_no_other_module_filters_warnings():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == HOME:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("filterwarnings", "simplefilter", "catch_warnings"):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.attr}")
    assert offenders == [], "filter warnings in ablate/utils/commands.py, with the cause"


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


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bogus"], "No such option: --bogus (Possible options: --verbose) (see cli.py --help)"),
        (["nosuch"], "No such command 'nosuch'. (see root --help)"),  # typer's CliRunner calls the program root
        (["table"], "Missing argument 'SOURCE'. (see root table --help)"),
        (
            ["table", "results/table3-cpu", "--format", "xml"],
            "Invalid value for '--format' / '-f': 'xml' is not one of 'rich', 'md', 'latex', 'csv'. "
            "(see root table --help)",
        ),
        (["sweep", "run", "sweeps/quickstart.yaml", "--grace", "x"], "'x' is not a valid float. (see root sweep run"),
        (  # W&B's ${args} (a sweep command's --key=value): every run of a plain `wandb agent` failed with no hint
            ["train", "--train.max_steps=2"],
            "No such option: --train.max_steps: config keys take no dashes (train.max_steps=VALUE); a W&B sweep's "
            "command passes them so with ${args_no_hyphens}, not ${args} (see root train --help)",
        ),
    ],
)
def test_a_usage_error_is_one_line_naming_the_help_to_read(args, message):
    """click frames a usage error in a box of five lines or more; ablate's bad input is one line, exit 2."""
    result = run_cli(*args, cwd=ROOT) if args == ["--bogus"] else invoke_cli(*args, cwd=ROOT)
    assert_one_error_line(result, message)
    assert result.stdout == ""


def test_a_group_run_bare_still_shows_its_help():
    result = invoke_cli("sweep", cwd=ROOT)
    assert "Usage: root sweep" in result.stdout and "status" in result.stdout and result.stderr == ""
