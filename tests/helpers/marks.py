"""What a table marks and what the figures draw, as one comparable dict, and a spy on the figures.

``{(row, split): (Δ, 95% CI, †)}``: :func:`table_marks` reads it off a ``TableResult``, :func:`drawn` off the
comparisons the forest plot (``delta_ci.png``) is drawn from; :func:`spy_on_plots` records what ``ablate plot``
and ``ablate export`` pass to :func:`ablate.report.figures.plot_all` (the figures are still drawn).
"""

from __future__ import annotations

from typing import Any

from ablate.report.figures import forest_lines
from ablate.report.layout import MARK

Marks = dict[tuple[str, str], tuple[float, tuple[float, float], bool]]


def table_marks(result: Any) -> Marks:
    """``{(row, split): (Δ, 95% CI, †)}`` of every tested cell of a ``TableResult``."""
    return {
        (row.name, col.split): (cell.comparison.delta, cell.comparison.ci, cell.mark == MARK)
        for row in result.table.rows
        for col, cell in zip(result.table.columns, row.cells)
        if col.split and cell.comparison is not None and cell.comparison.tested
    }


def drawn(sweep: Any, comparisons: Any, alpha: float = 0.05) -> Marks:
    """The same, as the forest plot (delta_ci.png) draws them."""
    return {
        (ln.row, ln.split): (ln.delta, (ln.low, ln.high), ln.marked) for ln in forest_lines(sweep, comparisons, alpha)
    }


def spy_on_plots(monkeypatch: Any) -> list[tuple[Any, list[Any]]]:
    """Record ``(sweep, comparisons)`` of every ``plot_all`` call from now on (the figures are still drawn)."""
    import ablate.report.figures as figures

    calls: list[tuple[Any, list[Any]]] = []
    plot_all = figures.plot_all

    def spy(sweep, out_dir, comparisons=None, *args, **kwargs):
        calls.append((sweep, list(comparisons or [])))
        return plot_all(sweep, out_dir, comparisons, *args, **kwargs)

    monkeypatch.setattr(figures, "plot_all", spy)
    return calls
