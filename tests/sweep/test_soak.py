"""The soak drill: a real sweep with kills, SIGTERMs, NaNs and out-of-memory errors injected.

sweeps/soak.yaml's six variants with one seed, validated and tested on EVAL_PAIRS built-in pairs each
instead of 500 (the shipped file has two seeds, 12 trials; its full run is in the closing notes).
Every trial ends finished or failed with its reason; killed and SIGTERM'd trials are relaunched,
resume from their checkpoints and finish with the same W&B run id; the launcher itself, killed
mid-sweep, loses nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.sweep import one_seed
from tests.helpers.tiny import EVAL_PAIRS

ROOT = Path(__file__).resolve().parents[2]


def launch(sweep: Path, out: Path, *extra: str) -> subprocess.Popen:
    argv = [
        sys.executable,
        str(ROOT / "cli.py"),
        "sweep",
        "run",
        str(sweep),
        "--out",
        str(out),
        "--devices",
        "cpu",
        "--parallel",
        "2",
        "--grace",
        "10",
        "tracking.wandb=offline",
        f"data.builtin_eval_pairs={EVAL_PAIRS}",
        *extra,
    ]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def statuses(out: Path) -> dict[str, str]:
    try:
        return {t["name"]: t["status"] for t in json.loads((out / "sweep.json").read_text())["trials"]}
    except (OSError, json.JSONDecodeError, KeyError):
        return {}


@pytest.mark.slow
def test_soak_sweep_with_injected_faults_loses_nothing(tmp_path, cache_dir):
    out, sweep = tmp_path / "soak", one_seed(ROOT / "sweeps" / "soak.yaml", tmp_path)
    assert os.environ["ABLATE_CACHE"]  # the trials share the test's private cache
    first = launch(sweep, out)
    deadline = time.monotonic() + 300
    while sum(s == "finished" for s in statuses(out).values()) < 2 and time.monotonic() < deadline:
        assert first.poll() is None, first.stdout.read()
        time.sleep(0.5)
    os.killpg(first.pid, signal.SIGKILL)  # the launcher and its running trials die mid-sweep
    first.wait()

    second = launch(sweep, out)
    output, _ = second.communicate(timeout=600)
    assert second.returncode == 1, output  # exit 1: some trials failed (the injected NaN and OOM, by design)
    trials = json.loads((out / "sweep.json").read_text())["trials"]
    assert len(trials) == 6
    by_name = {t["name"]: t for t in trials}
    for name, t in by_name.items():
        variant = name
        summary = json.loads((out / name / "summary.json").read_text())
        if variant in ("nan", "oom"):
            assert t["status"] == "failed" and summary["status"] == "failed", (name, t)
            expected = "non-finite loss at step 25" if variant == "nan" else "out of memory with train.max_tokens=1024"
            assert expected in t["error"] and expected in summary["error"]
        else:
            assert t["status"] == "finished" and summary["status"] == "finished", (name, t, output)
            assert summary["step"] == 60 and t["metric"] == summary["val/bleu"]
            assert len((out / name / "hyps" / "test.txt").read_text().splitlines()) == EVAL_PAIRS
            runs = list((out / name / "wandb").glob("offline-run-*"))
            ids = {p.name.rsplit("-", 1)[-1] for p in runs}
            assert ids == {(out / name / "wandb_id.txt").read_text().strip()}, runs  # one W&B run id
        if variant in ("killed", "sigterm"):
            assert (
                t["attempts"] >= 2
                and (
                    out / name / f".fault-{'kill' if variant == 'killed' else 'term'}-"
                    f"{45 if variant == 'killed' else 35}"
                ).exists()
            )
    assert "4 finished" in output and "2 failed" in output, output
