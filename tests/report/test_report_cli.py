"""The typer sub-app: ``table``, ``plot`` and ``report`` end to end on a constructed sweep."""

from __future__ import annotations

import csv
import inspect
import io

import pytest
from typer.testing import CliRunner

from ablate.report.commands import app

runner = CliRunner()


@pytest.mark.slow
def test_table_prints_every_format(variant_sweep):
    for fmt, needle in [
        ("md", "| base | base |"),
        ("latex", r"\toprule"),
        ("csv", "group,name,"),
        ("rich", "Ablation: table3"),
    ]:
        options = ["--samples", "100"] if fmt == "md" else ["--no-significance"]
        result = runner.invoke(app, ["table", str(variant_sweep), "--format", fmt, *options])
        assert result.exit_code == 0, result.output
        assert needle in result.output and "B-dk16-s3" in result.output
        assert ("†" in result.output) == (fmt == "md")


def test_table_writes_a_file(variant_sweep, tmp_path):
    out = tmp_path / "t" / "table.csv"
    result = runner.invoke(app, ["table", str(variant_sweep), "-f", "csv", "-o", str(out), "--no-significance"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert rows[0]["name"] == "base" and rows[0]["val/bleu.mean"] == "28.5"
    assert not any(k.endswith(".p") and v for r in rows for k, v in r.items())  # not tested


@pytest.mark.slow
def test_plot_writes_pngs(variant_sweep, tmp_path):
    result = runner.invoke(app, ["plot", str(variant_sweep), "--out", str(tmp_path / "figs"), "--no-significance"])
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in (tmp_path / "figs").glob("*.png"))
    assert len(names) == 6 and "delta_vs_step.png" in names and "delta_ci.png" not in names  # no comparisons made


def test_user_errors_are_one_line_without_traceback(tmp_path):
    result = runner.invoke(app, ["table", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert result.output.strip().startswith("error: sweep folder not found") and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_run_folder_given_for_a_sweep_names_its_parent(variant_sweep):
    """`ablate table runs/sweep/trial` said "no trials in runs/sweep/trial: expected subfolders holding summary.json",
    though the folder holds one: it is one run's folder, and the table wants the sweep's."""
    run = variant_sweep / "base-s1"
    result = runner.invoke(app, ["table", str(run)])
    assert result.exit_code == 2 and result.output == (
        f"error: {run} is one run's folder (it holds summary.json); a table reads a sweep folder of runs: "
        f"pass {variant_sweep}\n"
    )


@pytest.mark.parametrize("command", ["table", "plot", "export", "calibrate"])
def test_alpha_0_is_refused_as_the_command_line_is_read(variant_sweep, tmp_path, command):
    """--help said [0.0<=x<=1.0] and --alpha 0 was taken, then refused after every trial was read ("alpha=0: a
    significance level is above 0 and at most 1"); the help says (0, 1] and the parser refuses 0."""
    args = [command, str(variant_sweep), *([str(tmp_path / "out")] if command == "export" else []), "--alpha", "0"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "read " not in result.output, result.output
    assert "Invalid value for '--alpha': 0 is not a significance level: give one above 0 and at most 1" in result.output
    assert "in (0, 1]" in runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output


def test_every_option_has_help():
    for command in ("table", "plot", "report", "export"):
        info = next(c for c in app.registered_commands if c.name == command)
        for name, param in inspect.signature(info.callback).parameters.items():
            assert getattr(param.default, "help", None), f"{command} --{name} has no help"


@pytest.mark.parametrize("fmt", ["md", "latex", "csv"])
def test_columns_keeps_only_the_named_columns_in_every_format(variant_sweep, fmt):
    """``--columns`` by header or key, in the table's order; the row names and n stay; a wrong name is one line."""
    args = ["table", str(variant_sweep), "--no-significance", "--format", fmt]
    full = CliRunner().invoke(app, args)
    some = CliRunner().invoke(app, [*args, "--columns", "h,model.d_ff"])
    assert full.exit_code == 0 and some.exit_code == 0, some.output
    header = next(line for line in some.output.splitlines() if "variant" in line or line.startswith("group,"))
    cells = {"md": header.strip("| ").split(" | "), "latex": header.split("&"), "csv": header.split(",")}[fmt]
    if fmt == "csv":
        assert cells == ["group", "name", "model.d_ff", "model.heads", "status", "reason"]
    else:
        assert len(cells) == {"md": 4, "latex": 5}[fmt] and "ff" in header  # (group,) name, d_ff, h, n
    wrong = CliRunner().invoke(app, [*args, "--columns", "d_modle"])
    assert wrong.exit_code == 2 and "did you mean 'd_model'?" in wrong.output


def test_columns_takes_the_headers_that_always_stay(variant_sweep):
    """``--columns 'variant,h,n'``, headers copied from the table (as --help says: "comma-separated headers"), was
    refused ("no column 'variant'"; "no column 'n'; did you mean 'N'?", the layers): they always stay, so they select
    nothing more; named alone they still name no column."""
    args = ["table", str(variant_sweep), "--no-significance", "--format", "md", "--columns"]
    with_kept = CliRunner().invoke(app, [*args, "variant,h,n"])
    assert with_kept.exit_code == 0, with_kept.output
    assert with_kept.output == CliRunner().invoke(app, [*args, "h"]).output
    alone = CliRunner().invoke(app, [*args, "n"])
    assert alone.exit_code == 2 and "--columns: it names no column" in alone.output, alone.output


@pytest.mark.parametrize("columns", [",", " , ", ""])
def test_columns_that_name_no_column_are_one_line_naming_the_columns(variant_sweep, columns):
    """``--columns ,`` names no column: an error listing the table's columns, not a table of row names alone."""
    result = CliRunner().invoke(app, ["table", str(variant_sweep), "--no-significance", "--columns", columns])
    assert result.exit_code == 2 and "--columns: it names no column" in result.output, result.output
    assert "its columns: " in result.output and "d_model" in result.output
