"""Figures of a sweep (matplotlib, no pyplot state): PNGs a person reads at a glance.

* ``test_bleu.png``: test BLEU per row (horizontal bars, one per test split), whiskers the 95% CI
  of the row's Δ vs the base placed on the base's mean (± std over seeds without a test), † as
  in the table;
* ``delta_ci.png``: the table's comparisons as a forest plot, Δ and 95% CI (:mod:`.forest`);
* ``bleu_vs_speed.png`` and ``bleu_vs_params.png``: quality against cost, with the Pareto
  front (rows no other row beats on both axes) marked;
* ``learning_curves.png`` and ``delta_vs_step.png``: validation BLEU against step per row, and
  each row's Δ vs the base against step (:mod:`.step_plots`);
* ``bleu_by_length.png``: test BLEU per source-length bucket, mean line and ± std band per row
  (Bahdanau et al. 2015, Fig. 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from matplotlib.figure import Figure

from ablate.metrics import get_scorer
from ablate.report.aggregate import Row, Sweep
from ablate.report.figure_style import (
    DPI,
    MARKED,
    SPLIT_COLORS,
    caption,
    describe_test,
    display_names,
    group_colors,
    group_label,
    row_height,
    save,
    tick_size,
)
from ablate.report.forest import plot_delta_ci
from ablate.report.metric_values import DEFAULT_METRIC
from ablate.report.significance import LEVEL, Comparison, against_base
from ablate.report.step_plots import plot_delta_vs_step, plot_learning_curves
from ablate.report.table import MARK

__all__ = ["display_names", "plot_all", "plot_delta_ci", "plot_learning_curves", "plot_delta_vs_step"]


def test_metric(sweep: Sweep, metric: str = DEFAULT_METRIC) -> tuple[str, str]:
    """The test score key (BLEU, or ``metric``) used for single-metric plots and its label (first split)."""
    splits, label = sweep.test_splits, get_scorer(metric).label
    if splits:
        return f"test_{splits[0]}/{metric}", f"test {label} ({splits[0]})"
    return f"test/{metric}", f"test {label}"


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


@dataclass(frozen=True)
class Bar:
    """One bar of ``test_bleu.png`` and its whisker.

    Attributes:
        row, split: the row's name and the test split (None: the only ``test/bleu``).
        mean: mean over seeds of the row's test BLEU (the bar).
        low, high: the whisker's ends (nan: no whisker), as ``whisker`` says.
        center: where the whisker is centred: ``mean``, or for ``ci`` the base's mean + Δ (the
            bar's end too, unless the runs' summary BLEU differs from their saved hypotheses').
        whisker: ``ci``: the base's mean + the 95% CI of the row's Δ vs the base (the comparison
            the table's † is about), so it crosses the base's mean exactly where the CI holds 0;
            ``std``: mean ± std over seeds (no comparisons made); ``none``.
        mark: the table's † for this row and split, from the same comparison.
    """

    row: str
    split: Optional[str]
    mean: float
    low: float
    high: float
    center: float
    whisker: str
    mark: str = ""


def bleu_bars(
    sweep: Sweep, comparisons: Sequence[Comparison] = (), alpha: float = 0.05, metric: str = DEFAULT_METRIC
) -> list[Bar]:
    """The bars of :func:`plot_test_bleu`, rows in table order, each row's splits together."""
    splits = sweep.test_splits
    keys = [(_key(s, metric), s) for s in splits] or [(_key(None, metric), None)]
    vs_base = against_base(comparisons, sweep)
    tested = sorted({s for (_, s) in vs_base})
    use_ci = any(c.tested for c in vs_base.values())
    bars = []
    for row in sweep.rows:
        for key, split in keys:
            if key not in row.stats:
                continue
            mean = row.stats[key].mean
            # as the table: the plain test/bleu column is tested on the one split with hypotheses
            comp = vs_base.get((row.name, split or (tested[0] if len(tested) == 1 else "")))
            mark = MARK if comp is not None and comp.significant(alpha) else ""
            base = sweep.base.stats.get(key)
            if use_ci and comp is not None and comp.tested and base is not None:
                low, high = base.mean + comp.ci[0], base.mean + comp.ci[1]
                bars.append(Bar(row.name, split, mean, low, high, base.mean + comp.delta, "ci", mark))
            elif use_ci or row.stats[key].std is None:
                bars.append(Bar(row.name, split, mean, math.nan, math.nan, mean, "none", mark))
            else:
                std = row.stats[key].std
                bars.append(Bar(row.name, split, mean, mean - std, mean + std, mean, "std", mark))
    return bars


def bleu_bars_figure(
    sweep: Sweep, comparisons: Sequence[Comparison] = (), alpha: float = 0.05, metric: str = DEFAULT_METRIC
) -> Optional[Figure]:
    """Horizontal bars of test BLEU (or ``metric``) per row (one per test split); None when no row has it."""
    bars = bleu_bars(sweep, comparisons, alpha, metric)
    scorer = get_scorer(metric)
    if not bars:
        return None
    rows = list(dict.fromkeys(b.row for b in bars))
    splits = list(dict.fromkeys(b.split for b in bars))
    by_name = {r.name: r for r in sweep.rows}
    lines = len(rows) * (1 if len(splits) == 1 else 0.55 * len(splits) + 0.45)
    fig = Figure(figsize=(8.0, row_height(round(lines), 0.3, 2.6)), dpi=DPI)
    ax = fig.add_subplot()
    thick = 0.8 / len(splits)
    size = tick_size(len(rows) * len(splits))
    ends = [v for b in bars for v in (b.mean, b.low, b.high) if not math.isnan(v)]
    lo, hi = min(ends), max(ends)
    pad = max(0.5, 0.08 * (hi - lo))
    left = max(0.0, math.floor(lo - 2 * pad))
    for j, split in enumerate(splits):
        mine = [b for b in bars if b.split == split]
        pos = np.array([rows.index(b.row) for b in mine]) - 0.4 + thick * (j + 0.5)
        color = SPLIT_COLORS[j % len(SPLIT_COLORS)]
        ax.barh(
            pos, [b.mean - left for b in mine], thick * 0.9, left=left, color=color, alpha=0.8, label=split or "test"
        )
        for p, b in zip(pos, mine):
            end = b.mean
            if b.whisker != "none":
                ax.errorbar(
                    b.center,
                    p,
                    xerr=[[b.center - b.low], [b.high - b.center]],
                    fmt="none",
                    ecolor="#222222",
                    elinewidth=1.1,
                    capsize=3,
                )
                end = max(b.high, b.mean)
            ax.annotate(
                f"{b.mean:.1f}{b.mark}",
                (end, p),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=size - 0.5,
                color=MARKED if b.mark else "#000000",
                bbox={"fc": "white", "ec": "none", "pad": 0.6, "alpha": 0.85},
                zorder=4,
            )
        base = next((b for b in mine if b.row == sweep.base.name), None)
        if base is not None:
            ax.axvline(base.mean, color=color if len(splits) > 1 else "#555555", ls="--", lw=1, zorder=1)
    ax.set_yticks(
        range(len(rows)), [f"{display_names(sweep)[r]} (n={len(by_name[r].trials)})" for r in rows], fontsize=size
    )
    for tick, r in zip(ax.get_yticklabels(), rows):
        tick.set_color(MARKED if any(b.mark for b in bars if b.row == r) else "#000000")
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(left, hi + 3 * pad)
    what = f"test {scorer.label}" + (f" ({splits[0]})" if len(splits) == 1 and splits[0] else "")
    what += "" if scorer.higher_is_better else ", lower is better"
    ax.set_xlabel(what if left == 0 else f"{what}, axis starts at {left:g}", fontsize=9)
    ax.set_title(f"Test {scorer.label} per configuration (bar: mean over seeds; n = seeds)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    if len(splits) > 1:
        ax.legend(title="test split", fontsize=8, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    caption(ax, _bar_caption(bars, comparisons, sweep, alpha, metric), gap=32)
    return fig


def _bar_caption(
    bars: Sequence[Bar], comparisons: Sequence[Comparison], sweep: Sweep, alpha: float, metric: str = DEFAULT_METRIC
) -> list[str]:
    kinds = {b.whisker for b in bars}
    lines = ["Dashed line: the base's mean."]
    if "ci" in kinds:
        lines.append(
            f"Whiskers: the base's mean + the {LEVEL:.0%} CI of the row's Δ vs the base ({describe_test(comparisons)}"
            " test), so a whisker that crosses the dashed line is a CI that includes Δ = 0; no whisker: the base "
            "(the reference) or a row not tested against it."
        )
        tested = sum(c.tested for c in comparisons)
        lines.append(
            f"{MARK} (red): Holm-adjusted p < {alpha:g} vs the base over the table's {tested} tested comparisons, "
            f"as in the table; the CIs are not adjusted, so one can exclude the base without a {MARK}."
        )
        odd = [
            b.row
            for b in bars
            if b.mark and b.whisker == "ci" and b.low <= sweep.base.stats[_key(b.split, metric)].mean <= b.high
        ]
        if odd:  # possible only where alpha > 1 - LEVEL, or for a test whose p-value is not its CI's (bs, ar)
            lines.append(
                f"Note: {', '.join(odd)}: {MARK} from the test's p-value although the {LEVEL:.0%} CI reaches the base "
                f"(alpha = {alpha:g}; {describe_test(comparisons)} test)."
            )
    elif "std" in kinds:
        lines.append("Whiskers: ± std over seeds (no significance test was run).")
    return lines


def _key(split: Optional[str], metric: str = DEFAULT_METRIC) -> str:
    return f"test_{split}/{metric}" if split else f"test/{metric}"


def plot_test_bleu(
    sweep: Sweep,
    path: Path,
    comparisons: Optional[Sequence[Comparison]] = None,
    alpha: float = 0.05,
    metric: str = DEFAULT_METRIC,
) -> Optional[Path]:
    """Write :func:`bleu_bars_figure` to ``path``; None when no row has the test score."""
    fig = bleu_bars_figure(sweep, list(comparisons or []), alpha, metric)
    return None if fig is None else save(fig, path)


def plot_quality_cost(sweep: Sweep, path: Path, cost: str, metric: str = DEFAULT_METRIC) -> Optional[Path]:
    """Test BLEU (or ``metric``) against ``train/tokens_per_sec`` (higher is cheaper) or ``params``
    (lower is), error bars ± std, the Pareto front circled and joined by a dashed line."""
    key, ylabel = test_metric(sweep, metric)
    up = get_scorer(metric).higher_is_better
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
    front = pareto_front(xs, ys if up else [-y for y in ys], maximize_x=speed)
    fx, fy = [xs[i] for i in front], [ys[i] for i in front]
    ax.plot(fx, fy, ls="--", color="#C44E52", lw=1.2, zorder=2)
    ax.scatter(fx, fy, s=180, facecolors="none", edgecolors="#C44E52", lw=1.5, zorder=4, label="Pareto front")
    ax.margins(x=0.15, y=0.15)
    _place_labels(ax, xs, ys, [display_names(sweep)[r.name] for r in rows])
    ax.set_xlabel("training throughput (tokens/s)  →  faster" if speed else "parameters (millions)  ←  smaller")
    ax.set_ylabel(f"{ylabel}  {'↑' if up else '↓'}  better")
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
    sweep: Sweep,
    out_dir: Path,
    comparisons: Optional[list[Comparison]] = None,
    alpha: float = 0.05,
    fmt: str = "png",
    metric: str = DEFAULT_METRIC,
) -> list[Path]:
    """Write every figure that the sweep has data for into ``out_dir`` as ``fmt`` files; return their
    paths. With another ``metric`` than BLEU, the test-score figures are on it and named after it
    (``test_chrf.png``, ``chrf_vs_speed.png``); learning curves and BLEU by length stay BLEU's."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    m = metric
    written = [
        plot_test_bleu(sweep, out_dir / f"test_{m}.{fmt}", comparisons, alpha, m),
        plot_delta_ci(sweep, out_dir / f"delta_ci.{fmt}", comparisons, alpha),
        plot_quality_cost(sweep, out_dir / f"{m}_vs_speed.{fmt}", "train/tokens_per_sec", m),
        plot_quality_cost(sweep, out_dir / f"{m}_vs_params.{fmt}", "params", m),
        plot_learning_curves(sweep, out_dir / f"learning_curves.{fmt}"),
        plot_delta_vs_step(sweep, out_dir / f"delta_vs_step.{fmt}"),
        plot_bleu_by_length(sweep, out_dir / f"bleu_by_length.{fmt}"),
    ]
    return [p for p in written if p is not None]
