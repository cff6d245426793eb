"""Packed SLURM workers (``--trials-per-job``) against a real one-node SLURM cluster started on localhost.

Skipped with the reason where SLURM cannot start (``.ci/run`` installs slurm-wlm and munge).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ablate.sweep.commands import app

from tests.helpers.slurm_cluster import LocalSlurm, unavailable
from tests.helpers.tiny import tiny_sweep_yaml

ROOT = Path(__file__).resolve().parents[2]

PACKED_SWEEP = (
    """\
# eight tiny trials, long enough to be cancelled half-way and resumed
method: grid
parameters:
  seed: {values: [1, 2, 3, 4, 5, 6, 7, 8]}
  data.builtin_pairs: {value: 300}
"""
    + tiny_sweep_yaml()
    + """\
  train.max_steps: {value: 60}
  train.max_epochs: {value: 1000}
  train.max_tokens: {value: 512}
  train.checkpoint_every: {value: 5}
  train.val_every: {value: 100000}
  eval.beam: {value: 1}
  eval.max_len_b: {value: 3}
"""
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    slurm = LocalSlurm(tmp_path_factory.mktemp("slurm"), port=16837).start()
    yield slurm
    slurm.stop()


def test_trials_per_job_needs_slurm(tmp_path):
    result = CliRunner().invoke(
        app, ["run", str(ROOT / "sweeps" / "quickstart.yaml"), "--trials-per-job", "2", "--out", str(tmp_path / "x")]
    )
    assert (
        result.exit_code == 2 and "--trials-per-job packs trials into SLURM jobs: add --launcher slurm" in result.output
    )
    assert len(result.output.strip().splitlines()) == 1


def _running_jobs() -> set[str]:
    out = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i"], capture_output=True, text=True)
    return set(out.stdout.split())


def _wait(predicate, timeout: float, what: str, cluster: LocalSlurm, seen: list[set[str]]) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        seen.append(_running_jobs())
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n{cluster.log()}\n{cluster.log('slurmd')}"
        time.sleep(0.5)


def _occupancy(out: Path) -> str:
    """Trials started per worker job, and the busy slots over time (from the workers' logs)."""
    events, per_job = [], Counter()
    for log in (out / ".workers").glob("*.log"):
        for line in log.read_text().splitlines():
            at, kind = line.split()[:2]
            events.append((float(at), 1 if kind == "start" else -1))
            per_job[log.stem] += kind == "start"
    events.sort()
    busy, curve = 0, []
    for at, step in events:
        busy += step
        curve.append(f"{at - events[0][0]:.0f}s:{busy}")
    return f"starts per worker job {dict(per_job)}; busy slots over time {' '.join(curve)}"


@pytest.mark.slow
def test_packed_workers_survive_a_cancelled_worker(cluster, tmp_path, cache_dir):
    """8 trials, 2 worker jobs x 2 slots; scancel one worker mid-trial; every trial finishes exactly once."""
    path = tmp_path / "packed.yaml"
    path.write_text(PACKED_SWEEP)
    out = tmp_path / "out"
    argv = [sys.executable, str(ROOT / "cli.py"), "sweep", "run", str(path), "--launcher", "slurm", "--out", str(out)]
    argv += ["--trials-per-job", "2", "--max-concurrent", "2", "--grace", "30"]
    argv += ["tracking.wandb=disabled"]
    watcher = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[set[str]] = []

    def state() -> dict:
        try:
            return json.loads((out / "sweep.json").read_text())
        except (OSError, ValueError):
            return {}

    def mid_trial() -> list[dict]:  # running trials past their first checkpoint
        return [
            t
            for t in state().get("trials", [])
            if t["status"] == "running" and (out / t["name"] / "checkpoints" / "last.ckpt").exists()
        ]

    _wait(lambda: bool(mid_trial()), 300, "a trial to checkpoint", cluster, seen)
    victim = mid_trial()[0]
    job = victim["job_id"]
    cancelled = [t["name"] for t in state()["trials"] if t["status"] == "running" and t["job_id"] == job]
    # those with a checkpoint must resume from it; one that had just started has none, and starts again
    checkpointed = [name for name in cancelled if (out / name / "checkpoints" / "last.ckpt").exists()]
    assert victim["name"] in checkpointed
    subprocess.run(["scancel", job], check=True)
    while watcher.poll() is None:
        seen.append(_running_jobs())
        time.sleep(0.5)
    output = watcher.stdout.read() if watcher.stdout else ""
    assert watcher.returncode == 0, output + cluster.log()

    final = state()
    trials = final["trials"]
    assert len(trials) == 8 and {t["status"] for t in trials} == {"finished"}, output
    assert max(len(jobs) for jobs in seen) <= 2  # never more than --max-concurrent workers at once
    assert len(final["workers"]) >= 2 and job in final["workers"]
    folders = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert sorted(p.name for p in folders) == sorted(t["name"] for t in trials)
    for trial in trials:
        summary = json.loads((out / trial["name"] / "summary.json").read_text())
        assert summary["status"] == "finished" and summary["step"] == 60
    ends = Counter(
        line.split()[2]
        for log in (out / ".workers").glob("*.log")
        for line in log.read_text().splitlines()
        if line.split()[1] == "end" and line.split()[3] == "finished"
    )
    assert ends == Counter({t["name"]: 1 for t in trials})  # each trial finished exactly once
    for name in cancelled:  # the cancelled worker's trials ran again, from their checkpoint where they had one
        trial = next(t for t in trials if t["name"] == name)
        assert trial["attempts"] >= 2 and trial["job_id"] != job
        log = (out / name / "trial.log").read_text()
        # or (a race: it ended as scancel came) attempt 1 finished it and nothing trained it again
        finished_first = log.count("\n=== ") == 1 and "| 60 steps |" in log
        if name in checkpointed:
            assert "resum" in log.lower() or finished_first, log

    print(_occupancy(out))  # the numbers docs/sweeps.md quotes (pytest -s)

    status = CliRunner().invoke(app, ["status", str(out)])
    assert status.exit_code == 0 and f"worker job {job}" in status.output
    again = subprocess.run(argv, capture_output=True, text=True)
    assert again.returncode == 0 and "nothing to train: all 8 trials of packed are done" in again.stdout, again.stdout
