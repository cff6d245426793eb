"""Sweeps over several GPUs on one machine, with N visible GPUs faked: which trial gets which devices.

The fake trainer records the ``CUDA_VISIBLE_DEVICES`` and thread count it was started with and its
overrides, so these tests see exactly what a real trial would be given: N trials on N GPUs at once,
N/K DDP trials of K GPUs each (``--gpus-per-trial K`` adds ``train.devices=K``), and K small trials
packed on one GPU (``--parallel K``). DDP itself on one node is proven by the CPU DDP run in
``tests/sweep/test_e2e.py`` (``train.devices: 2``) and ``tests/training/test_train.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ablate.sweep.local import plan_slots

from tests.helpers.sweep import fake_command, options, quiet_progress, run_sweep, small_spec


def run_on(tmp_path: Path, events, trials: int, slots) -> dict[str, dict]:
    """Run ``trials`` seeds over ``slots``; per trial: its GPUs, threads, time span and overrides."""
    spec = small_spec({"seed": {"values": list(range(1, trials + 1))}})
    opts = options(tmp_path / "out", fake_command(events, steps=6, step_s=0.25))
    opts.slots = slots
    progress, _ = quiet_progress()
    result = run_sweep(spec, opts, progress)
    assert all(t.status == "finished" for t in result.state.trials)
    out: dict[str, dict] = {}
    for what, name, t, _, gpus, threads in events.rows():
        row = out.setdefault(name, {})
        row[what] = t
        row["gpus"], row["threads"] = gpus.strip("[]"), threads
    for name, row in out.items():
        row["config"] = json.loads((tmp_path / "out" / name / "summary.json").read_text())["config"]
    return out


def most_at_once(rows: dict[str, dict], key=lambda row: "") -> int:
    """The most trials (sharing ``key``) whose start..finish spans overlap at one moment."""
    spans = [(r["start"], r["finish"], key(r)) for r in rows.values()]
    return max(sum(s <= t < e and k == key_t for s, e, k in spans) for t, _, key_t in spans)


FOUR = ["0", "1", "2", "3"]


def test_n_trials_run_at_once_on_n_gpus_one_each(tmp_path, events):
    rows = run_on(tmp_path, events, 4, plan_slots("auto", cores=8, gpus=lambda: FOUR))
    assert sorted(r["gpus"] for r in rows.values()) == FOUR  # each trial sees exactly one, all different
    assert most_at_once(rows) == 4 and {r["threads"] for r in rows.values()} == {"2"}
    assert all("train.devices" not in r["config"] for r in rows.values())  # one GPU: no DDP


@pytest.mark.slow
def test_more_trials_than_gpus_never_share_one(tmp_path, events):
    rows = run_on(tmp_path, events, 8, plan_slots("auto", cores=8, gpus=lambda: FOUR))
    assert {r["gpus"] for r in rows.values()} == set(FOUR)
    assert most_at_once(rows) == 4 and most_at_once(rows, key=lambda r: r["gpus"]) == 1


@pytest.mark.slow
@pytest.mark.parametrize("gpus, k", [(FOUR, 2), (FOUR, 4), (["0", "1", "2", "3", "4", "5", "6", "7"], 4)])
def test_gpus_per_trial_runs_n_over_k_ddp_trials(tmp_path, events, gpus, k):
    n = len(gpus)
    rows = run_on(tmp_path, events, n // k * 2, plan_slots("auto", gpus_per_trial=k, cores=8, gpus=lambda: gpus))
    groups = {r["gpus"] for r in rows.values()}
    assert groups == {",".join(gpus[i : i + k]) for i in range(0, n, k)}  # disjoint groups of K, all used
    assert all(r["config"]["train.devices"] == str(k) for r in rows.values())  # DDP over its K devices
    assert most_at_once(rows) == n // k and most_at_once(rows, key=lambda r: r["gpus"]) == 1


def test_parallel_packs_small_trials_on_one_gpu(tmp_path, events):
    """What the GPU check's packed stage runs: ``--parallel 4`` on one visible GPU."""
    rows = run_on(tmp_path, events, 4, plan_slots("auto", parallel=4, cores=8, gpus=lambda: ["0"]))
    assert {r["gpus"] for r in rows.values()} == {"0"} and most_at_once(rows) == 4
    assert {r["threads"] for r in rows.values()} == {"2"}  # the cores are split between the packed trials
