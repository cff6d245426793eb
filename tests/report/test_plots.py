"""Figures: files written, non-trivial, the Pareto front, and what they draw (marks, whiskers,
curves) checked against the table and the data rather than against pixels."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.image import imread

from ablate.report.figures import (
    CAPTION,
    NO_HISTORY,
    bleu_bars,
    bleu_bars_figure,
    delta_vs_step_figure,
    draw_curves,
    forest_figure,
    forest_lines,
    learning_curves_figure,
    pareto_front,
    plot_all,
)
from ablate.report.layout import MARK, build_table
from ablate.report.stats import Row, aggregate, compare, delta_curves
from ablate.report.trials import collect

NAMES = ["test_bleu.png", "bleu_vs_speed.png", "bleu_vs_params.png", "learning_curves.png", "delta_vs_step.png"]
TABLE3_CPU = Path(__file__).resolve().parents[2] / "results" / "table3-cpu"


def test_pareto_front_keeps_only_undominated_points():
    xs, ys = [1.0, 2.0, 3.0, 2.0, 0.5], [5.0, 4.0, 1.0, 3.0, 5.0]
    # maximise x and y: (2,3) is beaten by (2,4); (0.5,5) by (1,5)
    assert pareto_front(xs, ys, maximize_x=True) == [0, 1, 2]
    # minimise x, maximise y: only (0.5, 5) is undominated
    assert pareto_front(xs, ys, maximize_x=False) == [4]


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["variant_sweep", "grid_sweep"])
def test_every_figure_is_written_and_has_content(fixture, request, tmp_path):
    sweep = aggregate(collect(str(request.getfixturevalue(fixture))))
    paths = plot_all(sweep, tmp_path / "plots", compare(sweep, n_samples=100))
    # the grid saved no hypotheses: no BLEU by length, no comparisons to draw as a forest plot
    with_hyps = ["bleu_by_length.png", "delta_ci.png"] if fixture == "variant_sweep" else []
    assert sorted(p.name for p in paths) == sorted(NAMES + with_hyps)
    for path in paths:
        assert path.stat().st_size > 20_000, path.name
        image = imread(path)
        assert image.shape[0] > 400 and image.shape[1] > 700, path.name
        colours = np.unique((image[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
        assert len(colours) > 50, path.name  # more than blank axes: bars, points, curves, text


@pytest.mark.slow
def test_missing_metrics_skip_the_figure_instead_of_failing(variant_sweep, tmp_path):
    sweep = aggregate(collect(str(variant_sweep)))
    for row in sweep.rows:
        row.stats.pop("train/tokens_per_sec")  # e.g. runs logged before throughput existed
    paths = plot_all(sweep, tmp_path, None)
    assert "bleu_vs_speed.png" not in [p.name for p in paths] and len(paths) == 5


# --------------------------------------------------------------------------------------
# What the figures draw
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def variant(variant_sweep):
    """The variant sweep and its comparisons against the base (as ``ablate table`` makes them)."""
    sweep = aggregate(collect(str(variant_sweep)))
    return sweep, compare(sweep, n_samples=200)


def table_marks(sweep, comparisons, alpha: float = 0.05) -> dict[tuple[str, str], bool]:
    """``{(row, split): marked}`` for every test-BLEU cell of the table."""
    table = build_table(sweep, comparisons, alpha)
    return {
        (row.name, col.split): cell.mark == MARK
        for row in table.rows
        for col, cell in zip(table.columns, row.cells)
        if col.split and cell.stat is not None
    }


def visible_points(ax) -> int:
    """Data points one can see on ``ax``: vertices of lines that have a marker, or of lines with two
    or more vertices and a line style (a one-vertex line without a marker draws nothing)."""
    caps = {id(cap) for c in ax.containers for cap in c.lines[1]}  # an error bar's ends
    seen = 0
    for line in ax.get_lines():
        if id(line) in caps:
            continue
        n = len(line.get_xdata())
        if line.get_marker() not in (None, "", "None", " ") or (n > 1 and line.get_linestyle() not in ("None", "")):
            seen += n
    return seen


@pytest.mark.slow
def test_the_forest_plot_marks_exactly_what_the_table_marks(variant):
    sweep, comparisons = variant
    lines = forest_lines(sweep, comparisons, 0.05)
    marks = {k: m for k, m in table_marks(sweep, comparisons).items() if k[0] != sweep.base.name}
    assert {(ln.row, ln.split): ln.marked for ln in lines} == marks
    assert any(marks.values()) and not all(marks.values())  # the fixture has both kinds
    by_key = {(c.row, c.split): c for c in comparisons}
    for ln in lines:
        c = by_key[(ln.row, ln.split)]
        assert (ln.delta, (ln.low, ln.high)) == (c.delta, c.ci)
    ticks = [t.get_text() for t in forest_figure(sweep, comparisons).axes[0].get_yticklabels()]
    assert [t.endswith(MARK) for t in ticks] == [ln.marked for ln in lines]
    assert len(set(ticks)) == len(ticks)  # the two test splits are told apart


@pytest.mark.slow
def test_no_forest_plot_without_comparisons(variant, tmp_path):
    sweep, _ = variant
    assert forest_figure(sweep, []) is None
    assert "delta_ci.png" not in [p.name for p in plot_all(sweep, tmp_path, [])]


def test_named_comparisons_are_drawn_against_their_reference_row(variant):
    sweep, comparisons = variant
    named = [dataclasses.replace(comparisons[0], reference="A-heads8", row="A-heads1")]
    (line,) = forest_lines(sweep, named, 0.05)
    assert line.label.startswith("A-heads1 vs A-heads8")
    assert "vs reference row" in forest_figure(sweep, named).axes[0].get_xlabel()


def test_test_bleu_whiskers_are_the_tables_interval_and_marks(variant):
    sweep, comparisons = variant
    bars = bleu_bars(sweep, comparisons, 0.05)
    vs_base = {(c.row, c.split): c for c in comparisons}
    marks = table_marks(sweep, comparisons)
    assert {(b.row, b.split): b.mark == MARK for b in bars} == marks
    for b in bars:
        base = sweep.base.stats[f"test_{b.split}/bleu"].mean
        if b.row == sweep.base.name:
            assert b.whisker == "none"
            continue
        c = vs_base[(b.row, b.split)]
        assert b.whisker == "ci" and (b.low, b.high) == pytest.approx((base + c.ci[0], base + c.ci[1]))
        if b.mark:  # a dagger never sits on a whisker that reaches the base
            assert b.low > base or b.high < base


def test_test_bleu_whiskers_are_the_seed_std_without_a_test(variant):
    sweep, _ = variant
    for b in bleu_bars(sweep, [], 0.05):
        st = next(r for r in sweep.rows if r.name == b.row).stats[f"test_{b.split}/bleu"]
        assert b.whisker == "std" and (b.low, b.high) == pytest.approx((st.mean - st.std, st.mean + st.std))
        assert b.mark == ""


def _one_validation(sweep, keep=lambda row: True):
    """``sweep`` with every trial's history cut to its last validation (none where not ``keep``)."""
    rows = []
    for row in sweep.rows:
        trials = tuple(dataclasses.replace(t, history=t.history[-1:] if keep(row) else ()) for t in row.trials)
        rows.append(dataclasses.replace(row, trials=trials))
    return dataclasses.replace(sweep, rows=rows)


def test_rows_validated_once_are_drawn_as_markers(variant):
    sweep = _one_validation(variant[0])
    fig = learning_curves_figure(sweep)
    (ax,) = [a for a in fig.axes if a.get_visible()]
    drawn = {c.get_label(): c.lines[0] for c in ax.containers}  # errorbar: (data line, caps, bars)
    for row in sweep.rows:
        (label,) = [k for k in drawn if k.startswith(f"{row.name} (n=")]
        assert list(drawn[label].get_xdata()) == [500]  # the data stay at the step; only the display shifts
        values = [t.history[0]["val/bleu"] for t in row.trials]
        assert drawn[label].get_ydata()[0] == pytest.approx(np.mean(values))


def test_a_panel_without_any_history_says_so():
    fig = Figure()
    ax = fig.add_subplot()
    empty = np.zeros(0)
    row = Row("base", "base", {}, (), (), {}, True)
    draw_curves(ax, [(row, empty, empty, empty)], {row.name: row.name})
    assert NO_HISTORY in [t.get_text() for t in ax.texts]
    assert any(NO_HISTORY in t.get_text() for t in ax.get_legend().get_texts())


def test_rows_without_history_are_listed_not_silently_dropped(variant):
    sweep = _one_validation(variant[0], keep=lambda row: not row.name.startswith("E"))
    (ax,) = [a for a in learning_curves_figure(sweep).axes if a.get_visible()]
    assert any(t.get_text().startswith("E-learned") and NO_HISTORY in t.get_text() for t in ax.get_legend().get_texts())


@pytest.mark.slow
def test_delta_vs_step_draws_the_budget_curves(variant, tmp_path):
    sweep, _ = variant
    fig = delta_vs_step_figure(sweep)
    bleu = delta_curves(sweep, "val/bleu")
    lines = [ln for ln in fig.axes[0].get_lines() if not ln.get_label().startswith("_")]  # not the line at 0
    drawn = {ln.get_label().split(" (")[0]: ln for ln in lines}
    assert set(drawn) == {c.row for c in bleu.curves}
    for c in bleu.curves:
        np.testing.assert_allclose(drawn[c.row].get_ydata(), c.mean)
    assert delta_vs_step_figure(_one_validation(sweep)) is None  # one step per row: nothing to show over steps
    assert "delta_vs_step.png" not in [p.name for p in plot_all(_one_validation(sweep), tmp_path, [])]


@pytest.mark.slow
@pytest.mark.skipif(not TABLE3_CPU.is_dir(), reason="results/table3-cpu is not in this checkout")
def test_the_shipped_table3_cpu_plots_have_a_forest_plot_and_no_empty_panel(tmp_path):
    sweep = aggregate(collect(str(TABLE3_CPU)))
    comparisons = compare(sweep, n_samples=200)
    names = [p.name for p in plot_all(sweep, tmp_path, comparisons)]
    assert "delta_ci.png" in names and "delta_vs_step.png" not in names  # validated once per trial
    panels = [ax for ax in learning_curves_figure(sweep).axes if ax.get_visible()]
    assert len(panels) == 5  # groups A-E, each with the base
    for ax in panels:
        shown = [t.get_text() for t in ax.get_legend().get_texts()]
        assert visible_points(ax) == len(shown) >= 2  # one marker per row in the legend
    bars = bleu_bars(sweep, comparisons, 0.05)
    base = sweep.base.stats[f"test_{bars[0].split}/bleu"].mean
    assert any(b.mark for b in bars) and all(b.low > base or b.high < base for b in bars if b.mark)
    assert not any(math.isnan(b.low) for b in bars if b.row != sweep.base.name)


def caption_text(fig) -> str:
    return "\n".join(t.get_text() for t in fig.findobj(lambda a: a.get_gid() == CAPTION))


def test_a_dagger_on_an_interval_that_reaches_the_base_is_called_out(variant):
    sweep, comparisons = variant
    c = comparisons[0]
    ci = (min(c.delta, 0.0) - 0.5, max(c.delta, 0.0) + 0.5)  # holds both Δ and 0
    odd = dataclasses.replace(c, p_value=0.01, p_adjusted=0.01, ci=ci)  # e.g. alpha 0.1, or a bs test
    fair = [c for c in comparisons if not c.significant(0.05)]
    assert "Note:" not in caption_text(forest_figure(sweep, fair)) + caption_text(bleu_bars_figure(sweep, fair))
    for fig in (forest_figure(sweep, [odd]), bleu_bars_figure(sweep, [odd])):
        assert f"Note: {odd.row}" in caption_text(fig)


def test_a_label_no_font_has_is_one_warning_line_not_matplotlibs(variant_sweep, tmp_path, caplog):
    """Variants named 学习-... printed matplotlib's 2-line UserWarnings ("Glyph 23398 (\\N{CJK UNIFIED
    IDEOGRAPH-5B66}) missing from font(s) DejaVu Sans." and its source line) and the figures showed boxes
    unexplained; now `ablate plot` says it in one status line that names the characters."""
    import shutil
    import warnings

    sweep_dir = tmp_path / "sweep"
    shutil.copytree(variant_sweep, sweep_dir)
    for summary in sweep_dir.glob("A-heads1-*/summary.json"):
        summary.write_text(summary.read_text().replace('"A-heads1"', '"学习-heads1"'))
    sweep = aggregate(collect(str(sweep_dir)))
    with warnings.catch_warnings(record=True) as seen, caplog.at_level("WARNING", logger="ablate"):
        warnings.simplefilter("always")
        paths = plot_all(sweep, tmp_path / "figs", compare(sweep, n_samples=100))
    assert paths and not [w for w in seen if "missing from font" in str(w.message)]
    lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(lines) == 1 and lines[0].startswith("no installed font has 学, 习 (drawn as boxes"), lines
