"""Seed-repeat search: ``seed: {repeat: N}`` trains every proposed configuration with seeds 1..N, and
W&B's search engine sees one run per configuration whose metric is the mean over its seeds."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ablate.cli import app as main_app
from ablate.record import RunStatus
from ablate.sweep import commands
from ablate.sweep.planner import check_trial_count, search_runs
from ablate.sweep.spec import SweepError, spec_from_dict
from ablate.sweep.state import Trial, configuration_key
from ablate.sweep.wandb_server import wandb_sweep_config

from tests.helpers.sweep import fake_command, options, quiet_progress, run_sweep, small_spec
from tests.helpers.tiny import tiny_sweep_yaml

HEADS = {"model.heads": {"values": [1, 2, 4, 8]}}
SPLIT = "test_2016_flickr"


def _config(method: str, seed: dict) -> dict:
    return {
        "method": method,
        "metric": {"name": "val/bleu", "goal": "maximize"},
        "run_cap": 2,
        "parameters": {"seed": seed, "train.lr": {"min": 0.0001, "max": 0.01}},
    }


def test_a_repeat_seed_is_one_documented_spelling_and_a_searched_seed_is_refused():
    spec = spec_from_dict(_config("bayes", {"repeat": 3}))
    assert spec.repeat_seeds == [1, 2, 3]
    assert "seed" not in spec.search_config["parameters"] and "seed" in spec.parameters  # the engine never sees it
    assert spec.varying == ["train.lr", "seed"]  # trials are named <configuration>-seed=<k>
    for method in ("bayes", "random"):  # the ambiguous spelling: searched like a hyperparameter
        with pytest.raises(
            SweepError, match=r"parameters\.seed: method '\w+' would search the seed.*seed: \{repeat: N\}"
        ):
            spec_from_dict(_config(method, {"values": [1, 2, 3]}))
    assert spec_from_dict(_config("bayes", {"value": 1})).repeat_seeds is None
    grid = {**_config("grid", {"values": [1, 2]}), "parameters": {"seed": {"values": [1, 2]}}}
    assert spec_from_dict(grid).repeat_seeds is None  # a grid's seed values stay a grid axis
    for bad in ({"repeat": 0}, {"repeat": "3"}, {"repeat": 2, "values": [1, 2]}):
        with pytest.raises(SweepError, match=r"parameters\.seed: write seed: \{repeat: N\}"):
            spec_from_dict(_config("bayes", bad))
    other = _config("bayes", {"repeat": 2})
    other["parameters"]["model.heads"] = {"repeat": 2}
    with pytest.raises(SweepError, match=r"parameters\.model\.heads: only the seed repeats"):
        spec_from_dict(other)


def test_the_engine_is_given_one_run_per_configuration_with_the_mean_of_its_finished_seeds():
    spec = spec_from_dict(_config("bayes", {"repeat": 2}))
    a, b = {"train.lr": 0.001}, {"train.lr": 0.005}
    trials = [
        Trial("lr=0.001-seed=1", {**a, "seed": 1}, RunStatus.FINISHED, metric=10.0, history=[4.0, 10.0]),
        Trial("lr=0.001-seed=2", {**a, "seed": 2}, RunStatus.FINISHED, metric=20.0, history=[6.0, 20.0]),
        Trial("lr=0.005-seed=1", {**b, "seed": 1}, RunStatus.FINISHED, metric=30.0),
        Trial("lr=0.005-seed=2", {**b, "seed": 2}, RunStatus.RUNNING, history=[1.0]),
    ]
    runs = search_runs(spec, trials)
    assert len(runs) == 2
    first, second = runs
    assert first.config == {"train.lr": {"value": 0.001}}  # no seed: the engine searches configurations
    assert first.state == "finished" and first.summary_metrics == {"val/bleu": 15.0}
    assert [h["val/bleu"] for h in first.history] == [5.0, 15.0]
    assert first.name == configuration_key(trials[0].point) == configuration_key(trials[1].point)
    assert second.state == "running"  # until every seed is done
    assert second.summary_metrics == {"val/bleu": 30.0}
    trials[3].status = RunStatus.FAILED
    assert search_runs(spec, trials)[1].state == "finished"  # the mean is over the seeds that finished
    alone = spec_from_dict(_config("bayes", {"value": 1}))
    assert len(search_runs(alone, trials)) == 4  # without a repeat seed: one run per trial, as before


def _bayes_dry_run(tmp_path, monkeypatch, run_cap: int, seeds: str = "") -> str:
    """``ablate sweep run --dry-run`` of a bayes sweep over train.lr (``seeds``: a ``seed`` parameter); its output."""
    monkeypatch.setattr(commands, "console", Console(width=250))
    path = tmp_path / "b.yaml"
    path.write_text(
        f"name: b\nmethod: bayes\nrun_cap: {run_cap}\nmetric: {{name: val/bleu, goal: maximize}}\nparameters:\n"
        f"{seeds}  train.lr: {{min: 0.0001, max: 0.01}}\n" + tiny_sweep_yaml()
    )
    result = CliRunner().invoke(commands.app, ["run", str(path), "--dry-run", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    return result.output


def test_dry_run_of_a_bayes_sweep_with_a_repeat_seed_lists_one_configuration_times_its_seeds(tmp_path, monkeypatch):
    output = _bayes_dry_run(tmp_path, monkeypatch, 4, "  seed: {repeat: 3}\n")
    assert "b: 12 trials" in output  # run_cap counts configurations: 4 x 3 seeds
    assert "each trained with seeds 1, 2, 3 and searched on their mean" in output
    names = re.findall(r"^(lr=\S+-seed=\d)\s", output, flags=re.M)
    assert [n.rsplit("-", 1)[1] for n in names] == ["seed=1", "seed=2", "seed=3"]
    assert len({n.rsplit("-", 1)[0] for n in names}) == 1  # one configuration, replicated
    assert "\n3 trials listed (the first proposal)" in output and not (tmp_path / "out").exists()


def test_a_dry_run_of_a_bayes_sweep_says_it_lists_the_first_proposal_in_the_singular(tmp_path, monkeypatch):
    """A bayes dry run printed 'bay: 3 trials', then its first proposal, then '1 trials'."""
    output = _bayes_dry_run(tmp_path, monkeypatch, 3)
    assert output.splitlines()[0] == "b: 3 trials"
    assert "\n1 trial listed (the first proposal)\n" in output and "1 trials" not in output


def test_a_bayes_sweep_with_a_repeat_seed_runs_every_seed_and_its_table_tests_the_rows(tmp_path, events, monkeypatch):
    # three heads values and three runs: every value is proposed, ablate's default (4) among them, so the
    # table's base is the same whichever order the engine draws them in
    spec = small_spec(
        {"seed": {"repeat": 2}, "model.heads": {"values": [1, 2, 4]}}, method="bayes", run_cap=3, name="rep"
    )
    out = tmp_path / "out"
    progress, buffer = quiet_progress()
    result = run_sweep(spec, options(out, fake_command(events, texts=SPLIT), parallel=2), progress)
    trials = result.state.trials
    assert all(t.status == RunStatus.FINISHED for t in trials), buffer.getvalue()
    by_config: dict[str, list[Trial]] = {}
    for t in trials:
        by_config.setdefault(configuration_key(t.point), []).append(t)
    assert len(by_config) == 3 and len(trials) == 6  # 3 configurations, never proposed twice, x 2 seeds
    for seeds in by_config.values():
        assert sorted(t.point["seed"] for t in seeds) == [1, 2]
        assert {t.name.rsplit("-seed=", 1)[0] for t in seeds} == {f"heads={seeds[0].point['model.heads']}"}
    assert events.count("start") == 6
    runs = search_runs(spec, trials)
    assert sorted(r.summary_metrics["val/bleu"] for r in runs) == sorted(
        sum(t.metric for t in seeds) / 2 for seeds in by_config.values()
    )
    table = CliRunner().invoke(main_app, ["table", str(out), "--format", "md"])
    assert table.exit_code == 0, table.output
    rows = [line for line in table.output.splitlines() if line.startswith("| ") and " ± " in line]
    assert len(rows) == 3 and all(line.rstrip(" |").endswith("| 2") for line in rows)  # n = 2 seeds per row
    assert sum("†" in line for line in rows) >= 1 and "seed-aware t-test" in table.output
    state = json.loads((out / "sweep.json").read_text())
    assert len(state["trials"]) == 6
    console = Console(file=io.StringIO(), width=250)
    commands.report(console, result.state, "val/bleu", "maximize", out, repeat=True)
    best = max(by_config.values(), key=lambda seeds: sum(t.metric for t in seeds))
    mean = sum(t.metric for t in best) / 2
    assert (
        f"best val/bleu = {mean:.2f}, the mean of 2 seeds ({best[0].name}, {best[1].name})" in console.file.getvalue()
    )


def test_random_and_grid_search_with_a_repeat_seed_plan_each_configuration_once_per_seed(tmp_path):
    random_search = small_spec({"seed": {"repeat": 2}, "model.heads": {"values": [2, 4]}}, method="random", run_cap=3)
    names = sorted(t.name for t in _plan(random_search, tmp_path))  # 2 configurations exist: never one twice
    assert names == ["heads=2-seed=1", "heads=2-seed=2", "heads=4-seed=1", "heads=4-seed=2"]
    assert check_trial_count(random_search, 3, 100) == 4  # what runs, not run_cap 3 x 2 seeds = 6
    grid = small_spec({"model.heads": {"values": [2, 4]}, "seed": {"repeat": 3}}, method="grid")
    names = [t.name for t in _plan(grid, tmp_path)]
    assert names == [f"heads={h}-seed={s}" for h in (2, 4) for s in (1, 2, 3)]
    assert check_trial_count(grid, None, 100) == 6  # the count printed before planning: 2 configurations x 3 seeds


def test_hyperband_stops_every_seed_of_a_lagging_configuration(tmp_path, events):
    spec = small_spec(
        {"seed": {"repeat": 2}, "model.heads": {"values": [1, 2, 4]}},
        method="random",
        run_cap=3,
        early_terminate={"type": "hyperband", "min_iter": 2, "eta": 2},
    )
    names = [t.name for t in _plan(spec, tmp_path)]  # random search, seeded: the same plan every time
    assert [n.rsplit("-seed=", 1)[0] for n in names[::2]] == ["heads=2", "heads=4", "heads=1"]
    lagging = names[4:]  # the last configuration lags behind the two before it at every validation
    command = fake_command(events, {n: "bad" for n in lagging}, steps=8, step_s=0.15)
    progress, buffer = quiet_progress()
    result = run_sweep(spec, options(tmp_path / "out", command, parallel=2), progress)
    status = {t.name: t.status for t in result.state.trials}
    assert {status[n] for n in names[:4]} == {RunStatus.FINISHED}, buffer.getvalue()
    assert {status[n] for n in lagging} == {RunStatus.STOPPED}, buffer.getvalue()
    assert not any(events.count("finish", n) for n in lagging)


def test_a_random_sweep_with_a_repeat_seed_rerun_with_a_larger_max_trials_adds_configurations(tmp_path):
    # a rerun planned nothing: --max-trials 4 after 2 said "rnd: 8 trials", then "nothing to train: all 4 trials
    # of rnd are done"; it now adds the configurations a fresh plan of 4 draws after the 2 it has
    from ablate.sweep.planner import Planner

    spec = small_spec({"seed": {"repeat": 2}, "train.lr": {"min": 0.0001, "max": 0.01}}, method="random")

    def plan(cap: int) -> list[str]:
        planner = Planner(spec, options(tmp_path / "out", None, max_trials=cap))
        planner.open()
        planner.prepare()
        return [t.name for t in planner.state.trials]

    first = plan(2)
    assert len(first) == 4 and plan(2) == first  # the same cap: nothing new
    fresh = [t.name for t in Planner(spec, options(tmp_path / "fresh", None, max_trials=4)).preview()]
    assert plan(4) == fresh and fresh[:4] == first and len(fresh) == 8


def _plan(spec, tmp_path):
    from ablate.sweep.planner import Planner

    return Planner(spec, options(tmp_path / "plan", None)).preview()


def test_w_and_b_agents_refuse_a_repeat_seed_and_a_local_sweeps_dashboard_lists_its_seeds():
    spec = spec_from_dict(_config("bayes", {"repeat": 3}))
    with pytest.raises(SweepError, match=r"seed: \{repeat: 3\} is run by `ablate sweep run` only"):
        wandb_sweep_config(spec)
    assert wandb_sweep_config(spec, agents=False)["parameters"]["seed"] == {"values": [1, 2, 3]}
