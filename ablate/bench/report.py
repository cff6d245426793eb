"""Ratios, targets, and the two outputs of a benchmark run: rich tables and a JSON file.

Every ratio is taken between figures measured in the same run; timed ones are paired per
interleaved round (median of the per-round ratios), so noise on a shared machine moves both
sides alike. A ratio whose section did not run is ``None``,
and so is its ``targets_met`` entry.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Optional

from rich.console import Console
from rich.table import Table

from ablate.bench.timing import NOISY, paired, speedup
from ablate.utils.io import atomic_write_text

TARGETS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "dot_scaled_vs_torch": (">= 1.1", lambda r: r >= 1.1),
    "dot_unscaled_vs_scaled": ("within 5%", lambda r: abs(r - 1.0) <= 0.05),
    "additive_vs_dot": (">= 0.33", lambda r: r >= 0.33),
    "additive_chunked_mem_vs_naive": ("<= 0.25", lambda r: r <= 0.25),
    "additive_chunked_inference_mem_vs_naive": ("<= 0.25", lambda r: r <= 0.25),
    "beam5_cache_speedup": (">= 3", lambda r: r >= 3.0),
    "startup_first_step_s": ("<= 3 s", lambda r: r <= 3.0),
    "data_scale_peak_gib": ("< 1 GiB", lambda r: r < 1.0),
}
"""Ratio (or figure) -> (the target, as text; its check)."""


def _get(tree: dict, *path: str) -> Optional[Any]:
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def ratios(results: dict[str, Any]) -> dict[str, Optional[float]]:
    """The headline ratios of a run's results (``None`` where a section did not run)."""
    variants = _get(results, "training", "variants") or {}

    def faster(a: str, b: str) -> Optional[float]:  # throughput of a over b, paired per round
        if a not in variants or b not in variants:
            return None
        return speedup(variants[a]["seconds"], variants[b]["seconds"])

    beam = _get(results, "decoding", "beam")
    scale_peak = _get(results, "data", "scale", "peak_delta_mb")
    return {
        "dot_scaled_vs_torch": faster("dot-scaled", "torch"),
        "dot_unscaled_vs_scaled": faster("dot-unscaled", "dot-scaled"),
        "additive_vs_dot": faster("additive-scaled", "dot-scaled"),
        "non_padding_rows_vs_all_rows": faster("dot-scaled", "dot-scaled-all-rows"),
        "additive_chunked_mem_vs_naive": _get(results, "memory", "training", "ratio"),  # what training pays
        "additive_chunked_inference_mem_vs_naive": _get(results, "memory", "inference", "ratio"),
        "beam5_cache_speedup": _get(results, "decoding", "cache_speedup", f"beam{beam}") if beam == 5 else None,
        "greedy_cache_speedup": _get(results, "decoding", "cache_speedup", "greedy"),
        "startup_first_step_s": _get(results, "startup", "first_step_s"),
        "data_cached_speedup": _get(results, "data", "corpus", "cached_speedup"),
        "data_scale_peak_gib": None if scale_peak is None else scale_peak / 1024.0,
    }


def ratio_spreads(results: dict[str, Any]) -> dict[str, Optional[float]]:
    """The spread of the per-round values of each timed ratio of :func:`ratios` (None where not timed or not run)."""
    variants = _get(results, "training", "variants") or {}

    def rounds(a: str, b: str) -> Optional[float]:
        if a not in variants or b not in variants:
            return None
        return paired(variants[a]["seconds"], variants[b]["seconds"])[1]

    beam = _get(results, "decoding", "beam")
    return {
        "dot_scaled_vs_torch": rounds("dot-scaled", "torch"),
        "dot_unscaled_vs_scaled": rounds("dot-unscaled", "dot-scaled"),
        "additive_vs_dot": rounds("additive-scaled", "dot-scaled"),
        "non_padding_rows_vs_all_rows": rounds("dot-scaled", "dot-scaled-all-rows"),
        "beam5_cache_speedup": _get(results, "decoding", "cache_speedup_spread", f"beam{beam}") if beam == 5 else None,
        "greedy_cache_speedup": _get(results, "decoding", "cache_speedup_spread", "greedy"),
    }


def noisy(spreads: dict[str, Optional[float]]) -> list[str]:
    """The ratios whose rounds disagree by more than :data:`~ablate.bench.timing.NOISY`: flagged, not to be quoted."""
    return [name for name, value in spreads.items() if value is not None and value > NOISY]


def targets_met(values: dict[str, Optional[float]], targets: Optional[dict] = None) -> dict[str, Optional[bool]]:
    """Each target's verdict (of ``targets``, default :data:`TARGETS`); ``None`` when its figure was not measured."""
    return {
        name: (None if values.get(name) is None else bool(check(values[name])))
        for name, (_, check) in (TARGETS if targets is None else targets).items()
    }


def _clean(value: Any) -> Any:
    """JSON-safe copy: non-finite floats become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_json(results: dict[str, Any], path: Path) -> None:
    """Write the results (raw figures, ``ratios``, ``targets_met``) as indented JSON."""
    atomic_write_text(path, json.dumps(_clean(results), indent=1) + "\n")


def _fmt(value: Optional[float], spec: str = ",.0f") -> str:
    return "-" if value is None or (isinstance(value, float) and not math.isfinite(value)) else format(value, spec)


def training_table(training: dict[str, Any]) -> Table:
    table = Table(title=f"Training throughput (matmul peak {training['matmul_gflops']:.1f} GFLOP/s)")
    for col in ("variant", "tokens/s", "x torch", "x dot-scaled", "spread", "GFLOP/s", "MFU", "SDPA", "params"):
        table.add_column(col, justify="left" if col in ("variant", "SDPA") else "right")
    for name, row in training["variants"].items():
        table.add_row(
            name,
            _fmt(row["tokens_per_s"]),
            _fmt(row["ratio_vs_torch"], ".3f"),
            _fmt(row["ratio_vs_standard"], ".3f"),
            _fmt(row["spread"], ".0%"),
            _fmt(row.get("gflops"), ".1f"),
            _fmt(row.get("mfu"), ".0%"),
            row.get("sdpa", "-"),
            _fmt(row["params"] / 1e6, ".2f") + "M",
        )
    return table


def decoding_table(decoding: dict[str, Any]) -> Table:
    table = Table(
        title=f"Decoding ({decoding['sentences']} sentences, {decoding['length']}-token outputs, {decoding['model']})"
    )
    for col in ("mode", "sentences/s", "tokens/s", "spread"):
        table.add_column(col, justify="left" if col == "mode" else "right")
    for name, row in decoding["modes"].items():
        table.add_row(name, _fmt(row["sentences_per_s"], ".2f"), _fmt(row["tokens_per_s"]), _fmt(row["spread"], ".0%"))
    return table


def memory_table(memory: dict[str, Any]) -> Table:
    table = Table(
        title=f"Additive attention peak memory, length {memory['length']}, batch {memory['batch']} "
        f"(full intermediate {memory['intermediate_mb']:.0f} MiB)"
    )
    for col in ("mode", "chunked MiB", "naive MiB", "chunked / naive"):
        table.add_column(col, justify="left" if col == "mode" else "right")
    for mode in ("inference", "training"):
        if mode in memory:
            row = memory[mode]
            table.add_row(
                mode, _fmt(row["chunked"]["delta_mb"]), _fmt(row["naive"]["delta_mb"]), _fmt(row["ratio"], ".3f")
            )
    return table


def data_table(data: dict[str, Any]) -> Table:
    table = Table(title="Data stage (fresh process per run)")
    for col in ("corpus", "pairs", "first s", "encode-only s", "cached s", "tokenizer s", "encode pairs/s", "peak MiB"):
        table.add_column(col, justify="left" if col == "corpus" else "right")
    for name in ("corpus", "scale"):
        if name in data:
            d = data[name]
            table.add_row(
                data["source"] if name == "corpus" else "generated",
                _fmt(d["pairs"]),
                _fmt(d["first"]["seconds"], ".2f"),
                _fmt(d["encode"]["seconds"], ".2f"),
                _fmt(d["cached"]["seconds"], ".2f"),
                _fmt(d["tokenizer_s"], ".2f"),
                _fmt(d["encode_pairs_per_s"]),
                _fmt(d["peak_delta_mb"]),
            )
    return table


def startup_table(startup: dict[str, Any]) -> Table:
    table = Table(title="Start-up of a cached trial (seconds)")
    cols = ("W&B", "interpreter", "imports", "first step", "data", "model", "fit start", "step")
    for col in cols:
        table.add_column(col, justify="left" if col == "W&B" else "right")
    for key, row in startup.items():
        if key.startswith("wandb_"):
            table.add_row(
                key[6:],
                *(
                    _fmt(row.get(k), ".2f")
                    for k in (
                        "interpreter_s",
                        "imports_s",
                        "first_step_s",
                        "to_data_s",
                        "to_model_s",
                        "to_fit_start_s",
                        "to_first_step_s",
                    )
                ),
            )
    return table


def ratios_table(
    values: dict[str, Optional[float]], met: dict[str, Optional[bool]], spreads: Optional[dict] = None
) -> Table:
    spreads = spreads or {}
    table = Table(title=f"Ratios and targets (spread: of the per-round ratios; over {NOISY:.0%}: noisy)")
    for col in ("ratio", "value", "spread", "target", "met"):
        table.add_column(col, justify="left" if col in ("ratio", "target") else "right")
    for name, value in values.items():
        target = TARGETS.get(name, ("", None))[0]
        verdict = met.get(name)
        text = "-" if verdict is None else ("yes" if verdict else "NO")
        spread = spreads.get(name)
        if spread is not None and spread > NOISY:
            text += " (noisy)"
        table.add_row(name, _fmt(value, ".3f"), _fmt(spread, ".0%"), target, text)
    return table


def render(results: dict[str, Any], console: Optional[Console] = None) -> None:
    """Print every measured section and the ratios as rich tables."""
    if console is None:
        console = Console()
        if not console.is_terminal:  # a file or pipe: wide enough for every column
            console = Console(width=160)
    meta, hw = results["meta"], results["meta"]["hardware"]
    console.print(
        f"[bold]ablate bench[/]: {hw['name']} ({hw['device']}, {hw['threads']} threads, {hw['dtype']}), "
        f"torch {hw['torch']}, {meta['reps']} rounds (median) timed by {meta.get('clock', 'wall')} clock, "
        f"{meta['seconds']:.0f} s"
    )
    for key, make in (
        ("training", training_table),
        ("decoding", decoding_table),
        ("memory", memory_table),
        ("data", data_table),
        ("startup", startup_table),
    ):
        if results.get(key):
            console.print(make(results[key]))
    console.print(ratios_table(results["ratios"], results["targets_met"], results.get("ratio_spread")))
    if results.get("noisy"):
        console.print(f"[yellow]noisy (rounds disagree by over {NOISY:.0%}): {', '.join(results['noisy'])}[/]")
