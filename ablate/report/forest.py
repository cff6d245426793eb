"""Forest plot of the table's comparisons (``delta_ci.png``): each Δ with its 95% CI and mark.

One horizontal line per comparison the table made (every row against the base, or the sweep's
named pairs, on every test split with saved hypotheses): the point is Δ test BLEU, the row minus
its reference (each the mean over seeds of corpus BLEU), the line the comparison's 95% confidence
interval of Δ (:attr:`ablate.report.significance.Comparison.ci`, not corrected for multiple
comparisons), with a vertical line at 0. A line is marked † exactly where the table marks the
comparison, :meth:`Comparison.significant` at the table's alpha: the Holm-adjusted p-value. An
interval can therefore exclude 0 without a †: the correction over all the table's comparisons is
stricter than one unadjusted interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from ablate.metrics import get_scorer
from ablate.report.aggregate import Sweep
from ablate.report.figure_style import (
    DPI,
    MARKED,
    PLAIN,
    caption,
    describe_test,
    display_names,
    row_height,
    save,
    tick_size,
)
from ablate.report.significance import LEVEL, Comparison
from ablate.report.table import MARK


@dataclass(frozen=True)
class ForestLine:
    """One comparison as the forest plot draws it.

    Attributes:
        label: the tick text: the row's name (``row vs reference`` when the reference is not the
            base; the split when there are several), ending in † where marked.
        row, reference, split: what was compared, where.
        delta, low, high: Δ and its 95% CI (nan bounds: not tested).
        marked: the table's † (Holm-adjusted p < alpha).
        note: why the comparison was not tested, if it was not.
    """

    label: str
    row: str
    reference: str
    split: str
    delta: float
    low: float
    high: float
    marked: bool
    note: str = ""

    @property
    def tested(self) -> bool:
        return not (math.isnan(self.low) or math.isnan(self.high))


def forest_lines(sweep: Sweep, comparisons: Sequence[Comparison], alpha: float) -> list[ForestLine]:
    """The lines of the forest plot, in the table's order (a comparison's splits together)."""
    names = display_names(sweep)
    splits = sorted({c.split for c in comparisons})
    pairs = list(dict.fromkeys((c.reference, c.row) for c in comparisons))
    ordered = sorted(comparisons, key=lambda c: (pairs.index((c.reference, c.row)), splits.index(c.split)))
    out = []
    for c in ordered:
        label = names.get(c.row, c.row)
        if c.reference != sweep.base.name:
            label += f" vs {names.get(c.reference, c.reference)}"
        if len(splits) > 1:
            label += f" [{c.split}]"
        marked = c.significant(alpha)
        low, high = c.ci if c.tested else (math.nan, math.nan)
        out.append(
            ForestLine(
                label + (f" {MARK}" if marked else ""), c.row, c.reference, c.split, c.delta, low, high, marked, c.note
            )
        )
    return out


def forest_figure(sweep: Sweep, comparisons: Sequence[Comparison], alpha: float = 0.05) -> Optional[Figure]:
    """The forest plot of ``comparisons``; None when there are none (no hypotheses, or not tested)."""
    lines = forest_lines(sweep, comparisons, alpha)
    if not lines:
        return None
    n = len(lines)
    fig = Figure(figsize=(8.5, row_height(n, 0.3, 2.4)), dpi=DPI)
    ax = fig.add_subplot()
    size = tick_size(n)
    for y, line in enumerate(lines):
        color = MARKED if line.marked else PLAIN
        if line.tested:
            err = [[line.delta - line.low], [line.high - line.delta]]
            ax.errorbar(line.delta, y, xerr=err, fmt="o", ms=5, color=color, capsize=3, lw=1.6, zorder=3)
        else:  # a point without an interval: hollow
            ax.plot(line.delta, y, "o", ms=5, mfc="white", mec=color, zorder=3)
        if y and line.reference != lines[y - 1].reference:  # named comparisons against another row
            ax.axhline(y - 0.5, color="#999999", lw=0.6, ls=":")
    ax.axvline(0.0, color="#333333", lw=1.0, zorder=1)
    ax.set_yticks(range(n), [line.label for line in lines], fontsize=size)
    for tick, line in zip(ax.get_yticklabels(), lines):
        tick.set_color(MARKED if line.marked else "#000000")
    ax.set_ylim(n - 0.5, -0.5)  # the table's first comparison on top
    _value_column(ax, lines, size)
    splits = sorted({line.split for line in lines})
    reference = "vs base" if all(line.reference == sweep.base.name for line in lines) else "vs reference row"
    scorer = get_scorer(comparisons[0].metric if comparisons else "bleu")
    lower = "" if scorer.higher_is_better else "; lower is better"
    ax.set_xlabel(
        f"Δ test {scorer.label} {reference} ({LEVEL:.0%} CI, {describe_test(comparisons)}{lower})", fontsize=9
    )
    ax.set_title(f"Differences in test {scorer.label} ({', '.join(splits)}), row minus reference", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    tested = sum(c.tested for c in comparisons)
    caption(
        ax,
        [
            f"Point: Δ of the means over seeds; line: its {LEVEL:.0%} CI."
            + (" Rows named 'A vs B' are the sweep's named comparisons (A minus B)." if reference != "vs base" else ""),
            f"{MARK} (red): Holm-adjusted p < {alpha:g} over the table's {tested} tested comparisons, as in the "
            f"table; the CIs are not adjusted, so one can exclude 0 without a {MARK}.",
            "Hollow point: not tested (" + "; ".join(sorted({ln.note for ln in lines if not ln.tested})) + ")."
            if any(not ln.tested for ln in lines)
            else "",
            _disagreement(lines, alpha, comparisons),
        ],
    )
    return fig


def _disagreement(lines: Sequence[ForestLine], alpha: float, comparisons: Sequence[Comparison]) -> str:
    """A note naming marked lines whose CI holds 0: possible only where alpha > 1 - LEVEL, or for a
    test whose p-value does not come from its interval (``bs``, ``ar``)."""
    odd = [ln.label for ln in lines if ln.marked and ln.tested and ln.low <= 0.0 <= ln.high]
    if not odd:
        return ""
    return (
        f"Note: {', '.join(odd)}: {MARK} from the test's p-value although the {LEVEL:.0%} CI holds 0 "
        f"(alpha = {alpha:g}; {describe_test(comparisons)} test)."
    )


def _value_column(ax, lines: Sequence[ForestLine], size: float) -> None:
    """``Δ [low, high]`` right of the axes, one per line."""
    where = blended_transform_factory(ax.transAxes, ax.transData)
    for y, line in enumerate(lines):
        text = f"{line.delta:+.2f} [{line.low:+.2f}, {line.high:+.2f}]" if line.tested else f"{line.delta:+.2f}"
        ax.text(1.02, y, text, transform=where, va="center", ha="left", fontsize=size - 0.5, family="monospace")


def plot_delta_ci(
    sweep: Sweep, path: Path, comparisons: Optional[Sequence[Comparison]] = None, alpha: float = 0.05
) -> Optional[Path]:
    """Write the forest plot to ``path``; None (nothing written) without comparisons."""
    fig = forest_figure(sweep, list(comparisons or []), alpha)
    return None if fig is None else save(fig, path)
