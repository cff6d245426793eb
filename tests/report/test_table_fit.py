"""``ablate table`` fits where it is printed: whole cells in a file or pipe, rows as blocks in a narrow terminal."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ablate.report.commands import app, print_fitted
from ablate.report.layout import build_table
from ablate.report.render import fmt_stat, rich_width
from ablate.report.stats import aggregate, compare
from ablate.report.trials import collect


@pytest.fixture(scope="module")
def table(variant_sweep):
    sweep = aggregate(collect(str(variant_sweep)))
    return build_table(sweep, compare(sweep, n_samples=200))


def cells(table) -> list[str]:
    return [fmt_stat(c, col) for row in table.rows for c, col in zip(row.cells, table.columns) if c.stat]


def printed(table, width: int, terminal: bool) -> str:
    out = io.StringIO()
    print_fitted(table, Console(file=out, width=width, force_terminal=terminal, color_system=None))
    return out.getvalue()


def test_the_table_needs_more_than_80_columns(table):
    assert rich_width(table) > 80  # else the tests below would not test anything


def test_piped_the_table_is_printed_whole_at_the_width_it_needs(table):
    text = printed(table, 80, terminal=False)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) > 80
    for cell in cells(table):
        assert cell in text


def test_a_narrow_terminal_gets_one_block_per_row_not_ellipses(table):
    text = printed(table, 80, terminal=True)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    for cell in cells(table):
        assert cell in text
    for row in table.rows:
        assert row.name in text
    wide = printed(table, rich_width(table) + 2, terminal=True)
    assert "┃" in wide and "…" not in wide  # room enough: the grid itself


def test_the_command_piped_through_a_runner_shows_whole_cells(variant_sweep, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    result = CliRunner().invoke(app, ["table", str(variant_sweep), "--samples", "200"])
    assert result.exit_code == 0, result.output
    assert "…" not in result.output and "±" in result.output


def test_the_paper_beside_the_table_gets_blocks_too_in_a_narrow_terminal(table, variant_sweep):
    """`ablate table ... --reference` in an 80-column terminal squeezed the side-by-side's 14 columns to
    three characters each ("pa…", "1…"), every row wrapped over four lines; now its rows are blocks too."""
    from ablate.report.papers import get, side_by_side, to_rich as beside_rich
    from ablate.report.stats import load

    beside = beside_rich(side_by_side(load(str(variant_sweep)), table, get("vaswani2017-table3")))
    out = io.StringIO()
    print_fitted(table, Console(file=out, width=80, force_terminal=True, color_system=None), beside=beside)
    text = out.getvalue().split("Beside", 1)[1]
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    assert "  paper row" in text and "(A) h=1" in text and "A-heads1" in text
    wide = io.StringIO()
    print_fitted(table, Console(file=wide, width=400, force_terminal=True, color_system=None), beside=beside)
    assert "┃ paper row" in wide.getvalue()  # room enough: the grid itself


def test_a_rich_file_holds_the_table_as_wide_as_it_needs(table, variant_sweep, tmp_path):
    """`ablate table SRC --out table.txt` (rich) and `.render("rich")` drew at a fixed 200 columns and cut the
    cells of a wider table ("C-dmodel2…", "5.89 ±" with its std on the next line); piped, the same table printed
    whole. Now the file is what the pipe shows."""
    from ablate.report.render import render

    assert rich_width(table) > 200  # else this would test nothing
    text = render(table, "rich")
    assert text == printed(table, 80, terminal=False) and "…" not in text
    out = tmp_path / "table.txt"
    result = CliRunner().invoke(app, ["table", str(variant_sweep), "--samples", "200", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "…" not in out.read_text() and max(map(len, out.read_text().splitlines())) == rich_width(table)
    from ablate.report.sources import TableResult

    assert "…" not in TableResult(None, table)._repr_html_()  # a notebook's view: also 200 columns before


def test_per_seed_in_a_narrow_terminal_gets_one_block_per_trial(variant_sweep):
    """`ablate table SRC --per-seed` in an 80-column terminal printed its 119-column grid as it would into a file,
    and the terminal wrapped every line in two; narrower than the grid, each trial is a block now."""
    from ablate.report.render import render_per_seed
    from ablate.report.stats import load

    sweep = load(str(variant_sweep))
    text = render_per_seed(sweep, "rich", width=80)
    assert max(len(line) for line in text.splitlines()) <= 80 and "┃" not in text
    assert "  Δ (test_2016_flickr)" in text and "-3.00" in text and "Δ against the base trial" in text
    assert render_per_seed(sweep, "rich", width=400) == render_per_seed(sweep, "rich")  # room enough: the grid
