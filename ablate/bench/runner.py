"""One benchmark run: every selected section in one process, results in one dict.

Sections run in a fixed order (training, decoding, memory, data, startup); the timed ones
(training, decoding) run in this process on the same inputs, the memory, data and start-up ones
in fresh child processes (see their modules). The result dict is what ``--json`` writes:
``meta``, one key per section, ``ratios``, ``ratio_spread`` (of each timed ratio's per-round values),
``noisy`` (the ratios whose spread exceeds 10 %) and ``targets_met``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from ablate.bench.options import BenchOptions


def run(
    opts: BenchOptions,
    echo: Callable[[str], None] = lambda s: None,
    checkpoint: Optional[Callable[[dict[str, Any]], None]] = None,
) -> dict[str, Any]:
    """Run the benchmark described by ``opts``; returns the results (see the module docstring).

    Args:
        opts: What to measure.
        echo: Receives one progress line per step.
        checkpoint: Called with the results so far (ratios included) after every section, so an
            interrupted run still leaves what it measured.
    """
    from ablate.bench import hardware
    from ablate.bench.report import noisy, ratio_spreads, ratios, targets_met
    from ablate.bench.timing import compute_clock, set_threads

    opts.check()
    start = time.perf_counter()
    threads = set_threads(opts.threads)
    dev = hardware.device()
    results: dict[str, Any] = {
        "meta": {
            "hardware": hardware.describe(dev, threads),
            "options": {k: v for k, v in vars(opts).items()},
            "reps": opts.reps,
            "warmup": opts.warmup,
            "clock": compute_clock(dev)[0],
            "method": (
                "interleaved round-robin repetitions (order rotated each round), timed by the CPU time of the "
                "computing threads (wall clock on a GPU); ratios: median of per-round ratios, with their spread; "
                "warm-up rounds excluded"
            ),
        }
    }
    sections = set(opts.sections)

    def finish() -> dict[str, Any]:
        results["meta"]["seconds"] = time.perf_counter() - start
        results["ratios"] = ratios(results)
        results["ratio_spread"] = ratio_spreads(results)
        results["noisy"] = noisy(results["ratio_spread"])
        results["targets_met"] = targets_met(results["ratios"])
        if checkpoint is not None:
            checkpoint(results)
        return results

    inputs = None
    if sections & {"training", "decoding", "data"}:
        from ablate.bench.inputs import load_inputs

        echo(f"inputs: {opts.data} (vocab {opts.vocab_size}), {opts.batches} batches of <= {opts.max_tokens} tokens")
        inputs = load_inputs(opts, dev)
    if "training" in sections:
        from ablate.bench.training import bench_training

        results["training"] = bench_training(opts, inputs, dev, echo=echo)
        finish()
    if "decoding" in sections:
        from ablate.bench.decoding import bench_decoding

        results["decoding"] = bench_decoding(opts, inputs, dev, echo=echo)
        finish()
    if "memory" in sections:
        from ablate.bench.memory import bench_memory

        modes = ("inference", "training") if opts.mem_train else ("inference",)
        results["memory"] = bench_memory(
            opts.mem_length, opts.mem_batch, opts.d_model, opts.heads, opts.mem_chunk_mb, threads, modes, echo=echo
        )
        finish()
    if "data" in sections:
        from ablate.bench.data_stage import bench_data

        results["data"] = bench_data(
            opts.data, opts.vocab_size, opts.builtin_pairs, opts.data_scale, base=inputs.prepared, echo=echo
        )
        finish()
    if "startup" in sections:
        from ablate.bench.startup import bench_startup

        results["startup"] = bench_startup(opts, warm=inputs is not None, echo=echo)
    return finish()
