"""The measurements taken in fresh child processes (``python -m ablate.bench.processes KIND JSON``, one
JSON line back), so no allocator cache, earlier peak or import of the parent leaks in.

* **Memory** of additive attention, chunked (``chunk_mb``) vs naive (one chunk): peak RSS during one
  self-attention call (forward, or forward + backward) minus the RSS before, the peak counter reset through
  ``/proc/self/clear_refs`` (else the lifetime ``ru_maxrss``, an upper bound).
* **Data stage**: ``prepare`` three times against a private cache: *first* (train the BPE tokenizer,
  encode), *encode* (``max_len`` changed by one) and *cached*. The tokenizer is timed where it is trained
  (a difference of two processes' wall clocks came out negative on a shared machine).
* **Start-up** of a cached trial: the real ``ablate train`` path, exiting at the first training step.
"""

from __future__ import annotations

import time

_T0 = time.time()  # the start-up child's first timestamp: before its other imports

import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Iterator, cast  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GIB = 1024.0  # MiB


def spawn(kind: str, args: dict[str, Any], **env: str) -> subprocess.Popen:
    """A child measuring ``kind`` (``memory``, ``data``, ``startup``) with ``args``, started; ``env``: variables it
    gets unless set already."""
    from ablate.sweep.local import child_env

    cmd = [sys.executable, "-m", "ablate.bench.processes", kind, json.dumps(args)]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**env, **child_env(os.environ)}
    )


def _report(child: subprocess.Popen, what: str) -> dict[str, Any]:
    """The last JSON line the child prints before it ends; a failed child raises with its last line of stderr."""
    stdout, stderr = child.communicate()
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if child.returncode != 0 or not lines:
        tail = (stderr.strip().splitlines() or stdout.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{what} failed: {tail}")
    return json.loads(lines[-1])


NAIVE_MB = 1e9  # a chunk budget meaning "one chunk" (1 PB)
MB = 2**20


def _memory_mb(field: str) -> float:
    """This process's resident set size in MiB: ``VmRSS`` (current) or ``VmHWM`` (peak since the last
    the reset in :func:`_measured`); where ``/proc`` cannot tell, the lifetime peak ``ru_maxrss`` for both."""
    try:
        with open("/proc/self/status") as f:
            match = re.search(rf"{field}:\s+(\d+)", f.read())
    except OSError:
        match = None
    if match:
        return int(match.group(1)) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _measured(work: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """``work()``, and the RSS before it, the peak RSS during it, their difference and whether the kernel's
    peak-RSS counter could be reset before it (else the peak is the lifetime one)."""
    before = _memory_mb("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        exact = True
    except OSError:
        exact = False
    out = work()
    peak = _memory_mb("VmHWM")
    return out, {"rss_before_mb": before, "peak_mb": peak, "delta_mb": peak - before, "exact": exact}


def _memory_child(args: dict[str, Any]) -> None:
    import torch

    from ablate.config import AttentionConfig
    from ablate.model.attention import MultiHeadAttention
    from ablate.model.scores import AdditiveScore

    if args["threads"]:
        torch.set_num_threads(args["threads"])
    d_k = args["d_model"] // args["heads"]
    score = AdditiveScore(d_k, args["heads"], AttentionConfig(score="additive"), chunk_mb=args["chunk_mb"])
    attention = MultiHeadAttention(args["d_model"], args["heads"], score, d_k=d_k)

    def call(length: int) -> None:
        x = torch.randn(args["batch"], length, args["d_model"], requires_grad=args["train"])
        if args["train"]:
            out, _, _ = attention.self_attend(x)
            out.sum().backward()
        else:
            with torch.no_grad():
                attention.self_attend(x)

    call(8)
    print(json.dumps(_measured(lambda: call(args["length"]))[1]))


def bench_memory(opts, threads: int = 0, echo=lambda s: None) -> dict[str, Any]:
    """Chunked vs naive additive attention, at ``opts.mem_*`` sizes, in inference and training:
    ``{"<mode>": {"chunked", "naive", "ratio"}, ...}`` (``intermediate_mb``: the full (B, H, T, T, d_k) fp32 tensor)."""
    modes = ("inference", "training")
    length, batch, heads = opts.mem_length, opts.mem_batch, opts.heads
    out: dict[str, Any] = {
        "length": length,
        "batch": batch,
        "chunk_mb": opts.mem_chunk_mb,
        "intermediate_mb": batch * heads * length * length * (opts.d_model // heads) * 4 / MB,
        "method": "fresh subprocess; peak RSS (VmHWM after clear_refs) minus RSS before the call",
    }
    echo(f"memory: additive attention ({', '.join(modes)}), length {length}, batch {batch}, side by side")
    sizes = dict(length=length, batch=batch, d_model=opts.d_model, heads=heads, threads=threads)
    children = {  # side by side: each has its own RSS, so they do not disturb each other's figure
        (mode, name): spawn("memory", {**sizes, "chunk_mb": budget, "train": mode == "training"})
        for mode in modes
        for name, budget in (("chunked", opts.mem_chunk_mb), ("naive", NAIVE_MB))
    }
    what = {key: f"memory measurement {key} ({cast(list, child.args)[-1]})" for key, child in children.items()}
    reports = {key: _report(child, what[key]) for key, child in children.items()}
    for mode in modes:
        row = {name: reports[(mode, name)] for name in ("chunked", "naive")}
        row["ratio"] = row["chunked"]["delta_mb"] / max(row["naive"]["delta_mb"], 1e-9)
        out[mode] = row
    return out


def _data_child(args: dict[str, Any]) -> None:
    start = time.perf_counter()
    from ablate.config import DataConfig
    from ablate.data.cache import prepare
    from ablate.data.tokenizer import SubwordTokenizer

    learn, learned = SubwordTokenizer.train, {"tokenizer_s": 0.0, "tokenizer_cpu_s": 0.0}

    def timed_learn(*args, **kwargs):  # this child process only: time the tokenizer where it is trained
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return learn(*args, **kwargs)
        finally:
            learned["tokenizer_s"] += time.perf_counter() - wall
            learned["tokenizer_cpu_s"] += time.process_time() - cpu

    SubwordTokenizer.train = timed_learn  # type: ignore[method-assign]
    keys = ("source", "vocab_size", "max_len", "builtin_pairs")
    cfg = DataConfig(**{k: args[k] for k in keys}, cache_dir=args["cache"])
    imported, cpu = time.perf_counter(), time.process_time()
    prepared, memory = _measured(lambda: prepare(cfg))
    seconds, cpu = time.perf_counter() - imported, time.process_time() - cpu
    stats = {k: prepared.stats[k] for k in ("cached", "tokenizer_cached", "pairs")}
    print(json.dumps({"seconds": seconds, "cpu_s": cpu, **learned, "import_s": imported - start, **stats, **memory}))


def prepare_in_subprocess(source: str, cache: Path, vocab_size: int, max_len: int, builtin_pairs: int) -> dict:
    """One ``prepare`` in a fresh process; its JSON line (seconds, cached, peak memory, ...)."""
    args = dict(source=source, cache=str(cache), vocab_size=vocab_size, max_len=max_len, builtin_pairs=builtin_pairs)
    return _report(spawn("data", args), f"data preparation of {source}")


def three_runs(
    source: str, cache: Path, vocab_size: int, builtin_pairs: int, max_len: int = 128, echo=lambda s: None
) -> dict[str, Any]:
    """First, encode-only and cached preparations of ``source`` in the empty cache ``cache``, and what they show."""
    runs = {}
    for name, length in (("first", max_len), ("encode", max_len + 1), ("cached", max_len + 1)):
        echo(f"data stage: {name} run of {source}")
        runs[name] = prepare_in_subprocess(source, cache, vocab_size, length, builtin_pairs)
    pairs = sum(runs["encode"]["pairs"].values())
    return {
        **runs,
        "train_pairs": runs["encode"]["pairs"]["train"],
        "pairs": pairs,
        "tokenizer_s": runs["first"]["tokenizer_s"],
        "encode_pairs_per_s": pairs / runs["encode"]["seconds"],
        "cached_speedup": runs["first"]["seconds"] / runs["cached"]["seconds"],
        "peak_delta_mb": max(r["delta_mb"] for r in runs.values()),
    }


def _perturbed(texts: list[str], repetition: int) -> Iterator[str]:
    """Repetition ``r`` of ``texts``: words rotated by ``r`` and the first word marked with ``r``."""
    for text in texts:
        words = text.split()
        if repetition and words:
            k = repetition % len(words)
            words = words[k:] + words[:k]
            words[0] = f"{words[0]}{repetition}"
        yield " ".join(words)


def write_corpus(folder: Path, splits: dict[str, tuple[list[str], list[str]]], pairs: int) -> None:
    """Write a ``{split}.en`` / ``{split}.de`` folder whose train split has ``pairs`` pairs grown from
    ``splits["train"]`` (split name -> (source texts, target texts)); the other splits are copied as is."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, (src, tgt) in splits.items():
        with open(folder / f"{name}.en", "w") as fs, open(folder / f"{name}.de", "w") as ft:
            if name != "train":
                fs.write("\n".join(src) + "\n")
                ft.write("\n".join(tgt) + "\n")
                continue
            left, r = pairs, 0
            while left > 0:
                n = min(left, len(src))
                fs.write("\n".join(_perturbed(src[:n], r)) + "\n")
                ft.write("\n".join(_perturbed(tgt[:n], r)) + "\n")
                left, r = left - n, r + 1


def bench_data(opts, base=None, echo=lambda s: None) -> dict[str, Any]:
    """Three preparations of ``opts.data`` and, when ``opts.data_scale`` > 0, of a generated corpus of that many
    pairs grown from ``base``, the prepared ``opts.data``."""
    source, vocab_size, builtin_pairs, scale = opts.data, opts.vocab_size, opts.builtin_pairs, opts.data_scale
    out: dict[str, Any] = {"source": source}
    with tempfile.TemporaryDirectory(prefix="ablate-bench-data-") as tmp:
        out["corpus"] = three_runs(source, Path(tmp) / "cache", vocab_size, builtin_pairs, echo=echo)
        if scale > 0:
            folder = Path(tmp) / "generated"
            echo(f"data stage: writing a {scale:,}-pair corpus")
            texts = {
                name: (ds.data.column("src").to_pylist(), ds.data.column("tgt").to_pylist())
                for name, ds in base.splits.items()
            }
            write_corpus(folder, texts, scale)
            scaled = three_runs(str(folder), Path(tmp) / "cache-scale", vocab_size, builtin_pairs, echo=echo)
            scaled["target_peak_mb"] = GIB
            scaled["peak_under_1gib"] = scaled["peak_delta_mb"] < GIB
            out["scale"] = scaled
    return out


def _startup_child(args: dict[str, Any]) -> None:
    sys.path.insert(0, str(ROOT))
    wandb = [] if "tracking.wandb=disabled" in args["overrides"] else ["wandb"]
    third = ["datasets", "pytorch_lightning", "sacrebleu", "tokenizers", "torch", "typer", *wandb]
    for name in [*third, "ablate.data.datamodule", "ablate.model.build", "ablate.training.module"]:
        importlib.import_module(name)
    from ablate.config import load_config
    from ablate.training.train import train

    marks = {"interpreter": _T0, "imports": time.time()}

    def milestone(name: str) -> None:
        marks[name] = time.time()
        if name == "first_step":
            print(json.dumps(marks), flush=True)
            os._exit(0)

    train(load_config(None, args["overrides"]), Path(args["run_dir"]), overwrite=True, milestone=milestone)
    raise SystemExit("training ended before its first step")


def run_trial(overrides: list[str], run_dir: Path) -> dict[str, float]:
    """One start-up child run; returns seconds per phase."""
    spawned = time.time()
    m = _report(
        spawn("startup", {"overrides": overrides, "run_dir": str(run_dir)}, WANDB_SILENT="true"), "start-up trial"
    )
    out = {
        "interpreter_s": m["interpreter"] - spawned,
        "imports_s": m["imports"] - m["interpreter"],
        "first_step_s": m["first_step"] - m["imports"],
        "total_s": m["first_step"] - spawned,
    }
    previous = m["imports"]
    for name in ("data", "model", "fit_start", "first_step"):
        if name in m:
            out[f"to_{name}_s"] = m[name] - previous
            previous = m[name]
    return out


def trial_overrides(opts, wandb: str) -> list[str]:
    """The trial's config: the benchmark's data and model sizes, a one-step budget."""
    data = {"data.source": opts.data, "data.vocab_size": opts.vocab_size, "data.builtin_pairs": opts.builtin_pairs}
    model = {f"model.{k}": getattr(opts, k) for k in ("d_model", "layers", "heads", "d_ff")}
    out = [f"{k}={v}" for k, v in {**data, **model, "train.max_tokens": opts.max_tokens}.items()]
    out += ["train.max_steps=1", f"tracking.wandb={wandb}", f"seed={opts.seed}"]
    if opts.cache_dir:
        out.append(f"data.cache_dir={opts.cache_dir}")
    if opts.threads:
        out.append(f"train.threads={opts.threads}")
    return out


def bench_startup(opts, warm: bool = False, echo=lambda s: None) -> dict[str, Any]:
    """Time a cached trial with W&B disabled (and, if ``opts.startup_wandb``, offline); unless ``warm``
    (the data cache holds the corpus already), one untimed trial fills the cache first."""
    modes = ["disabled"] + (["offline"] if opts.startup_wandb else [])
    out: dict[str, Any] = {"target_s": 3.0}
    with tempfile.TemporaryDirectory(prefix="ablate-bench-startup-") as tmp:
        if not warm:
            echo("start-up: filling the data cache")
            run_trial(trial_overrides(opts, "disabled"), Path(tmp) / "warm")
        for mode in modes:
            echo(f"start-up: cached trial, W&B {mode}")
            out[f"wandb_{mode}"] = run_trial(trial_overrides(opts, mode), Path(tmp) / mode)
    out["first_step_s"] = out["wandb_disabled"]["first_step_s"]
    return out


CHILDREN = {"memory": _memory_child, "data": _data_child, "startup": _startup_child}

if __name__ == "__main__":
    CHILDREN[sys.argv[1]](json.loads(sys.argv[2]))
