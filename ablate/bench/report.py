"""Ratios, targets, and the two outputs of a benchmark run: rich tables and a JSON file.

Every ratio is taken between figures measured in the same run; timed ones are paired per interleaved
round (median of the per-round ratios, with its distribution-free 95% interval), so noise on a shared
machine moves both sides alike, and a ratio whose interval is wider than 10% of it is flagged noisy. A
ratio whose section did not run is ``None``, and so is its ``targets_met`` entry.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

from rich.console import Console
from rich.table import Table

from ablate.bench import SECTIONS
from ablate.bench.timing import NOISY, paired, paired_interval, too_wide
from ablate.utils.io import dumps, write_output_text

TARGETS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "dot_scaled_vs_torch": (">= 1.1", lambda r: r >= 1.1),
    "dot_unscaled_vs_scaled": ("within 5%", lambda r: abs(r - 1.0) <= 0.05),
    "additive_vs_dot": (">= 0.33", lambda r: r >= 0.33),
    "additive_chunked_mem_vs_naive": ("<= 0.25", lambda r: r <= 0.25),
    "additive_chunked_inference_mem_vs_naive": ("<= 0.25", lambda r: r <= 0.25),
    "beam5_cache_speedup": (">= 3", lambda r: r >= 3.0),
    "startup_first_step_s": ("<= 3 s", lambda r: r <= 3.0),
    "data_scale_peak_gib": ("< 1 GiB", lambda r: r < 1.0),
}  # ratio (or figure) -> (the target, as text; its check)


def _get(tree: dict, *path: str) -> Optional[Any]:
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


PAIRED = {
    "dot_scaled_vs_torch": ("dot-scaled", "torch"),
    "dot_unscaled_vs_scaled": ("dot-unscaled", "dot-scaled"),
    "additive_vs_dot": ("additive-scaled", "dot-scaled"),
    "non_padding_rows_vs_all_rows": ("dot-scaled", "dot-scaled-all-rows"),
}
"""Timed ratio -> (variant, the variant it is faster than): throughputs paired per round."""


def _paired(results: dict[str, Any], which: Callable) -> dict[str, Any]:
    """``which(fast seconds, slow seconds)`` of each :data:`PAIRED` ratio; ``None`` where a variant did not run."""
    variants = _get(results, "training", "variants") or {}
    return {
        name: which(variants[a]["seconds"], variants[b]["seconds"]) if a in variants and b in variants else None
        for name, (a, b) in PAIRED.items()
    }


def _cache_speedups(results: dict[str, Any], figure: str) -> dict[str, Any]:
    """The beam-5 and greedy entries of the decoding section's ``figure`` (``cache_speedup``, ``..._spread`` or
    ``..._interval``); ``None`` where decoding did not run, and for beam 5 where another beam ran."""
    found = _get(results, "decoding", figure) or {}
    beam5 = found.get("beam5") if _get(results, "decoding", "beam") == 5 else None
    return {"beam5_cache_speedup": beam5, "greedy_cache_speedup": found.get("greedy")}


def ratios(results: dict[str, Any]) -> dict[str, Optional[float]]:
    """The headline ratios of a run's results (``None`` where a section did not run)."""
    scale_peak = _get(results, "data", "scale", "peak_delta_mb")
    return {
        **_paired(results, lambda fast, slow: paired(fast, slow)[0]),
        "additive_chunked_mem_vs_naive": _get(results, "memory", "training", "ratio"),  # what training pays
        "additive_chunked_inference_mem_vs_naive": _get(results, "memory", "inference", "ratio"),
        **_cache_speedups(results, "cache_speedup"),
        "startup_first_step_s": _get(results, "startup", "first_step_s"),
        "data_cached_speedup": _get(results, "data", "corpus", "cached_speedup"),
        "data_scale_peak_gib": None if scale_peak is None else scale_peak / 1024.0,
    }


def ratio_spreads(results: dict[str, Any]) -> dict[str, Optional[float]]:
    """The spread of the per-round values of each timed ratio of :func:`ratios` (None where not timed or not run)."""
    return {
        **_paired(results, lambda fast, slow: paired(fast, slow)[1]),
        **_cache_speedups(results, "cache_speedup_spread"),
    }


def ratio_intervals(results: dict[str, Any]) -> dict[str, Optional[tuple[float, float]]]:
    """The 95% interval of the median of each timed ratio of :func:`ratios`
    (:func:`~ablate.bench.timing.paired_interval`; None where not timed or not run)."""
    return {**_paired(results, paired_interval), **_cache_speedups(results, "cache_speedup_interval")}


def noisy(values: dict[str, Optional[float]], intervals: dict[str, Any]) -> list[str]:
    """The ratios whose 95% interval spans more than :data:`~ablate.bench.timing.NOISY` of them (or that have under
    6 rounds, :func:`~ablate.bench.timing.median_interval`): flagged, not to be quoted; more rounds narrow it."""
    return [name for name, value in values.items() if too_wide(value, intervals.get(name))]


def targets_met(values: dict[str, Optional[float]], targets: Optional[dict] = None) -> dict[str, Optional[bool]]:
    """Each target's verdict (of ``targets``, default :data:`TARGETS`); ``None`` when its figure was not measured."""
    return {
        name: (None if (value := values.get(name)) is None else bool(check(value)))
        for name, (_, check) in (TARGETS if targets is None else targets).items()
    }


def write_json(results: dict[str, Any], path: Path) -> None:
    """Write the results (raw figures, ``ratios``, ``targets_met``) as indented JSON (non-finite floats: null)."""
    write_output_text(path, dumps(results, indent=1) + "\n")  # a folder or an unwritable path: one line


def _fmt(value: Optional[float], spec: str = ",.0f") -> str:
    return "-" if value is None or (isinstance(value, float) and not math.isfinite(value)) else format(value, spec)


def _table(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]], left: Sequence[str] = ()) -> Table:
    """A rich table; the first column and those in ``left`` are left-aligned, the numbers right-aligned."""
    table = Table(title=title)
    for col in columns:
        table.add_column(col, justify="left" if col == columns[0] or col in left else "right")
    for row in rows:
        table.add_row(*row)
    return table


def training_table(training: dict[str, Any]) -> Table:
    columns = ("variant", "tokens/s", "x torch", "x dot-scaled", "spread", "GFLOP/s", "MFU", "SDPA", "params")
    rows = [
        (
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
        for name, row in training["variants"].items()
    ]
    return _table(f"Training throughput (matmul peak {training['matmul_gflops']:.1f} GFLOP/s)", columns, rows, ["SDPA"])


def decoding_table(d: dict[str, Any]) -> Table:
    rows = [
        (name, _fmt(row["sentences_per_s"], ".2f"), _fmt(row["tokens_per_s"]), _fmt(row["spread"], ".0%"))
        for name, row in d["modes"].items()
    ]
    title = f"Decoding ({d['sentences']} sentences, {d['length']}-token outputs, {d['model']})"
    return _table(title, ("mode", "sentences/s", "tokens/s", "spread"), rows)


def memory_table(m: dict[str, Any]) -> Table:
    rows = [
        (mode, _fmt(m[mode]["chunked"]["delta_mb"]), _fmt(m[mode]["naive"]["delta_mb"]), _fmt(m[mode]["ratio"], ".3f"))
        for mode in ("inference", "training")  # bench_memory measures both
    ]
    title = (
        f"Additive attention peak memory, length {m['length']}, batch {m['batch']} "
        f"(full intermediate {m['intermediate_mb']:.0f} MiB)"
    )
    return _table(title, ("mode", "chunked MiB", "naive MiB", "chunked / naive"), rows)


def data_table(data: dict[str, Any]) -> Table:
    columns = ("corpus", "pairs", "first s", "encode-only s", "cached s", "tokenizer s", "encode pairs/s", "peak MiB")
    rows = [
        (
            data["source"] if name == "corpus" else "generated",
            _fmt(d["pairs"]),
            *(_fmt(d[run]["seconds"], ".2f") for run in ("first", "encode", "cached")),
            _fmt(d["tokenizer_s"], ".2f"),
            _fmt(d["encode_pairs_per_s"]),
            _fmt(d["peak_delta_mb"]),
        )
        for name, d in ((name, data[name]) for name in ("corpus", "scale") if name in data)
    ]
    return _table("Data stage (fresh process per run)", columns, rows)


STARTUP_FIGURES = ("interpreter_s", "imports_s", "first_step_s") + tuple(
    f"to_{name}_s" for name in ("data", "model", "fit_start", "first_step")
)


def startup_table(startup: dict[str, Any]) -> Table:
    columns = ("W&B", "interpreter", "imports", "first step", "data", "model", "fit start", "step")
    rows = [
        (key[6:], *(_fmt(row.get(k), ".2f") for k in STARTUP_FIGURES))
        for key, row in startup.items()
        if key.startswith("wandb_")
    ]
    return _table("Start-up of a cached trial (seconds)", columns, rows)


def ratios_table(
    values: dict[str, Optional[float]],
    met: dict[str, Optional[bool]],
    spreads: Optional[dict] = None,
    intervals: Optional[dict] = None,
) -> Table:
    spreads, intervals = spreads or {}, intervals or {}
    rows = []
    for name, value in values.items():
        verdict, interval = met.get(name), intervals.get(name)
        text = "-" if verdict is None else ("yes" if verdict else "NO")
        if too_wide(value, interval):
            text += " (noisy)"
        shown = "-" if interval is None else f"{_fmt(interval[0], '.3f')}-{_fmt(interval[1], '.3f')}"
        rows.append(
            (name, _fmt(value, ".3f"), shown, _fmt(spreads.get(name), ".0%"), TARGETS.get(name, ("", None))[0], text)
        )
    title = f"Ratios and targets (median of the rounds, its 95% interval: wider than {NOISY:.0%} of it, noisy)"
    return _table(title, ("ratio", "value", "95% interval", "range", "target", "met"), rows, ["target"])


def render(results: dict[str, Any]) -> None:
    """Print every measured section and the ratios as rich tables."""
    console = Console()
    if not console.is_terminal:  # a file or pipe: wide enough for every column
        console = Console(width=160)
    meta, hw = results["meta"], results["meta"]["hardware"]
    console.print(
        f"[bold]ablate bench[/]: {hw['name']} ({hw['device']}, {hw['threads']} threads, {hw['dtype']}), "
        f"torch {hw['torch']}, {meta['reps']} rounds (median) timed by {meta.get('clock', 'wall')} clock, "
        f"{meta['seconds']:.0f} s"
    )
    for key, make in zip(SECTIONS, (training_table, decoding_table, memory_table, data_table, startup_table)):
        if results.get(key):
            console.print(make(results[key]))
    console.print(
        ratios_table(
            results["ratios"], results["targets_met"], results.get("ratio_spread"), results.get("ratio_interval")
        )
    )
    if results.get("noisy"):
        console.print(
            f"[yellow]noisy (95% interval wider than {NOISY:.0%} of the ratio; more --reps narrow it): "
            f"{', '.join(results['noisy'])}[/]"
        )
