"""Interleaved timing: every contender runs once per round, rounds repeat, medians are reported.

On a CPU the clock is the CPU time of the threads that compute (:func:`compute_clock`): a neighbour
on a shared machine takes cores away, which stretches wall-clock time but not the CPU time the work
itself needs, so two contenders doing identical work read the same. On a GPU the clock is the wall
clock after a synchronize (the work is the device's). Either way the contenders run round-robin
(rotating who goes first each round), ratios are taken per round and their median reported
(:func:`paired`), with the spread of the per-round ratios beside it: a ratio whose rounds disagree by
more than :data:`NOISY` is flagged, not trusted.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

Clock = Callable[[], float]
"""Seconds since an arbitrary origin, increasing."""

NOISY = 0.10
"""A ratio whose per-round values spread more than this ((max - min) / median) is flagged as noisy."""


def compute_clock(dev: torch.device | None = None) -> tuple[str, Clock]:
    """The clock that times work on ``dev`` (None: the CPU), and its name.

    ``thread_cpu`` (``time.thread_time``, this thread's CPU time) when torch computes on one thread,
    ``process_cpu`` (``time.process_time``, every thread of the process, the intra-op pool included)
    when it uses several, ``wall`` (``time.perf_counter``) on a GPU (None: on one when there is one).
    """
    if dev is None:
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cuda":
        return "wall", time.perf_counter
    if torch.get_num_threads() == 1:
        return "thread_cpu", time.thread_time
    return "process_cpu", time.process_time


def set_threads(threads: int) -> int:
    """Fix torch's intra-op threads (0 keeps the current setting); returns the count in use."""
    if threads > 0:
        torch.set_num_threads(threads)
    return torch.get_num_threads()


def synchronize() -> None:
    """Wait for queued GPU work, so a timer measures it (no-op on CPU)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def interleaved(
    contenders: dict[str, Callable[[], object]], reps: int, warmup: int = 1, clock: Clock | None = None
) -> dict[str, list[float]]:
    """Seconds of each call, measured round-robin.

    Args:
        contenders: name -> a callable doing one unit of work (e.g. one pass over the batches).
        reps: timed rounds.
        warmup: untimed rounds first (allocator, thread pools and kernels warm up).
        clock: What a duration is read from (None: :func:`compute_clock`).

    Returns:
        name -> ``reps`` durations in seconds of ``clock``, in round order.
    """
    clock = clock or compute_clock()[1]
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            contenders[name]()
    synchronize()
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for r in range(reps):
        shift = r % len(names) if names else 0
        for name in names[shift:] + names[:shift]:  # rotate who goes first each round
            start = clock()
            contenders[name]()
            synchronize()
            seconds[name].append(clock() - start)
    return seconds


def median(values: list[float]) -> float:
    """The median, NaN for no values."""
    return statistics.median(values) if values else float("nan")


def speedup(fast: list[float], slow: list[float]) -> float:
    """How many times faster ``fast`` ran than ``slow``: the median over rounds of ``slow[r] / fast[r]``.

    Pairing the two durations of each round cancels slow drifts of the machine's load; for
    equal work it is also the ratio of throughputs.
    """
    return paired(fast, slow)[0]


def paired(fast: list[float], slow: list[float]) -> tuple[float, float]:
    """:func:`speedup` and the :func:`spread` of its per-round ratios (how far the rounds disagree)."""
    per_round = [s / f for f, s in zip(fast, slow)]
    return median(per_round), spread(per_round)


def spread(values: list[float]) -> float:
    """Relative spread ``(max - min) / median`` of repeated measurements (0 for fewer than two)."""
    if len(values) < 2:
        return 0.0
    return (max(values) - min(values)) / statistics.median(values)
