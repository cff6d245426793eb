"""The planner and the one loop through a fake in-memory executor: no processes, no sleeping.

Every poll of :class:`FakeExecutor` advances each running attempt by one step and writes its
``summary.json`` as the trainer would, so what is asserted is the planner's part alone: the order
of starts, the capacity, retries of attempts lost from outside, hyperband, Ctrl-C and resume, and
the final ``sweep.json``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Callable, Optional

import pytest

from ablate.sweep.launcher import EXECUTORS, make_executor
from ablate.sweep.local import ExecutorArgs, Exit, Handle, LaunchRefused, Polled
from ablate.sweep.spec import SweepError
from ablate.sweep.state import Trial, load_state

from tests.helpers.sweep import options, quiet_progress, run_sweep, small_spec

SEEDS = {"seed": {"values": [1, 2, 3, 4, 5]}}
INTERRUPTED = "interrupted; run the same command again to resume from out/seed=1/checkpoints"  # the trainer's error


class FakeExecutor:
    """An in-memory backend. ``modes`` maps a trial to one mode per attempt (the last repeats):
    ``ok``, ``bad`` (a low metric), ``lost`` (ended from outside at the first step of the attempt), ``sigterm`` (so, but
    the trainer saw the signal and checkpointed), ``crash`` (its own error), ``refuse`` (never starts)."""

    poll_s = 0.0
    can_stop_early = True

    def __init__(
        self,
        out: Path,
        modes: Optional[dict[str, list[str]]] = None,
        capacity: int = 2,
        steps: int = 4,
        outlives: bool = False,
        reason: Optional[str] = None,
    ):
        self.out, self.modes, self.slots, self.steps = out, modes or {}, capacity, steps
        self.outlives_launcher, self.reason = outlives, reason
        self.live: dict[str, dict] = {}  # what runs "on the cluster": survives a launcher when outlives
        self.log: list[tuple[str, str]] = []  # (what, trial) in order
        self.commands: dict[str, list[str]] = {}
        self.most = 0
        self.interrupt_at: Optional[int] = None  # Ctrl-C at this poll
        self.polls = 0

    def capacity(self) -> int:
        return self.slots

    def describe(self) -> str:
        return f"fake x{self.slots}"

    def check(self) -> None:
        pass

    def _mode(self, trial: Trial) -> str:
        modes = self.modes.get(trial.name, ["ok"])
        return modes[min(trial.attempts, len(modes) - 1)]  # attempts: before this one

    def start(self, trial: Trial, run_dir: Path, argv: Callable[[list[str]], list[str]]) -> Handle:
        mode = self._mode(trial)
        if mode == "refuse":
            raise LaunchRefused("the fake cluster refused the job")
        run_dir.mkdir(parents=True, exist_ok=True)
        self.commands[trial.name] = argv(["fake.backend=1"])
        step = json.loads((run_dir / "ckpt").read_text()) if (run_dir / "ckpt").exists() else 0
        self.live[trial.name] = {"mode": mode, "step": step, "begun": step, "stop": None, "seed": trial.point["seed"]}
        self.most = max(self.most, len(self.live))
        self.log.append(("start", trial.name))
        return Handle(trial, "fake", ref=trial.name)

    def _write(self, name: str, **summary) -> None:
        (self.out / name / "summary.json").write_text(json.dumps(summary))

    def _advance(self, name: str, run: dict) -> Optional[Exit]:
        if run["stop"] == "kill":
            return Exit(-9, lost=True, reason=self.reason)
        if run["stop"] == "term":  # the trainer checkpoints and says so
            self._write(name, status="interrupted", step=run["step"])
            return Exit(143, lost=True, reason=self.reason)
        run["step"] += 1
        (self.out / name / "ckpt").write_text(str(run["step"]))
        bleu = 0.5 if run["mode"] == "bad" else 10.0 * run["seed"]
        if run["mode"] == "lost" and run["step"] == run["begun"] + 1:
            return Exit(-9, lost=True, reason=self.reason)
        if run["mode"] == "sigterm" and run["step"] == run["begun"] + 1:  # from outside: the trainer checkpoints
            self._write(name, status="interrupted", step=run["step"], error=INTERRUPTED)
            return Exit(130)
        if run["mode"] == "crash" and run["step"] == 2:
            self._write(name, status="failed", step=2, error="loss is NaN at step 2")
            return Exit(1)
        if run["step"] < self.steps:
            self._write(name, status="running", step=run["step"], **{"val/bleu": bleu * run["step"] / self.steps})
            return None
        self._write(name, status="finished", step=run["step"], **{"val/bleu": bleu, "test/bleu": bleu - 1})
        return Exit(0)

    def poll(self, handles: list[Handle]) -> Polled:
        self.polls += 1
        if self.polls == self.interrupt_at:
            raise KeyboardInterrupt
        polled = Polled()
        for handle in handles:
            ended = self._advance(handle.ref, self.live[handle.ref])
            if ended is not None:
                polled.ended.append((handle, ended))
        return polled

    def stop(self, handle: Handle) -> None:
        self.live[handle.ref]["stop"] = "term"
        self.log.append(("stop", handle.ref))

    def kill(self, handle: Handle) -> None:
        self.live[handle.ref]["stop"] = "kill"

    def release(self, handle: Handle) -> None:
        del self.live[handle.ref]
        self.log.append(("end", handle.ref))

    def adopt(self, trial: Trial, say: Callable[[str], None]) -> Optional[Handle]:
        if self.outlives_launcher and trial.name in self.live:
            self.log.append(("adopt", trial.name))
            return Handle(trial, "fake", ref=trial.name)
        return None


def sweep(tmp_path: Path, executor: FakeExecutor, spec=None, **kwargs):
    progress, buffer = quiet_progress()
    opts = options(tmp_path / "out", command=lambda run_dir, overrides: ["train", *overrides], **kwargs)
    result = run_sweep(spec or small_spec(SEEDS), opts, progress, executor)
    return result, buffer.getvalue()


def saved(tmp_path: Path) -> dict[str, dict]:
    return {t["name"]: t for t in json.loads((tmp_path / "out" / "sweep.json").read_text())["trials"]}


def test_trials_start_in_plan_order_within_capacity_and_reach_sweep_json(tmp_path):
    fake = FakeExecutor(tmp_path / "out", capacity=2)
    result, _ = sweep(tmp_path, fake)
    starts = [name for what, name in fake.log if what == "start"]
    assert starts == ["seed=1", "seed=2", "seed=3", "seed=4", "seed=5"]  # W&B grid order
    assert fake.most == 2  # never more than the executor's capacity at once, and it was used
    assert result.launched == 5 and not result.interrupted
    trials = saved(tmp_path)
    assert {n: (t["status"], t["metric"], t["attempts"]) for n, t in trials.items()} == {
        f"seed={s}": ("finished", 10.0 * s, 1) for s in range(1, 6)
    }
    assert trials["seed=3"]["results"]["test/bleu"] == 29.0
    command = fake.commands["seed=3"]
    assert "seed=3" in command and "tracking.name=seed=3" in command and command[-1] == "fake.backend=1"


def test_an_attempt_lost_from_outside_is_retried_then_failed_and_an_own_error_is_not(tmp_path):
    modes = {"seed=2": ["lost", "ok"], "seed=3": ["lost"], "seed=4": ["crash"]}
    fake = FakeExecutor(tmp_path / "out", modes, capacity=1)
    _, text = sweep(tmp_path, fake, retries=2)
    trials = saved(tmp_path)
    assert (trials["seed=2"]["status"], trials["seed=2"]["attempts"]) == ("finished", 2)  # resumed, then done
    assert (trials["seed=3"]["status"], trials["seed=3"]["attempts"]) == ("failed", 3)  # 1 + 2 retries
    assert "killed by SIGKILL" in trials["seed=3"]["error"]
    assert (trials["seed=4"]["status"], trials["seed=4"]["attempts"]) == ("failed", 1)  # its own NaN: no retry
    assert trials["seed=4"]["error"] == "loss is NaN at step 2"
    assert [n for w, n in fake.log if w == "start"].count("seed=3") == 3
    assert "retrying seed=2 (killed by SIGKILL" in text and "relaunch 1 of 2" in text
    # how the attempt ended, then what the launcher does about it (it printed "retrying" before "interrupted")
    ended, retry = text.index("interrupted seed=2 ("), text.index("retrying seed=2 (")
    assert ended < retry < text.index("started  seed=2", retry)


def test_the_retry_line_of_a_trial_interrupted_from_outside_gives_no_advice_meant_for_a_lone_trainer(tmp_path):
    # "retrying seed=1 (interrupted; run the same command again to resume from ...; attempt 2 of 3)": the trainer's
    # advice to whoever ran it, where the launcher relaunches it by itself
    fake = FakeExecutor(tmp_path / "out", {"seed=1": ["sigterm", "ok"]})
    result, text = sweep(tmp_path, fake, spec=small_spec({"seed": {"values": [1, 2]}}))
    assert result.state.trial("seed=1").status == "finished"
    assert "retrying seed=1 (interrupted from outside, checkpointed; relaunch 1 of 2)" in text, text


@pytest.mark.parametrize("retry_failed", [False, True])
def test_a_trial_resumed_or_retried_by_a_rerun_keeps_its_retries(tmp_path, retry_failed):
    # --retries bounded every attempt the trial ever had: one resumed after Ctrl-C (or run again with --retry-failed
    # after its retries ran out) that was then preempted failed at once ("killed by SIGKILL"), never relaunched
    spec = small_spec({"seed": {"values": [1, 2]}})
    modes = {"seed=1": ["lost", "lost", "lost", "ok"] if retry_failed else ["ok", "lost", "ok"]}
    first = FakeExecutor(tmp_path / "out", modes, capacity=1)
    first.interrupt_at = None if retry_failed else 2  # Ctrl-C while seed=1 trains
    sweep(tmp_path, first, spec=spec, retries=1)
    assert saved(tmp_path)["seed=1"]["status"] == ("failed" if retry_failed else "interrupted")
    _, text = sweep(
        tmp_path, FakeExecutor(tmp_path / "out", modes, capacity=1), spec=spec, retries=1, retry_failed=retry_failed
    )
    assert saved(tmp_path)["seed=1"]["status"] == "finished", text
    assert "retrying seed=1 (" in text and "; relaunch 1 of 1)" in text, text


def test_a_finished_trial_whose_folder_was_deleted_trains_again(tmp_path):
    """``rm -rf runs/<sweep>/seed=2`` to train it again: the rerun said 'nothing to train: all 5 trials are done',
    ``sweep status`` 'finished', and the table 'excluded - no hyps/test'; the rerun trains it now, and says why."""
    import shutil

    sweep(tmp_path, FakeExecutor(tmp_path / "out"))
    shutil.rmtree(tmp_path / "out" / "seed=2")
    again = FakeExecutor(tmp_path / "out")
    _, text = sweep(tmp_path, again)
    assert [n for w, n in again.log if w == "start"] == ["seed=2"]
    assert "seed=2: its folder holds no summary.json (deleted?); it trains again" in text
    assert saved(tmp_path)["seed=2"]["status"] == "finished" and (tmp_path / "out" / "seed=2").is_dir()


def test_a_backend_reason_marks_an_exhausted_lost_trial_failed_with_it(tmp_path):
    fake = FakeExecutor(tmp_path / "out", {"seed=1": ["lost"]}, reason="fake job 7 PREEMPTED")
    result, text = sweep(tmp_path, fake, spec=small_spec({"seed": {"values": [1, 2]}}), retries=1)
    trial = result.state.trial("seed=1")
    assert trial.status == "failed" and trial.attempts == 2
    assert trial.error.startswith("fake job 7 PREEMPTED; ")
    assert "retrying seed=1 (fake job 7 PREEMPTED; relaunch 1 of 1)" in text


def test_a_refused_start_fails_the_trial_and_the_sweep_goes_on(tmp_path):
    fake = FakeExecutor(tmp_path / "out", {"seed=2": ["refuse"]})
    result, _ = sweep(tmp_path, fake)
    assert result.state.trial("seed=2").status == "failed"
    assert result.state.trial("seed=2").error == "the fake cluster refused the job"
    assert result.state.trial("seed=2").attempts == 0 and result.state.count("finished") == 4


def test_hyperband_stops_the_trial_that_lags(tmp_path):
    spec = small_spec(
        {"seed": {"values": [1, 2, 3]}}, early_terminate={"type": "hyperband", "min_iter": 2, "eta": 2}, name="hb"
    )
    fake = FakeExecutor(tmp_path / "out", {"seed=3": ["bad"]}, capacity=1, steps=8)
    _, text = sweep(tmp_path, fake, spec=spec)
    trials = saved(tmp_path)
    assert {n: t["status"] for n, t in trials.items()} == {
        "seed=1": "finished",
        "seed=2": "finished",
        "seed=3": "stopped",
    }
    assert ("stop", "seed=3") in fake.log and "stopping seed=3 early (hyperband)" in text
    assert trials["seed=3"]["history"] and trials["seed=3"]["attempts"] == 1  # stopped is final: not retried


def test_a_backend_that_cannot_stop_early_runs_every_trial_to_its_budget_and_says_so(tmp_path):
    spec = small_spec(
        {"seed": {"values": [1, 2, 3]}}, early_terminate={"type": "hyperband", "min_iter": 2, "eta": 2}, name="hb"
    )
    fake = FakeExecutor(tmp_path / "out", {"seed=3": ["bad"]}, capacity=1, steps=8)
    fake.can_stop_early = False
    _, text = sweep(tmp_path, fake, spec=spec)
    assert all(t["status"] == "finished" for t in saved(tmp_path).values())
    assert not [w for w, _ in fake.log if w == "stop"]
    assert "note: early_terminate is not applied to these trials (fake x1)" in text


def test_ctrl_c_stops_running_trials_and_a_rerun_resumes_only_those(tmp_path):
    fake = FakeExecutor(tmp_path / "out", capacity=2, steps=4)
    fake.interrupt_at = 6  # seed=1 and seed=2 finished at poll 4; seed=3 and seed=4 at step 2
    first, text = sweep(tmp_path, fake)
    assert first.interrupted and "interrupted: stopping running trials" in text
    trials = saved(tmp_path)
    assert {n: t["status"] for n, t in trials.items()} == {
        "seed=1": "finished",
        "seed=2": "finished",
        "seed=3": "interrupted",
        "seed=4": "interrupted",
        "seed=5": "pending",
    }
    assert not fake.live  # every attempt was stopped and read back

    fake.log.clear()
    second, text = sweep(tmp_path, fake)
    assert [n for w, n in fake.log if w == "start"] == ["seed=3", "seed=4", "seed=5"]
    assert "2 finished trials skipped" in text and second.launched == 3
    trials = saved(tmp_path)
    assert all(t["status"] == "finished" for t in trials.values())
    assert trials["seed=3"]["attempts"] == 2 and trials["seed=1"]["attempts"] == 1


def test_a_rerun_names_the_failed_trials_it_skips_and_how_to_retry_them_once(tmp_path):
    """Resumed after Ctrl-C, a sweep said ``1 finished trials skipped`` and went on: the trial that had failed was
    skipped without a word (the "nothing to train" line names them, this one did not)."""
    fake = FakeExecutor(tmp_path / "out", {"seed=2": ["crash"]}, capacity=2, steps=4)
    fake.interrupt_at = 6  # seed=1 finished and seed=2 failed at poll 4; seed=3 and seed=4 at step 2
    first, _ = sweep(tmp_path, fake)
    assert first.interrupted and saved(tmp_path)["seed=2"]["status"] == "failed"
    fake.interrupt_at, fake.polls = None, 0
    second, text = sweep(tmp_path, fake)
    assert "1 finished, 1 failed trials skipped (--retry-failed runs the failed again)\n" in text, text
    assert text.count("--retry-failed") == 1 and second.launched == 3


def test_attempts_that_outlive_the_launcher_are_left_running_then_adopted(tmp_path):
    """SLURM's way: Ctrl-C only stops watching; the rerun adopts the jobs instead of starting them again."""
    fake = FakeExecutor(tmp_path / "out", capacity=2, steps=4, outlives=True)
    fake.interrupt_at = 2
    first, text = sweep(tmp_path, fake)
    assert first.interrupted and "stopped watching: the trials keep running (fake x2)" in text
    assert {n: t["status"] for n, t in saved(tmp_path).items() if t["status"] == "running"} == {
        "seed=1": "running",
        "seed=2": "running",
    }
    fake.log.clear()
    fake.interrupt_at = None
    second, text = sweep(tmp_path, fake)
    assert fake.log[:2] == [("adopt", "seed=1"), ("adopt", "seed=2")]
    assert [n for w, n in fake.log if w == "start"] == ["seed=3", "seed=4", "seed=5"]
    assert "watching 2 trials a previous launcher started" in text
    assert all(t["status"] == "finished" and t["attempts"] == 1 for t in saved(tmp_path).values())


def test_a_rerun_reads_back_a_trial_that_finished_while_no_launcher_watched(tmp_path):
    spec = small_spec({"seed": {"values": [1, 2]}})
    fake = FakeExecutor(tmp_path / "out", capacity=1)
    fake.interrupt_at = 2
    sweep(tmp_path, fake, spec=spec)  # stopped at step 1: interrupted
    state = load_state(tmp_path / "out")
    state.trials[0].status = "running"  # as a SIGKILLed launcher leaves it, after the trainer finished
    (tmp_path / "out" / "seed=1" / "summary.json").write_text(json.dumps({"status": "finished", "val/bleu": 7.0}))
    (tmp_path / "out" / "sweep.json").write_text(json.dumps(state.to_json()))
    fake.log.clear()
    result, text = sweep(tmp_path, fake, spec=spec)
    assert [n for w, n in fake.log if w == "start"] == ["seed=2"]  # seed=1 is not trained again
    assert result.state.trials[0].status == "finished" and result.state.trials[0].metric == 7.0
    assert "1 finished trials skipped" in text


def test_the_registry_names_the_launchers_and_suggests_one_for_a_typo(tmp_path):
    assert list(EXECUTORS) == ["local", "slurm", "ray"]
    opts = options(tmp_path / "out", command=None)
    local = make_executor("local", ExecutorArgs(devices="cpu", parallel=3), opts)
    assert local.capacity() == 3 and local.describe().startswith("slots: ")
    slurm = make_executor("slurm", ExecutorArgs(max_concurrent=5, slurm_args=("account=abc",)), opts)
    assert slurm.capacity() == 5 and slurm.outlives_launcher and not slurm.can_stop_early
    with pytest.raises(SweepError, match=r"--launcher 'locl': choose one of local, slurm, ray; did you mean 'local'\?"):
        make_executor("locl", ExecutorArgs(), opts)


# ---- the worked example of docs/extending.md, through a fake kubectl -------------------------------

FAKE_KUBECTL = """\
import json, subprocess, sys
from pathlib import Path

jobs = Path(__file__).with_name("jobs")
jobs.mkdir(exist_ok=True)
args = sys.argv[1:]
if args[:2] == ["create", "job"]:  # the job runs to its end at once
    code = subprocess.run(args[args.index("--") + 1 :], capture_output=True).returncode
    (jobs / args[2]).write_text(json.dumps({"status": {"succeeded": 1} if code == 0 else {"failed": 1}}))
elif args[:2] == ["get", "job"]:
    print((jobs / args[2]).read_text())
"""


def _docs_executor():
    text = (Path(__file__).resolve().parents[2] / "docs" / "extending.md").read_text()
    block = next(b for b in text.split("```python\n")[1:] if "class KubernetesExecutor" in b).split("```")[0]
    namespace: dict = {}
    exec(block, namespace)  # noqa: S102 - the page's own example
    return namespace["KubernetesExecutor"]


def test_the_extending_pages_kubernetes_executor_runs_a_sweep_from_its_registry_line(tmp_path, monkeypatch, events):
    from rich.console import Console
    from typer.testing import CliRunner

    from ablate.sweep import commands, launcher
    from ablate.sweep.commands import app

    from tests.helpers.sweep import fake_command

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f"#!{sys.executable}\n" + FAKE_KUBECTL)
    kubectl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ABLATE_IMAGE", "registry.example/ablate:1")
    kubernetes = _docs_executor()
    monkeypatch.setattr(kubernetes, "poll_s", 0.01)
    monkeypatch.setitem(launcher.EXECUTORS, "kubernetes", kubernetes)  # the page's registry line
    monkeypatch.setattr(launcher, "trainer_command", lambda config=None: fake_command(events))
    monkeypatch.setattr(commands, "console", Console(width=250))
    (tmp_path / "k.yaml").write_text(
        "method: grid\nparameters:\n  seed: {values: [1, 2]}\n  model.d_model: {value: 32}\n"
    )
    args = ["run", str(tmp_path / "k.yaml"), "--out", str(tmp_path / "out"), "--max-concurrent", "2"]
    result = CliRunner().invoke(app, [*args, "--launcher", "kubernetes"])
    assert result.exit_code == 0, result.output
    assert "Kubernetes: at most 2 jobs of registry.example/ablate:1" in result.output
    trials = saved(tmp_path)
    assert all(t["status"] == "finished" and t["job_id"].startswith("ablate-") for t in trials.values())
    assert events.count("finish") == 2
    typo = CliRunner().invoke(app, [*args, "--launcher", "kubernets"])
    assert typo.exit_code == 2 and "did you mean 'kubernetes'?" in typo.output
