"""Figures against the training step, from each trial's validation history.

* ``learning_curves.png``: validation BLEU per row, the mean over seeds as a line with a ± std
  band; a row validated once is a marker with a ± std error bar, and a panel with no validation
  at all says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.transforms import offset_copy

from ablate.report.aggregate import Row, Sweep, curve
from ablate.report.figure_style import DPI, display_names, group_label, save

NO_HISTORY = "no validation history"
DODGE = 14.0  # points between the markers of rows validated at one step, side by side


def learning_curves_figure(sweep: Sweep, metric: str = "val/bleu") -> Optional[Figure]:
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
        ax.set_ylabel("validation BLEU" if metric == "val/bleu" else metric)
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


def plot_learning_curves(sweep: Sweep, path: Path, metric: str = "val/bleu") -> Optional[Path]:
    """Write :func:`learning_curves_figure` to ``path``; None when no trial validated."""
    fig = learning_curves_figure(sweep, metric)
    return None if fig is None else save(fig, path)
