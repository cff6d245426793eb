"""What a dry run prints: the listing on stdout, one plain line per trial; progress only on stderr."""

from __future__ import annotations

import io

from rich.console import Console

from ablate.sweep import commands
from ablate.sweep.planner import Planner

from tests.helpers.sweep import options, small_spec


def test_a_long_plan_shows_progress_on_stderr_and_stdout_keeps_only_the_listing(tmp_path):
    spec = small_spec({"seed": {"values": list(range(1, 301))}, "model.heads": {"values": [2, 4]}})
    stdout = Console(file=io.StringIO(), width=100)  # not a terminal: plain lines
    stderr = Console(file=io.StringIO(), force_terminal=True, width=100)
    progress = commands.PlanProgress(stderr)
    progress.after_s = 0.0  # as if planning had already run for seconds
    invalid = commands.preview(stdout, Planner(spec, options(tmp_path / "out", None)), progress)
    lines = stdout.file.getvalue().splitlines()
    assert invalid == 0 and len(lines) == 601 and lines[-1] == "600 trials"
    assert lines[0].startswith("heads=2-seed=1  tracking.group=") and all("━" not in line for line in lines)
    shown = stderr.file.getvalue()
    assert "checking trials" in shown and "listing trials" in shown


def test_a_short_plan_shows_no_progress(tmp_path):
    stderr = Console(file=io.StringIO(), force_terminal=True)
    stdout = Console(file=io.StringIO(), width=100)
    commands.preview(
        stdout,
        Planner(small_spec({"seed": {"values": [1, 2]}}), options(tmp_path, None)),
        commands.PlanProgress(stderr),
    )
    assert stderr.file.getvalue() == "" and stdout.file.getvalue().splitlines()[-1] == "2 trials"
