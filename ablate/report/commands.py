"""``ablate table``, ``ablate plot`` and ``ablate report``: plain functions and a typer sub-app.

The plain functions (:func:`load`, :func:`make_table`, :func:`make_plots`, :func:`make_report`)
do the work and return values; the typer commands only parse options and print. The lead's
:mod:`ablate.cli` mounts :data:`app`'s commands at top level.
"""

from __future__ import annotations

import functools
import sys
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer

from ablate.report.aggregate import Sweep, aggregate
from ablate.report.formats import render, to_rich
from ablate.report.records import WANDB_PREFIX, ReportError, collect, parse_wandb_path
from ablate.report.significance import Comparison, compare
from ablate.report.table import Table, build_table

app = typer.Typer(help="Paper-style tables, figures and W&B reports of a sweep.", no_args_is_help=True,
                  add_completion=False)

SOURCE_HELP = "A sweep output folder, or wandb:<entity>/<project>/<group> (group optional) to read the runs from W&B."


class Format(str, Enum):
    rich = "rich"
    md = "md"
    latex = "latex"
    csv = "csv"


class Test(str, Enum):
    bs = "bs"
    ar = "ar"


# --------------------------------------------------------------------------------------
# Plain functions
# --------------------------------------------------------------------------------------


def load(source: str, api: Any = None) -> Sweep:
    """Collect and aggregate the trials of ``source`` (``api``: a ``wandb.Api`` stand-in)."""
    return aggregate(collect(source, api=api))


def significance(sweep: Sweep, enabled: bool = True, test: str = "bs", samples: int = 0) -> list[Comparison]:
    """The table's comparisons (named by the sweep, else against the base), Holm-adjusted; none when disabled."""
    return compare(sweep, test=test, n_samples=samples) if enabled else []


def table_of(source: str, alpha: float = 0.05, test: str = "bs", samples: int = 0,
             with_significance: bool = True, api: Any = None, by_length: bool = False) -> Table:
    """The laid-out table of ``source``, significance included unless disabled, and BLEU per
    source-length bucket as columns with ``by_length``."""
    sweep = load(source, api)
    comps = significance(sweep, with_significance, test, samples)
    extra = None
    if by_length:
        from ablate.report.lengths import bleu_by_length

        lengths = bleu_by_length(sweep)
        if lengths is None:
            raise ReportError(f"--by-length needs saved hypotheses (hyps/<split>.txt), and {source} has none")
        extra = (lengths.columns(), lengths.row_stats(), lengths.note())
    return build_table(sweep, comps, alpha, test, samples, extra)


def make_table(source: str, fmt: str = "md", alpha: float = 0.05, test: str = "bs", samples: int = 0,
               with_significance: bool = True, api: Any = None, by_length: bool = False) -> str:
    """The paper-style table of ``source`` as text in ``fmt`` (rich, md, latex or csv)."""
    return render(table_of(source, alpha, test, samples, with_significance, api, by_length), fmt)


def make_plots(source: str, out: Path, alpha: float = 0.05, with_significance: bool = True,
               api: Any = None) -> list[Path]:
    """Write the sweep's PNG figures into ``out``; return their paths."""
    from ablate.report.plots import plot_all

    sweep = load(source, api)
    comps = significance(sweep, with_significance)
    return plot_all(sweep, Path(out), comps, alpha)


def make_report(source: str, title: Optional[str] = None, alpha: float = 0.05, test: str = "bs", samples: int = 0,
                with_significance: bool = True, api: Any = None) -> Any:
    """The (unsaved) W&B Report of a ``wandb:<entity>/<project>[/<group>]`` source."""
    from ablate.report.wandb_report import build_report

    if not source.startswith(WANDB_PREFIX):
        raise ReportError(f"ablate report needs a W&B source, got '{source}': use wandb:<entity>/<project>/<group>")
    entity, project, group = parse_wandb_path(source[len(WANDB_PREFIX):])
    sweep = load(source, api)
    table = build_table(sweep, significance(sweep, with_significance, test, samples), alpha, test, samples)
    return build_report(entity, project, group, table, sweep, title)


# --------------------------------------------------------------------------------------
# Typer commands
# --------------------------------------------------------------------------------------


def _user_errors(fn):
    """Print a user error as one line on stderr and exit with status 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ReportError as err:
            print(f"error: {err}", file=sys.stderr)
            raise typer.Exit(2) from None

    return wrapper


def _print_table(table: Table, fmt: Format, out: Optional[Path]) -> None:
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render(table, fmt.value))
        print(f"wrote {out}", file=sys.stderr)
    elif fmt is Format.rich:
        from rich.console import Console

        Console().print(to_rich(table))
    else:
        sys.stdout.write(render(table, fmt.value))


ALPHA = typer.Option(0.05, "--alpha", min=0.0, max=1.0,
                     help="Family-wise significance level for the † mark (Holm-Bonferroni over the table's "
                          "comparisons).")
TEST = typer.Option(Test.bs, "--test",
                    help="Paired test over source sentences, seeds kept together: bs (bootstrap resampling) "
                         "or ar (approximate randomization).")
SAMPLES = typer.Option(0, "--samples", min=0,
                       help="Resamples (bs) or trials (ar); 0 uses 2000 / 10000.")
SIGNIFICANCE = typer.Option(True, "--significance/--no-significance",
                            help="Test each row against the base on the saved hypotheses (slower on big test sets).")


@app.command("table")
@_user_errors
def table_command(
    source: str = typer.Argument(..., metavar="SOURCE", help=SOURCE_HELP),
    fmt: Format = typer.Option(Format.rich, "--format", "-f",
                               help="Output format: rich (terminal), md, latex (booktabs) or csv."),
    out: Optional[Path] = typer.Option(None, "--out", "-o",
                                       help="Write the table to this file instead of printing it."),
    alpha: float = ALPHA,
    test: Test = TEST,
    samples: int = SAMPLES,
    with_significance: bool = SIGNIFICANCE,
    by_length: bool = typer.Option(False, "--by-length",
                                   help="Add test BLEU per source-length bucket as columns "
                                        "(Bahdanau et al. 2015, Fig. 2)."),
) -> None:
    """Paper-style ablation table (Vaswani et al. 2017, Table 3): base row first, changes only."""
    _print_table(table_of(source, alpha, test.value, samples, with_significance, by_length=by_length), fmt, out)


@app.command("plot")
@_user_errors
def plot_command(
    source: str = typer.Argument(..., metavar="SOURCE", help=SOURCE_HELP),
    out: Path = typer.Option(Path("plots"), "--out", "-o", help="Folder for the PNG figures (created if missing)."),
    alpha: float = ALPHA,
    with_significance: bool = SIGNIFICANCE,
) -> None:
    """PNG figures: test BLEU per variant, BLEU vs tokens/s and parameters, learning curves, BLEU by length."""
    for path in make_plots(source, out, alpha, with_significance):
        print(path)


@app.command("report")
@_user_errors
def report_command(
    source: str = typer.Argument(..., metavar="SOURCE", help="wandb:<entity>/<project>/<group>: the sweep's W&B runs."),
    title: Optional[str] = typer.Option(None, "--title", help="Report title (default: the sweep's name)."),
    draft: bool = typer.Option(False, "--draft", help="Save the report as a draft."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Build the report and print its outline without saving it."),
    alpha: float = ALPHA,
    test: Test = TEST,
    samples: int = SAMPLES,
    with_significance: bool = SIGNIFICANCE,
) -> None:
    """Publish a W&B Report: the paper-style table and panels (BLEU bars, BLEU vs tokens/s, curves)."""
    from ablate.report.wandb_report import publish

    report = make_report(source, title, alpha, test.value, samples, with_significance)
    if dry_run:
        print(outline(report))
        return
    print(publish(report, draft=draft))


def outline(report: Any) -> str:
    """A short text outline of a report's blocks and panels (for ``--dry-run``)."""
    lines = [f"{report.entity}/{report.project}: {report.title}"]
    for block in report.blocks:
        name = type(block).__name__
        panels = getattr(block, "panels", None)
        if panels is not None:
            lines.append(f"  {name}: " + ", ".join(f"{type(p).__name__}({p.title!r})" for p in panels))
        else:
            text = getattr(block, "text", "")
            first = (text if isinstance(text, str) else str(text)).splitlines()[:1]
            lines.append(f"  {name}: {first[0][:70] if first else ''}")
    return "\n".join(lines)

