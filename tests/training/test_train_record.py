"""What a finished run records: every saved hypothesis file reproduces its recorded score, and
the validation scores all come from the checkpoint that was tested."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sacrebleu

from ablate.config import load_config
from ablate.training.train import train

from tests.helpers.tiny import EVAL_PAIRS, tiny

TINY = tiny(
    "train.max_steps=48",
    "train.max_tokens=1024",
    "train.warmup=4",
    "train.lr=3e-2",
    "train.schedule=inverse_sqrt",
    "train.val_every=8",
    "eval.beam=2",
    "tracking.wandb=disabled",
    pairs=300,
    eval_pairs=EVAL_PAIRS,
)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("record")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABLATE_CACHE", str(root / "cache"))
        train(load_config(None, TINY), root / "run")
    run_dir = root / "run"
    return run_dir, json.loads((run_dir / "summary.json").read_text())


@pytest.mark.slow
def test_every_hypothesis_file_reproduces_its_recorded_bleu(finished):
    run_dir, summary = finished
    for split, key in (("val", "val/bleu"), ("test", "test/bleu")):
        hyps, refs = _lines(run_dir / "hyps" / f"{split}.txt"), _lines(run_dir / "refs" / f"{split}.txt")
        assert len(hyps) == len(refs) == len(_lines(run_dir / "sources" / f"{split}.txt")) == EVAL_PAIRS
        assert sacrebleu.corpus_bleu(hyps, [refs]).score == summary[key], split


def test_validation_scores_come_from_one_validation(finished):
    _, summary = finished
    history = summary["history"]
    assert len(history) >= 3
    best = next(h for h in history if h["step"] == summary["val/step"])
    assert summary["val/bleu"] == best["val/bleu"] == max(h["val/bleu"] for h in history)
    assert summary["val/ppl"] == best["val/ppl"] and summary["val/chrf"] == best["val/chrf"]


def test_summary_records_resolved_sizes_and_budget_use(finished):
    _, summary = finished
    assert summary["config"]["model"]["d_k"] is None
    assert summary["resolved"]["model.d_k"] == summary["resolved"]["model.d_v"] == 16
    assert summary["resolved"]["model.encoder_layers"] == summary["resolved"]["model.decoder_layers"] == 1
    assert summary["resolved"]["train.lr"] == 3e-2
    assert summary["resolved"]["model.attention.scale"] == pytest.approx(16**-0.5)
    assert summary["step"] == 48 and summary["train/tokens"] > 48 * 100
