"""Figures of a sweep (``ablate plot``; matplotlib, no pyplot state), sharing one style.

* ``test_bleu.png``: test BLEU per row, whiskers the 95% CI of the row's Δ vs the base placed on the
  base's mean, † as in the table;
* ``delta_ci.png``: the table's comparisons as a forest plot, Δ and its 95% CI (uncorrected), marked †
  exactly where the table marks it (Holm-adjusted), so an interval can exclude 0 without a †;
* ``bleu_vs_speed.png``, ``bleu_vs_params.png``: quality against cost, the Pareto front marked;
* ``learning_curves.png``, ``delta_vs_step.png``: validation BLEU per row (mean ± std band), and each
  row's seed-paired Δ vs the base per step with its 95% t band and sign changes;
* ``bleu_by_length.png``: test BLEU per source-length bucket (Bahdanau et al. 2015, Fig. 2).
"""

from __future__ import annotations

import logging
import math
import re
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory, offset_copy

from ablate.metrics import get_scorer, metric_key
from ablate.record import DEV_BLEU, DEV_PPL, TOKENS_PER_SEC
from ablate.report.layout import MARK, bleu_by_length, key_labels, show_value, signed
from ablate.report.stats import (
    LEVEL,
    BudgetCurves,
    Comparison,
    DeltaCurve,
    Row,
    Sweep,
    against_base,
    curve,
    delta_curves,
)
from ablate.report.trials import DEFAULT_METRIC, ReportError
from ablate.utils.commands import recorded_warnings

log = logging.getLogger(__name__)

DPI = 130
SPLIT_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3")
MARKED = "#C44E52"  # what the table marks † (significant after Holm)
PLAIN = "#4C72B0"
CAPTION = "caption"
TEST_WORDS = {
    "seeds": "seed-aware",
    "bs": "paired bootstrap, sentences only",
    "ar": "approx. randomization, sentences only",
}
"""Short names of the significance tests (:data:`ablate.report.stats.TESTS`) for axis labels."""


def display_names(sweep: Sweep) -> dict[str, str]:
    """Short row names for figures: variant names as they are, else ``h=8`` for ``model.heads=8``."""
    labels = dict(zip(sweep.keys, key_labels(sweep.keys)))
    return {
        r.name: ", ".join(f"{labels[k]}={show_value(r.settings[k])}" for k in r.changed)
        if r.changed and not (sweep.uses_variants or r.is_base)
        else r.name
        for r in sweep.rows
    }


def group_label(row: Row, sweep: Sweep) -> str:
    """``base``, ``group A`` or ``varying h`` (what a legend calls the row's ablation group)."""
    if row.is_base:
        return "base"
    if sweep.uses_variants:
        return f"group {row.group}"
    labels = dict(zip(sweep.keys, key_labels(sweep.keys)))
    return "varying " + "+".join(labels[k] for k in row.changed)


def tab10(k: int) -> tuple[float, float, float, float]:
    """The ``k``-th colour of matplotlib's ``tab10`` cycle."""
    return matplotlib.colormaps["tab10"](k % 10)


def group_colors(rows: Sequence[Row]) -> dict[str, str]:
    """One colour per ablation group; the base is black."""
    unique = list(dict.fromkeys(r.group for r in rows if not r.is_base))
    colors = {g: matplotlib.colors.to_hex(tab10(i)) for i, g in enumerate(unique)}
    colors.update({r.group: "#000000" for r in rows if r.is_base})
    return colors


def panels(rows: Sequence[Row], sweep: Sweep) -> list[tuple[str, list[Row]]]:
    """``rows`` in one panel (up to six rows, or one ablation group), else one per group with the base in each."""
    base = [r for r in rows if r.is_base]
    groups = list(dict.fromkeys(r.group for r in rows if not r.is_base))
    if len(rows) <= 6 or len(groups) < 2:
        return [("", list(rows))]
    return [
        (group_label(next(r for r in rows if r.group == g), sweep), base + [r for r in rows if r.group == g])
        for g in groups
    ]


def describe_test(comparisons: Sequence[Comparison]) -> str:
    """The short name of the test(s) the comparisons used, e.g. ``seed-aware``."""
    tests = list(dict.fromkeys(c.test for c in comparisons))
    return " / ".join(TEST_WORDS.get(t, t) for t in tests)


def tick_size(count: int) -> float:
    """Font size of ``count`` row labels stacked on one axis (the figure grows with the count)."""
    return 9.0 if count <= 12 else 8.0


def row_axis(ax, labels: Sequence[str], marked: Sequence[bool], size: float) -> None:
    """One labelled row per y from the top, the labels red where the table marks the row; an x grid behind."""
    ax.set_yticks(range(len(labels)), labels, fontsize=size)
    for tick, mark in zip(ax.get_yticklabels(), marked):
        tick.set_color(MARKED if mark else "#000000")
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)


def row_height(count: int, fixed: float = 1.8) -> float:
    """Figure height in inches for ``count`` stacked rows (0.3 each, room for the label) and ``fixed`` inches more."""
    return max(3.2, 0.3 * count + fixed)


def caption(ax, lines: Sequence[str], gap: float = 34.0) -> None:
    """Small text under ``ax``'s x label saying what the marks mean: ``lines`` wrapped (empty ones left out),
    ``gap`` points below the axes."""
    width = int(ax.figure.get_figwidth() * 15)
    text = "\n".join(textwrap.fill(line, width) for line in lines if line)
    if text:
        note = ax.annotate(
            text,
            (0.01, 0),
            xycoords=("figure fraction", "axes fraction"),
            xytext=(0, -gap),
            textcoords="offset points",
            ha="left",
            va="top",
            fontsize=7.5,
            color="#333333",
            gid=CAPTION,
        )
        note.set_in_layout(False)  # the panels are laid out without it; :func:`save` keeps it in the file


MAX_SIDE_PX = 16384
"""Longest side of a figure, in pixels (Agg refuses 65536; a side this long is already unreadable)."""
MAX_PIXELS = 64_000_000
"""Most pixels of a figure: its RGBA buffer stays under 256 MB whatever the input asked for."""


def check_size(width_in: float, height_in: float, dpi: float, name: str, why: str) -> None:
    """A ReportError naming figure ``name``, its size and ``why`` if it is over :data:`MAX_SIDE_PX` or :data:`MAX_PIXELS`."""
    w, h = round(width_in * dpi), round(height_in * dpi)
    if max(w, h) > MAX_SIDE_PX or w * h > MAX_PIXELS:
        raise ReportError(
            f"{name} would be {w:,} x {h:,} pixels, over the limit of {MAX_SIDE_PX:,} a side and "
            f"{MAX_PIXELS / 1e6:.0f} million in all ({why})"
        )


def save(fig: Figure, path: Path) -> Path:
    """Write ``fig`` to ``path`` (format from the suffix), cropped to what was drawn; refuse one too large to draw."""
    width, height = fig.get_size_inches()
    check_size(width, height, fig.dpi, Path(path).name, "too many rows: plot fewer variants")
    fig.tight_layout()
    for note in fig.findobj(lambda a: a.get_gid() == CAPTION):
        note.set_in_layout(True)
    fig.savefig(path, bbox_inches="tight")
    return Path(path)


_NO_GLYPH = re.compile(r"Glyph \d+ \(.*\) missing from font")


def _say_missing_glyphs(seen: list[warnings.WarningMessage]) -> None:
    """One status line for the characters of a label (a variant named 学习) no installed font has, where
    matplotlib warned with its source line per character and figure; other warnings go on as they were."""
    missing: dict[str, None] = {}
    for w in seen:
        text = str(w.message)
        if _NO_GLYPH.match(text):
            missing[chr(int(text.split()[1]))] = None
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if missing:
        log.warning(
            "no installed font has %s (drawn as boxes in the figures): install one that does (e.g. Noto Sans CJK) "
            "and name it in matplotlib's font.family",
            ", ".join(missing),
        )


NO_HISTORY = "no validation history"
DODGE = 14.0  # points between the markers of rows validated at one step, side by side


def learning_curves_figure(sweep: Sweep) -> Optional[Figure]:
    """Validation BLEU against step per row (:func:`panels`); None when no trial has a validation history."""
    curves = {r.name: (r, *curve(r, DEV_BLEU.key)) for r in sweep.rows}
    if not any(len(c[1]) for c in curves.values()):
        return None
    found = [(title, [curves[r.name] for r in rows]) for title, rows in panels(sweep.rows, sweep)]
    ncols = min(3, len(found))
    nrows = -(-len(found) // ncols)
    fig = Figure(figsize=(7.0 if ncols == 1 else 4.6 * ncols, 4.8 if nrows == 1 else 3.4 * nrows + 0.9), dpi=DPI)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    names = display_names(sweep)
    for ax, (title, members) in zip(axes.flat, found):
        draw_curves(ax, members, names)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(found) :]:
        ax.set_visible(False)
    for ax in axes.flat[max(0, len(found) - ncols) : len(found)]:  # the lowest panel of each column
        ax.set_xlabel("training step")
    for ax in axes[:, 0]:
        ax.set_ylabel("validation BLEU")
    single = any(len(c[1]) == 1 for c in curves.values())
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
    singles = [m[0].name for m in members if len(m[1]) == 1]
    k = 0
    for row, steps, mean, std in members:
        color = "#000000" if row.is_base else tab10(k)
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


PANELS = (
    (DEV_BLEU.key, "Δ dev BLEU vs base  (↑ row better)"),
    (DEV_PPL.key, "Δ dev perplexity vs base  (↓ row better)"),
)


def delta_vs_step_figure(sweep: Sweep) -> Optional[Figure]:
    """Δ dev BLEU (left) and Δ dev perplexity (right) against step, one line and band per row, a pair of
    panels per :func:`panels`; None unless some row has a Δ at two or more steps."""
    found = [(delta_curves(sweep, metric), title) for metric, title in PANELS]
    if not any(len(c.steps) > 1 for curves, _ in found for c in curves.curves):
        return None
    shown = {c.row for curves, _ in found for c in curves.curves}
    bands = panels([r for r in sweep.rows if r.name in shown], sweep)
    fig = Figure(figsize=(12.5, 4.9 if len(bands) == 1 else 2.7 * len(bands) + 1.2), dpi=DPI)
    axes = fig.subplots(len(bands), 2, squeeze=False, sharex=True)
    names = display_names(sweep)
    rings = any(c.sign_changes for curves, _ in found for c in curves.curves)
    for i, (label, members) in enumerate(bands):
        colors = {r.name: tab10(k) for k, r in enumerate(members)}
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
    caption(axes[-1, 0], _delta_caption(found))
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
        alone = "no row here shares a seed and a history with the base"
        ax.text(0.5, 0.5, alone, transform=ax.transAxes, ha="center", va="center", fontsize=9, color="#555555")
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


@dataclass(frozen=True)
class ForestLine:
    """One comparison as the forest plot draws it: its tick text (ending in † where the table marks it),
    Δ and its 95% CI (nan bounds: not tested, ``note`` says why)."""

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
        label += f" {MARK}" if marked else ""
        out.append(ForestLine(label, c.row, c.reference, c.split, c.delta, low, high, marked, c.note))
    return out


def forest_figure(sweep: Sweep, comparisons: Sequence[Comparison], alpha: float = 0.05) -> Optional[Figure]:
    """The forest plot of ``comparisons``; None when there are none (no hypotheses, or not tested)."""
    lines = forest_lines(sweep, comparisons, alpha)
    if not lines:
        return None
    n = len(lines)
    fig = Figure(figsize=(8.5, row_height(n, 2.4)), dpi=DPI)
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
    row_axis(ax, [line.label for line in lines], [line.marked for line in lines], size)
    _value_column(ax, lines, size)
    splits = sorted({line.split for line in lines})
    reference = "vs base" if all(line.reference == sweep.base.name for line in lines) else "vs reference row"
    scorer = get_scorer(comparisons[0].metric)  # lines come from comparisons, so there is one
    lower = "" if scorer.higher_is_better else "; lower is better"
    ax.set_xlabel(
        f"Δ test {scorer.label} {reference} ({LEVEL:.0%} CI, {describe_test(comparisons)}{lower})", fontsize=9
    )
    ax.set_title(f"Differences in test {scorer.label} ({', '.join(splits)}), row minus reference", fontsize=10)
    odd = [ln.label for ln in lines if ln.marked and ln.tested and ln.low <= 0.0 <= ln.high]
    marks, note = _mark_notes(comparisons, alpha, odd, on_base=False)
    caption(
        ax,
        [
            f"Point: Δ of the means over seeds; line: its {LEVEL:.0%} CI."
            + (" Rows named 'A vs B' are the sweep's named comparisons (A minus B)." if reference != "vs base" else ""),
            marks,
            "Hollow point: not tested (" + "; ".join(sorted({ln.note for ln in lines if not ln.tested})) + ")."
            if any(not ln.tested for ln in lines)
            else "",
            note,
        ],
    )
    return fig


def _mark_notes(comparisons: Sequence[Comparison], alpha: float, odd: Sequence[str], on_base: bool) -> tuple[str, str]:
    """What a red † means, and a note ("" if none) naming the ``odd`` marked lines whose CI holds 0 (the base's
    mean where ``on_base``): possible only where alpha > 1 - LEVEL, or for a test whose p-value does not come
    from its interval (``bs``, ``ar``)."""
    versus, zero, holds = (" vs the base", "the base", "reaches the base") if on_base else ("", "0", "holds 0")
    tested = sum(c.tested for c in comparisons)
    return (
        f"{MARK} (red): Holm-adjusted p < {alpha:g}{versus} over the table's {tested} tested comparisons, as in the "
        f"table; the CIs are not adjusted, so one can exclude {zero} without a {MARK}.",
        f"Note: {', '.join(odd)}: {MARK} from the test's p-value although the {LEVEL:.0%} CI {holds} "
        f"(alpha = {alpha:g}; {describe_test(comparisons)} test)."
        if odd
        else "",
    )


def _value_column(ax, lines: Sequence[ForestLine], size: float) -> None:
    """``Δ [low, high]`` right of the axes, one per line."""
    where = blended_transform_factory(ax.transAxes, ax.transData)
    for y, line in enumerate(lines):
        text = f"{signed(line.delta)} [{signed(line.low)}, {signed(line.high)}]" if line.tested else signed(line.delta)
        ax.text(1.02, y, text, transform=where, va="center", ha="left", fontsize=size - 0.5, family="monospace")


def pareto_front(xs: Sequence[float], ys: Sequence[float], maximize_x: bool) -> list[int]:
    """Indices of points not dominated by any other (y is maximised; x maximised or minimised),
    ordered by x."""
    sign = 1.0 if maximize_x else -1.0
    points = [(sign * x, y) for x, y in zip(xs, ys)]
    front = [i for i, (x, y) in enumerate(points) if not any(a >= x and b >= y and (a, b) != (x, y) for a, b in points)]
    return sorted(front, key=lambda i: xs[i])


@dataclass(frozen=True)
class Bar:
    """One bar of ``test_bleu.png`` (``split`` None: the only ``test/bleu``) and its whisker from ``low`` to
    ``high`` (nan: none) around ``center``: ``ci`` the base's mean + the 95% CI of the row's Δ vs the base (so it
    crosses the base's mean exactly where the CI holds 0), ``std`` mean ± std over seeds, or ``none``."""

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
    """The bars of :func:`bleu_bars_figure`, rows in table order, each row's splits together."""
    splits = sweep.test_splits
    keys: list[tuple[str, Optional[str]]] = [(metric_key(metric, s), s) for s in splits] or [(metric_key(metric), None)]
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
            base, std = sweep.base.stats.get(key), row.stats[key].std
            if use_ci and comp is not None and comp.tested and base is not None:
                low, high = base.mean + comp.ci[0], base.mean + comp.ci[1]
                bars.append(Bar(row.name, split, mean, low, high, base.mean + comp.delta, "ci", mark))
            elif use_ci or std is None:
                bars.append(Bar(row.name, split, mean, math.nan, math.nan, mean, "none", mark))
            else:
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
    fig = Figure(figsize=(8.0, row_height(round(lines), 2.6)), dpi=DPI)
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
                whisker = [[b.center - b.low], [b.high - b.center]]
                ax.errorbar(b.center, p, xerr=whisker, fmt="none", ecolor="#222222", elinewidth=1.1, capsize=3)
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
    names = display_names(sweep)
    marked = [any(b.mark for b in bars if b.row == r) for r in rows]
    row_axis(ax, [f"{names[r]} (n={len(by_name[r].trials)})" for r in rows], marked, size)
    ax.set_xlim(left, hi + 3 * pad)
    what = f"test {scorer.label}" + (f" ({splits[0]})" if len(splits) == 1 and splits[0] else "")
    what += "" if scorer.higher_is_better else ", lower is better"
    ax.set_xlabel(what if left == 0 else f"{what}, axis starts at {left:g}", fontsize=9)
    ax.set_title(f"Test {scorer.label} per configuration (bar: mean over seeds; n = seeds)", fontsize=10)
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
        odd = [
            b.row
            for b in bars
            if b.mark and b.whisker == "ci" and b.low <= sweep.base.stats[metric_key(metric, b.split)].mean <= b.high
        ]
        lines += _mark_notes(comparisons, alpha, odd, on_base=True)  # caption() leaves out an empty note
    elif "std" in kinds:
        lines.append("Whiskers: ± std over seeds (no significance test was run).")
    return lines


def quality_cost_figure(sweep: Sweep, cost: str, metric: str = DEFAULT_METRIC) -> Optional[Figure]:
    """Test BLEU (or ``metric``) against ``train/tokens_per_sec`` (higher is cheaper) or ``params``
    (lower is), error bars ± std, the Pareto front circled and joined by a dashed line."""
    scorer, split = get_scorer(metric), next(iter(sweep.test_splits), None)
    key, ylabel = metric_key(metric, split), f"test {scorer.label}" + (f" ({split})" if split else "")
    up = scorer.higher_is_better
    speed = cost == TOKENS_PER_SEC.key
    scale = 1.0 if speed else 1e-6
    rows = [r for r in sweep.rows if key in r.stats and cost in r.stats]
    if not rows:
        return None
    xs = [r.stats[cost].mean * scale for r in rows]
    ys = [r.stats[key].mean for r in rows]
    colors = group_colors(rows)
    fig = Figure(figsize=(7.0, 4.8), dpi=DPI)
    ax = fig.add_subplot()
    first = {r.group: r for r in reversed(rows)}  # the legend names each group once, at its first row
    for r, x, y in zip(rows, xs, ys):
        ax.errorbar(
            x,
            y,
            xerr=(r.stats[cost].std or 0.0) * scale,
            yerr=r.stats[key].std or 0.0,
            fmt="o",
            ms=7,
            capsize=3,
            color=colors[r.group],
            label=group_label(r, sweep) if first[r.group] is r else None,
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
    return fig


def _place_labels(ax, xs: Sequence[float], ys: Sequence[float], names: Sequence[str], size: float = 8.0) -> None:
    """Annotate points, trying six offsets each so labels avoid points and earlier labels."""
    ax.autoscale_view()
    scale = ax.figure.dpi / 72.0
    pts = [tuple(ax.transData.transform((x, y))) for x, y in zip(xs, ys)]
    taken = [(px - 5 * scale, py - 5 * scale, px + 5 * scale, py + 5 * scale) for px, py in pts]
    for (px, py), x, y, name in zip(pts, xs, ys, names):
        w, h = 0.6 * size * len(name) * scale, size * 1.3 * scale
        for dx, dy in ((6, 5), (6, -5), (-6, 5), (-6, -5), (6, 14), (6, -14)):  # points; the text leans away
            ha, va = "left" if dx > 0 else "right", "bottom" if dy > 0 else "top"
            x0 = px + dx * scale - (w if ha == "right" else 0)
            y0 = py + dy * scale - (h if va == "top" else 0)
            box = (x0, y0, x0 + w, y0 + h)
            if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in taken):
                break
        taken.append(box)
        ax.annotate(name, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=size)


def bleu_by_length_figure(sweep: Sweep) -> Optional[Figure]:
    """Test BLEU against source-length bucket: mean line and ± std band over seeds per row."""
    data = bleu_by_length(sweep)
    if data is None:
        return None
    fig = Figure(figsize=(7.0, 4.8), dpi=DPI)
    ax = fig.add_subplot()
    x = np.arange(len(data.buckets))
    names = display_names(sweep)
    for k, row in enumerate(sweep.rows):
        stats = data.stats.get(row.name) or []
        if not any(stats):
            continue
        mean = np.array([s.mean if s else np.nan for s in stats])
        std = np.array([s.std or 0.0 if s else 0.0 for s in stats])
        color = "#000000" if row.is_base else tab10(k)
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
    return fig


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
    m, comparisons = metric, list(comparisons or [])
    figures = {
        f"test_{m}": bleu_bars_figure(sweep, comparisons, alpha, m),
        "delta_ci": forest_figure(sweep, comparisons, alpha),
        f"{m}_vs_speed": quality_cost_figure(sweep, TOKENS_PER_SEC.key, m),
        f"{m}_vs_params": quality_cost_figure(sweep, "params", m),
        "learning_curves": learning_curves_figure(sweep),
        "delta_vs_step": delta_vs_step_figure(sweep),
        "bleu_by_length": bleu_by_length_figure(sweep),
    }
    with recorded_warnings() as seen:
        paths = [save(fig, out_dir / f"{name}.{fmt}") for name, fig in figures.items() if fig is not None]
    _say_missing_glyphs(seen)
    return paths
