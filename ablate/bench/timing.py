"""Interleaved timing: every contender runs once per round, rounds repeat, medians are reported.

A noisy neighbour on a shared machine slows whatever runs at that moment; running the
contenders round-robin (and rotating who goes first each round) spreads such noise over all of
them, so ratios measured in one run stay meaningful even when absolute numbers do not. Ratios
are taken per round and their median reported (:func:`speedup`).
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch


def set_threads(threads: int) -> int:
    """Fix torch's intra-op threads (0 keeps the current setting); returns the count in use."""
    if threads > 0:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def synchronize() -> None:
    """Wait for queued GPU work, so a timer measures it (no-op on CPU)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def interleaved(contenders: dict[str, Callable[[], object]], reps: int, warmup: int = 1) -> dict[str, list[float]]:
    """Seconds of each call, measured round-robin.

    Args:
        contenders: name -> a callable doing one unit of work (e.g. one pass over the batches).
        reps: timed rounds.
        warmup: untimed rounds first (allocator, thread pools and kernels warm up).

    Returns:
        name -> ``reps`` wall-clock durations in seconds, in round order.
    """
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            contenders[name]()
    synchronize()
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for r in range(reps):
        shift = r % len(names) if names else 0
        for name in names[shift:] + names[:shift]:  # rotate who goes first each round
            start = time.perf_counter()
            contenders[name]()
            synchronize()
            seconds[name].append(time.perf_counter() - start)
    return seconds


def median(values: list[float]) -> float:
    """The median, NaN for no values."""
    return statistics.median(values) if values else float("nan")


def speedup(fast: list[float], slow: list[float]) -> float:
    """How many times faster ``fast`` ran than ``slow``: the median over rounds of ``slow[r] / fast[r]``.

    Pairing the two durations of each round cancels slow drifts of the machine's load; for
    equal work it is also the ratio of throughputs.
    """
    return median([s / f for f, s in zip(fast, slow)])


def spread(values: list[float]) -> float:
    """Relative spread ``(max - min) / median`` of repeated measurements (0 for fewer than two)."""
    if len(values) < 2:
        return 0.0
    return (max(values) - min(values)) / statistics.median(values)
