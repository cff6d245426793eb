"""``ablate bench``: the command, and one run (every selected section, results in one dict: what ``--json`` writes).

The timed sections run in this process on the same inputs, the others in fresh child processes
(:mod:`ablate.bench.processes`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from ablate.bench import DEFAULT_DATA, SECTIONS, BenchOptions, quick


def run(
    opts: BenchOptions,
    echo: Callable[[str], None] = lambda s: None,
    checkpoint: Optional[Callable[[dict[str, Any]], None]] = None,
) -> dict[str, Any]:
    """The results of the benchmark ``opts`` describes; ``echo`` gets one progress line per step, and
    ``checkpoint`` the results so far after every section, so an interrupted run leaves what it measured."""
    import torch

    from ablate.bench import timing
    from ablate.bench.processes import bench_data, bench_memory, bench_startup
    from ablate.bench.report import noisy, ratio_intervals, ratio_spreads, ratios, targets_met

    opts.check()
    start = time.perf_counter()
    if opts.threads:
        torch.set_num_threads(opts.threads)
    threads = torch.get_num_threads()
    dev = timing.device()
    results: dict[str, Any] = {
        "meta": {
            "hardware": timing.describe(dev, threads),
            "options": dict(vars(opts)),
            "reps": opts.reps,
            "warmup": opts.warmup,
            "clock": timing.compute_clock(dev)[0],
            "method": (
                "interleaved round-robin repetitions (order rotated each round), timed by the CPU time of the computing "
                "threads (wall clock on a GPU); ratios: median of per-round ratios, with its distribution-free 95% "
                "interval and the range of the rounds; warm-up rounds excluded"
            ),
        }
    }
    sections = set(opts.sections)

    def finish() -> dict[str, Any]:
        results["meta"]["seconds"] = time.perf_counter() - start
        results["ratios"] = ratios(results)
        results["ratio_spread"] = ratio_spreads(results)
        results["ratio_interval"] = ratio_intervals(results)
        results["noisy"] = noisy(results["ratios"], results["ratio_interval"])
        results["targets_met"] = targets_met(results["ratios"])
        if checkpoint is not None:
            checkpoint(results)
        return results

    inputs = None
    if sections & {"training", "decoding", "data"}:
        from ablate.bench.speed import bench_decoding, bench_training, load_inputs

        echo(f"inputs: {opts.data} (vocab {opts.vocab_size}), {opts.batches} batches of <= {opts.max_tokens} tokens")
        inputs = load_inputs(opts, dev)
    if inputs is not None and "training" in sections:
        results["training"] = bench_training(opts, inputs, dev, echo=echo)
        finish()
    if inputs is not None and "decoding" in sections:
        results["decoding"] = bench_decoding(opts, inputs, dev, echo=echo)
        finish()
    if "memory" in sections:
        results["memory"] = bench_memory(opts, threads, echo=echo)
        finish()
    if inputs is not None and "data" in sections:
        results["data"] = bench_data(opts, base=inputs.prepared, echo=echo)
        finish()
    if "startup" in sections:
        results["startup"] = bench_startup(opts, warm=inputs is not None, echo=echo)
    return finish()


log = logging.getLogger(__name__)


def _split(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def bench(
    data: str = typer.Option(
        DEFAULT_DATA, "--data", help="Text to measure on: a {split}.{lang}[.gz] folder, 'builtin' or 'hf:<dataset>'."
    ),
    json_path: Optional[Path] = typer.Option(
        None, "--json", help="Also write every figure, the ratios and targets_met to this JSON file."
    ),
    quick_run: bool = typer.Option(False, "--quick", help="Smoke test: few small batches and rounds, short sequences."),
    d_model: int = typer.Option(256, "--d-model"),
    layers: int = typer.Option(3, "--layers", help="Encoder layers and decoder layers (each)."),
    heads: int = typer.Option(4, "--heads"),
    d_ff: int = typer.Option(1024, "--d-ff"),
    vocab_size: int = typer.Option(8000, "--vocab-size", help="BPE vocabulary (joint)."),
    builtin_pairs: int = typer.Option(6000, "--builtin-pairs", help="Training pairs of --data builtin."),
    max_tokens: int = typer.Option(3000, "--max-tokens", help="Padded tokens per training batch."),
    batches: int = typer.Option(1, "--batches", help="Fixed training batches; one round runs them all."),
    reps: int = typer.Option(5, "--reps", help="Timed rounds (median reported)."),
    warmup: int = typer.Option(1, "--warmup", help="Untimed rounds before the timed ones."),
    threads: int = typer.Option(0, "--threads", help="torch threads (0: torch's default)."),
    variants: str = typer.Option(
        "", "--variants", help="Comma-separated training variants (default all; dot-scaled and torch always run)."
    ),
    plugins: str = typer.Option(
        "",
        "--plugins",
        help="Comma-separated plugin modules or .py files; their scores and positions are variants too.",
    ),
    decode_sentences: int = typer.Option(8, "--decode-sentences", help="Test sentences decoded per round."),
    decode_len: int = typer.Option(50, "--decode-len", help="Output length of every hypothesis."),
    beam: int = typer.Option(5, "--beam"),
    mem_length: int = typer.Option(512, "--mem-length", help="Sequence length of the memory test."),
    mem_batch: int = typer.Option(2, "--mem-batch", help="Batch of the memory test."),
    mem_chunk_mb: float = typer.Option(
        64.0, "--mem-chunk-mb", help="Chunk budget of the chunked side (model.attention.params.chunk_mb)."
    ),
    data_scale: int = typer.Option(
        0, "--data-scale", help="Also prepare a generated corpus of this many pairs (e.g. 1000000; minutes)."
    ),
    sections: str = typer.Option(
        ",".join(SECTIONS), "--sections", help="Comma-separated subset of: " + ", ".join(SECTIONS) + "."
    ),
    flops: bool = typer.Option(True, "--flops/--no-flops", help="Count model FLOPs (GFLOP/s, MFU, SDPA backend)."),
    startup_wandb: bool = typer.Option(
        True, "--startup-wandb/--no-startup-wandb", help="Also time start-up with W&B offline."
    ),
    seed: int = typer.Option(1, "--seed"),
    cache_dir: str = typer.Option("", "--cache-dir", help="Tokenizer/corpus cache (default: the usual one)."),
) -> None:
    """Benchmark every attention variant against torch.nn.Transformer: training and decoding speed,
    attention memory, the data stage and start-up; prints tables and ratios (interleaved medians)."""

    from ablate.bench.report import render, write_json
    from ablate.utils.plugins import is_file, load as load_plugins

    plugin_paths = tuple(str(Path(p).resolve()) if is_file(p) else p for p in _split(plugins))
    given = {**locals(), "variants": _split(variants), "plugins": plugin_paths, "sections": _split(sections)}
    opts = BenchOptions(**{f.name: given[f.name] for f in dataclasses.fields(BenchOptions) if f.name in given})
    load_plugins(opts.plugins)  # before the variants are listed
    if quick_run:  # quick() and run() check the options
        opts = quick(opts)
    save = None if json_path is None else (lambda partial: write_json(partial, json_path))
    results = run(opts, echo=log.info, checkpoint=save)
    render(results)
    if json_path is not None:
        log.info("wrote %s", json_path)


def register(app: typer.Typer) -> None:
    """Add ``bench`` as a top-level command of ``app``."""
    app.command("bench")(bench)
