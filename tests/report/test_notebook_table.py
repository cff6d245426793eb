"""``ablate.table`` / ``ablate.plot`` (the notebook API) on the report's constructed sweeps: the same
table as ``ablate table``, as a DataFrame and a rich view; the test-BLEU figure as a Figure."""

from __future__ import annotations

import json
import re

import pytest
from matplotlib.figure import Figure

import ablate
from ablate.report import table as report_table
from ablate.report.trials import ReportError


def test_the_table_object_holds_the_tables_numbers_and_views(variant_sweep):
    table = ablate.table(variant_sweep)
    assert table.render("md") == report_table(str(variant_sweep)).render("md") == str(table)
    df = table.df
    assert list(df.columns[:2]) == ["group", "name"] and df.columns[-2:].tolist() == ["status", "reason"]
    finished = df[df["status"] == "finished"]
    assert finished["name"].tolist() == [row.name for row in table.table.rows]
    bleu = "test_test_2016_flickr/bleu.mean"
    means = {row.name: row.stats["test_test_2016_flickr/bleu"].mean for row in table.sweep.rows}
    assert finished.set_index("name")[bleu].to_dict() == pytest.approx(means)
    assert sorted(df.loc[df["status"] != "finished", "status"]) == ["failed", "running"]
    html = table._repr_html_()
    assert "<pre" in html and all(name in html for name in finished["name"])
    assert repr(table) == "TableResult('Ablation: table3': 5 rows, 2 unfinished)"


def test_plot_is_the_test_bleu_figure_and_refuses_a_sweep_without_test_bleu(variant_sweep, tmp_path):
    figure = ablate.plot(variant_sweep)
    assert isinstance(figure, Figure)
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    assert any("base" in label for label in labels)

    empty = tmp_path / "empty"
    (empty / "t1").mkdir(parents=True)
    (empty / "t1" / "summary.json").write_text(json.dumps({"status": "running", "config": {}}))
    with pytest.raises(ReportError):
        ablate.plot(empty)


@pytest.mark.parametrize("alpha", [2, -1, 0, float("nan"), "0.05", True])
def test_a_significance_level_outside_0_1_is_one_line_naming_it_before_any_work(variant_sweep, alpha):
    """The Python API took any alpha (the CLI's --alpha is typed and ranged): alpha=-1 was refused as
    "alpha=-0.0555556" (the per-comparison level, a number the user never gave), alpha="0.05" raised
    "TypeError: '<' not supported between instances of 'float' and 'str'", and alpha=2 drew a figure."""
    for call in (ablate.table, ablate.plot):
        with pytest.raises(
            ReportError, match=rf"^alpha={re.escape(repr(alpha))}: a significance level is a number "
        ) as err:
            call(variant_sweep, alpha=alpha)
        assert "\n" not in str(err.value)


def test_an_unknown_render_format_is_a_report_error_with_a_guess(variant_sweep):
    """``table.render("latx")`` raised a bare ValueError (a traceback, not an AblateError), with no guess."""
    table = ablate.table(variant_sweep)
    with pytest.raises(ReportError, match=r"unknown format 'latx'; did you mean 'latex'\? \(choose from: rich"):
        table.render("latx")


def test_the_report_functions_take_the_sources_the_table_takes(variant_sweep, tmp_path, drawing):
    """``ablate.report.make_report`` and ``make_plots`` (the functions docs/python-api.md lists beside ``table``) ended in
    ``AttributeError: 'PosixPath' object has no attribute 'startswith'`` for the ``Path`` that ``ablate.table`` takes."""
    from ablate.report import make_plots, make_report

    assert (
        make_report(variant_sweep, significance=False).title
        == make_report(str(variant_sweep), significance=False).title
    )
    make_plots(variant_sweep, tmp_path / "plots", significance=False)
    assert len(drawing) == 1 and drawing[0][0].name == "table3"
