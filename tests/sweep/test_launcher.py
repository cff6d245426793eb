"""The local launcher with a fake trainer: isolation, validation, parallel slots, resuming."""

from __future__ import annotations

import json
import re

import pytest

from ablate.sweep.spec import SweepError, spec_from_dict
from ablate.sweep.state import load_state

from tests.helpers.sweep import fake_command, options, quiet_progress, run_sweep, small_spec

HEADS_X_SEEDS = {"model.heads": {"values": [2, 4]}, "seed": {"values": [1, 2]}}


def run(spec, out, command, **kwargs):
    progress, buffer = quiet_progress()
    result = run_sweep(spec, options(out, command, **kwargs), progress)
    return result, buffer.getvalue()


def test_grid_runs_every_trial_with_its_overrides_and_records_metrics(tmp_path, events):
    spec = small_spec(HEADS_X_SEEDS, name="heads")
    result, text = run(spec, tmp_path / "out", fake_command(events))
    state = result.state
    names = [t.name for t in state.trials]
    assert names == ["heads=2-seed=1", "heads=2-seed=2", "heads=4-seed=1", "heads=4-seed=2"]  # W&B grid order
    assert all(t.status == "finished" for t in state.trials)
    assert {t.name: t.metric for t in state.trials} == {
        "heads=2-seed=1": 21.0,
        "heads=4-seed=1": 41.0,
        "heads=2-seed=2": 22.0,
        "heads=4-seed=2": 42.0,
    }
    seen = json.loads((tmp_path / "out" / "heads=4-seed=2" / "summary.json").read_text())["config"]
    assert seen["model.heads"] == "4" and seen["seed"] == "2" and seen["model.d_model"] == "32"
    assert seen["tracking.group"] == state.group and seen["tracking.name"] == "heads=4-seed=2"
    assert re.fullmatch(r"heads-[0-9a-f]{6}", state.group)  # the W&B group: the sweep's name + this folder's id
    assert json.loads(seen["tracking.tags"]) == ["heads=4", "seed=2"]
    assert load_state(tmp_path / "out").trials[3].results["test/bleu"] == 41.0
    assert "finished heads=4-seed=2" in text


def test_impossible_variant_is_failed_with_its_reason_and_never_launched(tmp_path, events):
    variants = {
        "variant": {"values": ["base", {"name": "three-heads", "model.heads": 3}]},
        "model.heads": {"value": 4},
        "seed": {"values": [1, 2]},
    }
    result, _ = run(small_spec(variants), tmp_path / "out", fake_command(events))
    by_name = {t.name: t for t in result.state.trials}
    assert by_name["base-seed=1"].status == by_name["base-seed=2"].status == "finished"
    bad = by_name["three-heads-seed=1"]
    assert bad.status == "failed" and "model.heads=3 does not divide model.d_model=32" in bad.error
    assert bad.attempts == 0 and not (tmp_path / "out" / bad.name).exists()
    assert events.count("start") == 2


@pytest.mark.parametrize(
    "mode, reason",
    [
        ("crash", "RuntimeError: CUDA out of memory"),
        ("nan", "loss is NaN at step 2"),
        ("oom-kill", "killed by SIGKILL"),
    ],
)
def test_a_crashing_trial_is_isolated_and_recorded_with_its_reason(tmp_path, events, mode, reason):
    spec = small_spec({"seed": {"values": [1, 2, 3]}})
    result, text = run(spec, tmp_path / "out", fake_command(events, {"seed=2": mode}), parallel=2, retries=0)
    status = {t.name: (t.status, t.error) for t in result.state.trials}
    assert status["seed=1"] == ("finished", None) and status["seed=3"] == ("finished", None)
    assert status["seed=2"][0] == "failed" and reason in status["seed=2"][1]
    assert "failed   seed=2" in text


def test_a_trial_killed_from_outside_is_relaunched_and_resumes(tmp_path, events):
    """SIGKILL (preemption, the OOM killer) is not the trial's fault: it runs again from its checkpoint."""
    spec = small_spec({"seed": {"values": [1, 2]}})
    result, text = run(spec, tmp_path / "out", fake_command(events, {"seed=2": "oom-kill"}), parallel=2)
    by_name = {t.name: t for t in result.state.trials}
    assert by_name["seed=2"].status == "finished" and by_name["seed=2"].attempts == 2
    assert "retrying seed=2 (killed by SIGKILL" in text
    assert events.count("start") == 3 and events.count("finish") == 2


def test_errors_inside_a_trial_are_not_retried(tmp_path, events):
    spec = small_spec({"seed": {"values": [1, 2]}})
    result, _ = run(spec, tmp_path / "out", fake_command(events, {"seed=1": "nan"}), retries=5)
    trial = result.state.trials[0]
    assert trial.name == "seed=1" and trial.status == "failed" and trial.attempts == 1


def test_parallel_slots_overlap_in_time_and_split_the_threads(tmp_path, events):
    from ablate.sweep.local import plan_slots

    spec = small_spec({"seed": {"values": [1, 2, 3, 4]}})
    opts = options(tmp_path / "out", fake_command(events, steps=6, step_s=0.1))
    opts.slots = plan_slots("cpu", parallel=2, cores=4)
    progress, _ = quiet_progress()
    run_sweep(spec, opts, progress)
    rows = events.rows()
    start = {r[1]: r[2] for r in rows if r[0] == "start"}
    end = {r[1]: r[2] for r in rows if r[0] == "finish"}
    assert len(start) == len(end) == 4
    spans = sorted((start[n], end[n]) for n in start)
    overlaps = sum(a_end > b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    assert overlaps >= 2, spans  # two slots: consecutive trials run side by side
    most_at_once = max(sum(s <= t < e for s, e in spans) for t, _ in spans)
    assert most_at_once == 2
    assert {r[4] for r in rows} == {"[]"} and {r[5] for r in rows} == {"2"}  # GPUs hidden, 4 cores / 2


def test_rerunning_a_done_sweep_trains_nothing_and_says_so(tmp_path, events):
    spec = small_spec({"seed": {"values": [1, 2]}})
    run(spec, tmp_path / "out", fake_command(events))
    result, text = run(spec, tmp_path / "out", fake_command(events))
    assert result.launched == 0 and events.count("start") == 2
    assert "nothing to train: all 2 trials of t are done" in text


def test_a_rerun_under_another_metric_reads_it_from_the_finished_trials(tmp_path, events):
    # the file's metric changed from val/bleu to val/ppl: the rerun reported "best val/ppl = 21" (a BLEU, minimised)
    run(small_spec({"seed": {"values": [1, 2]}}), tmp_path / "out", fake_command(events))
    spec = small_spec({"seed": {"values": [1, 2]}}, metric={"name": "val/ppl", "goal": "minimize"})
    result, text = run(spec, tmp_path / "out", fake_command(events))
    assert [t.metric for t in result.state.trials] == [3.0, 3.0] and events.count("start") == 2
    assert [t.metric for t in load_state(tmp_path / "out").trials] == [3.0, 3.0]


def test_retry_failed_runs_only_the_failures_again(tmp_path, events):
    spec = small_spec({"seed": {"values": [1, 2]}})
    first, _ = run(spec, tmp_path / "out", fake_command(events, {"seed=2": "crash"}))
    assert [t.status for t in first.state.trials] == ["finished", "failed"]
    again, text = run(spec, tmp_path / "out", fake_command(events))
    assert "1 failed: --retry-failed" in text and again.launched == 0
    retried, text = run(spec, tmp_path / "out", fake_command(events), retry_failed=True)
    assert [t.status for t in retried.state.trials] == ["finished", "finished"]
    assert "1 finished trials skipped" in text
    assert events.count("start", "seed=1") == 1 and retried.state.trials[1].attempts == 2


def test_a_second_launcher_on_the_same_folder_is_refused(tmp_path, events):
    from ablate.sweep.state import SweepLock

    with SweepLock(tmp_path / "out"):
        with pytest.raises(SweepError, match="another launcher"):
            run(small_spec({"seed": {"values": [1]}}), tmp_path / "out", fake_command(events))


def test_a_folder_started_with_other_parameters_is_refused(tmp_path, events):
    run(small_spec({"seed": {"values": [1]}}), tmp_path / "out", fake_command(events))
    with pytest.raises(SweepError, match="other parameters or overrides"):
        run(small_spec({"seed": {"values": [1, 2]}}), tmp_path / "out", fake_command(events))


def test_random_search_stops_at_run_cap_and_bayes_learns_from_results(tmp_path, events):
    spec = small_spec(
        {"model.heads": {"values": [1, 2, 4, 8]}, "train.lr": {"min": 0.0001, "max": 0.01}}, method="random", run_cap=3
    )
    result, _ = run(spec, tmp_path / "random", fake_command(events))
    assert len(result.state.trials) == 3 and all(t.status == "finished" for t in result.state.trials)
    bayes = small_spec({"model.heads": {"values": [1, 2, 4, 8]}}, method="bayes", run_cap=4)
    result, _ = run(bayes, tmp_path / "bayes", fake_command(events), parallel=2)
    assert len(result.state.trials) == 4 and all(t.metric is not None for t in result.state.trials)
    with pytest.raises(SweepError, match="needs run_cap"):
        run(
            small_spec({"train.lr": {"min": 0.0001, "max": 0.01}}, method="random"),
            tmp_path / "x",
            fake_command(events),
        )


def test_interrupting_the_launcher_stops_trials_and_a_rerun_resumes_them(tmp_path, events, monkeypatch):
    from ablate.sweep import launcher

    spec = small_spec({"seed": {"values": [1, 2]}})
    real_tick = launcher.Launcher._tick

    def tick_then_ctrl_c(self):  # Ctrl-C once the first trial has saved a checkpoint
        real_tick(self)
        if (self.out / "seed=1" / "checkpoints" / "last.ckpt").exists():
            raise KeyboardInterrupt

    monkeypatch.setattr(launcher.Launcher, "_tick", tick_then_ctrl_c)
    first, _ = run(spec, tmp_path / "out", fake_command(events, steps=8, step_s=0.1))
    monkeypatch.undo()
    assert first.interrupted and first.state.trials[0].status == "interrupted"
    assert events.count("interrupted", "seed=1") == 1  # the trainer got SIGTERM and saved
    second, _ = run(spec, tmp_path / "out", fake_command(events, steps=8, step_s=0.1))
    assert [t.status for t in second.state.trials] == ["finished", "finished"]
    resumed = [r for r in events.rows() if r[0] == "start" and r[1] == "seed=1"]
    assert len(resumed) == 2 and resumed[1][3] > 0  # the second start resumed from its checkpoint


def test_hyperband_stops_a_trial_that_lags_behind(tmp_path, events):
    spec = small_spec({"seed": {"values": [1, 2, 3]}}, early_terminate={"type": "hyperband", "min_iter": 2, "eta": 2})
    command = fake_command(events, {"seed=3": "bad"}, steps=8, step_s=0.15)
    result, text = run(spec, tmp_path / "out", command)
    status = {t.name: t.status for t in result.state.trials}
    assert status == {"seed=1": "finished", "seed=2": "finished", "seed=3": "stopped"}, text
    assert events.count("finish", "seed=3") == 0 and "early (hyperband)" in text


def test_a_base_config_file_reaches_validation_and_the_trainer(tmp_path, events):
    import sys

    from ablate.sweep.planner import trainer_command

    base = tmp_path / "base.yaml"
    base.write_text("model:\n  d_model: 30\n")
    spec = spec_from_dict(
        {
            "method": "grid",
            "metric": {"name": "val/bleu", "goal": "maximize"},
            "parameters": {"model.heads": {"values": [2, 4]}},
        },
        name="b",
    )
    result, _ = run(spec, tmp_path / "out", fake_command(events), config=base)
    status = {t.name: (t.status, t.error) for t in result.state.trials}
    assert status["heads=2"] == ("finished", None)
    assert status["heads=4"][0] == "failed" and "does not divide model.d_model=30" in status["heads=4"][1]
    argv = trainer_command(base)(tmp_path / "r", ["seed=1"])
    assert argv == [
        sys.executable,
        "-m",
        "ablate",
        "train",
        "--run-dir",
        str(tmp_path / "r"),
        "--config",
        str(base),
        "seed=1",
    ]


def test_each_sweep_folder_is_its_own_wandb_group_and_keeps_it_on_rerun(tmp_path, events):
    spec = small_spec({"seed": {"values": [1, 2]}}, name="heads")
    one, _ = run(spec, tmp_path / "one", fake_command(events))
    two, _ = run(spec, tmp_path / "two", fake_command(events))
    assert one.state.group != two.state.group and load_state(tmp_path / "one").group == one.state.group
    seen = json.loads((tmp_path / "two" / "seed=1" / "summary.json").read_text())["config"]
    assert seen["tracking.group"] == two.state.group
    again, _ = run(spec, tmp_path / "one", fake_command(events), retry_failed=True)
    assert again.state.group == one.state.group


def test_a_trial_left_running_as_a_slurm_job_is_not_started_again_here(tmp_path, events):
    # rerun without --launcher slurm (local is the default) after Ctrl-C stopped watching a SLURM sweep: the local
    # launcher started the trials the jobs were still training, in the same run folders
    from ablate.sweep.state import save_state

    spec, out = small_spec({"seed": {"values": [1, 2]}}), tmp_path / "out"
    run(spec, out, fake_command(events))
    state = load_state(out)
    state.trials[0].status, state.trials[0].job_id, state.trials[1].status = "running", "12", "pending"
    save_state(out, state)
    with pytest.raises(
        SweepError, match=r"^trial seed=1 was left running as SLURM job 12: rerun with --launcher slurm"
    ):
        run(spec, out, fake_command(events))
    assert events.count("start") == 2 and load_state(out).trials[0].status == "running"


def test_a_rerun_names_the_stopped_trials_it_skips_as_stopped(tmp_path, events):
    # a rerun of a hyperband sweep said "2 finished trials skipped" of one finished and one stopped trial
    spec = small_spec({"seed": {"values": [1, 2, 3]}}, early_terminate={"type": "hyperband", "min_iter": 2, "eta": 2})
    first, text = run(spec, tmp_path / "out", fake_command(events, {"seed=3": "bad"}, steps=8, step_s=0.15))
    assert [t.status for t in first.state.trials] == ["finished", "finished", "stopped"], text
    import shutil

    from ablate.sweep.state import save_state

    state = load_state(tmp_path / "out")
    state.trials[1].status = "pending"  # as if it had not run yet
    shutil.rmtree(tmp_path / "out" / state.trials[1].name)
    save_state(tmp_path / "out", state)
    _, text = run(spec, tmp_path / "out", fake_command(events, steps=8, step_s=0.01))
    assert "1 finished, 1 stopped trials skipped" in text, text
