"""Peak memory of additive attention, chunked vs naive, at a long sequence length.

Method: each measurement runs in a fresh Python process (``python -m ablate.bench.memory``) so
that no allocator cache or earlier peak of the parent leaks in. The child builds one
:class:`~ablate.model.attention.MultiHeadAttention` with the additive score, runs it once on a
short input (thread pools, kernels), then records its resident set size, resets the kernel's
peak-RSS counter (``/proc/self/clear_refs``, Linux) and runs self-attention over a
``(batch, length, d_model)`` input: forward only under ``torch.no_grad`` (``inference``: the
validation loss, attention maps, encoding for decoding) or forward + backward (``training``).
The figure is the peak RSS during that call minus the RSS before it. Where the counter cannot be
reset, the process's lifetime peak (``ru_maxrss``) minus the RSS before is used (an upper bound).

*Naive* is the same score with an unlimited chunk budget (the whole ``(B, H, T, T, d_k)``
intermediate at once); *chunked* uses the configured ``model.attention.params.chunk_mb`` (64 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

NAIVE_MB = 1e9
"""Chunk budget meaning "one chunk" (1 PB)."""
MB = 2**20


def _status_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            match = re.search(rf"{field}:\s+(\d+)", f.read())
    except OSError:
        return None
    return int(match.group(1)) / 1024 if match else None


def rss_mb() -> float:
    """Current resident set size of this process in MiB (the peak where the current is unknown)."""
    current = _status_mb("VmRSS")
    return current if current is not None else peak_mb()


def peak_mb() -> float:
    """Peak resident set size of this process in MiB (since the last :func:`reset_peak`)."""
    peak = _status_mb("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def reset_peak() -> bool:
    """Reset the kernel's peak-RSS counter of this process; False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _child(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m ablate.bench.memory")
    for name in ("length", "batch", "d-model", "heads", "threads"):
        parser.add_argument(f"--{name}", type=int, required=True)
    parser.add_argument("--chunk-mb", type=float, required=True)
    parser.add_argument("--train", action="store_true")
    args = parser.parse_args(argv)

    import torch

    from ablate.config import AttentionConfig
    from ablate.model.attention import MultiHeadAttention
    from ablate.model.scores import AdditiveScore

    if args.threads:
        torch.set_num_threads(args.threads)
    d_k = args.d_model // args.heads
    score = AdditiveScore(d_k, args.heads, AttentionConfig(score="additive"), chunk_mb=args.chunk_mb)
    attention = MultiHeadAttention(args.d_model, args.heads, score, d_k=d_k)

    def call(length: int) -> None:
        x = torch.randn(args.batch, length, args.d_model, requires_grad=args.train)
        if args.train:
            out, _, _ = attention.self_attend(x)
            out.sum().backward()
        else:
            with torch.no_grad():
                attention.self_attend(x)

    call(8)
    before = rss_mb()
    exact = reset_peak()
    call(args.length)
    peak = peak_mb()
    print(json.dumps({"rss_before_mb": before, "peak_mb": peak, "delta_mb": peak - before, "exact": exact}))


def _command(
    length: int, batch: int, d_model: int, heads: int, chunk_mb: float, train: bool, threads: int
) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "ablate.bench.memory",
        "--length",
        str(length),
        "--batch",
        str(batch),
        "--d-model",
        str(d_model),
        "--heads",
        str(heads),
        "--threads",
        str(threads),
        "--chunk-mb",
        str(chunk_mb),
    ]
    return cmd + (["--train"] if train else [])


def measure_all(commands: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """Run the children side by side (each has its own RSS, so they do not disturb each other's figure).

    Returns:
        name -> the child's JSON report (``delta_mb`` is the figure).
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_root(), os.environ.get("PYTHONPATH")])))
    procs = {
        name: subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for name, cmd in commands.items()
    }
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate()
        if proc.returncode != 0:
            tail = (stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"memory measurement {name} failed ({' '.join(commands[name][3:])}): {tail}")
        out[name] = json.loads(stdout.strip().splitlines()[-1])
    return out


def _root() -> str:
    return str(Path(__file__).resolve().parents[2])


def bench_memory(
    length: int,
    batch: int,
    d_model: int,
    heads: int,
    chunk_mb: float = 64.0,
    threads: int = 0,
    modes: tuple[str, ...] = ("inference", "training"),
    echo=lambda s: None,
) -> dict[str, Any]:
    """Chunked vs naive additive attention in each mode.

    Returns:
        ``{"length", "batch", "chunk_mb", "intermediate_mb": size of the full (B, H, T, T, d_k) fp32
        tensor, "<mode>": {"chunked": {...}, "naive": {...}, "ratio": chunked / naive}}``.
    """
    d_k = d_model // heads
    out: dict[str, Any] = {
        "length": length,
        "batch": batch,
        "chunk_mb": chunk_mb,
        "intermediate_mb": batch * heads * length * length * d_k * 4 / MB,
        "method": "fresh subprocess; peak RSS (VmHWM after clear_refs) minus RSS before the call",
    }
    echo(f"memory: additive attention ({', '.join(modes)}), length {length}, batch {batch}, side by side")
    commands = {
        (mode, name): _command(length, batch, d_model, heads, budget, mode == "training", threads)
        for mode in modes
        for name, budget in (("chunked", chunk_mb), ("naive", NAIVE_MB))
    }
    reports = measure_all(commands)
    for mode in modes:
        row = {name: reports[(mode, name)] for name in ("chunked", "naive")}
        row["ratio"] = row["chunked"]["delta_mb"] / max(row["naive"]["delta_mb"], 1e-9)
        out[mode] = row
    return out


if __name__ == "__main__":
    _child(sys.argv[1:])
