"""Per-seed values behind a table's cells: ``ablate table SOURCE --per-seed``.

One line per trial: its row, seed, the test BLEU of every test split, and its Δ against the base
trial of the same seed value (the seed-paired differences the seed-aware test pools; blank where
the base has no trial of that seed). A row whose per-seed Δs disagree in sign is marked
:data:`~ablate.report.footnotes.FLIP`: at least one seed says better and one says worse.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Any, Optional

from ablate.record import TEST_BLEU
from ablate.report.aggregate import Sweep, value_order
from ablate.report.footnotes import FLIP


@dataclass(frozen=True)
class SeedLine:
    row: str
    seed: Any
    values: list[Optional[float]]
    deltas: list[Optional[float]]
    flip: list[bool]


def per_seed(sweep: Sweep) -> tuple[list[str], list[SeedLine]]:
    """``(test metric keys, one line per finished trial)`` in table order, seeds in order."""
    keys = [TEST_BLEU.split_key(s) for s in sweep.test_splits] or [TEST_BLEU.key]
    base = {str(t.seed): t for t in sweep.base.trials}
    lines = []
    for row in sweep.rows:
        trials = sorted(row.trials, key=lambda t: value_order(t.seed))
        deltas = {}
        for t in trials:
            b = base.get(str(t.seed))
            deltas[t.name] = [
                None
                if row.is_base or b is None or k not in t.metrics or k not in b.metrics
                else t.metrics[k] - b.metrics[k]
                for k in keys
            ]
        flips = [len({d[i] > 0 for d in deltas.values() if d[i] not in (None, 0.0)}) > 1 for i in range(len(keys))]
        lines += [SeedLine(row.name, t.seed, [t.metrics.get(k) for k in keys], deltas[t.name], flips) for t in trials]
    return keys, lines


def render(sweep: Sweep, fmt: str) -> str:
    """The per-seed lines as CSV (unrounded) or Markdown (every other format)."""
    keys, lines = per_seed(sweep)
    labels = [TEST_BLEU.split_of(k) or k.partition("/")[0] for k in keys]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["row", "seed", *(f"{k}" for k in keys), *(f"{k}.delta_vs_base" for k in keys)])
        for ln in lines:
            w.writerow([ln.row, ln.seed, *(_num(v) for v in ln.values), *(_num(d) for d in ln.deltas)])
        return buf.getvalue()
    out = [
        f"**Per seed: {sweep.name or 'ablation'}** (test BLEU; Δ against the base trial of the same seed)",
        "",
        "| row | seed | "
        + " | ".join(f"BLEU ({s})" for s in labels)
        + " | "
        + " | ".join(f"Δ ({s})" for s in labels)
        + " |",
        "| :-- | --: | " + " | ".join(["--:"] * 2 * len(keys)) + " |",
    ]
    for ln in lines:
        deltas = [
            ("" if d is None else f"{d:+.2f}") + (FLIP if f and d is not None else "")
            for d, f in zip(ln.deltas, ln.flip)
        ]
        values = ["" if v is None else f"{v:.2f}" for v in ln.values]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in [ln.row, str(ln.seed), *values, *deltas]) + " |")
    out += ["", f"{FLIP} the row's per-seed Δs disagree in sign."]
    return "\n".join(out) + "\n"


def _num(x: Optional[float]) -> str:
    return "" if x is None else f"{x:.10g}"
