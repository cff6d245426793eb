"""Learning-rate schedules and the training clock that budget-aware schedules read."""

import math
import typing
from types import SimpleNamespace

import pytest
import torch

from ablate.config import Schedule
from ablate.training.module import WarmupDecay, inverse_sqrt, schedules
from ablate.training.trainer import TrainClock


def make(schedule: str, warmup: int, progress, min_ratio: float = 0.0, peak: float = 1.0):
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=peak)
    return opt, WarmupDecay(opt, schedule, warmup, min_ratio, progress)


def run(schedule: str, warmup: int, total: int, min_ratio: float = 0.0) -> list[float]:
    """Learning rates of steps 0..total-1 with progress = step / total."""
    state = {"step": 0}
    opt, sched = make(schedule, warmup, lambda: state["step"] / total, min_ratio)
    lrs = []
    for step in range(total):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        state["step"] = step + 1
        sched.step()
    return lrs


def test_config_choices_are_the_schedule_registry():
    marker = typing.get_args(Schedule)[1]
    assert marker.choices() == schedules() == ["inverse_sqrt", "linear", "cosine"]


def test_inverse_sqrt_is_the_papers_formula_up_to_its_peak():
    d, warmup = 512, 4000
    peak = d**-0.5 * warmup**-0.5
    for step in (1, 10, 3999, 4000, 4001, 10_000, 100_000):
        paper = d**-0.5 * min(step**-0.5, step * warmup**-1.5)  # Vaswani et al. Eq. 3, 1-based steps
        assert peak * inverse_sqrt(step - 1, warmup) == pytest.approx(paper, rel=1e-12)


def test_inverse_sqrt_scheduler_matches_the_function():
    lrs = run("inverse_sqrt", 10, 50)
    assert lrs == pytest.approx([inverse_sqrt(s, 10) for s in range(50)])


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_budget_decays_reach_the_floor_exactly_at_the_budget(schedule):
    lrs = run(schedule, warmup=10, total=110, min_ratio=0.0)
    assert lrs[:9] == pytest.approx([(s + 1) / 10 for s in range(9)])  # linear warm-up
    assert lrs[9] == pytest.approx(1.0)  # the peak, at the end of warm-up
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))  # then never rises
    decay = (lambda q: 1 - q) if schedule == "linear" else (lambda q: 0.5 * (1 + math.cos(math.pi * q)))
    # the decay runs from the progress at the end of warm-up (9/110) to the budget (110/110)
    assert lrs[9:] == pytest.approx([decay((s - 9) / 101) for s in range(9, 110)])
    assert lrs[-1] < 0.01


def test_floor_is_respected():
    assert min(run("linear", 5, 40, min_ratio=0.1)) >= 0.1 - 1e-12


def test_state_round_trip_continues_the_same_curve():
    """A resumed run (new scheduler, loaded state) gives the same rates as an uninterrupted one."""
    total, cut = 60, 25
    full = run("linear", 5, total)
    state = {"step": 0}
    opt, sched = make("linear", 5, lambda: state["step"] / total)
    for step in range(cut):
        opt.step()
        state["step"] = step + 1
        sched.step()
    saved = sched.state_dict()
    assert "_progress" not in saved and "optimizer" not in saved
    opt2, sched2 = make("linear", 5, lambda: state["step"] / total)
    sched2.load_state_dict(saved)
    opt2.param_groups[0]["lr"] = sched2.get_last_lr()[0]
    resumed = []
    for step in range(cut, total):
        resumed.append(opt2.param_groups[0]["lr"])
        opt2.step()
        state["step"] = step + 1
        sched2.step()
    assert resumed == pytest.approx(full[cut:])


def test_unknown_schedule_lists_the_valid_ones():
    with pytest.raises(ValueError, match="inverse_sqrt, linear, cosine"):
        make("step", 10, lambda: 0.0)


# ---------------------------------------------------------------- the training clock
class FakeTrainer(SimpleNamespace):
    def __init__(self, **kw):
        super().__init__(
            global_step=0,
            num_training_batches=100,
            world_size=1,
            should_stop=False,
            sanity_checking=False,
            state=SimpleNamespace(fn="fit"),
            **kw,
        )


def test_clock_counts_training_not_validation(monkeypatch):
    now = {"t": 0.0}
    monkeypatch.setattr("ablate.training.trainer.time.perf_counter", lambda: now["t"])
    clock, trainer = TrainClock(max_time=10.0), FakeTrainer()
    clock.on_train_start(trainer, None)
    now["t"] = 3.0
    clock.on_train_batch_end(trainer, None, None, None, 0)
    clock.on_validation_start(trainer, None)
    now["t"] = 100.0  # a long validation
    clock.on_validation_end(trainer, None)
    now["t"] = 104.0
    clock.on_train_batch_end(trainer, None, None, None, 1)
    assert clock.seconds == pytest.approx(7.0)
    assert not trainer.should_stop and clock.progress() == pytest.approx(0.7)
    now["t"] = 107.5
    clock.on_train_batch_end(trainer, None, None, None, 2)
    assert trainer.should_stop and clock.progress() == 1.0


def test_clock_progress_is_the_nearest_budget_and_survives_a_checkpoint():
    clock, trainer = TrainClock(max_time=100.0, max_steps=200, max_epochs=4, accumulate=1), FakeTrainer()
    clock.on_train_start(trainer, None)
    trainer.global_step = 50
    assert clock.progress() == pytest.approx(50 / 200)  # steps (0.25) beat epochs (50/400) and time (0)
    clock.seconds = 60.0
    assert clock.progress() == pytest.approx(0.6)
    restored = TrainClock(max_time=100.0)
    restored.load_state_dict(clock.state_dict())
    assert restored.seconds == 60.0
    assert TrainClock().progress() == 0.0  # before training: no budget used


def test_epoch_budget_counts_the_step_lightning_takes_on_an_epochs_last_partial_accumulation():
    # 100 batches with accumulate=3: Lightning steps after batches 3, 6, ..., 99 and on the epoch's last batch,
    # 34 steps an epoch; counting 33 ended a linear decay at its floor 2 steps early here (3 of 12 in a 2-epoch run of 16 batches)
    clock, trainer = TrainClock(max_epochs=2, accumulate=3), FakeTrainer()
    clock.on_train_start(trainer, None)
    trainer.global_step = 67
    assert clock.progress() == pytest.approx(67 / 68)
