"""The Ray executor (``--launcher ray``) against a real local Ray cluster the test starts."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import types
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ablate.sweep import commands
from ablate.sweep.commands import app

from tests.helpers.sweep import fake_command, one_seed
from tests.helpers.tiny import EVAL_PAIRS

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "sweeps" / "quickstart.yaml")
TINY_QUICKSTART = [
    "tracking.wandb=disabled",
    "data.builtin_pairs=400",
    f"data.builtin_eval_pairs={EVAL_PAIRS}",
    "data.vocab_size=300",
    "model.d_model=32",
    "model.d_ff=64",
    "model.layers=1",
    "model.heads=2",
    "train.max_steps=60",  # long enough (about a second) for _kill_one_task to land mid-training
    "train.max_tokens=512",
    "train.val_every=1000",
    "train.checkpoint_every=5",
    "eval.beam=1",
    "eval.max_len_b=3",
]
"""sweeps/quickstart.yaml's trials, each a tiny model for a few steps."""


def test_without_ray_the_launcher_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    result = CliRunner().invoke(app, ["run", QUICKSTART, "--launcher", "ray", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == "error: --launcher ray needs Ray: pip install 'ablate[ray]'"
    assert not (tmp_path / "x" / "sweep.json").exists()


def test_a_cancelled_ray_task_stops_its_trainer_at_once(tmp_path, events):
    """ray.cancel(force=False) raises KeyboardInterrupt in the task through _thread.interrupt_main, which a blocking
    proc.wait() never saw: on Ctrl-C, hyperband and --trial-timeout the trainer ran on until --grace ran out and
    ray.cancel(force=True) killed it, without the checkpoint it saves on SIGTERM."""
    import _thread

    from ablate.sweep.ray_cluster import run_attempt

    run_dir = tmp_path / "run"
    command = fake_command(events, steps=200, step_s=0.05)(run_dir, [])

    def cancel() -> None:
        while not events.count("start"):
            time.sleep(0.02)
        _thread.interrupt_main()  # what Ray's cancel does in the worker running the task

    threading.Thread(target=cancel, daemon=True).start()
    started = time.monotonic()
    run_attempt(command, str(run_dir), "a test", grace_s=5.0)
    assert time.monotonic() - started < 5 and events.count("interrupted") == 1 and not events.count("finish")
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "interrupted"


def test_the_cluster_is_described_after_ray_is_started(tmp_path, monkeypatch):
    """``ablate sweep run --launcher ray`` prints how many trials fit before the loop's check() runs: reading
    the cluster's resources starts (or joins) Ray first instead of failing with Ray's "not been started yet"."""
    from ablate.sweep import ray_cluster
    from ablate.sweep.local import ExecutorArgs
    from ablate.sweep.planner import LaunchOptions

    started: list[dict] = []

    def resources() -> dict[str, float]:
        if not started:
            raise RuntimeError("Ray has not been started yet")
        return {"CPU": 4.0}

    fake = types.SimpleNamespace(
        is_initialized=lambda: bool(started), init=lambda **kwargs: started.append(kwargs), cluster_resources=resources
    )
    monkeypatch.setattr(ray_cluster, "_ray", lambda: fake)
    executor = ray_cluster.RayExecutor(ExecutorArgs(), LaunchOptions(tmp_path / "out", []))
    assert executor.describe() == "Ray: 1 CPU per trial, 4 at once"
    assert len(started) == 1


@pytest.mark.parametrize("code, lost", [(-9, True), (-15, True), (0, False), (1, False)])
def test_a_trainer_killed_inside_its_ray_task_is_relaunched_as_a_local_one_is(monkeypatch, code, lost):
    """A trainer killed by a signal inside a live Ray task (the OOM killer, ``kill -9``) ended as a failure of its
    own (``Exit(-9)``, not lost): the trial failed for good where a local one killed so is relaunched."""
    from ablate.sweep import ray_cluster

    errors = types.SimpleNamespace(RayTaskError=KeyError, RayError=KeyError)
    fake = types.SimpleNamespace(get=lambda ref: code, exceptions=errors)
    monkeypatch.setattr(ray_cluster, "_ray", lambda: fake)
    exit = ray_cluster.RayExecutor._exit(object())
    assert exit.code == code and exit.lost is lost


def test_a_cluster_ray_cannot_reach_is_one_line_naming_ray_address(tmp_path, monkeypatch):
    # RAY_ADDRESS naming a stopped head (or one whose token this client lacks): Ray's ConnectionError traceback, rc 1
    from ablate.sweep import ray_cluster

    def init(**kwargs):
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.9:6379")

    fake = types.SimpleNamespace(is_initialized=lambda: False, init=init)
    monkeypatch.setattr(ray_cluster, "_ray", lambda: fake)
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.9:6379")
    result = CliRunner().invoke(app, ["run", QUICKSTART, "--launcher", "ray", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2, result.output
    line = result.output.strip().splitlines()[-1]
    assert (
        line.startswith("error: --launcher ray: Failed to connect to Ray cluster at 10.0.0.9:6379")
        and "RAY_ADDRESS" in line
    )
    assert not (tmp_path / "x" / "sweep.json").exists()


@pytest.mark.parametrize("flags", [{"cpus_per_trial": 0}, {"cpus_per_trial": -1}, {"gpus_per_trial": -1}])
def test_no_cpu_or_negative_gpus_per_ray_task_is_refused(tmp_path, flags):
    # --cpus-per-trial 0 ran every task on 1 CPU, as if it were not given
    from ablate.sweep import ray_cluster
    from ablate.sweep.local import ExecutorArgs
    from ablate.sweep.planner import LaunchOptions
    from ablate.sweep.spec import SweepError

    with pytest.raises(SweepError, match="--cpus-per-trial must be > 0"):
        ray_cluster.RayExecutor(ExecutorArgs(**flags), LaunchOptions(tmp_path / "out", []))


def _running(out: Path) -> set[str]:
    try:
        return {t["name"] for t in json.loads((out / "sweep.json").read_text())["trials"] if t["status"] == "running"}
    except (OSError, ValueError, KeyError):
        return set()


def _finished(run_dir: Path) -> bool:
    """Whether the run in ``run_dir`` recorded that it finished (a kill after that is not a lost run)."""
    try:
        return json.loads((run_dir / "summary.json").read_text())["status"] == "finished"
    except (OSError, ValueError, KeyError):
        return False


def _kill_one_task(out: Path, killed: list[str]) -> None:
    """Once a running trial has a checkpoint and has not finished, SIGKILL the Ray worker process running it (named
    in its trial.log). Its training must outlast the 0.2 s poll: a kill that lands after the run finished (CI, stop
    46: 20 steps took a fraction of it) makes a retry that finds the run done, and resumes nothing."""
    deadline = time.monotonic() + 1200
    while time.monotonic() < deadline and not killed:
        for name in sorted(_running(out)):
            log = out / name / "trial.log"
            pids = re.findall(r"ray worker pid (\d+)", log.read_text(errors="replace")) if log.exists() else []
            if pids and (out / name / "checkpoints" / "last.ckpt").exists() and not _finished(out / name):
                os.kill(int(pids[-1]), signal.SIGKILL)
                killed.append(name)
                return
        time.sleep(0.2)


def _layout(table: str, out: Path) -> str:
    """A table of sweep folder ``out`` with its numbers, bold (the best of a column, throughput included), folder and
    W&B group (random per folder) blanked: its rows and columns."""
    group = json.loads((out / "sweep.json").read_text())["group"]
    return re.sub(r"-?\d+(\.\d+)?", "N", table.replace(str(out), "").replace(group, "GROUP").replace("**", ""))


@pytest.mark.slow
def test_quickstart_on_a_local_ray_cluster_retries_a_killed_task_and_tables_like_local(
    tmp_path, cache_dir, monkeypatch
):
    ray = pytest.importorskip("ray")
    monkeypatch.setattr(commands, "console", Console(width=250))
    from ablate.cli import app as main_app

    quickstart = str(one_seed(Path(QUICKSTART), tmp_path))  # its 4 variants, 2 at a time: 2 of them queued
    session_sigterm = signal.getsignal(signal.SIGTERM)  # ray.init puts its own (sys.exit) there for good
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        out = tmp_path / "ray"
        killed: list[str] = []
        killer = threading.Thread(target=_kill_one_task, args=(out, killed), daemon=True)
        killer.start()
        result = CliRunner().invoke(app, ["run", quickstart, "--launcher", "ray", "--out", str(out), *TINY_QUICKSTART])
        killer.join(timeout=1)
    finally:
        ray.shutdown()
        signal.signal(signal.SIGTERM, session_sigterm)  # SIGTERM stops this session again (tests/conftest.py)
    assert result.exit_code == 0, result.output
    assert "Ray: 1 CPU per trial, 2 at once" in result.output
    assert killed, result.output
    state = json.loads((out / "sweep.json").read_text())
    assert len(state["trials"]) == 4 and {t["status"] for t in state["trials"]} == {"finished"}
    victim = next(t for t in state["trials"] if t["name"] == killed[0])
    assert victim["attempts"] == 2 and f"retrying {killed[0]}" in result.output  # the lost task ran again
    log = (out / killed[0] / "trial.log").read_text()
    assert log.count("ablate sweep (Ray)") == 2 and "resum" in log.lower()

    local = tmp_path / "local"
    args = ["run", quickstart, "--devices", "cpu", "--parallel", "2", "--out", str(local), *TINY_QUICKSTART]
    assert CliRunner().invoke(app, args).exit_code == 0
    folders = {
        p: sorted(q.name for q in p.iterdir() if q.is_dir() and not q.name.startswith(".")) for p in (out, local)
    }
    assert folders[out] == folders[local] and len(folders[out]) == 4
    tables = [CliRunner().invoke(main_app, ["table", str(p), "--format", "md"]) for p in (out, local)]
    assert all(t.exit_code == 0 for t in tables), [t.output for t in tables]
    assert _layout(tables[0].output, out) == _layout(tables[1].output, local)
