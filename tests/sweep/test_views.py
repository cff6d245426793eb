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


def test_a_configuration_checked_once_for_its_seeds_fails_each_trial_as_checking_every_point_would(tmp_path):
    """The planner checks a configuration once for all its seeds and each seed on its own; every trial's
    verdict and error text equal ``load_config`` on that trial's whole override list."""
    from ablate.config import ConfigError, load_config

    base = tmp_path / "base.yaml"
    base.write_text("seed: -1\n")  # out of range, but every point sets its own seed
    spec = small_spec({"seed": {"values": [1, -1, 2**32, 2]}, "model.heads": {"values": [2, 3]}})
    planner = Planner(spec, options(tmp_path / "out", None, config=base))
    trials = planner.preview()

    def expected(trial):
        try:
            load_config(base, planner.overrides(trial))
        except ConfigError as err:
            return f"invalid config: {err}"
        return None

    assert [t.error for t in trials] == [expected(t) for t in trials]
    errors = [t.error or "" for t in trials]
    assert sum("does not divide" in e for e in errors) == 4  # heads=3, whatever its seed
    assert sum("must be in [0, 2**32 - 1]" in e for e in errors) == 2  # heads=2 with seed -1 or 2**32
    assert planner._check.cache_info().currsize == 2 + 4  # two configurations, four seeds: not eight points
