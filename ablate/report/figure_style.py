"""What every figure of a sweep shares: resolution, colours, row names, label sizes, saving."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Sequence

from matplotlib.figure import Figure

from ablate.report.aggregate import Row, Sweep
from ablate.report.significance import Comparison
from ablate.report.table import key_labels, show_value

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
"""Short names of the significance tests (:data:`ablate.report.significance.TESTS`) for axis labels."""


def display_names(sweep: Sweep) -> dict[str, str]:
    """Short row names for figures: variant names as they are, else ``h=8`` for ``model.heads=8``."""
    labels = dict(zip(sweep.keys, key_labels(sweep.keys)))
    names = {}
    for r in sweep.rows:
        if sweep.uses_variants or r.is_base or not r.changed:
            names[r.name] = r.name
        else:
            names[r.name] = ", ".join(f"{labels[k]}={show_value(r.settings[k])}" for k in r.changed)
    return names


def group_label(row: Row, sweep: Sweep) -> str:
    """``base``, ``group A`` or ``varying h`` (what a legend calls the row's ablation group)."""
    if row.is_base:
        return "base"
    if sweep.uses_variants:
        return f"group {row.group}"
    labels = dict(zip(sweep.keys, key_labels(sweep.keys)))
    return "varying " + "+".join(labels[k] for k in row.changed)


def group_colors(rows: Sequence[Row]) -> dict[str, str]:
    """One colour per ablation group; the base is black."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    groups = [r.group for r in rows if not r.is_base]
    unique = list(dict.fromkeys(groups))
    colors = {g: matplotlib.colors.to_hex(cmap(i % 10)) for i, g in enumerate(unique)}
    colors.update({r.group: "#000000" for r in rows if r.is_base})
    return colors


def describe_test(comparisons: Sequence[Comparison]) -> str:
    """The short name of the test(s) the comparisons used, e.g. ``seed-aware``."""
    tests = list(dict.fromkeys(c.test for c in comparisons))
    return " / ".join(TEST_WORDS.get(t, t) for t in tests)


def tick_size(count: int) -> float:
    """Font size of ``count`` row labels stacked on one axis (the figure grows with the count)."""
    return 9.0 if count <= 12 else 8.0


def row_height(count: int, per_row: float = 0.3, fixed: float = 1.8) -> float:
    """Figure height in inches for ``count`` stacked rows: each row keeps room for its label."""
    return max(3.2, per_row * count + fixed)


def caption(ax, lines: Sequence[str], gap: float = 34.0) -> None:
    """Small text under ``ax``'s x label, from the figure's left edge, saying what the marks mean.

    Args:
        lines: sentences, each wrapped to the figure's width; empty ones are left out.
        gap: points between the bottom of the axes and the first line (room for ticks and x label).
    """
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
    """Refuse a figure of ``width_in`` x ``height_in`` inches at ``dpi`` over :data:`MAX_SIDE_PX` or :data:`MAX_PIXELS`.

    Args:
        name: the figure, for the message.
        why: what made it that large and how to make it smaller, for the message.

    Raises:
        ReportError: naming the size and the limit.
    """
    from ablate.report.records import ReportError

    w, h = round(width_in * dpi), round(height_in * dpi)
    if max(w, h) > MAX_SIDE_PX or w * h > MAX_PIXELS:
        raise ReportError(
            f"{name} would be {w:,} x {h:,} pixels, over the limit of {MAX_SIDE_PX:,} a side and "
            f"{MAX_PIXELS / 1e6:.0f} million in all ({why})"
        )


def save(fig: Figure, path: Path, why: str = "too many rows: plot fewer variants") -> Path:
    """Write ``fig`` to ``path`` (format from the suffix), cropped to what was drawn; refuse one too large to draw."""
    check_size(*fig.get_size_inches(), fig.dpi, Path(path).name, why)
    fig.tight_layout()
    for note in fig.findobj(lambda a: a.get_gid() == CAPTION):
        note.set_in_layout(True)
    fig.savefig(path, bbox_inches="tight")
    return Path(path)
