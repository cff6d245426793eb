"""The Throughput callback: exact token counts, the warm-up steps left out, its checkpoint state."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from torch import nn
from torch.utils.data import DataLoader

from ablate.training.trainer import Throughput

PAD = 0


def _batches(n: int) -> list[dict[str, torch.Tensor]]:
    """Batches whose non-padding token count is known: batch i holds i + 3 source and 2 target tokens."""
    out = []
    for i in range(n):
        src = torch.zeros(2, 16, dtype=torch.long)
        src[0, : i + 3] = 5
        tgt = torch.zeros(2, 4, dtype=torch.long)
        tgt[1, :2] = 7
        out.append({"src": src, "tgt_out": tgt})
    return out


class Toy(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 1)

    def training_step(self, batch, batch_idx):
        return self.lin(batch["src"].float()).pow(2).mean()

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=0.01)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5)}


def _fit(callback: Throughput, steps: int, ckpt_path: Path | None = None, accumulate: int = 1) -> pl.Trainer:
    trainer = pl.Trainer(
        max_steps=steps,
        accumulate_grad_batches=accumulate,
        accelerator="cpu",
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    batches = DataLoader(_batches(steps * accumulate), batch_size=None)
    trainer.fit(Toy(), train_dataloaders=batches, ckpt_path=ckpt_path)
    return trainer


def test_counts_every_non_padding_token_and_leaves_out_the_warm_up_steps():
    steps, skip = 8, 3
    meter = Throughput(PAD, skip=skip, log_every=2)
    logged = _fit(meter, steps).callback_metrics
    per_batch = [(i + 3) + 2 for i in range(steps)]
    assert meter.all_tok == meter.train_tokens == sum(per_batch)
    assert meter.tok == sum(per_batch[skip:]) and meter.skip == 0
    assert 0 < meter.sec < meter.all_sec == meter.step_seconds
    assert meter.tokens_per_sec == pytest.approx(meter.tok / meter.sec)
    assert float(logged["train/lr"]) == pytest.approx(0.005) and float(logged["train/tokens_per_sec"]) > 0


def test_with_accumulation_each_logged_step_logs_once_and_the_warm_up_counts_batches(monkeypatch):
    """With ``train.accumulate=2`` the rate was logged at every batch of a logging step's window (twice per logged
    step, and at step 0 from the first warm-up batch alone), each with its reduction over the ranks."""
    logged = []
    monkeypatch.setattr(Toy, "log_dict", lambda self, metrics, **kw: logged.append(self.global_step), raising=False)
    meter = Throughput(PAD, skip=3, log_every=2)
    _fit(meter, 6, accumulate=2)
    assert logged == [2, 4, 6]
    assert meter.all_tok == sum((i + 3) + 2 for i in range(12)) and meter.tok == sum((i + 3) + 2 for i in range(3, 12))


def test_a_run_shorter_than_the_warm_up_uses_every_step():
    meter = Throughput(PAD, skip=10)
    _fit(meter, 4)
    assert meter.tok == 0 and meter.skip == 6
    assert meter.tokens_per_sec == pytest.approx(meter.all_tok / meter.all_sec)


def test_the_state_round_trips_and_takes_precedence_over_an_old_checkpoint_block():
    meter = Throughput(PAD, skip=2)
    _fit(meter, 5)
    restored = Throughput(PAD)
    old = {"tok": 1, "sec": 1.0, "all_tok": 2, "all_sec": 2.0, "skip": 0, "loss": 3.0}
    restored.on_load_checkpoint(None, None, {"ablate": {"measured": old}})  # Lightning calls this first
    restored.load_state_dict(meter.state_dict())
    assert restored.state_dict() == meter.state_dict() and restored.state_dict()["cpu"] == meter.cpu > 0
    assert restored.tokens_per_sec == pytest.approx(meter.tok / meter.sec)
    assert restored.tokens_per_cpu_sec == pytest.approx(meter.tok / meter.cpu)


def test_cpu_seconds_are_those_of_the_timed_steps_and_at_most_wall_seconds_times_threads():
    steps, skip = 8, 3
    meter = Throughput(PAD, skip=skip, log_every=2)
    logged = _fit(meter, steps).callback_metrics
    threads = torch.get_num_threads()
    assert 0 < meter.cpu < meter.all_cpu
    assert meter.cpu <= meter.sec * threads + 0.05 and meter.all_cpu <= meter.all_sec * threads + 0.05
    assert meter.cpu_seconds == pytest.approx(meter.cpu)  # one rank: the sum over ranks is its own
    assert meter.tokens_per_cpu_sec == pytest.approx(meter.tok / meter.cpu)
    assert float(logged["train/tokens_per_cpu_sec"]) > 0


def test_cpu_time_carries_on_through_a_checkpoint(tmp_path):
    first = Throughput(PAD, skip=2)
    _fit(first, 5).save_checkpoint(tmp_path / "last.ckpt")
    resumed = Throughput(PAD, skip=2)
    _fit(resumed, 8, ckpt_path=tmp_path / "last.ckpt")  # three more steps
    assert resumed.all_tok > first.all_tok and resumed.all_cpu > first.all_cpu and resumed.cpu > first.cpu
    assert resumed.cpu <= resumed.sec * torch.get_num_threads() + 0.05
    assert resumed.tokens_per_cpu_sec == pytest.approx(resumed.tok / resumed.cpu)


def test_steps_counted_before_cpu_time_was_measured_leave_it_unknown():
    """A checkpoint without the CPU counters: its tokens' CPU time is unknown, not zero, so no made-up rate."""
    meter = Throughput(PAD)
    meter.load_state_dict({"tok": 900, "sec": 3.0, "all_tok": 1000, "all_sec": 4.0, "skip": 0})
    assert meter.tokens_per_sec == pytest.approx(300.0)
    assert math.isnan(meter.cpu) and math.isnan(meter.tokens_per_cpu_sec) and "cpu" not in meter.state_dict()
    fresh = Throughput(PAD)
    fresh.load_state_dict({"tok": 0, "sec": 0.0, "all_tok": 0, "all_sec": 0.0, "skip": 5})
    assert fresh.cpu == fresh.all_cpu == 0.0  # nothing counted yet: CPU time starts from zero


def test_checkpoints_from_before_the_callback_still_report_their_throughput():
    """Older checkpoints kept the counters in ``checkpoint["ablate"]["measured"]``."""
    meter = Throughput(PAD)
    measured = {"tok": 900, "sec": 3.0, "all_tok": 1000, "all_sec": 4.0, "skip": 0, "loss": 2.5}
    meter.on_load_checkpoint(None, None, {"ablate": {"measured": measured}})
    assert (meter.tok, meter.all_tok, meter.all_sec) == (900, 1000, 4.0)
    assert meter.tokens_per_sec == pytest.approx(300.0)


@pytest.mark.parametrize("bad", [float("nan"), -1.0, "many", True, None])
def test_a_planted_counter_is_not_believed(bad):
    meter = Throughput(PAD)
    measured = {"tok": 900, "sec": bad, "all_tok": 1000, "all_sec": 4.0, "skip": 0}
    meter.on_load_checkpoint(None, None, {"ablate": {"measured": measured}})
    meter.load_state_dict({**measured})
    assert meter.all_tok == 0 and math.isnan(meter.tokens_per_sec)
