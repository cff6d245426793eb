"""``ablate sweep`` on the command line: run, status, errors (the trainer is the fake one)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ablate.sweep import commands, launcher
from ablate.sweep.commands import app

from tests.helpers.sweep import fake_command

SWEEP = """\
# a tiny sweep
method: grid
metric: {name: val/bleu, goal: maximize}
parameters:
  variant:
    values: [base, {name: wide, model.d_ff: 128}, {name: odd-heads, model.heads: 3}]
  seed: {values: [1, 2]}
  model.d_model: {value: 32}
  model.heads: {value: 2}
"""


@pytest.fixture()
def sweep_file(tmp_path, monkeypatch, events):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launcher, "trainer_command", lambda config=None: fake_command(events))
    monkeypatch.setattr(commands, "console", Console(width=250))  # wide tables: whole names
    path = tmp_path / "tiny.yaml"
    path.write_text(SWEEP)
    return path


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.mark.slow
def test_run_then_rerun_then_status(sweep_file, events, tmp_path):
    first = invoke("run", sweep_file, "--devices", "cpu", "--parallel", "2", "train.max_steps=3")
    assert first.exit_code == 1, first.output  # two trials failed: a script can tell
    assert "sweep tiny (grid) -> runs/tiny" in first.output
    assert "4 finished, 2 failed" in first.output and "best val/bleu = 22.00 (base-seed=2)" in first.output
    assert events.count("start") == 4 and (tmp_path / "runs" / "tiny" / "sweep.json").exists()

    again = invoke("run", sweep_file, "--devices", "cpu", "train.max_steps=3")
    assert again.exit_code == 1 and "nothing to train: all 6 trials of tiny are done (2 failed" in again.output
    assert events.count("start") == 4

    other = invoke("run", sweep_file, "--devices", "cpu")  # different overrides, same folder
    assert other.exit_code == 2 and "rerun that command, or pass another --out" in other.output

    status = invoke("status", "runs/tiny")
    assert status.exit_code == 0, status.output
    for text in (
        "wide-seed=1",
        "finished",
        "odd-heads-seed=2",
        "invalid config: model.heads=3 does not divide",
        "4 finished, 2 failed",
        "no launcher running",
    ):
        assert text in status.output
    assert invoke("status", sweep_file).output == status.output  # the file finds its default folder


def test_dry_run_lists_trials_without_training(sweep_file, events, tmp_path):
    result = invoke("run", sweep_file, "--dry-run", "--devices", "cpu")
    assert (
        result.exit_code == 1 and "2 of the 6 trials are invalid" in result.output and "model.d_ff=128" in result.output
    )
    assert "invalid config" in result.output
    assert events.count("start") == 0 and not (tmp_path / "runs").exists()
    valid = invoke("run", sweep_file, "--dry-run", "--devices", "cpu", "model.heads=4")  # 4 divides 32
    assert valid.exit_code == 0 and "invalid" not in valid.output, valid.output


def test_a_dry_run_states_its_trial_count_once(sweep_file, events, tmp_path):
    # it began with "tiny: 6 trials" (printed before planning) and ended with "6 trials", the same count again
    valid = invoke("run", sweep_file, "--dry-run", "--devices", "cpu", "model.heads=4")
    lines = valid.output.splitlines()
    assert valid.exit_code == 0 and "tiny: 6 trials" in lines, valid.output
    assert sum("6 trials" in line for line in lines) == 1, valid.output
    invalid = invoke("run", sweep_file, "--dry-run", "--devices", "cpu")  # the end says what the count did not
    assert invalid.exit_code == 1 and "\n2 of the 6 trials are invalid\n" in invalid.output, invalid.output


def test_a_data_folder_missing_from_where_the_sweep_runs_is_refused_before_any_trial(sweep_file, events, tmp_path):
    # the shipped sweeps name ../shared/data/multi30k, relative to where they run: from another folder the dry run
    # said every trial was valid, then each trial failed at once with "is not a folder"
    (tmp_path / "data").mkdir()
    for extra in ["--dry-run"], []:
        missing = invoke("run", sweep_file, *extra, "--devices", "cpu", "model.heads=4", "data.source=../nowhere/x")
        assert missing.exit_code == 2 and events.count("start") == 0, missing.output
        assert "data.source='../nowhere/x' is not a folder seen from" in missing.output, missing.output
        assert "Traceback" not in missing.output and not (tmp_path / "runs" / "tiny" / "sweep.json").exists()
    found = invoke("run", sweep_file, "--dry-run", "--devices", "cpu", "model.heads=4", "data.source=./data")
    assert found.exit_code == 0, found.output  # an existing folder, and hub or plugin kinds, are the trial's own
    hub = invoke("run", sweep_file, "--dry-run", "--devices", "cpu", "model.heads=4", "data.source=hf:org/set")
    assert hub.exit_code == 0, hub.output


def test_exit_status_0_when_every_trial_finished(sweep_file, events):
    result = invoke("run", sweep_file, "--devices", "cpu", "train.max_steps=3", "model.heads=4")
    assert result.exit_code == 0 and "6 finished" in result.output, result.output
    assert "Exit status:" in invoke("run", "--help").output


def test_a_sweep_folder_with_brackets_in_its_name_is_shown_as_written(sweep_file, events, tmp_path):
    # the line naming the sweep went through rich markup: --out 'a[/x]' ended the run with a MarkupError traceback
    out = tmp_path / "a[/x]"
    result = invoke("run", sweep_file, "--devices", "cpu", "--out", out, "train.max_steps=3", "model.heads=4")
    assert result.exit_code == 0 and f"-> {out}  " in result.output, result.output


def test_a_comma_list_override_is_one_more_grid_axis(sweep_file, events, tmp_path):
    args = ["run", sweep_file, "--devices", "cpu", "train.max_steps=2,3", "model.dropout=0"]
    result = invoke(*args, "--dry-run")
    assert "4 of the 12 trials are invalid" in result.output, result.output  # 3 variants x 2 seeds x 2 budgets
    assert "base-seed=1-max_steps=3  " in result.output and "train.max_steps=3 model.dropout=0" in result.output
    run = invoke(*args, "--max-trials", "2")
    assert run.exit_code == 0 and "2 finished" in run.output, run.output
    state = json.loads((tmp_path / "runs" / "tiny" / "sweep.json").read_text())
    assert state["overrides"] == ["model.dropout=0", "train.max_steps=2,3"]  # what was typed, for ablate export
    again = invoke(*args, "--max-trials", "2")
    assert again.exit_code == 0 and "nothing to train" in again.output, again.output  # the same command resumes


def test_a_dry_run_shows_the_w_and_b_group_the_run_uses(sweep_file, events, tmp_path):
    # before the first run no group exists yet, so none is made up; after it, the folder's own
    before = invoke("run", sweep_file, "--dry-run", "--devices", "cpu", "model.heads=4")
    assert before.exit_code == 0 and "tracking.group=tiny-xxxxxx " in before.output, before.output
    assert "W&B group tiny-xxxxxx: its digits are drawn when the sweep first runs in runs/tiny" in before.output
    assert invoke("run", sweep_file, "--devices", "cpu", "model.heads=4", "train.max_steps=3").exit_code == 0
    group = json.loads((tmp_path / "runs" / "tiny" / "sweep.json").read_text())["group"]
    assert group.startswith("tiny-") and group != "tiny-xxxxxx"
    after = invoke("run", sweep_file, "--dry-run", "--devices", "cpu", "model.heads=4", "train.max_steps=3")
    listed = {word for word in after.output.split() if word.startswith("tracking.group=")}
    assert listed == {f"tracking.group={group}"} and "xxxxxx" not in after.output, after.output


def test_an_override_of_a_swept_key_is_refused_not_run_under_the_axis_names(sweep_file, events, tmp_path):
    # seed=1 applied after each trial's own seed: base-seed=2 trained seed 1 under its name, rc 0
    for args in (["seed=1"], ["seed=1", "--dry-run"], ["train.max_steps=2,3", "train.max_steps=4"]):
        result = invoke("run", sweep_file, "--devices", "cpu", *args)
        assert result.exit_code == 2, result.output
        assert "the sweep varies" in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert events.count("start") == 0 and not (tmp_path / "runs").exists()


def test_a_dry_run_on_a_folder_of_another_sweep_is_refused_as_the_run_is(sweep_file, events, tmp_path):
    # it listed 6 trials, exit 0, "its digits are drawn when the sweep first runs" there; the run then refused
    assert invoke("run", sweep_file, "--devices", "cpu", "model.heads=4", "train.max_steps=3").exit_code == 0
    result = invoke("run", sweep_file, "--dry-run", "--devices", "cpu", "model.heads=4")
    assert result.exit_code == 2 and "rerun that command, or pass another --out" in result.output, result.output
    assert result.output.count("error:") == 1 and "tracking.group" not in result.output


@pytest.mark.parametrize("base", ["missing.yaml", "malformed.yaml"])
def test_a_dry_run_refuses_a_missing_or_malformed_base_config_as_the_run_does(sweep_file, events, tmp_path, base):
    # the dry run listed every trial 'invalid config: config file not found: missing.yaml' and exited 1 (some trial
    # invalid), where the run refuses the base config in one line, exit 2
    (tmp_path / "malformed.yaml").write_text("model: {d_model: 32\n")
    dry, run = invoke("run", sweep_file, "--config", base, "--dry-run"), invoke("run", sweep_file, "--config", base)
    assert dry.exit_code == run.exit_code == 2, dry.output
    assert dry.output.splitlines()[-1] == run.output.splitlines()[-1] and "invalid config" not in dry.output
    assert events.count("start") == 0


def test_dry_run_refuses_a_variant_name_no_folder_can_hold(sweep_file, events, tmp_path):
    sweep_file.write_text(SWEEP.replace("name: wide", "name: " + "w" * 300))
    result = invoke("run", sweep_file, "--dry-run", "--devices", "cpu")
    assert result.exit_code == 2 and "is 300 characters long: use at most 64" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert events.count("start") == 0 and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "missing.yaml"], "sweep file not found: missing.yaml"),
        (["run", "{file}", "model.headz=2"], "unknown config key 'model.headz'"),
        (["run", "{file}", "model.nonsense=2"], "unknown config key 'model.nonsense'; see `ablate train --help`"),
        (["run", "{file}", "model.heads"], "is not of the form key=value"),
        (["run", "{file}", "--devices", "gpu7"], "use auto, cpu, or GPU ids"),
        (["run", "{bad}"], "bad.yaml line 2: mapping values are not allowed here"),
        (["status", "nowhere"], "no sweep state in nowhere"),
        (["run", "{file}", "model.heads=4,"], "an empty value in the comma list"),
        (["run", "{file}", "model.heads=4,4"], "a value is listed twice"),
    ],
)
def test_bad_input_is_one_red_line_and_exit_2(sweep_file, tmp_path, args, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text("method: grid\n  parameters: x\n")
    result = invoke(*[a.format(file=sweep_file, bad=bad) for a in args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert "Traceback" not in result.output and result.output.count("error:") == 1


def test_every_command_and_option_has_help():
    import typer.main

    group = typer.main.get_command(app)
    assert set(group.commands) == {"run", "create", "agent", "status"}
    for name, command in group.commands.items():
        assert command.help, name
        for param in command.params:
            assert getattr(param, "help", None), f"{name} {param.name}"


def test_status_of_a_sweep_with_pending_trials_and_bracketed_text(tmp_path, monkeypatch):
    """A pending trial has no style: the status column once became ``[]pending[/]``, a MarkupError;
    names and errors are printed as text, so ``[x]`` in them is shown, not parsed."""
    from ablate.sweep.state import SweepState, Trial, save_state

    monkeypatch.setattr(commands, "console", Console(width=250))
    trials = [
        Trial("base-seed=1", {"seed": 1}, status="finished", metric=20.0),
        Trial("base-seed=2", {"seed": 2}, status="pending"),
        Trial("odd[bold]-seed=1", {"seed": 1}, status="failed", error="bad value [/red] here"),
    ]
    save_state(tmp_path, SweepState("tiny", "gone.yaml", "sig", trials=trials))
    result = invoke("status", tmp_path)
    assert result.exit_code == 0, result.output
    assert (
        "pending" in result.output and "odd[bold]-seed=1" in result.output and "bad value [/red] here" in result.output
    )
    assert "3 trials: 1 finished, 1 failed, 1 pending" in result.output


def test_a_one_trial_sweep_counts_one_trial(sweep_file, events, tmp_path):
    # its dry run began "tiny: 1 trials"
    result = invoke("run", sweep_file, "--dry-run", "--devices", "cpu", "--max-trials", "1")
    assert result.exit_code == 0 and "tiny: 1 trial\n" in result.output, result.output


def test_status_says_its_time_column_sums_every_attempt(tmp_path, monkeypatch):
    # a trial preempted after 50 min that resumed and finished in 12 showed "time 1:02:00" under "time", read as
    # one training of 62 min; it is the trial's cost over its tries, and the header says so
    from ablate.sweep.state import SweepState, Trial, save_state

    monkeypatch.setattr(commands, "console", Console(width=250))
    trials = [Trial("seed=1", {"seed": 1}, status="finished", metric=20.0, attempts=2, duration_s=3720.0)]
    save_state(tmp_path, SweepState("tiny", "gone.yaml", "sig", trials=trials))
    result = invoke("status", tmp_path)
    header = next(line for line in result.output.splitlines() if "trial" in line and "tries" in line)
    assert "time, all tries" in header and "1:02:00" in result.output, result.output
    assert "\n1 trial: 1 finished (no launcher running)" in result.output  # was "1 trials: 1 finished"


def test_status_counts_the_trials_hyperband_stopped(tmp_path, monkeypatch):
    # the count line left them out: "3 trials: 2 finished (no launcher running)" for 3 trials, where the report
    # after the run said "sweep tiny: 2 finished, 1 stopped"
    from ablate.sweep.state import SweepState, Trial, save_state

    monkeypatch.setattr(commands, "console", Console(width=250))
    trials = [Trial(f"seed={i}", {"seed": i}, status="finished", metric=20.0 + i) for i in (1, 2)]
    trials.append(Trial("seed=3", {"seed": 3}, status="stopped", metric=1.0))
    save_state(tmp_path, SweepState("tiny", "gone.yaml", "sig", trials=trials, metric="val/bleu", goal="maximize"))
    result = invoke("status", tmp_path)
    assert result.exit_code == 0 and "3 trials: 2 finished, 1 stopped (no launcher running)" in result.output


def test_the_report_after_stopping_watching_slurm_jobs_counts_the_trials_still_running(tmp_path):
    # the jobs keep running after Ctrl-C; the report said "sweep k: 2 pending", as if nothing ran
    from ablate.sweep.state import SweepState, Trial

    trials = [Trial(f"t{i}", {"seed": i}, status="running" if i < 2 else "pending") for i in range(4)]
    console = Console(width=250, record=True)
    commands.report(console, SweepState("k", "k.yaml", "sig", trials=trials), "val/bleu", "maximize", tmp_path)
    assert "sweep k: 2 running, 2 pending\n" in console.export_text()


@pytest.mark.parametrize("cap", ["0", "-2"])
def test_max_trials_below_one_is_a_bad_command_line(sweep_file, events, tmp_path, cap):
    # it planned nothing, made a sweep folder and a W&B group, said "sweep tiny: " and exited 0 ("-2 trials" dry)
    result = invoke("run", sweep_file, "--devices", "cpu", f"--max-trials={cap}")
    assert result.exit_code == 2 and "--max-trials" in result.output, result.output
    assert not (tmp_path / "runs").exists() and events.count("start") == 0


@pytest.mark.parametrize("launcher", ["slurm", "ray"])
def test_no_cpu_per_trial_is_a_bad_command_line(sweep_file, events, tmp_path, launcher):
    # SLURM jobs were submitted without --cpus-per-task (0 read as "not given"), Ray tasks took 1 CPU each
    result = invoke("run", sweep_file, "--launcher", launcher, "--cpus-per-trial", "0")
    assert result.exit_code == 2 and "--cpus-per-trial" in result.output, result.output
    assert not (tmp_path / "runs").exists() and events.count("start") == 0


def test_status_from_another_folder_shows_the_sweep_metric_and_best_trial(sweep_file, events, tmp_path, monkeypatch):
    # sweep.json's source is relative to where the sweep ran: from another folder the file was not found, so the
    # metric column said "metric" and no best trial was named
    result = invoke("run", sweep_file.name, "--devices", "cpu", "--max-trials", "2", "train.max_steps=3")
    assert result.exit_code == 0, result.output
    here = invoke("status", "runs/tiny")
    assert "val/bleu" in here.output and "best val/bleu = " in here.output, here.output
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert invoke("status", tmp_path / "runs" / "tiny").output == here.output


@pytest.mark.parametrize(
    "args",
    [
        ["--grace", "-5"],
        ["--dry-run", "--grace", "-5"],
        ["--launcher", "slurm", "--signal-delay", "-1"],
        ["--launcher", "ray", "--parallel", "0"],
        ["--dry-run", "--grace", "nan"],
        ["--trial-timeout", "nan"],
        ["--stall-warning", "nan"],
    ],
)
def test_a_number_out_of_range_is_one_line_naming_the_option(sweep_file, events, tmp_path, args):
    # --grace -5 ran (a stopped trial was killed at once), --signal-delay -1 reached sbatch, and Ray read
    # --parallel 0 as 1, where --max-trials 0 was already refused; nan passed every "at least 0" (nan < 0 is false):
    # --grace nan never killed a stopped trial that hung, --trial-timeout nan was no limit,
    # --stall-warning nan never warned
    result = invoke("run", sweep_file, *args)
    assert result.exit_code == 2 and f"error: {args[-2]} {args[-1]} must be at least" in result.output, result.output
    assert result.output.count("\n") == 1 and not (tmp_path / "runs").exists() and events.count("start") == 0


@pytest.mark.parametrize(
    "args, owners",
    [
        (["--max-concurrent", "3"], "slurm"),
        (["--partition", "gpu", "--dry-run"], "slurm"),
        (["--cpus-per-trial", "2"], "slurm and ray"),
        (["--launcher", "slurm", "--parallel", "2"], "local and ray"),
        (["--launcher", "slurm", "--trial-timeout", "60"], "local and ray"),
        (["--launcher", "ray", "--devices", "cpu"], "local"),
        (["--launcher", "ray", "--slurm-arg", "account=abc"], "slurm"),
    ],
)
def test_another_launchers_option_is_refused_not_ignored(sweep_file, events, tmp_path, args, owners):
    # --max-concurrent 3 ran the local launcher's one slot, --launcher slurm --parallel 2 one job per trial
    launcher = args[1] if args[0] == "--launcher" else "local"
    result = invoke("run", sweep_file, *args)
    flag = next(a for a in args if a.startswith("--") and a not in ("--launcher", "--dry-run"))
    line = f"error: {flag} is read by --launcher {owners}, not by --launcher {launcher}: drop it"
    assert result.exit_code == 2 and result.output.startswith(line), result.output
    assert result.output.count("\n") == 1 and not (tmp_path / "runs").exists() and events.count("start") == 0


def test_a_launchers_own_options_are_accepted(sweep_file, events):
    result = invoke("run", sweep_file, "--launcher", "slurm", "--max-concurrent", "3", "--time", "1:00:00", "--dry-run")
    assert result.exit_code == 1 and "2 of the 6 trials are invalid" in result.output, result.output  # odd-heads


def test_an_override_of_a_key_variants_set_names_them_in_a_note(sweep_file, events, tmp_path):
    # model.heads=4 replaced odd-heads' 3 without a word, so a row labelled odd-heads trained 4 heads
    result = invoke("run", sweep_file, "--dry-run", "model.heads=4", "model.d_model=32")
    assert result.exit_code == 0, result.output
    note = "note: model.heads=4 applies after the variants, so odd-heads (model.heads=3) train model.heads=4 under"
    assert note in result.output and result.output.count("note:") == 1  # model.d_model: no variant sets it
    assert "odd-heads-seed=1  " in result.output and "6 trials" in result.output  # the override still applies


@pytest.mark.parametrize(
    "args, message",
    [
        (["--launcher", "slurm", "--time", "abc"], "--time 'abc': use HH:MM:SS"),
        (["--launcher", "slurm", "--slurm-arg", "account"], "--slurm-arg 'account': use KEY=VALUE"),
        (["--launcher", "ray", "--gpus-per-trial", "-1"], "--gpus-per-trial >= 0 for --launcher ray"),
        (["--parallel", "0"], "--parallel and --gpus-per-trial must be at least 1"),  # the local launcher's too
        (["--devices", ","], "--devices ',': use auto, cpu, or GPU ids"),
        (["--devices", "3,3"], "--devices 3,3 lists GPU 3 twice"),
    ],
)
def test_a_dry_run_refuses_the_launcher_options_the_run_refuses(sweep_file, events, tmp_path, args, message):
    # --dry-run listed the trials and exited 0 ("every trial is valid"); the same command without it exited 2
    for dry in (["--dry-run"], []):
        result = invoke("run", sweep_file, *args, *dry)
        assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "runs").exists() and events.count("start") == 0


def test_status_from_another_folder_names_the_best_mean_of_a_repeat_seed_sweep(
    sweep_file, events, tmp_path, monkeypatch
):
    # the sweep file (sweep.json's source, relative to where it ran) was not found from another folder, so status
    # named the best single seed, not the best configuration's mean as it did beside the file
    sweep_file.write_text(SWEEP.replace("seed: {values: [1, 2]}", "seed: {repeat: 2}"))
    result = invoke("run", sweep_file.name, "--devices", "cpu", "--max-trials", "2", "train.max_steps=3")
    assert result.exit_code == 0, result.output
    here = invoke("status", "runs/tiny")
    assert "the mean of 2 seeds" in here.output, here.output
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert invoke("status", tmp_path / "runs" / "tiny").output == here.output


def test_status_without_a_launcher_shows_the_slurm_jobs_as_they_are_now(tmp_path, monkeypatch):
    """After Ctrl-C (the jobs keep running) ``sweep status`` showed each job as the launcher last saw it: "3 running"
    for a job SLURM had ended minutes before, "4 pending" for one running. It asks squeue, and says what to do."""
    from ablate.sweep import slurm
    from ablate.sweep.state import SweepState, Trial, save_state

    monkeypatch.setattr(commands, "console", Console(width=250))
    monkeypatch.setattr(slurm, "job_states", lambda ids: {"4": "RUNNING"})  # job 3 ended: squeue forgot it
    trials = [
        Trial("seed=1", {"seed": 1}, status="running", job_id="3", job_state="RUNNING"),
        Trial("seed=2", {"seed": 2}, status="running", job_id="4", job_state="PENDING"),
    ]
    save_state(tmp_path, SweepState("tiny", "gone.yaml", "sig", trials=trials))
    result = invoke("status", tmp_path)
    assert result.exit_code == 0, result.output
    assert "3 gone" in result.output and "4 running" in result.output and "3 running" not in result.output
    assert "1 trial's SLURM job has ended since a launcher last looked (seed=1)" in result.output
    assert "run the sweep command again to collect it" in result.output

    def no_squeue(ids):
        raise commands.SweepError("SLURM's 'squeue' is not on PATH")

    monkeypatch.setattr(slurm, "job_states", no_squeue)  # a copied folder on a laptop: as last seen
    result = invoke("status", tmp_path)
    assert result.exit_code == 0 and "3 running" in result.output and "ended" not in result.output, result.output


def test_status_names_local_trials_a_dead_launcher_left_running(tmp_path, monkeypatch):
    """A local launcher killed (kill -9, a closed terminal) takes its trials with it; ``sweep status`` then said
    "2 trials: 2 running (no launcher running)" while nothing trained them."""
    import subprocess
    import sys

    from ablate.sweep.local import start_time
    from ablate.sweep.state import SweepState, Trial, save_state

    monkeypatch.setattr(commands, "console", Console(width=250))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    trials = [
        Trial("seed=1", {"seed": 1}, status="running", pid=gone.pid, pid_start=1),
        Trial("seed=2", {"seed": 2}, status="running"),
        Trial("seed=3", {"seed": 3}, status="finished", metric=1.0, pid=gone.pid),
    ]
    save_state(tmp_path, SweepState("tiny", "gone.yaml", "sig", trials=trials))
    result = invoke("status", tmp_path)
    assert result.exit_code == 0, result.output
    assert (
        "2 trials were left running by a launcher that is gone and nothing trains them (seed=1, seed=2): run the "
        "sweep command again to resume them"
    ) in result.output
    assert start_time(gone.pid) is None


def test_status_of_a_run_folder_says_it_is_one_and_what_to_run(tmp_path):
    """``ablate sweep status RUN_DIR`` said 'no sweep state in RUN_DIR', as for a folder that holds nothing."""
    run, trial = tmp_path / "run", tmp_path / "sweep" / "trial-1"
    for folder in (run, trial):
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text('{"status": "finished"}')
    (tmp_path / "sweep" / "sweep.json").write_text("{}")
    result = invoke("status", str(trial))
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert (
        f"{trial} is a trial of the sweep in {trial.parent}; run 'ablate sweep status {trial.parent}'" in result.output
    )
    result = invoke("status", str(run))
    assert result.exit_code == 2 and f"{run} is a run folder, not a sweep's: its record is {run}/summary.json" in (
        result.output.replace("\n", "")
    )


def test_a_dry_run_on_a_terminal_shows_the_overrides_as_written(tmp_path, monkeypatch):
    # on a terminal the listing went through rich markup: 'a[red]b' was listed as a red 'b', and 'c[/red]d' ended
    # the dry run with a MarkupError traceback
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(commands, "console", Console(width=250, force_terminal=True, color_system=None))
    path = tmp_path / "tiny.yaml"
    path.write_text(SWEEP + '  tracking.project: {values: ["a[red]b", "c[/red]d"]}\n')
    result = invoke("run", path, "--dry-run", "--devices", "cpu")
    assert "tracking.project=a[red]b " in result.output and "tracking.project=c[/red]d " in result.output, result.output


def test_status_prints_a_score_as_the_table_does_never_in_scientific_notation(tmp_path, monkeypatch):
    """A trial scored BLEU 6.025e-07 (a few steps of training): ``ablate sweep status`` and the best line printed
    ``6.025e-07`` where ``ablate table`` prints ``0.00``; 25.1234 was ``25.12`` there and ``25.12`` here too."""
    from ablate.sweep.state import SweepState, Trial, save_state

    monkeypatch.setattr(commands, "console", Console(width=250))
    trials = [
        Trial.from_json(dict(name=n, point={"seed": s}, status="finished", metric=m, results={"test/bleu": b}))
        for n, s, m, b in (("a", 1, 6.025e-07, 6.025e-07), ("b", 2, 25.1234, 24.5678))
    ]
    save_state(tmp_path, SweepState("tiny", "gone.yaml", "sig", trials=trials, metric="val/bleu", goal="minimize"))
    result = invoke("status", tmp_path)
    assert result.exit_code == 0 and "e-07" not in result.output, result.output
    rows = [line.split("│")[1:5] for line in result.output.splitlines() if line.startswith("│ ")]
    assert [[cell.strip() for cell in row] for row in rows] == [
        ["a", "finished", "0.00", "0.00"],
        ["b", "finished", "25.12", "24.57"],
    ]
    assert "best val/bleu = 0.00 (a)" in result.output
