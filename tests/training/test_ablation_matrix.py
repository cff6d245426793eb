"""Every ablation axis trains on real Multi30k text and records a finite loss and a test BLEU.

Every registered score x scaling (2) with sinusoidal positions, every registered position type, heads 1 and
8, and the RNN with ``additive``, ``dot`` and ``none`` -- each through the real training path
(data module, Lightning, decoding, sacreBLEU, run record) on a slice of the corpus.
"""

from __future__ import annotations

import gzip
import itertools
import math
from pathlib import Path

import pytest

from ablate.config import load_config
from ablate.model.positions import POSITIONS
from ablate.model.scores import SCORES
from ablate.training.train import train

from tests.helpers.tiny import tiny

CASES = (  # every registered variant: a new score or position type is trained here with no edit
    [
        [f"model.attention.score={s}", f"model.attention.scale={str(scaled).lower()}"]
        for s in SCORES
        for scaled in (True, False)
    ]
    + [[f"model.positions={p}"] for p in POSITIONS if p != "sinusoidal"]
    + [["model.heads=1"], ["model.heads=8"]]
    + [["model.arch=rnn", f"model.attention.score={s}", "model.rnn.hidden=32"] for s in ("additive", "dot", "none")]
)
BASE = tiny(  # on the Multi30k slice (data.source below), with four heads and a larger vocabulary
    "data.vocab_size=400",
    "model.heads=4",
    "train.max_steps=12",
    "train.max_tokens=1500",
    "train.warmup=4",
    "train.lr=3e-3",
    "eval.beam=2",
    "eval.max_len_b=5",
    "eval.max_len_a=1.0",
    "tracking.wandb=disabled",
    "tracking.log_every=4",
    "train.val_every=1000",
)


@pytest.fixture(scope="module")
def multi30k_slice(multi30k: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 1500 / 60 / 60 lines of Multi30k en-de (train / val / test_2016_flickr)."""
    folder = tmp_path_factory.mktemp("m30k-slice")
    for split, n in (("train", 1500), ("val", 60), ("test_2016_flickr", 60)):
        for lang in ("en", "de"):
            with gzip.open(multi30k / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
                (folder / f"{split}.{lang}").write_text("".join(itertools.islice(f, n)))
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(x.split(".")[-1] for x in c))
def test_variant_trains_and_scores(case, multi30k_slice, tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATE_CACHE", str(multi30k_slice / "cache"))  # one tokenizer for all cases
    cfg = load_config(None, [*BASE, f"data.source={multi30k_slice}", *case])
    summary = train(cfg, tmp_path / "run")
    assert summary["status"] == "finished" and summary["step"] == 12
    assert math.isfinite(summary["train/loss"]) and math.isfinite(summary["val/ppl"]) and summary["val/ppl"] > 1
    assert 0.0 <= summary["test_test_2016_flickr/bleu"] <= 100.0
    assert summary["test/bleu"] == summary["test_test_2016_flickr/bleu"]
    hyps = (tmp_path / "run" / "hyps" / "test_2016_flickr.txt").read_text().splitlines()
    assert len(hyps) == 60
    if case in (CASES[0], CASES[-3]):  # Transformer and RNN + Bahdanau: the attention pictures
        from ablate.report.attention_maps import plot_attention

        pngs = plot_attention(tmp_path / "run", "A man is riding a bike .", tmp_path / "pics", beam=2)
        names = {p.name for p in pngs}
        assert "attention_cross.png" in names
        if "model.arch=rnn" not in case:
            assert {"attention_encoder_self.png", "attention_decoder_self.png", "positions.png"} <= names
        assert all(p.stat().st_size > 10_000 for p in pngs)
