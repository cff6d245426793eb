"""Figures against the training step, from each trial's validation history.

* ``learning_curves.png``: validation BLEU per row, the mean over seeds as a line with a ± std
  band; a row validated once is a marker with a ± std error bar, and a panel with no validation
  at all says so;
* ``delta_vs_step.png``: each row's seed-paired Δ against the base per step on dev BLEU and dev
  perplexity, with its 95% t band and the steps where the mean Δ changes sign
  (:mod:`ablate.report.budget`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.transforms import offset_copy

from ablate.record import DEV_BLEU, DEV_PPL
from ablate.report.aggregate import Row, Sweep, curve
from ablate.report.budget import LEVEL, BudgetCurves, DeltaCurve, delta_curves
from ablate.report.figure_style import DPI, caption, display_names, group_label, save

NO_HISTORY = "no validation history"
DODGE = 14.0  # points between the markers of rows validated at one step, side by side


def learning_curves_figure(sweep: Sweep, metric: str = DEV_BLEU.key) -> Optional[Figure]:
    """Validation ``metric`` against step per row; None when no trial has a validation history.

    Up to six rows share one panel; more rows get one panel per ablation group, each with the
    base (black) for reference, so no panel holds more than a handful of curves.
    """
    curves = [(r, *curve(r, metric)) for r in sweep.rows]
    if not any(len(c[1]) for c in curves):
        return None
    groups = list(dict.fromkeys(r.group for r in sweep.rows if not r.is_base))
    if len(curves) <= 6 or len(groups) < 2:
        panels = [("", curves)]
    else:
        base = [c for c in curves if c[0].is_base]
        panels = [
            (
                group_label(next(r for r in sweep.rows if r.group == g), sweep),
                base + [c for c in curves if c[0].group == g],
            )
            for g in groups
        ]
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    fig = Figure(figsize=(7.0 if ncols == 1 else 4.6 * ncols, 4.8 if nrows == 1 else 3.4 * nrows + 0.9), dpi=DPI)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    names = display_names(sweep)
    for ax, (title, members) in zip(axes.flat, panels):
        draw_curves(ax, members, names)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax in axes.flat[max(0, len(panels) - ncols) : len(panels)]:  # the lowest panel of each column
        ax.set_xlabel("training step")
    for ax in axes[:, 0]:
        ax.set_ylabel("validation BLEU" if metric == DEV_BLEU.key else metric)
    single = any(len(c[1]) == 1 for c in curves)
    fig.suptitle(
        "Learning curves: validation BLEU (mean over seeds, shaded ± std)"
        + ("\nrows validated once: a marker ± std, set side by side at their step" if single else ""),
        fontsize=10,
    )
    return fig


def draw_curves(ax, members: Sequence[tuple[Row, np.ndarray, np.ndarray, np.ndarray]], names: dict[str, str]) -> None:
    """One row per ``(row, steps, mean, std)``: a line and band, a marker with an error bar for a
    single step (dodged sideways in points, its data unchanged), or a legend entry saying the row
    has no history; a panel without any data says so in its middle."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    singles = [m[0].name for m in members if len(m[1]) == 1]
    k = 0
    for row, steps, mean, std in members:
        color = "#000000" if row.is_base else cmap(k % 10)
        k += 0 if row.is_base else 1
        label = f"{names[row.name]} (n={len(row.trials)})"
        if not len(steps):
            ax.plot([], [], color=color, ls="none", marker="x", label=f"{label}: {NO_HISTORY}")
        elif len(steps) == 1:
            shift = (singles.index(row.name) - (len(singles) - 1) / 2) * DODGE
            where = offset_copy(ax.transData, fig=ax.figure, x=shift, y=0.0, units="points")
            ax.errorbar(
                steps,
                mean,
                yerr=std,
                fmt="D" if row.is_base else "o",
                ms=6,
                color=color,
                capsize=3,
                transform=where,
                label=label,
                zorder=3,
            )
            # drawn in shifted coordinates, so autoscaling does not see it: add its data by hand
            ax.update_datalim([(steps[0], mean[0] - std[0]), (steps[0], mean[0] + std[0])])
            ax.autoscale_view()
        else:
            ax.plot(
                steps, mean, color=color, lw=2.2 if row.is_base else 1.5, label=label, zorder=3 if row.is_base else 2
            )
            ax.fill_between(steps, mean - std, mean + std, color=color, alpha=0.15, lw=0)
    if not any(len(m[1]) for m in members):
        ax.text(0.5, 0.5, NO_HISTORY, transform=ax.transAxes, ha="center", va="center", fontsize=10, color="#555555")
    steps = np.unique(np.concatenate([m[1] for m in members]))
    if 0 < len(steps) <= 4:  # few validations: tick exactly those steps, with room for the markers
        pad = 0.25 * np.ptp(steps) if len(steps) > 1 else max(1.0, 0.1 * abs(steps[0]))
        ax.set_xticks(steps)
        # one step: its markers left of the middle, the legend on the right
        ax.set_xlim(steps[0] - pad, steps[-1] + (pad if len(steps) > 1 else 2.6 * pad))
    ax.legend(fontsize=7, loc="upper right" if len(steps) == 1 else "best")


def plot_learning_curves(sweep: Sweep, path: Path, metric: str = DEV_BLEU.key) -> Optional[Path]:
    """Write :func:`learning_curves_figure` to ``path``; None when no trial validated."""
    fig = learning_curves_figure(sweep, metric)
    return None if fig is None else save(fig, path)


PANELS = (
    (DEV_BLEU.key, "Δ dev BLEU vs base  (↑ row better)"),
    (DEV_PPL.key, "Δ dev perplexity vs base  (↓ row better)"),
)


def delta_vs_step_figure(sweep: Sweep) -> Optional[Figure]:
    """Δ dev BLEU (left) and Δ dev perplexity (right) against step, one line and band per row;
    None unless some row has a Δ at two or more steps.

    Up to six rows share one pair of panels; more get one pair per ablation group, so no panel
    holds more than a handful of bands.
    """
    found = [(delta_curves(sweep, metric), title) for metric, title in PANELS]
    if not any(len(c.steps) > 1 for curves, _ in found for c in curves.curves):
        return None
    shown = {c.row for curves, _ in found for c in curves.curves}
    rows = [r for r in sweep.rows if r.name in shown]
    groups = list(dict.fromkeys(r.group for r in rows))
    if len(rows) <= 6 or len(groups) < 2:
        bands = [("", rows)]
    else:
        bands = [
            (group_label(next(r for r in rows if r.group == g), sweep), [r for r in rows if r.group == g])
            for g in groups
        ]
    fig = Figure(figsize=(12.5, 4.9 if len(bands) == 1 else 2.7 * len(bands) + 1.2), dpi=DPI)
    axes = fig.subplots(len(bands), 2, squeeze=False, sharex=True)
    names = display_names(sweep)
    rings = any(c.sign_changes for curves, _ in found for c in curves.curves)
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    for i, (label, members) in enumerate(bands):
        colors = {r.name: cmap(k % 10) for k, r in enumerate(members)}
        for j, (curves, title) in enumerate(found):
            ax = axes[i, j]
            _draw_deltas(ax, [c for c in curves.curves if c.row in colors], names, colors, j == 1, rings)
            ax.grid(alpha=0.3)
            if i == 0:
                ax.set_title(title, fontsize=10)
        axes[i, 0].set_ylabel(f"{label}\nrow − base" if label else "row − base (mean over seed pairs)", fontsize=9)
    for ax in axes[-1]:
        ax.set_xlabel("training step")
    fig.suptitle(f"Budget dependence: each row minus {sweep.base.name} per training step (seed-paired)", fontsize=11)
    caption(axes[-1, 0], _delta_caption(found), gap=34)
    return fig


def _draw_deltas(
    ax, curves: Sequence[DeltaCurve], names: dict[str, str], colors: dict, legend: bool, rings: bool
) -> None:
    """A line and t band per row, a ring where its mean Δ changes sign, a line at 0; the legend
    outside on the right when ``legend`` (with the ring in it when ``rings``)."""
    ax.axhline(0.0, color="#333333", lw=1.0, zorder=1)
    for c in curves:
        color = colors[c.row]
        label = f"{names.get(c.row, c.row)} (seeds {', '.join(c.seeds)})"
        if len(c.steps) == 1:
            err = np.array([[c.mean[0] - c.low[0]], [c.high[0] - c.mean[0]]])
            ax.errorbar(
                c.steps, c.mean, yerr=None if np.isnan(err).any() else err, fmt="o", color=color, capsize=3, label=label
            )
            continue
        ax.plot(c.steps, c.mean, color=color, lw=1.6, marker=".", ms=4, label=label, zorder=3)
        ax.fill_between(c.steps, c.low, c.high, color=color, alpha=0.12, lw=0)
        at = np.isin(c.steps, c.sign_changes)
        ax.scatter(c.steps[at], c.mean[at], s=80, facecolors="none", edgecolors=color, lw=1.6, zorder=4)
    if not curves:
        ax.text(
            0.5,
            0.5,
            "no row here shares a seed and a history with the base",
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=9,
            color="#555555",
        )
    elif legend:
        if rings:
            ax.scatter([], [], s=80, facecolors="none", edgecolors="#333333", lw=1.6, label="mean Δ changes sign")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)


def _delta_caption(found: Sequence[tuple[BudgetCurves, str]]) -> list[str]:
    lines = [
        "Each seed of a row is paired with the same seed of the base; each trial's history is interpolated "
        "linearly between its own validations (never beyond them). Line: mean paired Δ; band: "
        f"{LEVEL:.0%} Student t interval over the seed pairs (seed variation only, not adjusted over steps; "
        "none where one pair covers a step); ring: the mean Δ changes sign there."
    ]
    skipped = {s.row: s.reason for curves, _ in found for s in curves.skipped}
    if skipped:
        lines.append("Not shown: " + "; ".join(f"{row} ({why})" for row, why in skipped.items()) + ".")
    return lines


def plot_delta_vs_step(sweep: Sweep, path: Path) -> Optional[Path]:
    """Write :func:`delta_vs_step_figure` to ``path``; None (nothing written) when no row has a Δ
    at two or more steps."""
    fig = delta_vs_step_figure(sweep)
    return None if fig is None else save(fig, path)
