"""Figures of a sweep (matplotlib, no pyplot state): PNGs a person reads at a glance.

* ``test_bleu.png``: test BLEU per row, mean with ± std error bars over seeds (bars);
* ``delta_ci.png``: the table's comparisons as a forest plot, Δ and 95% CI (:mod:`.forest`);
* ``bleu_vs_speed.png`` and ``bleu_vs_params.png``: quality against cost, with the Pareto
  front (rows no other row beats on both axes) marked;
* ``learning_curves.png``: validation BLEU against step, mean line and ± std band per row;
* ``bleu_by_length.png``: test BLEU per source-length bucket, mean line and ± std band per row
  (Bahdanau et al. 2015, Fig. 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from matplotlib.figure import Figure

from ablate.report.aggregate import Row, Sweep, curve
from ablate.report.figure_style import DPI, SPLIT_COLORS, display_names, group_colors, group_label, save
from ablate.report.forest import plot_delta_ci
from ablate.report.significance import Comparison, against_base

__all__ = ["display_names", "plot_all", "plot_delta_ci"]


def test_metric(sweep: Sweep) -> tuple[str, str]:
    """The test BLEU key used for single-metric plots and its label (first split)."""
    splits = sweep.test_splits
    if splits:
        return f"test_{splits[0]}/bleu", f"test BLEU ({splits[0]})"
    return "test/bleu", "test BLEU"


def pareto_front(xs: Sequence[float], ys: Sequence[float], maximize_x: bool) -> list[int]:
    """Indices of points not dominated by any other (y is maximised; x maximised or minimised),
    ordered by x."""
    sign = 1.0 if maximize_x else -1.0
    front = []
    for i, (x, y) in enumerate(zip(xs, ys)):
        dominated = any(
            sign * xo >= sign * x and yo >= y and (sign * xo > sign * x or yo > y)
            for j, (xo, yo) in enumerate(zip(xs, ys))
            if j != i
        )
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: xs[i])


def _std(row: Row, key: str) -> float:
    st = row.stats.get(key)
    return 0.0 if st is None or st.std is None else st.std


def plot_test_bleu(
    sweep: Sweep, path: Path, comparisons: Optional[list[Comparison]] = None, alpha: float = 0.05
) -> Optional[Path]:
    """Bars of test BLEU per row (one bar per test split), ± std over seeds; † = Holm p < alpha vs base."""
    splits = sweep.test_splits
    keys = [(f"test_{s}/bleu", s) for s in splits] or [("test/bleu", None)]
    rows = [r for r in sweep.rows if any(k in r.stats for k, _ in keys)]
    if not rows:
        return None
    comparisons = against_base(comparisons or [], sweep)
    fig = Figure(figsize=(min(14.0, max(6.5, 0.5 * len(rows) * len(keys) + 2.5)), 4.8), dpi=DPI)
    ax = fig.add_subplot()
    width = 0.8 / len(keys)
    x = np.arange(len(rows))
    lows, highs = [], []
    for j, (key, split) in enumerate(keys):
        means = np.array([r.stats[key].mean if key in r.stats else np.nan for r in rows])
        stds = np.array([_std(r, key) for r in rows])
        pos = x - 0.4 + width * (j + 0.5)
        ax.bar(
            pos,
            means,
            width * 0.92,
            yerr=stds,
            capsize=3,
            color=SPLIT_COLORS[j % len(SPLIT_COLORS)],
            label=split or "test",
            error_kw={"elinewidth": 1, "ecolor": "#333333"},
        )
        for p, m, s, r in zip(pos, means, stds, rows):
            if np.isnan(m):
                continue
            comp = comparisons.get((r.name, split)) if split else None
            mark = "†" if comp is not None and comp.significant(alpha) else ""
            ax.annotate(
                f"{m:.1f}{mark}",
                (p, m + s),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=8 if len(rows) * len(keys) <= 16 else 6.5,
            )
        lows.append(np.nanmin(means - stds))
        highs.append(np.nanmax(means + stds))
    base_key = keys[0][0]
    if base_key in sweep.base.stats:
        ax.axhline(
            sweep.base.stats[base_key].mean, color="#555555", ls="--", lw=1, label=f"base ({keys[0][1] or 'test'})"
        )
    lo, hi = min(lows), max(highs)
    pad = max(0.5, 0.15 * (hi - lo))
    bottom = max(0.0, lo - 2 * pad)
    ax.set_ylim(bottom, hi + 1.5 * pad)
    names = display_names(sweep)
    tilt = len(rows) > 6 or max(len(names[r.name]) for r in rows) * len(rows) > 60
    ax.set_xticks(
        x,
        [f"{names[r.name]}\n(n={len(r.trials)})" for r in rows],
        rotation=30 if tilt else 0,
        ha="right" if tilt else "center",
        fontsize=8,
    )
    ax.set_ylabel("BLEU" if bottom == 0 else f"BLEU (axis starts at {bottom:.0f})")
    ax.set_xlabel("configuration (n = seeds)")
    title = "Test BLEU per configuration (mean ± std over seeds)"
    if any(c.significant(alpha) for c in comparisons.values()):
        title += f"\n† Holm-adjusted p < {alpha:g} vs base (paired test over sentences, seeds together)"
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(title="test split", fontsize=8, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save(fig, path)


def plot_quality_cost(sweep: Sweep, path: Path, cost: str) -> Optional[Path]:
    """Test BLEU against ``train/tokens_per_sec`` (higher is cheaper) or ``params`` (lower is),
    error bars ± std, the Pareto front circled and joined by a dashed line."""
    key, ylabel = test_metric(sweep)
    speed = cost == "train/tokens_per_sec"
    scale = 1.0 if speed else 1e-6
    rows = [r for r in sweep.rows if key in r.stats and cost in r.stats]
    if not rows:
        return None
    xs = [r.stats[cost].mean * scale for r in rows]
    ys = [r.stats[key].mean for r in rows]
    colors = group_colors(rows)
    fig = Figure(figsize=(7.0, 4.8), dpi=DPI)
    ax = fig.add_subplot()
    seen = set()
    for r, x, y in zip(rows, xs, ys):
        label = None if r.group in seen else group_label(r, sweep)
        seen.add(r.group)
        ax.errorbar(
            x,
            y,
            xerr=_std(r, cost) * scale,
            yerr=_std(r, key),
            fmt="o",
            ms=7,
            capsize=3,
            color=colors[r.group],
            label=label,
            zorder=3,
        )
    front = pareto_front(xs, ys, maximize_x=speed)
    fx, fy = [xs[i] for i in front], [ys[i] for i in front]
    ax.plot(fx, fy, ls="--", color="#C44E52", lw=1.2, zorder=2)
    ax.scatter(fx, fy, s=180, facecolors="none", edgecolors="#C44E52", lw=1.5, zorder=4, label="Pareto front")
    ax.margins(x=0.15, y=0.15)
    _place_labels(ax, xs, ys, [display_names(sweep)[r.name] for r in rows])
    ax.set_xlabel("training throughput (tokens/s)  →  faster" if speed else "parameters (millions)  ←  smaller")
    ax.set_ylabel(f"{ylabel}  ↑  better")
    ax.set_title(f"Quality vs {'training speed' if speed else 'model size'} (mean ± std over seeds)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return save(fig, path)


def _place_labels(ax, xs: Sequence[float], ys: Sequence[float], names: Sequence[str], size: float = 8.0) -> None:
    """Annotate points, trying four offsets each so labels avoid points and earlier labels."""
    ax.autoscale_view()
    to_px = ax.transData.transform
    scale = ax.figure.dpi / 72.0
    pts = [tuple(to_px((x, y))) for x, y in zip(xs, ys)]
    taken = [(px - 5 * scale, py - 5 * scale, px + 5 * scale, py + 5 * scale) for px, py in pts]
    offsets = [
        (6, 5, "left", "bottom"),
        (6, -5, "left", "top"),
        (-6, 5, "right", "bottom"),
        (-6, -5, "right", "top"),
        (6, 14, "left", "bottom"),
        (6, -14, "left", "top"),
    ]
    for (px, py), x, y, name in zip(pts, xs, ys, names):
        w, h = 0.6 * size * len(name) * scale, size * 1.3 * scale
        for dx, dy, ha, va in offsets:
            x0 = px + dx * scale - (w if ha == "right" else 0)
            y0 = py + dy * scale - (h if va == "top" else 0)
            box = (x0, y0, x0 + w, y0 + h)
            if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in taken):
                break
        taken.append(box)
        ax.annotate(name, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=size)


def plot_learning_curves(sweep: Sweep, path: Path, metric: str = "val/bleu") -> Optional[Path]:
    """Validation BLEU against step: mean line and ± std band over seeds per row.

    Up to six rows share one panel; more rows get one panel per ablation group, each with
    the base (black) for reference, so no panel holds more than a handful of curves.
    """
    curves = [(r, *curve(r, metric)) for r in sweep.rows]
    curves = [c for c in curves if len(c[1])]
    if not curves:
        return None
    base = [c for c in curves if c[0].is_base]
    groups = list(dict.fromkeys(c[0].group for c in curves if not c[0].is_base))
    if len(curves) <= 6 or len(groups) < 2:
        panels = [("", curves)]
    else:
        panels = [
            (
                group_label(next(c[0] for c in curves if c[0].group == g), sweep),
                base + [c for c in curves if c[0].group == g],
            )
            for g in groups
        ]
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    fig = Figure(figsize=(7.0 if ncols == 1 else 4.6 * ncols, 4.8 if nrows == 1 else 3.4 * nrows + 0.6), dpi=DPI)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    for ax, (title, members) in zip(axes.flat, panels):
        _draw_curves(ax, members, display_names(sweep))
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7 if len(panels) > 1 else 8, loc="lower right")
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax in axes.flat[max(0, len(panels) - ncols) : len(panels)]:  # the lowest panel of each column
        ax.set_xlabel("training step")
    for ax in axes[:, 0]:
        ax.set_ylabel("validation BLEU")
    fig.suptitle("Learning curves: validation BLEU (mean, shaded ± std over seeds)", fontsize=10)
    return save(fig, path)


def _draw_curves(ax, members, names: dict[str, str]) -> None:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    k = 0
    for row, steps, mean, std in members:
        if row.is_base:
            color, lw = "#000000", 2.2
        else:
            color, lw = cmap(k % 10), 1.5
            k += 1
        ax.plot(
            steps,
            mean,
            color=color,
            lw=lw,
            label=f"{names[row.name]} (n={len(row.trials)})",
            zorder=3 if row.is_base else 2,
        )
        ax.fill_between(steps, mean - std, mean + std, color=color, alpha=0.15, lw=0)


def plot_bleu_by_length(sweep: Sweep, path: Path) -> Optional[Path]:
    """Test BLEU against source-length bucket: mean line and ± std band over seeds per row."""
    from ablate.report.lengths import bleu_by_length

    data = bleu_by_length(sweep)
    if data is None:
        return None
    fig = Figure(figsize=(7.0, 4.8), dpi=DPI)
    ax = fig.add_subplot()
    x = np.arange(len(data.buckets))
    names = display_names(sweep)
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    for k, row in enumerate(sweep.rows):
        stats = data.stats.get(row.name) or []
        if not any(stats):
            continue
        mean = np.array([s.mean if s else np.nan for s in stats])
        std = np.array([s.std or 0.0 if s else 0.0 for s in stats])
        color = "#000000" if row.is_base else cmap(k % 10)
        ax.plot(
            x,
            mean,
            marker="o",
            color=color,
            lw=2.2 if row.is_base else 1.5,
            label=f"{names[row.name]} (n={len(row.trials)})",
        )
        ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.12, lw=0)
    ax.set_xticks(x, data.labels)
    ax.set_xlabel(f"{data.basis} length (words), about equal-sized buckets of {data.split}")
    ax.set_ylabel("test BLEU")
    ax.set_title("BLEU by sentence length (mean, shaded ± std over seeds)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return save(fig, path)


FIGURE_FORMATS = ("png", "pdf", "svg")
"""File formats of the figures: PNG for screens, PDF and SVG (vector) for papers."""


def plot_all(
    sweep: Sweep, out_dir: Path, comparisons: Optional[list[Comparison]] = None, alpha: float = 0.05, fmt: str = "png"
) -> list[Path]:
    """Write every figure that the sweep has data for into ``out_dir`` as ``fmt`` files; return their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [
        plot_test_bleu(sweep, out_dir / f"test_bleu.{fmt}", comparisons, alpha),
        plot_delta_ci(sweep, out_dir / f"delta_ci.{fmt}", comparisons, alpha),
        plot_quality_cost(sweep, out_dir / f"bleu_vs_speed.{fmt}", "train/tokens_per_sec"),
        plot_quality_cost(sweep, out_dir / f"bleu_vs_params.{fmt}", "params"),
        plot_learning_curves(sweep, out_dir / f"learning_curves.{fmt}"),
        plot_bleu_by_length(sweep, out_dir / f"bleu_by_length.{fmt}"),
    ]
    return [p for p in written if p is not None]
