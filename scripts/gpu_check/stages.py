"""The GPU check's in-process stages: bf16 vs fp32 training against ``torch.nn.Transformer``, the
first-time cost of a batch shape per SDPA backend order, decoding, and ``torch.compile``. Each runs in a fresh child process (``python -m scripts.gpu_check.stages STAGE
OPTIONS_JSON RESULT_FILE``) so the parent can stop it at its time budget; it rewrites RESULT_FILE after
every measurement, so a stopped stage still leaves what it measured.

Everything is built from the ``ablate bench`` parts: the same fixed real batches
(:mod:`ablate.bench.speed`), the same training step of ours and of the reference
(:mod:`ablate.bench.speed`), interleaved rounds with paired per-round ratios (:mod:`ablate.bench.timing`).
"""

from __future__ import annotations

import json
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable, cast

import torch

from ablate.bench import timing
from ablate.bench.timing import interleaved, median, speedup, spread, synchronize
from ablate.utils.io import atomic_write_text
from scripts.gpu_check.flops import Dims, batches_flops, datasheet_peak
from scripts.gpu_check.options import GpuCheckOptions

Save = Callable[[dict[str, Any]], None]

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
SCORED = ("dot-scaled", "dot-unscaled", "additive-scaled", "general-scaled", "gaussian-scaled")
"""Variants whose SDPA backend is recorded (one per score, and unscaled dot)."""


def _peak_memory_mb(dev: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(dev) / 2**20 if dev.type == "cuda" else None


def _unpadded(batch: dict[str, Any]) -> dict[str, Any]:
    """``batch`` with every source row the first one's unpadded length (no row padded: no mask)."""
    src = batch["src"]
    length = int(src[0].ne(0).sum())
    rows = src[:, :length].clone()
    rows[rows.eq(0)] = 3  # fill padding of shorter rows with an ordinary token
    return {**batch, "src": rows, "src_tokens": rows.numel(), "src_padded": False}


def stage_training(opts: GpuCheckOptions, save: Save) -> dict[str, Any]:
    """Tokens/s and MFU of ours and ``torch.nn.Transformer`` in bf16 and fp32, additive in bf16, interleaved.

    MFU = model FLOPs (:mod:`scripts.gpu_check.flops`, the PaLM count) x passes/s / the datasheet peak of the
    dtype for a known GPU (else the square-matmul rate measured in the same rounds, also reported).
    """
    from ablate.bench.speed import ALL_ROWS, load_inputs, make_trainee, variant_config

    dev = timing.device()
    bench = opts.bench()
    inputs = load_inputs(bench, dev)
    name = timing.describe(dev, torch.get_num_threads())["name"]
    out: dict[str, Any] = {
        "tokens_per_pass": inputs.tokens,
        "batches": [list(b["src"].shape) + [b["tgt_in"].size(1)] for b in inputs.batches],
        "sdpa": {},
        "rows": {},
    }
    dims = Dims.of(variant_config(bench, {}).model, inputs.vocab)
    model_flops = batches_flops(dims, inputs.batches)
    out["model_gflop_per_pass"] = model_flops / 1e9
    save(out)
    trainees = {}
    for tag, dtype in DTYPES.items():
        for variant in ("dot-scaled", "torch"):
            trainees[f"{variant}-{tag}"] = make_trainee(variant, bench, inputs.vocab, dev)
            trainees[f"{variant}-{tag}"].dtype = dtype
    for variant in ("additive-scaled", ALL_ROWS):  # ALL_ROWS: logits for padding rows too (issue 31, item 6)
        trainees[f"{variant}-bf16"] = make_trainee(variant, bench, inputs.vocab, dev)
        trainees[f"{variant}-bf16"].dtype = torch.bfloat16
    standard = trainees["dot-scaled-bf16"]
    out["adamw"] = {k: standard.optimizer.defaults.get(k) for k in ("fused", "foreach")}  # issue 31, item 1
    unpadded = _unpadded(inputs.batches[0])  # no padding mask at all: the flash kernel may run (item 1)
    out["sdpa_unpadded"] = timing.sdpa_backend(timing.census(lambda: standard.forward_backward([unpadded]))[1])
    out["ops_per_batch"] = {  # host-side work: each dispatched op costs microseconds in eager mode
        key: timing.dispatched(partial(trainees[key].forward_backward, inputs.batches[:1]))
        for key in ("dot-scaled-bf16", "torch-bf16")
    }
    counted = {}
    for key, trainee in trainees.items():  # PyTorch's count (padding and recomputation included); a warm-up too
        counted[key], ops = timing.census(partial(trainee.forward_backward, inputs.batches))
        out["rows"][key] = {"sdpa": timing.sdpa_backend(ops), "params": trainee.params}
    for variant in SCORED:  # which fused kernel each score reaches in bf16
        if f"{variant}-bf16" in out["rows"]:
            out["sdpa"][variant] = out["rows"][f"{variant}-bf16"]["sdpa"]
            continue
        trainee = make_trainee(variant, bench, inputs.vocab, dev)
        trainee.dtype = torch.bfloat16
        _, ops = timing.census(partial(trainee.forward_backward, inputs.batches[:1]))
        out["sdpa"][variant] = timing.sdpa_backend(ops)
        del trainee
    save(out)
    contenders = {key: t.contender(inputs.batches) for key, t in trainees.items()}
    matmul_flops = {}
    for tag, dtype in DTYPES.items():
        contenders[f"matmul-{tag}"], matmul_flops[tag] = timing.matmul_work(dev, dtype=dtype)
    seconds = interleaved(contenders, opts.reps, opts.warmup)
    out["matmul_tflops"] = {tag: matmul_flops[tag] / median(seconds.pop(f"matmul-{tag}")) / 1e12 for tag in DTYPES}
    for key, secs in seconds.items():
        tag = key.rsplit("-", 1)[1]
        achieved = model_flops / median(secs)
        peak = datasheet_peak(name, "bfloat16" if tag == "bf16" else "float32")
        measured = out["matmul_tflops"][tag] * 1e12
        row = out["rows"][key]
        row.update(
            tokens_per_s=inputs.tokens / median(secs),
            seconds=secs,
            spread=spread(secs),
            counted_gflop_per_pass=counted[key] / 1e9,
        )
        if not key.startswith(("additive", ALL_ROWS)):  # the PaLM count is the dot-product model's
            row.update(
                model_tflops=achieved / 1e12,
                mfu=achieved / (peak or measured),
                mfu_peak="datasheet" if peak else "measured matmul",
                mfu_vs_matmul=achieved / measured,
            )
    out["ratios"] = {
        "bf16_vs_torch_bf16": speedup(seconds["dot-scaled-bf16"], seconds["torch-bf16"]),
        "fp32_vs_torch_fp32": speedup(seconds["dot-scaled-fp32"], seconds["torch-fp32"]),
        "bf16_vs_fp32": speedup(seconds["dot-scaled-bf16"], seconds["dot-scaled-fp32"]),
        "torch_bf16_vs_fp32": speedup(seconds["torch-bf16"], seconds["torch-fp32"]),
        "additive_vs_dot": speedup(seconds["additive-scaled-bf16"], seconds["dot-scaled-bf16"]),
        "non_padding_rows_vs_all_rows": speedup(seconds["dot-scaled-bf16"], seconds[f"{ALL_ROWS}-bf16"]),
    }
    out["peak_memory_mb"] = _peak_memory_mb(dev)
    save(out)
    return out


def _without_rows(batch: dict[str, Any], k: int) -> dict[str, Any]:
    """``batch`` less its last ``k`` rows: the same lengths at a batch size not seen before (a new shape),
    with its token counts recounted."""
    out = {key: v[:-k] if isinstance(v, torch.Tensor) and v.dim() else v for key, v in batch.items()}  # (B, ...)
    src_len = out["src"].ne(0).sum(1)
    out["src_tokens"], out["tgt_tokens"] = int(src_len.sum()), int(out["tgt_out"].ne(0).sum())
    out["src_padded"] = bool(src_len.min() != src_len.max())
    return out


def _cudnn_attention(on: bool, work: Callable[[], Any]) -> Callable[[], None]:
    """``work`` with cuDNN's fused attention allowed (PyTorch's default) or not; the flag is put back after."""

    def go() -> None:
        was = torch.backends.cuda.cudnn_sdp_enabled()
        torch.backends.cuda.enable_cudnn_sdp(on)
        try:
            work()
        finally:
            torch.backends.cuda.enable_cudnn_sdp(was)

    return go


SHAPE_ORDERS = {"no-cudnn": (False, 1), "default": (True, 2)}
"""Backend order -> (cuDNN's attention allowed, rows dropped from every batch to give it shapes of its own)."""


def stage_shapes(opts: GpuCheckOptions, save: Save) -> dict[str, Any]:
    """What a shape costs the first time it is seen, with the SDPA backends in PyTorch's order (cuDNN first
    on Hopper since 2.5) and with cuDNN's attention off: bf16 training passes, and greedy and beam decoding
    with the cache, of the standard model.

    cuDNN builds an execution plan for each new (batch, query length, key length), and bucketed batches
    (once each per run: they repeat each epoch) and step-by-step decoding (every output length) bring new
    ones. Everything is first run once at full size under both orders (CUDA, cuBLAS, the allocator and
    both code paths warm); then each order gets batches and sentences one (no-cudnn) or two (default)
    rows short, shapes nothing has seen, timed cold once and then warm, interleaved.
    """
    from ablate.bench.speed import STANDARD, load_inputs, make_trainee, modes

    dev = timing.device()
    bench = opts.bench(batches=opts.shape_batches)
    inputs = load_inputs(bench, dev)
    trainee = make_trainee(STANDARD, bench, inputs.vocab, dev)
    trainee.dtype = torch.bfloat16
    tok = inputs.prepared.tokenizer
    model = trainee.model
    searches = modes(model, tok.bos_id, tok.eos_id, opts.decode_len, opts.beam)
    decoders = {"greedy": searches["greedy-cache"], "beam": searches[f"beam{opts.beam}-cache"]}

    def decode(search: Callable[[torch.Tensor], Any], src: torch.Tensor) -> Callable[[], None]:
        def run() -> None:
            model.eval()
            with torch.no_grad(), timing.autocast(dev, torch.bfloat16):
                search(src)
            model.train()

        return run

    out: dict[str, Any] = {
        "batches": [list(b["src"].shape) + [b["tgt_in"].size(1)] for b in inputs.batches],
        "tokens_per_pass": inputs.tokens,
        "decode": {"sentences": int(inputs.decode_src.size(0)), "length": opts.decode_len, "beam": opts.beam},
        "orders": {},
    }
    for on, _ in SHAPE_ORDERS.values():  # warm at full size, both paths
        _cudnn_attention(on, trainee.contender(inputs.batches))()
        for search in decoders.values():
            _cudnn_attention(on, decode(search, inputs.decode_src))()
    work = {}
    for name, (on, k) in SHAPE_ORDERS.items():
        work[f"train-{name}"] = _cudnn_attention(on, trainee.contender([_without_rows(b, k) for b in inputs.batches]))
        for part, search in decoders.items():
            work[f"{part}-{name}"] = _cudnn_attention(on, decode(search, inputs.decode_src[:-k]))
    out["clock"], clock = timing.compute_clock(dev)
    cold = {}
    for key, go in work.items():
        synchronize()
        start = clock()
        go()
        synchronize()
        cold[key] = clock() - start
        out["cold_s"] = cold
        save(out)
    seconds = interleaved(work, min(opts.reps, 5), 0, clock)  # 5 warm rounds: the stage's point is the cold one
    # new shapes each cold pass meets: a batch each; about one an output step greedily (beam search's batch
    # shrinks as sentences end, so its count is not known: its cost is reported whole)
    new_shapes = {"train": len(inputs.batches), "greedy": opts.decode_len, "beam": None}
    for name in SHAPE_ORDERS:
        row = out["orders"][name] = {}
        for part, shapes in new_shapes.items():
            key = f"{part}-{name}"
            warm = median(seconds[key])
            row[part] = {
                "cold_s": cold[key],
                "warm_s": warm,
                "seconds": seconds[key],
                "first_time_cost_s": cold[key] - warm,
                "per_new_shape_s": (cold[key] - warm) / shapes if shapes else None,
            }
    _, ops = timing.census(lambda: trainee.forward_backward(inputs.batches[:1]))
    out["default_backend"] = timing.sdpa_backend(ops)
    out["no_cudnn_vs_default_warm"] = {
        part: speedup(seconds[f"{part}-no-cudnn"], seconds[f"{part}-default"]) for part in new_shapes
    }
    save(out)
    return out


SCALES = (1, 2)
"""Batch sizes of the ``scaling`` stage, in multiples of ``max_tokens``."""


def stage_scaling(opts: GpuCheckOptions, save: Save) -> dict[str, Any]:
    """Whether the training step is host-bound: bf16 passes of the standard model over batches of
    ``max_tokens`` and of twice as many tokens, timed interleaved. If the GPU's work set the pace, twice the
    tokens would take about twice the time (the same tokens/s and MFU); where the host's per-op cost sets it,
    the larger batches run at up to twice the tokens/s, because the op count per step barely changes.
    """
    from ablate.bench.speed import STANDARD, load_inputs, make_trainee, variant_config

    dev = timing.device()
    name = timing.describe(dev, torch.get_num_threads())["name"]
    peak = datasheet_peak(name, "bfloat16")
    out: dict[str, Any] = {"scales": {}}
    contenders, work = {}, {}
    for scale in SCALES:
        bench = opts.bench(max_tokens=opts.max_tokens * scale)
        inputs = load_inputs(bench, dev)
        trainee = make_trainee(STANDARD, bench, inputs.vocab, dev)
        trainee.dtype = torch.bfloat16
        flops = batches_flops(Dims.of(variant_config(bench, {}).model, inputs.vocab), inputs.batches)
        key = f"x{scale}"
        contenders[key], work[key] = trainee.contender(inputs.batches), (inputs.tokens, flops)
        out["scales"][key] = {
            "max_tokens": bench.max_tokens,
            "batches": [list(b["src"].shape) + [b["tgt_in"].size(1)] for b in inputs.batches],
            "ops_per_batch": timing.dispatched(partial(trainee.forward_backward, inputs.batches[:1])),
        }
        save(out)
    seconds = interleaved(contenders, opts.reps, opts.warmup)
    for key, secs in seconds.items():
        tokens, flops = work[key]
        row = out["scales"][key]
        row.update(tokens_per_s=tokens / median(secs), seconds=secs)
        row["mfu"] = flops / median(secs) / peak if peak else None
    out["x2_vs_x1_tokens_per_s"] = out["scales"]["x2"]["tokens_per_s"] / out["scales"]["x1"]["tokens_per_s"]
    save(out)
    return out


def stage_compile(opts: GpuCheckOptions, save: Save) -> dict[str, Any]:
    """bf16 training of ours eager vs ``torch.compile``d on the same batches; compile time reported.

    ``compile_s`` is the first compiled pass (one dynamic-shape compilation for the pass's batch shapes)
    minus one eager pass.
    """
    from ablate.bench.speed import load_inputs, make_trainee

    dev = timing.device()
    bench = opts.bench()
    inputs = load_inputs(bench, dev)
    eager = make_trainee("dot-scaled", bench, inputs.vocab, dev)
    compiled = make_trainee("dot-scaled", bench, inputs.vocab, dev)
    eager.dtype = compiled.dtype = torch.bfloat16
    # dynamic: one graph for every batch shape (the default compiles the first shape, then again for the second)
    compiled.model = cast(torch.nn.Module, torch.compile(compiled.model, backend=opts.compile_backend, dynamic=True))
    run_eager, run_compiled = eager.contender(inputs.batches), compiled.contender(inputs.batches)
    run_eager()  # warm
    timed = interleaved({"eager": run_eager}, 1, 0)["eager"][0]
    start = time.perf_counter()
    run_compiled()
    synchronize()
    first = time.perf_counter() - start
    out: dict[str, Any] = {"first_compiled_pass_s": first, "eager_pass_s": timed, "compile_s": first - timed}
    save(out)
    seconds = interleaved({"eager": run_eager, "compiled": run_compiled}, opts.reps, 1)
    out.update(
        eager_tokens_per_s=inputs.tokens / median(seconds["eager"]),
        compiled_tokens_per_s=inputs.tokens / median(seconds["compiled"]),
        compiled_vs_eager=speedup(seconds["compiled"], seconds["eager"]),
        seconds=seconds,
    )
    save(out)
    return out


def stage_decoding(opts: GpuCheckOptions, save: Save) -> dict[str, Any]:
    """Greedy and beam sentences/s of the standard model, under the training dtype's autocast."""
    from ablate.bench.speed import bench_decoding, load_inputs

    dev = timing.device()
    bench = opts.bench(reps=opts.decode_reps, batches=1)
    inputs = load_inputs(bench, dev)
    with torch.no_grad(), timing.autocast(dev):
        out = bench_decoding(bench, inputs, dev)
    out["dtype"] = str(timing.training_dtype(dev)).replace("torch.", "")
    out["peak_memory_mb"] = _peak_memory_mb(dev)
    save(out)
    return out


STAGE_FUNCTIONS: dict[str, Callable[[GpuCheckOptions, Save], dict[str, Any]]] = {
    "training": stage_training,
    "compile": stage_compile,
    "decoding": stage_decoding,
    "shapes": stage_shapes,
    "scaling": stage_scaling,
}
"""Stage name -> its function; the stages that run in a child process of their own."""


def _atomic_json(path: Path, data: dict[str, Any]) -> None:
    from ablate.utils.io import finite

    atomic_write_text(path, json.dumps(finite(data)))


def main(argv: list[str]) -> None:
    stage, options, result = argv
    opts = GpuCheckOptions.from_json(json.loads(options))
    torch.manual_seed(opts.seed)
    STAGE_FUNCTIONS[stage](opts, lambda partial: _atomic_json(Path(result), partial))


if __name__ == "__main__":
    main(sys.argv[1:])
