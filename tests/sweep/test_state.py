"""The on-disk state: atomic writes, round trips, and the one-launcher lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ablate.record import RunStatus, RunSummary
from ablate.sweep import state as state_mod
from ablate.sweep.spec import SweepError
from ablate.sweep.state import SweepLock, SweepState, Trial, is_locked, load_state, save_state
from ablate.utils.io import atomic_write_json

from tests.helpers.cli import assert_one_error_line, invoke_cli


def make_state(n: int = 3) -> SweepState:
    trials = [Trial(name=f"seed={i}", point={"seed": i, "variant": {"name": "a", "model.heads": 2}}) for i in range(n)]
    trials[0].status, trials[0].metric = RunStatus.FINISHED, 12.5
    trials[0].summary = RunSummary.from_json({"test/bleu": 11.0, "params": None}, strict=False)
    return SweepState(name="s", source="sweeps/s.yaml", signature="abc", overrides=["train.lr=0.1"], trials=trials)


def test_state_round_trips_through_disk(tmp_path):
    state = make_state()
    save_state(tmp_path, state)
    again = load_state(tmp_path)
    assert again == state and again.trial("seed=0").metric == 12.5
    assert load_state(tmp_path / "nowhere") is None


def test_a_write_that_dies_midway_leaves_the_old_state_and_no_temp_file(tmp_path, monkeypatch):
    save_state(tmp_path, make_state(2))
    before = (tmp_path / "sweep.json").read_text()

    def die_before_the_rename(fd):
        raise KeyboardInterrupt  # e.g. Ctrl-C in the middle of a write: the temp file is written, not renamed

    monkeypatch.setattr(state_mod.io.os, "fsync", die_before_the_rename)
    with pytest.raises(KeyboardInterrupt):
        save_state(tmp_path, make_state(5))
    assert (tmp_path / "sweep.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.json"]


@pytest.mark.slow
def test_readers_never_see_a_torn_file_while_a_writer_rewrites_it(tmp_path):
    path = tmp_path / "sweep.json"
    atomic_write_json(path, {"n": 0, "pad": "x" * 200_000})
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(state_mod.Path(state_mod.__file__).parents[2])!r})
        from ablate.utils.io import atomic_write_json
        for i in range(1, 150):
            atomic_write_json(__import__('pathlib').Path({str(path)!r}), {{"n": i, "pad": "x" * 200_000}})
    """),
        ]
    )
    reads = 0
    while writer.poll() is None:
        data = json.loads(path.read_text())  # would raise on a partial file
        assert len(data["pad"]) == 200_000
        reads += 1
    assert writer.returncode == 0 and reads > 0 and json.loads(path.read_text())["n"] == 149


def test_an_unreadable_state_file_is_a_one_line_error(tmp_path):
    (tmp_path / "sweep.json").write_text("{not json")
    with pytest.raises(SweepError, match="not a sweep state file"):
        load_state(tmp_path)


def test_a_state_file_that_is_a_pipe_is_a_one_line_error_never_a_hang(tmp_path):
    """A received sweep folder's ``sweep.json`` planted as a FIFO (or a link to ``/dev/zero``): reading it waited
    forever (or until memory ran out)."""
    os.mkfifo(tmp_path / "sweep.json")
    code = f"from ablate.sweep.state import load_state; from pathlib import Path; load_state(Path({str(tmp_path)!r}))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (
        "SweepError" in proc.stderr and "not a sweep state file" in proc.stderr and "not a regular file" in proc.stderr
    )


def test_a_lock_file_that_links_out_of_a_received_sweep_folder_is_a_one_line_error(tmp_path):
    thesis = tmp_path / "thesis.tex"
    thesis.write_text("my thesis\n")
    out = tmp_path / "theirs"
    out.mkdir()
    (out / ".lock").symlink_to(thesis)
    with pytest.raises(SweepError) as err:
        SweepLock(out).__enter__()
    assert "\n" not in str(err.value) and str(out / ".lock") in str(err.value)
    assert thesis.read_text() == "my thesis\n"


def test_the_lock_admits_one_launcher_and_dies_with_its_holder(tmp_path):
    with SweepLock(tmp_path):
        assert is_locked(tmp_path)
        with pytest.raises(SweepError, match=r"another launcher \(pid \d+\)"):
            SweepLock(tmp_path).__enter__()
    assert not is_locked(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import sys, time; sys.path.insert(0, {str(state_mod.Path(state_mod.__file__).parents[2])!r})
        from ablate.sweep.state import SweepLock
        lock = SweepLock(__import__('pathlib').Path({str(tmp_path)!r})).__enter__()
        print('locked', flush=True); time.sleep(60)
    """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    assert is_locked(tmp_path)
    holder.kill()  # SIGKILL: no cleanup runs, the kernel drops the lock
    holder.wait()
    with SweepLock(tmp_path):
        pass


def test_a_trials_summary_is_kept_as_its_headline_results_on_disk(tmp_path):
    save_state(tmp_path, make_state())
    trial = json.loads((tmp_path / "sweep.json").read_text())["trials"][0]
    assert trial["status"] == "finished" and trial["results"] == {"test/bleu": 11.0, "params": None}
    assert "summary" not in trial
    assert load_state(tmp_path).trials[0].summary.metrics == {"test/bleu": 11.0}


@pytest.mark.parametrize("name", ["mission-cpu", "table3-cpu", "calibration-cpu", "defaults-cpu", "table3-budget-cpu"])
def test_shipped_sweep_files_load_and_save_unchanged(tmp_path, name):
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[2] / "results" / name
    state = load_state(shipped)
    assert state is not None and state.trials and all(isinstance(t.status, RunStatus) for t in state.trials)
    save_state(tmp_path, state)
    saved, before = json.loads((tmp_path / "sweep.json").read_text()), json.loads((shipped / "sweep.json").read_text())
    assert {k: v for k, v in saved.items() if k in before} == before  # trials, statuses and results as they were
    assert set(saved) - set(before) <= {
        "group",
        "wandb_sweep",
        "workers",
        "metric",
        "goal",
        "repeat",
    }  # fields newer than the shipped file, unset


def test_an_unknown_trial_status_is_one_line_naming_the_choices(tmp_path):
    save_state(tmp_path, make_state())
    data = json.loads((tmp_path / "sweep.json").read_text())
    data["trials"][1]["status"] = "finshed"
    (tmp_path / "sweep.json").write_text(json.dumps(data))
    with pytest.raises(SweepError) as err:
        load_state(tmp_path)
    message = str(err.value)
    assert "\n" not in message and "unknown status 'finshed'" in message and "did you mean 'finished'?" in message


@pytest.mark.parametrize(
    "key, value", [("metric", "12.5"), ("duration_s", None), ("attempts", "2"), ("history", [1.0, "x"]), ("pid", True)]
)
def test_a_trial_number_that_is_not_a_number_is_one_line(tmp_path, key, value):
    """A hand-edited ``"metric": "12.5"`` crashed ``ablate sweep status`` with a traceback (format code 'g' for str)."""
    save_state(tmp_path, make_state())
    data = json.loads((tmp_path / "sweep.json").read_text())
    data["trials"][0][key] = value
    (tmp_path / "sweep.json").write_text(json.dumps(data))
    with pytest.raises(SweepError) as err:
        load_state(tmp_path)
    message = str(err.value)
    assert "\n" not in message and "not a sweep state file" in message and f"trial 'seed=0': {key} " in message
    assert_one_error_line(invoke_cli("sweep", "status", str(tmp_path), cwd=tmp_path), f"{key} ")


@pytest.mark.parametrize(
    "key, value, said",
    [
        ("error", 5, "trial 'seed=0': error 5 is not a string"),
        ("job_state", 5, "trial 'seed=0': job_state 5 is not a string"),
        ("job_id", 5, "trial 'seed=0': job_id 5 is not a string"),
        ("duration_s", float("inf"), "trial 'seed=0': duration_s inf is not a number"),
        ("devices", "0", "trial 'seed=0': devices '0' is not a list of strings"),
        ("workers", [1], "the sweep: workers [1] is not a mapping of strings"),
        ("source", 5, "the sweep: source 5 is not a string"),
        ("metric", 5, "the sweep: metric 5 is not a string"),
    ],
)
def test_a_value_of_the_wrong_type_in_a_received_sweep_json_is_one_line(tmp_path, key, value, said):
    """Only numbers were checked: ``"job_state": 5``, ``"workers": [1]``, ``"source": 5``, a trial's ``"error": 5``
    or ``"duration_s": Infinity`` crashed ``ablate sweep status`` with a traceback (AttributeError, TypeError,
    OverflowError)."""
    save_state(tmp_path, make_state())
    data = json.loads((tmp_path / "sweep.json").read_text())
    (data if said.startswith("the sweep") else data["trials"][0])[key] = value
    (tmp_path / "sweep.json").write_text(json.dumps(data))
    assert_one_error_line(invoke_cli("sweep", "status", str(tmp_path), cwd=tmp_path), said)


@pytest.mark.parametrize("name", ["../outside", "/tmp/elsewhere", "a/b", "..", ".", "", "seed=1\x00"])
def test_a_trial_name_that_is_not_one_folder_name_is_refused(tmp_path, name):
    """A trial's name becomes its run folder under the sweep folder: a received sweep.json must not steer
    a run's writes outside it (``../outside`` would train into a sibling of the sweep folder)."""
    save_state(tmp_path, make_state())
    data = json.loads((tmp_path / "sweep.json").read_text())
    data["trials"][1]["name"] = name
    (tmp_path / "sweep.json").write_text(json.dumps(data))
    with pytest.raises(SweepError) as err:
        load_state(tmp_path)
    message = str(err.value)
    assert "\n" not in message and "not a sweep state file" in message and "folder name" in message
    assert not (tmp_path.parent / "outside").exists()


def test_every_trial_name_ablate_makes_loads_back(tmp_path):
    from ablate.sweep.spec import MAX_NAME, safe_name

    names = [
        "heads=4-seed=1",
        "dot-sinusoidal-seed=2-2",
        safe_name("x" * 300) + "-3",
        "lr=0.001,0.01+warm",
        "=5",
        "odd[bold]",
    ]
    assert len(names[2]) > MAX_NAME  # a clash suffix may take a shortened name past MAX_NAME
    state = make_state(len(names))
    for trial, name in zip(state.trials, names):
        trial.name = name
    save_state(tmp_path, state)
    assert [t.name for t in load_state(tmp_path).trials] == names


@pytest.mark.parametrize("where", ["trial", "worker"])
def test_a_slurm_job_id_that_is_not_digits_is_refused_before_it_reaches_scancel(tmp_path, where):
    """A job id goes into squeue's and scancel's argv: a received sweep.json naming ``--user=you`` would cancel
    every job of the user's."""
    save_state(tmp_path, make_state())
    data = json.loads((tmp_path / "sweep.json").read_text())
    if where == "trial":
        data["trials"][1]["job_id"] = "--user=you"
    else:
        data["workers"] = {"--user=you": "RUNNING"}
    (tmp_path / "sweep.json").write_text(json.dumps(data))
    with pytest.raises(SweepError) as err:
        load_state(tmp_path)
    message = str(err.value)
    assert "\n" not in message and "not a sweep state file" in message and "'--user=you' is not a job id" in message


def test_slurm_job_ids_as_sbatch_gives_them_load_back(tmp_path):
    state = make_state(3)
    for trial, job in zip(state.trials, ["123", "124_7", "125+1"]):
        trial.job_id = job
    state.workers = {"126": "RUNNING"}
    save_state(tmp_path, state)
    loaded = load_state(tmp_path)
    assert [t.job_id for t in loaded.trials] == ["123", "124_7", "125+1"] and loaded.workers == {"126": "RUNNING"}


def test_an_out_that_is_a_file_or_unwritable_is_one_line(tmp_path):
    """``ablate sweep run FILE --out X`` with X an existing file, or under one: a FileExistsError traceback."""
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "t.yaml").write_text("name: t\nmethod: grid\nparameters:\n  seed: {values: [1]}\n")
    for out in (tmp_path / "notes.txt", tmp_path / "notes.txt" / "sweep"):
        proc = invoke_cli("sweep", "run", str(tmp_path / "t.yaml"), "--out", str(out), cwd=tmp_path)
        assert_one_error_line(proc, f"cannot use {out} as the sweep folder")
    assert (tmp_path / "notes.txt").read_text() == "x"


def test_status_of_the_state_file_itself_shows_its_folder(tmp_path):
    """``ablate sweep status runs/x/sweep.json`` read the state file as a sweep file: "missing required key:
    'method' is a required property"."""
    save_state(tmp_path, make_state())
    proc = invoke_cli("sweep", "status", str(tmp_path / "sweep.json"), cwd=tmp_path)
    assert proc.returncode == 0 and "3 trials: 1 finished" in proc.stdout, proc.stderr


def test_a_state_file_nested_deep_is_one_line_never_a_recursion_error(tmp_path):
    """A received sweep folder's ``sweep.json`` nested deeper than the parser follows: ``ablate sweep status`` (and
    ``sweep run``, ``table``, ``plot``) ended in a RecursionError traceback."""
    (tmp_path / "sweep.json").write_text("[" * 200_000 + "]" * 200_000)
    proc = invoke_cli("sweep", "status", str(tmp_path), cwd=tmp_path)
    assert_one_error_line(proc, "not a sweep state file (nested more than 100 levels deep)")


def test_status_of_a_received_sweep_sends_no_control_characters_to_the_terminal(tmp_path):
    """A received ``sweep.json`` whose trial's error, trial names and sweep name hold escape sequences (or rich
    markup): ``ablate sweep status`` printed them raw (clear the screen, retitle the terminal)."""
    state = make_state()
    state.trials[1].status, state.trials[1].error = RunStatus.FAILED, "boom\x1b[2J\x1b]0;pwned\x07 end"
    state.name, state.trials[0].name = "s\x1b[8m[red]", "seed=0\x1b]0;pwned\x07[bold]"
    state.metric, state.goal = "val/bleu", "maximize"
    save_state(tmp_path, state)
    proc = invoke_cli("sweep", "status", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0 and "boom?[2J?]0;" in proc.stdout, proc.stdout  # shown, made harmless
    assert "best val/bleu = 12.50 (seed=0?]0;pwned?[bold])" in proc.stdout and "s?[8m[red]" in proc.stdout, proc.stdout
    assert not set(proc.stdout + proc.stderr) & {"\x1b", "\x07"}


@pytest.mark.parametrize("trials", [{"a": 1}, ["seed=1"], "trials", "point is a list", "no point"])
def test_trials_that_are_not_a_list_of_points_are_one_line(tmp_path, trials):
    """The point shape is checked once, before any trial is built (it was checked before and after)."""
    save_state(tmp_path, make_state())
    data = json.loads((tmp_path / "sweep.json").read_text())
    if trials == "point is a list":
        data["trials"][1]["point"] = [1, 2]
    elif trials == "no point":
        del data["trials"][1]["point"]
    else:
        data["trials"] = trials
    (tmp_path / "sweep.json").write_text(json.dumps(data))
    with pytest.raises(SweepError, match=r"not a sweep state file \(its trials are not a list of points\)"):
        load_state(tmp_path)
