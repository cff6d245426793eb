"""A sweep is what its trials run; a huge grid is counted, not planned."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.sweep.planner import check_trial_count, planned_trials
from ablate.sweep.spec import SweepError

from tests.helpers.cli import assert_one_error_line, invoke_cli
from tests.helpers.sweep import fake_command, options, quiet_progress, run_sweep, small_spec

ROOT = Path(__file__).resolve().parents[2]


def test_editing_the_base_config_between_runs_is_refused(tmp_path, events):
    """Item 5: the same --config path with other contents is another sweep, refused like a run folder."""
    base = tmp_path / "base.yaml"
    base.write_text("model:\n  heads: 2\n")
    spec = small_spec({"seed": {"values": [1, 2]}})
    progress, _ = quiet_progress()
    first = run_sweep(spec, options(tmp_path / "out", fake_command(events), config=base), progress)
    assert [t.status for t in first.state.trials] == ["finished", "finished"]

    base.write_text("model:\n  heads: 4\n")  # edited in place: same path, other trials
    with pytest.raises(SweepError, match="another base config"):
        run_sweep(spec, options(tmp_path / "out", fake_command(events), config=base), progress)
    base.write_text("# a comment changes nothing the trials run\nmodel: {heads: 2}\n")
    again = run_sweep(spec, options(tmp_path / "out", fake_command(events), config=base), progress)
    assert again.launched == 0


def grid(n_params: int, n_values: int) -> dict:
    return {f"k{i}": {"values": list(range(n_values))} for i in range(n_params)}


def test_a_huge_grid_is_counted_without_expanding_it():
    """Item 13: 10**12 points counted at once; beyond the limit, refused with the count and how to raise it."""
    spec = small_spec(
        {
            "seed": {"values": list(range(1000))},
            "train.warmup": {"min": 1, "max": 1000},
            "train.lr": {"values": [1e-3, 2e-3, 3e-3] * 10**3},  # W&B's grid proposes each value once
            "model.heads": {"values": [1, 2, 4, 8]},
            "model.d_model": {"value": 64},
        }
    )
    assert planned_trials(spec, None) == 1000 * 1000 * 3 * 4
    assert planned_trials(spec, 50) == 50
    with pytest.raises(
        SweepError,
        match=r"12,000,000 trials is over the limit of 10,000; narrow the grid, run part of it with --max-trials N, "
        r"or split it into sweep files of at most 100,000 trials each",
    ):
        check_trial_count(spec, None, 10_000)
    assert check_trial_count(spec, 500, 10_000) == 500  # the grid is enumerated lazily: a cap bounds the planning


def test_a_grid_too_big_to_plan_is_refused_whatever_the_trial_limit():
    """The advice for a 10**6 grid is not a --trial-limit that then plans for ever."""
    spec = small_spec({"seed": {"values": list(range(1000))}, "train.warmup": {"min": 1, "max": 1000}})
    for limit in (10_000, 10**6, 10**13):  # the refusal used to suggest --trial-limit 1000000, which hung
        with pytest.raises(SweepError, match=r"1,000,000 trials is .*split it into sweep files") as err:
            check_trial_count(spec, None, limit)
        assert "--trial-limit" not in str(err.value)
    small = small_spec({"seed": {"values": list(range(200))}, "train.warmup": {"min": 1, "max": 100}})
    with pytest.raises(SweepError, match=r"20,000 trials is over the limit of 10,000.*--trial-limit 20000"):
        check_trial_count(small, None, 10_000)  # within what can be planned, raising the limit is the advice
    assert check_trial_count(small, None, 20_000) == 20_000


@pytest.mark.slow
def test_the_trial_count_is_printed_before_planning(tmp_path):
    """Item 13: the first line of a 10,000-trial dry run is its count, before any trial is planned."""
    sweep = tmp_path / "big.yaml"
    sweep.write_text(
        "method: grid\nparameters:\n"
        + "".join(
            f"  {key}:\n    values: {list(range(1, 11))}\n"
            for key in ("seed", "train.warmup", "train.max_steps", "eval.beam")
        )
    )
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "cli.py"), "sweep", "run", str(sweep), "--dry-run"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "WANDB_MODE": "disabled", "COLUMNS": "200"},
    )
    try:
        first = proc.stdout.readline()
        assert first.strip() == "big: 10,000 trials"
    finally:
        proc.kill()
        proc.wait()
    refused = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "sweep", "run", str(sweep), "--dry-run", "--trial-limit", "9999"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "WANDB_MODE": "disabled"},
    )
    assert refused.returncode == 2 and "10,000 trials is over the limit of 9,999" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_max_trials_below_one_is_one_line(tmp_path):
    """``--max-trials -1`` planned "-1 trials" and ended "nothing to train: all 0 trials are done", exit 0."""
    (tmp_path / "t.yaml").write_text("name: t\nmethod: grid\nparameters:\n  seed: {values: [1, 2]}\n")
    for n in ("-1", "0"):
        proc = invoke_cli("sweep", "run", str(tmp_path / "t.yaml"), "--max-trials", n, "--dry-run", cwd=tmp_path)
        assert_one_error_line(proc, f"--max-trials {n} must be at least 1")


def test_a_rerun_may_change_what_leaves_the_trained_model_alone(tmp_path, events):
    """A run resumes after a change of only ``config.NOT_TRAINING`` keys; its sweep does too (it was refused as
    "another sweep" for ``trainer.enable_progress_bar=false`` or ``tracking.project=x`` added on the rerun)."""
    spec = small_spec({"seed": {"values": [1, 2]}})
    progress, _ = quiet_progress()
    first = run_sweep(spec, options(tmp_path / "out", fake_command(events), overrides=["train.lr=0.01"]), progress)
    assert [t.status for t in first.state.trials] == ["finished", "finished"]
    quieter = ["train.lr=0.01", "trainer.enable_progress_bar=false", "tracking.project=x", "train.num_workers=0"]
    again = run_sweep(spec, options(tmp_path / "out", fake_command(events), overrides=quieter), progress)
    assert again.launched == 0
    with pytest.raises(SweepError, match="other parameters or overrides"):  # what trains still counts
        run_sweep(spec, options(tmp_path / "out", fake_command(events), overrides=["train.lr=0.02"]), progress)


def test_a_folder_recorded_with_every_override_hashed_still_resumes(tmp_path, events):
    """A sweep.json written before NOT_TRAINING left the signature (its signature hashed every override)
    resumes, also with its display overrides changed, and then holds this version's signature and the rerun's
    overrides (it kept the first ones); a training override changed is still refused."""
    import hashlib
    import json

    from ablate.sweep.state import load_state, save_state

    spec = small_spec({"seed": {"values": [1, 2]}})
    progress, _ = quiet_progress()
    old = ["train.lr=0.01", "tracking.project=old", "trainer.enable_progress_bar=false"]
    run_sweep(spec, options(tmp_path / "out", fake_command(events), overrides=old), progress)
    state = load_state(tmp_path / "out")
    blob = {"method": spec.method, "parameters": spec.parameters, "overrides": old, "config": None}
    state.signature = hashlib.sha1(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:12]
    save_state(tmp_path / "out", state)  # as the previous version wrote it
    before = (tmp_path / "out" / "sweep.json").read_text()
    with pytest.raises(SweepError, match="other parameters or overrides"):
        run_sweep(spec, options(tmp_path / "out", fake_command(events), overrides=["train.lr=0.02"]), progress)
    assert (tmp_path / "out" / "sweep.json").read_text() == before  # refused: left as it was
    for overrides in (["tracking.project=new", "train.lr=0.01"], old, ["train.lr=0.01"]):
        again = run_sweep(spec, options(tmp_path / "out", fake_command(events), overrides=overrides), progress)
        assert again.launched == 0
        assert load_state(tmp_path / "out").overrides == overrides  # the folder now holds this run's
    assert load_state(tmp_path / "out").signature != state.signature  # upgraded on its first accepted rerun
    with pytest.raises(SweepError, match="other parameters or overrides"):
        run_sweep(spec, options(tmp_path / "out", fake_command(events), overrides=["train.lr=0.02"]), progress)


def test_sweep_json_records_the_overrides_of_the_latest_run(tmp_path, events):
    """A rerun with a new ``tracking.project`` kept the first run's overrides in ``sweep.json`` (``tracking.project=
    first``), so ``ablate export`` rebuilt a command that logs to the old project; a dry run writes nothing."""
    from ablate.sweep.planner import Planner
    from ablate.sweep.state import load_state

    spec = small_spec({"seed": {"values": [1, 2]}})
    progress, _ = quiet_progress()
    run_sweep(spec, options(tmp_path / "out", fake_command(events), overrides=["tracking.project=first"]), progress)
    assert load_state(tmp_path / "out").overrides == ["tracking.project=first"]
    second = ["tracking.project=second", "trainer.enable_progress_bar=false"]
    again = run_sweep(spec, options(tmp_path / "out", fake_command(events), overrides=second), progress)
    assert again.launched == 0 and load_state(tmp_path / "out").overrides == second
    Planner(spec, options(tmp_path / "out", fake_command(events), overrides=["tracking.project=third"])).preview()
    assert load_state(tmp_path / "out").overrides == second


@pytest.mark.parametrize(
    "overrides, parameters",
    [(["tracking.tags=5"], {}), (["tracking.group=[1, 2]"], {}), ([], {"tracking.tags": {"values": [7]}})],
)
def test_a_label_set_by_the_user_is_checked_before_any_trial_starts(tmp_path, events, overrides, parameters):
    """The check before any trial starts skipped ``tracking.name/tags/group`` (ablate writes them), also when the
    user set them: ``tracking.tags=5`` started every trial, each failing in its own process."""
    spec = small_spec({"seed": {"values": [1, 2]}, **parameters})
    progress, _ = quiet_progress()
    result = run_sweep(spec, options(tmp_path / "out", fake_command(events), overrides=overrides), progress)
    assert [t.status for t in result.state.trials] == ["failed", "failed"] and events.count("start") == 0
    assert all(t.error.startswith("invalid config: tracking.") for t in result.state.trials)


def test_an_old_folder_takes_a_display_edit_in_its_config_once_rerun(tmp_path, events):
    """An old folder (its signature hashed every key of ``--config``) refused a ``tracking.project`` edited inside
    that file on every rerun: its hash cannot tell that edit from a training one, so the first refusal stands, but
    a rerun with the file as it was upgrades the folder and the edit then passes (a training edit still fails)."""
    import hashlib
    import json

    from ablate.config import flatten, read_yaml
    from ablate.sweep.state import load_state, save_state

    base = tmp_path / "base.yaml"
    base.write_text("tracking: {project: old}\nmodel: {heads: 2}\n")
    spec = small_spec({"seed": {"values": [1, 2]}})
    progress, _ = quiet_progress()
    run_sweep(spec, options(tmp_path / "out", fake_command(events), config=base), progress)
    state = load_state(tmp_path / "out")
    blob = {"method": spec.method, "parameters": spec.parameters, "overrides": [], "config": flatten(read_yaml(base))}
    state.signature = hashlib.sha1(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:12]
    save_state(tmp_path / "out", state)  # as the previous version wrote it
    base.write_text("tracking: {project: new}\nmodel: {heads: 2}\n")
    with pytest.raises(SweepError, match="another base config"):
        run_sweep(spec, options(tmp_path / "out", fake_command(events), config=base), progress)
    base.write_text("tracking: {project: old}\nmodel: {heads: 2}\n")
    assert run_sweep(spec, options(tmp_path / "out", fake_command(events), config=base), progress).launched == 0
    base.write_text("tracking: {project: new}\nmodel: {heads: 2}\n")
    assert run_sweep(spec, options(tmp_path / "out", fake_command(events), config=base), progress).launched == 0
    base.write_text("tracking: {project: new}\nmodel: {heads: 4}\n")
    with pytest.raises(SweepError, match="another base config"):
        run_sweep(spec, options(tmp_path / "out", fake_command(events), config=base), progress)
