"""Killing the launcher with SIGKILL mid-sweep, then rerunning: nothing finished runs twice."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ablate.sweep import local
from ablate.sweep.state import load_state

from tests.helpers.sweep import fake_command, options, quiet_progress, run_sweep, small_spec

ROOT = Path(__file__).resolve().parents[2]
MODES = {"seed=2": "stubborn"}  # ignores SIGTERM: survives its launcher's death


def driver(tmp_path: Path, events: Path) -> Path:
    script = tmp_path / "driver.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from tests.helpers.sweep import Events, fake_command, options, quiet_progress, small_spec
        from tests.helpers.sweep import run_sweep
        spec = small_spec({{"seed": {{"values": [1, 2, 3, 4]}}}})
        command = fake_command(Events(Path({str(events)!r})), {MODES!r}, steps=10, step_s=0.1)
        run_sweep(spec, options(Path({str(tmp_path / "out")!r}), command, parallel=2), quiet_progress()[0])
    """)
    )
    return script


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.slow
def test_sigkilled_launcher_resumes_without_redoing_finished_trials(tmp_path, events):
    launcher = subprocess.Popen([sys.executable, str(driver(tmp_path, events.path))])
    out = tmp_path / "out"
    survivors: list[int] = []
    try:

        def midway() -> bool:  # one trial done, seed=2 and another running with a checkpoint each
            state = load_state(out) if (out / "sweep.json").exists() else None
            return (
                bool(state)
                and state.count("finished") >= 1
                and state.count("running") == 2
                and all(
                    (out / t.name / "checkpoints" / "last.ckpt").exists() for t in state.trials if t.status == "running"
                )
                and state.trial("seed=2").status == "running"
            )

        wait_for(midway)
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        state = load_state(out)  # the state file is intact after SIGKILL
        done = {t.name for t in state.trials if t.status == "finished"}
        running = {t.name: (t.pid, t.pid_start) for t in state.trials if t.status == "running"}
        assert "seed=2" in running and done
        polite = [pid for name, (pid, _) in running.items() if name != "seed=2"]
        wait_for(lambda: all(local.start_time(pid) is None for pid in polite), timeout=10)  # died with it
        assert local.is_same_process(*running["seed=2"])  # the stubborn one outlived the launcher
        survivors.append(running["seed=2"][0])

        progress, buffer = quiet_progress()
        command = fake_command(events, MODES, steps=10, step_s=0.1)
        opts = options(out, command, parallel=2)
        opts.grace_s = 1.0
        result = run_sweep(small_spec({"seed": {"values": [1, 2, 3, 4]}}), opts, progress)
        text = buffer.getvalue()
    finally:
        for pid in survivors:
            local.signal_group(pid, signal.SIGKILL)
        if launcher.poll() is None:
            launcher.kill()

    assert not local.is_same_process(*running["seed=2"])  # the rerun stopped the survivor first
    assert "stopping seed=2" in text and f"{len(done)} finished trials skipped" in text
    assert all(t.status == "finished" for t in result.state.trials)
    for name in done:  # finished trials were not trained again
        assert events.count("start", name) == 1 and events.count("finish", name) == 1
    for name in running:  # interrupted trials resumed from their checkpoints
        starts = [r for r in events.rows() if r[0] == "start" and r[1] == name]
        assert len(starts) == 2 and starts[1][3] > 0
    summary = json.loads((out / "seed=4" / "summary.json").read_text())
    assert summary["status"] == "finished"
    assert not list(out.glob(".sweep.json.*.tmp"))


@pytest.fixture()
def no_plugins(monkeypatch):
    """Plugins this test imports are forgotten after it (its modules and records)."""
    from ablate.utils import plugins

    monkeypatch.setattr(plugins, "_LOADED", {})
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("lab_"):
            del sys.modules[name]


PLANTED = "from pathlib import Path\nPath({marker!r}).write_text('ran')  # what a planted plugin could do: anything\n"


@pytest.mark.parametrize(
    "parameters, planted",
    [
        pytest.param({}, lambda evil: {"plugins": [str(evil)]}, id="a-key-the-file-does-not-list"),
        pytest.param(
            {"variant": {"values": [{"name": "A", "model.heads": 2}]}},
            lambda evil: {"variant": {"name": "A", "model.heads": 2, "plugins": [str(evil)]}},
            id="a-variant-with-other-overrides",
        ),
        pytest.param(
            {"plugins": {"values": [[], ["{mine}"]]}},
            lambda evil: {"plugins": [str(evil)]},
            id="a-value-the-file-does-not-give",
        ),
    ],
)
def test_a_sweep_folder_whose_state_names_a_planted_plugin_runs_none_of_it(
    parameters, planted, tmp_path, events, no_plugins
):
    """``sweep.json`` is the folder's data: a pending trial whose point names a plugin the user's sweep file
    does not (the signature is the file's, so it matched) was validated and launched with that plugin."""
    from ablate.sweep.planner import signature
    from ablate.sweep.spec import SweepError, grid_points
    from ablate.sweep.state import SweepState, Trial, save_state

    marker, out = tmp_path / "marker", tmp_path / "theirs"
    mine = tmp_path / "mine" / "lab_mine.py"
    mine.parent.mkdir()
    mine.write_text("")
    text = json.dumps(parameters).replace("{mine}", str(mine))
    spec = small_spec(json.loads(text))
    opts = options(out, fake_command(events))
    evil = out / "lab_evil.py"
    out.mkdir()
    evil.write_text(PLANTED.format(marker=str(marker)))
    point = next(grid_points(spec.parameters))
    state = SweepState(name=spec.name, source="sweep.yaml", signature=signature(spec, opts), group="t-abcdef")
    state.trials = [Trial(name="trial", point={**point, **planted(evil)})]
    save_state(out, state)
    with pytest.raises(SweepError) as err:
        run_sweep(spec, opts, quiet_progress()[0])
    message = str(err.value)
    assert "\n" not in message and "sweep.json" in message and "trial" in message and "--out" in message, message
    assert not marker.exists()
    assert events.count("start") == 0


def test_a_trial_folder_that_links_out_of_a_received_sweep_folder_is_refused(tmp_path, events):
    """A received sweep folder whose pending trial's folder links to a folder of the user's: its run was trained
    there (config.yaml, checkpoints, summary.json over the user's files)."""
    from ablate.sweep.spec import SweepError

    spec = small_spec({"seed": {"values": [1, 2]}})
    out, mine = tmp_path / "theirs", tmp_path / "my-project"
    run_sweep(spec, options(out, fake_command(events)), quiet_progress()[0])
    state = json.loads((out / "sweep.json").read_text())
    state["trials"][1].update(status="pending", results={}, metric=None)
    (out / "sweep.json").write_text(json.dumps(state))
    mine.mkdir()
    (mine / "config.yaml").write_text("my: config\n")
    trial = out / state["trials"][1]["name"]
    shutil.rmtree(trial)
    trial.symlink_to(mine)
    with pytest.raises(SweepError) as err:
        run_sweep(spec, options(out, fake_command(events)), quiet_progress()[0])
    message = str(err.value)
    assert "\n" not in message and str(trial) in message and "outside" in message and "--out" in message, message
    assert sorted(p.name for p in mine.iterdir()) == ["config.yaml"]
    assert (mine / "config.yaml").read_text() == "my: config\n"


def test_a_running_trials_pid_in_a_received_sweep_folder_stops_only_a_trial_of_it(tmp_path, events):
    """``sweep.json`` names the process a dead launcher left running by pid and start time: a received folder could
    name any process of the user's (a tmux server), which a rerun stopped with its whole process group."""
    from ablate.sweep.planner import signature
    from ablate.sweep.spec import grid_points
    from ablate.sweep.state import SweepState, Trial, save_state

    mine = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        spec, out = small_spec({}), tmp_path / "theirs"
        opts = options(out, fake_command(events))
        state = SweepState(name=spec.name, source="sweep.yaml", signature=signature(spec, opts), group="t-abcdef")
        pid = {"pid": mine.pid, "pid_start": local.start_time(mine.pid)}
        state.trials = [Trial(name="trial", point=next(grid_points(spec.parameters)), status="running", **pid)]
        save_state(out, state)
        result = run_sweep(spec, opts, quiet_progress()[0])
        assert [t.status for t in result.state.trials] == ["finished"]
        assert mine.poll() is None, "a process of the user's that the folder named was stopped"
    finally:
        mine.kill()
        mine.wait()


def test_a_sweep_over_the_users_own_plugins_resumes(tmp_path, events, no_plugins):
    mine = tmp_path / "mine" / "lab_mine.py"
    mine.parent.mkdir()
    mine.write_text("")
    spec = small_spec({"plugins": {"values": [[], [str(mine)]]}})
    opts = options(tmp_path / "out", fake_command(events))
    first = run_sweep(spec, opts, quiet_progress()[0])
    assert [t.status for t in first.state.trials] == ["finished", "finished"]
    again = run_sweep(spec, options(tmp_path / "out", fake_command(events)), quiet_progress()[0])
    assert again.launched == 0 and len(again.state.trials) == 2
