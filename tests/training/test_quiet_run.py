"""A normal ``ablate train`` prints nothing a user cannot act on, and records what
produced it (items 3, 7, 8).

One tiny run through the command line, as a user starts it (W&B offline, epochs unbounded as in
every shipped sweep, a step budget spent before the first epoch ends), its stdout and stderr kept.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ablate.config import load_config
from ablate.training.train import train
from ablate.utils.provenance import freeze_sha256

from tests.helpers.tiny import EVAL_PAIRS, tiny
from tests.helpers.wandb_offline import read_offline_run

ROOT = Path(__file__).resolve().parents[2]

RUN = tiny(
    "train.max_steps=2",  # fewer than one epoch's batches: no validation before the budget ends
    "train.max_epochs=null",
    "train.max_tokens=1024",
    "train.warmup=1",
    "eval.max_len_b=5",
    "tracking.log_every=1",
    "train.clip_norm=0.01",  # clipping bites on every step: the recorded gradient norm is the one before it
    eval_pairs=EVAL_PAIRS,
)


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("quiet")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", ABLATE_CACHE=str(root / "cache"), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "train", "--run-dir", str(root / "run"), *RUN],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-2000:]
    return output, root / "run"


@pytest.mark.slow
def test_a_normal_run_prints_no_warning_a_user_cannot_act_on(cli_run):
    output, _ = cli_run
    assert "anonymous setting" not in output  # W&B's deprecation, from an argument nobody set
    assert "could not find the monitored key" not in output  # best.ckpt looked for val/bleu before any validation
    assert not re.search(r"Epoch \d+/-\d", output)  # "Epoch 0/-2": max_epochs=-1 shown as a bound
    assert "step 2/2 · loss " in output  # the budget the run does have (stderr is no terminal: a status line)
    assert "warning" not in output.lower(), output


@pytest.mark.slow
def test_the_summary_keeps_every_metric_signature(cli_run):
    summary = json.loads((cli_run[1] / "summary.json").read_text())
    assert summary["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert summary["chrf_signature"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:")
    assert summary["chrf++_signature"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:")
    assert summary["ter_signature"].startswith("nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|version:")


@pytest.mark.slow
def test_every_test_split_has_chrf_chrf_plus_plus_and_ter_in_the_summary_and_wandb(cli_run):
    import sacrebleu

    run = cli_run[1]
    summary = json.loads((run / "summary.json").read_text())
    splits = [k[len("test_") : -len("/bleu")] for k in summary if k.startswith("test_") and k.endswith("/bleu")]
    assert splits
    (wandb_file,) = run.glob("wandb/offline-run-*/run-*.wandb")
    logged = read_offline_run(wandb_file)
    for split in splits:
        hyps = (run / "hyps" / f"{split}.txt").read_text(encoding="utf-8").splitlines()
        refs = (run / "refs" / f"{split}.txt").read_text(encoding="utf-8").splitlines()
        expected = {
            "chrf": sacrebleu.metrics.CHRF().corpus_score(hyps, [refs]).score,
            "chrf++": sacrebleu.metrics.CHRF(word_order=2).corpus_score(hyps, [refs]).score,
            "ter": sacrebleu.metrics.TER().corpus_score(hyps, [refs]).score,
        }
        for name, value in expected.items():
            assert summary[f"test_{split}/{name}"] == pytest.approx(value)
            assert logged["summary"][f"test_{split}/{name}"] == pytest.approx(value)
    assert summary["test/ter"] == summary[f"test_{splits[0]}/ter"] and summary["test/ter"] > 0


@pytest.mark.slow
def test_the_summary_records_package_versions_and_the_environment(cli_run):
    run = cli_run[1]
    summary = json.loads((run / "summary.json").read_text())
    env = summary["environment"]
    assert env["versions"]["torch"] == torch.__version__ and env["versions"]["ablate"]
    assert env["freeze_sha256"] == freeze_sha256((run / "environment.txt").read_text().splitlines())
    assert summary["commits"] and "unknown" not in summary["commits"]


@pytest.mark.slow
def test_the_gradient_norm_before_clipping_is_in_history_summary_and_wandb(cli_run):
    run = cli_run[1]
    summary = json.loads((run / "summary.json").read_text())
    norm = summary["train/grad_norm"]
    assert norm > 0.01  # train.clip_norm: the norm before clipping
    assert summary["history"][-1]["step"] == 2 and summary["history"][-1]["train/grad_norm"] == norm
    (wandb_file,) = run.glob("wandb/offline-run-*/run-*.wandb")
    assert read_offline_run(wandb_file)["history"]["train/grad_norm"] == pytest.approx(norm, rel=1e-5)


@pytest.mark.slow
def test_a_finished_run_continues_as_a_new_run_from_its_weights(cli_run, tmp_path, monkeypatch):
    run = cli_run[1]
    monkeypatch.setenv("ABLATE_CACHE", str(run.parent / "cache"))  # the same data, so the same tokenizer
    cfg = load_config(None, [*RUN, f"train.init_from={run}", "train.max_steps=3", "tracking.wandb=disabled"])
    summary = train(cfg, tmp_path / "longer")
    assert summary["init_from"] == {"checkpoint": str((run / "checkpoints" / "best.ckpt").resolve()), "step": 2}
    assert summary["step"] == 3 and summary["status"] == "finished"  # its own steps: a new optimizer and schedule
