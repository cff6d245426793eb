"""Interleaved timing, and what the hardware allows: clocks, rounds, medians, matmul peak, model FLOPs.

On a CPU the clock is the CPU time of the computing threads (a neighbour on a shared machine stretches wall
time, not CPU time); contenders run round-robin, ratios are per round (their median reported with their
spread); the matmul peak is one more contender, so it sees the same noise; FLOPs are counted by
``FlopCounterMode`` (MFU = FLOPs x steps/s / matmul peak), and the SDPA backend read off the aten ops.
"""

from __future__ import annotations

import contextlib
import math
import platform
import statistics
import time
from typing import Callable, Mapping, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ablate.training.run_folder import machine

Clock = Callable[[], float]  # seconds since an arbitrary origin, increasing
NOISY = 0.10  # a ratio whose 95% interval (:func:`paired_interval`) is wider than this share of it is flagged


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def compute_clock(dev: torch.device | None = None) -> tuple[str, Clock]:
    """The clock that times work on ``dev`` (None: the GPU if any), and its name: ``thread_cpu`` when torch
    computes on one thread, ``process_cpu`` (the intra-op pool included) on several, ``wall`` on a GPU."""
    if (dev or device()).type == "cuda":
        return "wall", time.perf_counter
    if torch.get_num_threads() == 1:
        return "thread_cpu", time.thread_time
    return "process_cpu", time.process_time


def synchronize() -> None:
    """Wait for queued GPU work, so a timer measures it."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def interleaved(
    contenders: Mapping[str, Callable[[], object]], reps: int, warmup: int = 1, clock: Clock | None = None
) -> dict[str, list[float]]:
    """Name -> ``reps`` durations (seconds of ``clock``, default :func:`compute_clock`, in round order) of
    each contender's one unit of work, measured round-robin after ``warmup`` untimed rounds."""
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
    """How many times faster ``fast`` ran than ``slow``: the median over rounds of ``slow[r] / fast[r]``
    (pairing each round's durations cancels slow drifts of the machine's load)."""
    return paired(fast, slow)[0]


def paired(fast: list[float], slow: list[float]) -> tuple[float, float]:
    """:func:`speedup` and the :func:`spread` of its per-round ratios (how far the rounds disagree)."""
    per_round = [s / f for f, s in zip(fast, slow)]
    return median(per_round), spread(per_round)


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """Distribution-free ``level`` confidence interval of the median of independent rounds: the order statistics
    ``x(j)`` and ``x(n+1-j)`` with the largest j whose coverage ``1 - 2 P(Bin(n, 1/2) <= j - 1)`` is at least
    ``level`` (Conover 1999, Practical Nonparametric Statistics, sec. 3.2); (nan, nan) below 6 rounds, where no
    interval reaches 95%. Unlike :func:`spread`, it narrows as rounds are added."""
    x, n = sorted(values), len(values)
    j, below = 0, 0.0
    for i in range(n // 2):
        below += math.comb(n, i) / 2**n  # P(Bin(n, 1/2) <= i)
        if 1 - 2 * below < level:
            break
        j = i + 1
    return (x[j - 1], x[n - j]) if j else (math.nan, math.nan)


def paired_interval(fast: list[float], slow: list[float], level: float = 0.95) -> tuple[float, float]:
    """:func:`median_interval` of the per-round ratios ``slow[r] / fast[r]`` (the interval of :func:`speedup`)."""
    return median_interval([s / f for f, s in zip(fast, slow)], level)


def too_wide(value: Optional[float], interval: Optional[tuple[float, float]]) -> bool:
    """Whether a ratio's 95% interval spans more than :data:`NOISY` of it (or is undefined: under 6 rounds)."""
    if value is None or interval is None:
        return False
    lo, hi = interval
    return not (math.isfinite(lo) and math.isfinite(hi)) or (hi - lo) > NOISY * abs(value)


def spread(values: list[float]) -> float:
    """Relative spread ``(max - min) / median`` of repeated measurements (0 for fewer than two)."""
    return (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else 0.0


BACKENDS = {  # substring of an aten op name -> backend label; an op takes the label of the first key its name contains
    "cudnn_attention": "cudnn",
    "flash_attention_for_cpu": "flash (cpu)",
    "flash_attention": "flash",
    "efficient_attention": "mem-efficient",
    "attention_math": "math",
}


def training_dtype(dev: torch.device) -> torch.dtype:
    """bf16 on a GPU that supports it (as ``train.precision=auto``), else fp32."""
    return torch.bfloat16 if dev.type == "cuda" and torch.cuda.is_bf16_supported() else torch.float32


def autocast(dev: torch.device, dtype: torch.dtype | None = None) -> contextlib.AbstractContextManager:
    """bf16 autocast on a bf16 GPU (or where ``dtype`` asks for bf16), nothing elsewhere or for fp32."""
    if (dtype or training_dtype(dev)) == torch.bfloat16:
        return torch.autocast(dev.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def describe(dev: torch.device, threads: int) -> dict:
    """Device, dtype, threads and versions, for the report."""
    cpu = machine()  # as a run records it
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"{cpu['cpu']}, {cpu['cores']} CPUs"
    return {
        "device": dev.type,
        "name": name,
        "dtype": str(training_dtype(dev)).replace("torch.", ""),
        "threads": threads,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def matmul_work(dev: torch.device, dtype: torch.dtype | None = None) -> tuple[Callable[[], None], float]:
    """A contender doing 4 (n x n) @ (n x n) products in ``dtype`` (default: the training dtype), and its FLOPs;
    n is 1024 on a CPU and 8192 on a GPU (big enough for the tensor cores' peak)."""
    n, repeat = (8192 if dev.type == "cuda" else 1024), 4
    dtype = dtype or training_dtype(dev)
    a, b = torch.randn(2, n, n, device=dev, dtype=dtype)

    def work() -> None:
        for _ in range(repeat):
            torch.mm(a, b)

    return work, 2.0 * n**3 * repeat


class _OpNames(TorchDispatchMode):
    """Records the name of every aten op dispatched inside it, and how many were."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(str(func.overloadpacket))
        self.calls += 1
        return func(*args, **(kwargs or {}))


def dispatched(step: Callable[[], None]) -> int:
    """How many aten ops ``step()`` dispatches (views and autocast's casts included; backward too): in eager
    mode each costs host time whatever its size, which bounds a small-kernel step on a GPU."""
    with _OpNames() as ops:
        step()
    return ops.calls


def census(step: Callable[[], None]) -> tuple[float, set[str]]:
    """FLOPs counted while ``step()`` runs (the CPU flash-attention ops, which ``FlopCounterMode`` does not know,
    by the SDPA formulas) and the aten op names it dispatched."""
    from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

    aten = torch.ops.aten
    cpu_flash = {  # (shapes, *args, out_shape=None, **kwargs) -> FLOPs
        aten._scaled_dot_product_flash_attention_for_cpu: lambda q, k, v, *_, **__: sdpa_flop_count(q, k, v),
        aten._scaled_dot_product_flash_attention_for_cpu_backward: (
            lambda grad, q, k, v, *_, **__: sdpa_backward_flop_count(grad, q, k, v)
        ),
    }
    counter = FlopCounterMode(display=False, custom_mapping=cpu_flash)
    with counter, _OpNames() as ops:
        step()
    return float(counter.get_total_flops()), ops.names


def sdpa_backend(op_names: set[str]) -> str:
    """Which fused attention kernel ran (``none`` when no SDPA op was dispatched)."""
    forward = [name for name in op_names if "backward" not in name]
    found = {next((label for key, label in BACKENDS.items() if key in name), None) for name in forward}
    return "+".join(label for label in BACKENDS.values() if label in found) or "none"
