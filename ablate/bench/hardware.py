"""What the hardware allows, and how close a model gets: matmul peak, model FLOPs, SDPA backend.

* The **matmul peak** is measured, not looked up: a square matmul in the training dtype runs as
  one more contender in the interleaved rounds, so it sees the same noise as the models.
* **Model FLOPs** of one training step (forward + backward) are counted by
  ``torch.utils.flop_counter.FlopCounterMode`` on the first batch (matrix products and attention
  kernels only; elementwise work such as additive attention's tanh is not counted). The CPU
  flash-attention kernel is counted with PyTorch's own SDPA formulas.
* **Model FLOPs utilisation** = counted FLOPs x steps/s / measured matmul peak.
* The **SDPA backend** is read off the aten ops a step dispatches (flash, memory-efficient,
  cuDNN, or the unfused math fallback).
* On a GPU with bf16 support, training runs under bf16 autocast (as ``train.precision=auto``).
"""

from __future__ import annotations

import contextlib
import os
import platform
from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

BACKENDS = {  # substring of an aten op name -> backend label; first match wins
    "cudnn_attention": "cudnn",
    "flash_attention_for_cpu": "flash (cpu)",
    "flash_attention": "flash",
    "efficient_attention": "mem-efficient",
    "attention_math": "math",
}


def device() -> torch.device:
    """The GPU when there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def training_dtype(dev: torch.device) -> torch.dtype:
    """bf16 on a GPU that supports it (as ``train.precision=auto``), else fp32."""
    if dev.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float32


def autocast(dev: torch.device, dtype: torch.dtype | None = None) -> contextlib.AbstractContextManager:
    """bf16 autocast on a bf16 GPU (or where ``dtype`` asks for bf16), nothing elsewhere or for fp32."""
    if (dtype or training_dtype(dev)) == torch.bfloat16:
        return torch.autocast(dev.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def cpu_name() -> str:
    """The CPU model (``/proc/cpuinfo``), else the machine type."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe(dev: torch.device, threads: int) -> dict:
    """Device, dtype, threads and versions, for the report."""
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"{cpu_name()}, {os.cpu_count()} CPUs"
    return {
        "device": dev.type,
        "name": name,
        "dtype": str(training_dtype(dev)).replace("torch.", ""),
        "threads": threads,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def matmul_work(
    dev: torch.device, n: int = 0, repeat: int = 4, dtype: torch.dtype | None = None
) -> tuple[Callable[[], None], float]:
    """A contender doing ``repeat`` (n x n) @ (n x n) products in ``dtype`` (default: the training dtype),
    and its FLOPs.

    ``n`` defaults to 1024 on a CPU and 8192 on a GPU (big enough to reach the tensor cores' peak).
    """
    n = n or (8192 if dev.type == "cuda" else 1024)
    dtype = dtype or training_dtype(dev)
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)

    def work() -> None:
        for _ in range(repeat):
            torch.mm(a, b)

    return work, 2.0 * n**3 * repeat


class _OpNames(TorchDispatchMode):
    """Records the name of every aten op dispatched inside it."""

    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def _sdpa_cpu(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    from torch.utils.flop_counter import sdpa_flop_count

    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _sdpa_cpu_backward(grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    from torch.utils.flop_counter import sdpa_backward_flop_count

    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


def _flop_mapping() -> dict:
    """FLOP formulas for the CPU flash-attention ops, which ``FlopCounterMode`` does not know."""
    aten = torch.ops.aten
    if not hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
        return {}
    return {
        aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_cpu,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: _sdpa_cpu_backward,
    }


def census(step: Callable[[], None]) -> tuple[float, set[str]]:
    """FLOPs counted while ``step()`` runs and the aten op names it dispatched."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False, custom_mapping=_flop_mapping())
    with counter, _OpNames() as ops:
        step()
    return float(counter.get_total_flops()), ops.names


def sdpa_backend(op_names: set[str]) -> str:
    """Which fused attention kernel ran (``none`` when no SDPA op was dispatched)."""
    found = []
    for key, label in BACKENDS.items():
        if any(key in name and "backward" not in name for name in op_names) and label not in found:
            if key == "flash_attention" and "flash (cpu)" in found:
                continue
            found.append(label)
    return "+".join(found) or "none"
