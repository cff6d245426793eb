"""Training on a GPU (skipped without CUDA): bf16 autocast is what ``train.precision=auto`` picks, and a
bf16 run trains as the fp32 run of the same seed does; its BLEU is sacreBLEU's.

Run it where a GPU is present: ``python -m pytest -q -m gpu`` (``scripts/gpu-check.sh`` does).
"""

from __future__ import annotations

import math

import pytest
import sacrebleu
import torch

from ablate.config import load_config
from ablate.training.train import train
from ablate.training.trainer import accelerator_and_precision

from tests.helpers.tiny import EVAL_PAIRS, tiny

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

TINY = tiny(  # the tiny run, twice as wide and deep, 120 steps; decoding 100+100 pairs greedily
    "model.d_model=64",
    "model.layers=2",
    "model.heads=4",
    "model.d_ff=128",
    "train.max_steps=120",
    "train.max_tokens=1024",
    "train.warmup=20",
    "train.val_every=1000",
    "eval.beam=1",
    "tracking.wandb=disabled",
    pairs=600,
    eval_pairs=EVAL_PAIRS,
)
VOCAB = 300  # tests.helpers.tiny.TINY's data.vocab_size: an untrained model's loss is about ln(300) = 5.7


def test_bf16_autocast_trains_as_fp32_does(tmp_path, cache_dir):
    """On the CPU the same two runs end at train loss 3.79 (fp32) and 3.81 (bf16 autocast), 0.5% apart;
    120 steps are too few for BLEU to mean anything on this task (0.08 and 0.13), so BLEU is only checked
    to be sacreBLEU's score of the written hypotheses."""
    assert accelerator_and_precision(load_config(None, TINY))[1] == "bf16-mixed"  # what `auto` picks here
    runs = {p: train(load_config(None, [*TINY, f"train.precision={p}"]), tmp_path / p) for p in ("32", "bf16-mixed")}
    for precision, summary in runs.items():
        assert summary["status"] == "finished" and summary["step"] == 120, precision
        assert summary["peak_memory_mb"] > 0 and summary["train/tokens_per_sec"] > 0
        hyps = (tmp_path / precision / "hyps" / "test.txt").read_text().splitlines()
        refs = (tmp_path / precision / "refs" / "test.txt").read_text().splitlines()
        assert len(hyps) == len(refs) == EVAL_PAIRS
        assert summary["test/bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-6)
    fp32, bf16 = runs["32"]["train/loss"], runs["bf16-mixed"]["train/loss"]
    assert math.isfinite(bf16) and bf16 < math.log(VOCAB) - 1.0  # it learned in bf16
    assert abs(bf16 - fp32) < 0.05 * fp32  # and as much as in fp32


def test_the_gpu_random_stream_comes_back_with_a_checkpoint():
    """Dropout on a GPU draws from the CUDA generator: a checkpoint saves its state (``on_save_checkpoint``) and
    a resumed run sets it again once the module is on its device (``on_train_start``), so the resumed run's
    dropout masks are the uninterrupted run's (on the CPU, test_train_resume.py checks it end to end)."""
    from ablate.training.module import TranslationModule

    from tests.helpers.model import VOCAB, tiny_model

    cfg, vocab = load_config(None, tiny()), {"src": VOCAB, "tgt": VOCAB}
    saving = TranslationModule(tiny_model(), cfg, vocab=vocab).cuda()
    torch.cuda.manual_seed(3)
    torch.rand(5, device="cuda")  # somewhere along the stream
    checkpoint: dict = {}
    saving.on_save_checkpoint(checkpoint)
    assert isinstance(checkpoint["ablate"]["rng"].get("cuda"), torch.Tensor)
    uninterrupted = torch.rand(4, device="cuda")

    torch.cuda.manual_seed(99)  # a new process's stream
    resumed = TranslationModule(tiny_model(), cfg, vocab=vocab).cuda()
    resumed.on_load_checkpoint(checkpoint)
    resumed.on_train_start()
    assert torch.equal(torch.rand(4, device="cuda"), uninterrupted)
