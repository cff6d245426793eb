"""The bench on a shared machine: durations by the CPU time of the computing threads, a 95% interval per
ratio and a flag where it is wider than 10 %, no negative durations. Fake clocks, no timing assertions."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from ablate.bench import processes
from ablate.bench.report import noisy, ratio_intervals, ratio_spreads, ratios, ratios_table
from ablate.bench.timing import compute_clock, dispatched, interleaved, median_interval, paired, speedup


class Machine:
    """A fake CPU shared with a neighbour: work advances the CPU clock by its cost, and the wall clock by
    its cost times the neighbour's load at that moment (which changes from call to call)."""

    def __init__(self):
        self.cpu = self.wall = 0.0
        self.load = itertools.cycle([1.0, 2.5, 1.2, 3.0, 1.0, 1.7])

    def work(self, cost: float):
        def run():
            self.cpu += cost
            self.wall += cost * next(self.load)

        return run


def test_identical_work_reads_the_same_by_cpu_time_whatever_the_neighbour_does():
    machine = Machine()
    contenders = {"a": machine.work(1.0), "b": machine.work(1.0), "half": machine.work(0.5)}
    by_cpu = interleaved(contenders, reps=5, warmup=1, clock=lambda: machine.cpu)
    assert paired(by_cpu["a"], by_cpu["b"]) == (1.0, 0.0)  # within 5 %: exactly, and no spread
    assert speedup(by_cpu["half"], by_cpu["a"]) == 2.0
    by_wall = interleaved(contenders, reps=5, warmup=1, clock=lambda: machine.wall)
    ratio, spread = paired(by_wall["a"], by_wall["b"])
    assert spread > 0.10  # the wall clock measures the neighbour: what the flag catches


def test_the_clock_is_the_computing_threads_cpu_time_on_a_cpu_and_the_wall_on_a_gpu():
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert compute_clock(torch.device("cpu"))[0] == "thread_cpu"
        torch.set_num_threads(2)
        assert compute_clock(torch.device("cpu"))[0] == "process_cpu"  # the intra-op pool's threads count too
    finally:
        torch.set_num_threads(threads)
    assert compute_clock(torch.device("cuda"))[0] == "wall"


def test_a_ratio_whose_interval_is_wider_than_ten_percent_is_flagged_not_one_whose_rounds_merely_range():
    """One slow round in twelve moves the range of the rounds by 20% but not the median's 95% interval; rounds
    that alternate between two speeds widen the interval; under 6 rounds there is no 95% interval at all."""
    steady = [1.0] * 12
    results = {
        "training": {
            "variants": {
                "dot-scaled": {"seconds": steady},
                "torch": {"seconds": [2.0] * 11 + [2.4]},
                "dot-unscaled": {"seconds": [1.0, 1.3] * 6},
            }
        }
    }
    values, intervals = ratios(results), ratio_intervals(results)
    assert ratio_spreads(results)["dot_scaled_vs_torch"] == pytest.approx(0.2)  # per-round ratios 2, ..., 2.4
    assert intervals["dot_scaled_vs_torch"] == (2.0, 2.0) and values["dot_scaled_vs_torch"] == 2.0
    assert intervals["dot_unscaled_vs_scaled"] == pytest.approx((1 / 1.3, 1.0))  # per-round 1, 1/1.3, ...
    assert intervals["additive_vs_dot"] is None  # not run
    assert noisy(values, intervals) == ["dot_unscaled_vs_scaled"]
    table = ratios_table({"dot_unscaled_vs_scaled": 0.88}, {"dot_unscaled_vs_scaled": False}, None, intervals)
    cells = [cell for column in table.columns for cell in column._cells]
    assert "NO (noisy)" in cells and "0.769-1.000" in cells
    short = {"training": {"variants": {"dot-scaled": {"seconds": [1.0] * 5}, "torch": {"seconds": [2.0] * 5}}}}
    assert noisy(ratios(short), ratio_intervals(short)) == ["dot_scaled_vs_torch"]


@pytest.mark.parametrize("n", [6, 9, 12, 41, 100])
def test_the_median_interval_is_the_widest_order_statistics_pair_that_covers_95_percent(n):
    from scipy import stats

    lo, hi = median_interval([float(i) for i in range(1, n + 1)])  # x(j) = j
    j = int(lo)
    assert hi == n + 1 - j
    assert 1 - 2 * stats.binom.cdf(j - 1, n, 0.5) >= 0.95 > 1 - 2 * stats.binom.cdf(j, n, 0.5)
    assert all(math.isnan(v) for v in median_interval([1.0] * 5))


def test_the_tokenizer_time_is_measured_where_it_is_trained_never_a_difference(monkeypatch, tmp_path):
    """The encode-only run slowed by a neighbour took longer than the first run: first - encode was negative."""
    reports = {
        128: {"seconds": 4.0, "tokenizer_s": 0.8, "pairs": {"train": 10}, "delta_mb": 5.0},
        129: {"seconds": 9.0, "tokenizer_s": 0.0, "pairs": {"train": 10}, "delta_mb": 5.0},
    }
    monkeypatch.setattr(processes, "prepare_in_subprocess", lambda src, cache, vocab, length, pairs: reports[length])
    out = processes.three_runs("builtin", tmp_path, 100, 10)
    assert out["tokenizer_s"] == 0.8


@pytest.mark.slow
def test_the_first_run_times_its_tokenizer_and_the_encode_run_has_none(tmp_path, cache_dir):
    out = processes.three_runs("builtin", tmp_path / "cache", 120, 200)
    assert out["first"]["tokenizer_s"] > 0 and out["first"]["tokenizer_cpu_s"] > 0
    assert out["encode"]["tokenizer_s"] == out["cached"]["tokenizer_s"] == 0.0
    assert all(out[name]["seconds"] >= 0 and out[name]["cpu_s"] >= 0 for name in ("first", "encode", "cached"))


def test_dispatched_counts_every_aten_op_backward_included():
    x = torch.ones(3, requires_grad=True)
    assert dispatched(lambda: (torch.ones(2) * 2).sum()) == 3  # ones, mul, sum
    forward = dispatched(lambda: (x * 2).sum())
    assert dispatched(lambda: (x * 2).sum().backward()) > forward  # the backward's ops count too
