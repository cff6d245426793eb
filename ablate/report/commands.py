"""``ablate table``, ``plot``, ``calibrate``, ``export``, ``score`` and ``report``: typer commands that parse
options and print; the plain functions of :mod:`ablate.report` do the work."""

from __future__ import annotations

import io
import logging
import sys
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Optional

import typer
from rich.console import Console, Group
from rich.measure import Measurement

from ablate.metrics import get_scorer
from ablate.report.layout import Table, select_columns
from ablate.report.papers import (
    REFERENCES,
    get as get_reference,
    render as render_reference,
    side_by_side,
    to_rich as beside_rich,
)
from ablate.report.render import FORMATS, render, render_per_seed, rich_blocks, rich_width, to_rich, to_vertical
from ablate.report.sources import make_plots, make_report, sweep_power, table as report_table
from ablate.report.stats import DEFAULT_ALPHA, TESTS, borrow_noise, load, load_pooled
from ablate.report.trials import WANDB_PREFIX, ReportError, local_folders, score_runs
from ablate.utils.commands import typer_app
from ablate.utils.io import atomic_write_json, check_apart, write_output_text

log = logging.getLogger(__name__)

app = typer_app(help="Paper-style tables, figures and W&B reports of a sweep.", no_args_is_help=True)

SOURCE_HELP = "A sweep output folder, or wandb:<entity>/<project>/<group> (group optional) to read the runs from W&B."
SOURCE = typer.Argument(..., metavar="SOURCE", help=SOURCE_HELP)


# ablate plot's file formats, ablate.report.figures.FIGURE_FORMATS (not imported here: it loads matplotlib)
FigureFormat = Enum("FigureFormat", {f: f for f in ("png", "pdf", "svg")}, type=str)  # type: ignore[misc]
Format = Enum("Format", {f: f for f in FORMATS}, type=str)  # type: ignore[misc]
Test = Enum("Test", {t: t for t in TESTS}, type=str)  # type: ignore[misc]


def _write(out: Path, text: str, *sources: str) -> None:
    """``text`` into the file ``out``, whole or not at all, never over or inside a source."""
    write_output_text(out, text, local_folders(*sources))
    log.info("wrote %s", out)


def print_fitted(table: Table, console: Any = None, beside: Any = None) -> None:
    """The rich table with every cell whole: piped, as wide as it needs; on a narrower terminal, one block
    per row (:func:`~ablate.report.render.to_vertical`). Then ``beside`` (a rich renderable, the paper's
    side-by-side), piped as wide as its own table needs."""
    console = console or Console()
    _print_fitted(console, rich_width(table), to_rich(table), lambda: to_vertical(table))
    if beside is not None:
        wide = Console(file=console.file, width=10_000, color_system=None)
        need = Measurement.get(wide, wide.options, beside.renderables[0]).maximum
        console.print()
        _print_fitted(console, need, beside, lambda: Group(rich_blocks(beside.renderables[0]), *beside.renderables[1:]))


def _print_fitted(console: Any, need: int, whole: Any, narrow: Callable[[], Any]) -> None:
    """``whole`` (``need`` cells wide), piped as wide as it needs; on a narrower terminal, ``narrow()``."""
    if not console.is_terminal:
        Console(file=console.file, width=max(need, 80), color_system=None).print(whole)
    else:
        console.print(whole if need <= console.width else narrow())


def _level(alpha: float) -> float:
    """``--alpha`` as it is read: a significance level in (0, 1] (at 0 nothing is marked and no power found)."""
    if not 0 < alpha <= 1:
        raise typer.BadParameter(f"{alpha:g} is not a significance level: give one above 0 and at most 1")
    return alpha


ALPHA = typer.Option(
    DEFAULT_ALPHA,
    "--alpha",
    callback=_level,
    help="Family-wise significance level for the † mark (Holm-Bonferroni over the table's comparisons), in (0, 1].",
)
TEST = typer.Option(
    Test("seeds"),
    "--test",
    help="seeds: training-seed variance (pooled over the table) plus a paired bootstrap over test sentences; "
    "bs / ar: test-set variance only (paired bootstrap / approximate randomization over sentences).",
)
SAMPLES = typer.Option(
    0, "--samples", min=0, help="Bootstrap resamples (seeds, bs) or random reassignments (ar); 0 uses 2000 / 10000."
)
METRIC_HELP = (
    "The score of the dev and test columns, the † test and 'best': bleu, chrf, chrf++, ter or a plugin's; "
    "scored from the saved hypotheses where a run's summary lacks it."
)
METRIC = typer.Option("bleu", "--metric", "-m", metavar="NAME", help=METRIC_HELP)


def sigma_from_option(help: str) -> Any:
    """``--sigma-from SOURCE`` (``ablate table --sigma-from``'s pooled seed σ), with what it does for this command."""
    return typer.Option(None, "--sigma-from", metavar="SOURCE", help=help)


SIGMA_FROM = sigma_from_option(
    "Pool the seed σ with this source's seeds of the base configuration (e.g. a calibration sweep of it): "
    "more df for a table of few seeds."
)
SIGNIFICANCE = typer.Option(
    True,
    "--significance/--no-significance",
    help="Test each row against the base on the saved hypotheses (slower on big test sets).",
)


@app.command("table")
def table_command(
    source: str = SOURCE,
    fmt: Format = typer.Option(
        Format("rich"), "--format", "-f", help="Output format: rich (terminal), md, latex (booktabs) or csv."
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", help="Write the table to this file instead of printing it."
    ),
    alpha: float = ALPHA,
    test: Test = TEST,
    samples: int = SAMPLES,
    with_significance: bool = SIGNIFICANCE,
    reference: Optional[str] = typer.Option(
        None,
        "--reference",
        metavar="NAME",
        help=f"Print the published results beside ours, with sign agreement per row: {', '.join(REFERENCES)}.",
    ),
    by_length: bool = typer.Option(
        False, "--by-length", help="Add test BLEU per source-length bucket as columns (Bahdanau et al. 2015, Fig. 2)."
    ),
    per_seed: bool = typer.Option(
        False,
        "--per-seed",
        help="Print every trial's test BLEU (or --metric) and its Δ against the base's trial of the same seed.",
    ),
    metric: str = METRIC,
    sigma_from: Optional[str] = SIGMA_FROM,
    columns: Optional[str] = typer.Option(
        None,
        "--columns",
        metavar="NAMES",
        help="Only these columns, comma-separated headers or keys (e.g. 'N,d_model,h,BLEU (test_2016_flickr)'), "
        "in every format; the row names and n always stay.",
    ),
) -> None:
    """Paper-style ablation table (Vaswani et al. 2017, Table 3): base row first, changes only."""
    paper = get_reference(reference) if reference else None  # a wrong name fails before any work
    label = get_scorer(metric).label  # so does a wrong metric
    given = dict(  # the options --per-seed has no use for (it tests nothing; it lists each trial's score)
        sigma_from=sigma_from is not None, reference=reference is not None, columns=columns is not None,
        by_length=by_length, alpha=alpha != DEFAULT_ALPHA, samples=samples != 0, test=test != Test("seeds"),
    )  # fmt: skip
    if per_seed and (option := next((name for name, on in given.items() if on), None)):
        lists = {"reference": "each trial, not the table beside a paper", "columns": f"each trial's test {label}"}
        what = lists.get("columns" if option == "by_length" else option, "each trial's Δ, with no test")
        raise ReportError(f"--per-seed lists {what}: drop --{option.replace('_', '-')}, or leave out --per-seed")
    if paper is not None and fmt is Format("csv"):  # one CSV holds one table, as pandas.read_csv reads it
        raise ReportError(
            "--format csv holds one table and --reference adds a second (the paper beside ours): use --format md "
            "or latex for both, or leave out --reference for the CSV"
        )
    if out is not None:
        check_apart(out, local_folders(source))  # before any work
    if per_seed:
        console = Console()
        width = console.width if out is None and console.is_terminal else None  # a file or a pipe: None
        text = render_per_seed(load(source, metric=metric), fmt.value, width, metric)
    else:
        result = report_table(
            source,
            alpha=alpha,
            test=test.value,
            samples=samples,
            significance=with_significance,
            by_length=by_length,
            metric=metric,
            sigma_from=sigma_from,
        )
        table = result.table
        beside, rich_beside = _beside(result.sweep, table, paper, fmt.value, metric, source)
        if columns is not None:
            table = select_columns(table, [c.strip() for c in columns.split(",") if c.strip()])
        if out is None and fmt is Format("rich"):
            print_fitted(table, beside=rich_beside)
            sys.stdout.write(beside)
            return
        text = render(table, fmt.value) + beside
        if rich_beside is not None:  # into --out: as it prints piped
            print_fitted(table, Console(file=(buf := io.StringIO())), beside=rich_beside)
            text = buf.getvalue()
    if out is not None:
        _write(out, text, source)
    else:
        sys.stdout.write(text)


def _beside(sweep: Any, table: Table, paper: Any, fmt: str, metric: str, source: str) -> tuple[str, Any]:
    """``(text, rich renderable)`` to print under the table: the ``paper``'s side-by-side in ``fmt`` (rich: the
    renderable, no text), or a note (a LaTeX comment under LaTeX) where ``metric`` is not the BLEU the published
    tables report."""
    if paper is None:
        return "", None
    if metric != "bleu":  # the published tables report BLEU (and PPL) only
        return (
            f"\n{'% ' if fmt == 'latex' else ''}note: the published table '{paper.name}' reports BLEU, not "
            f"{get_scorer(metric).label}, so it is "
            f"not compared on this table; `ablate table {source} --reference {paper.name}` compares on BLEU\n"
        ), None
    sbs = side_by_side(sweep, table, paper)
    return ("", beside_rich(sbs)) if fmt == "rich" else ("\n" + render_reference(sbs, fmt), None)


@app.command("calibrate")
def calibrate_command(
    sources: list[str] = typer.Argument(
        ...,
        metavar="SOURCE...",
        help=SOURCE_HELP + " Several: their trials pooled (one configuration's seeds run as two sweeps).",
    ),
    split: Optional[str] = typer.Option(None, "--split", help="Test split (default: the first with hypotheses)."),
    alpha: float = typer.Option(0.05, "--alpha", callback=_level, help="Significance level of each call, in (0, 1]."),
    k: Optional[list[int]] = typer.Option(
        None, "--k", min=2, help="Seeds per side of the k-vs-k splits (repeatable; default 2 3 4 6 8)."
    ),
    draws: int = typer.Option(400, "--draws", min=1, help="Random splits per k."),
    relabellings: int = typer.Option(
        400, "--relabellings", min=1, help="Random relabelled tables per design (rows x seeds, shared or distinct)."
    ),
    shift: float = typer.Option(1.0, "--shift", help="Known effect (BLEU) added to one side for the power column."),
    like: Optional[list[str]] = typer.Option(
        None,
        "--like",
        metavar="TABLE_SOURCE",
        help="Also relabel the design of this table (its rows, seeds per row, seed sharing and comparisons), or "
        "the largest stand-in SOURCE's seeds hold (repeatable).",
    ),
    design: Optional[list[str]] = typer.Option(
        None,
        "--design",
        metavar="RxK[:shared|distinct]",
        help="Also relabel R rows of K seeds, each against the first (repeatable; default both seed sharings).",
    ),
    like_only: bool = typer.Option(
        False, "--like-only", help="Only the designs of --like and --design (no built-in designs, splits or pairs)."
    ),
    sigma_from: Optional[str] = sigma_from_option(
        "Pool every relabelled table's seed σ with this source's seeds, as `ablate table --sigma-from` does "
        "(other seeds of the same configuration: the test's size and power with a borrowed σ)."
    ),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Also write the Markdown to this file."),
) -> None:
    """False-positive rate and power of the table's significance test on real runs: relabelled multi-row
    tables of one row's seeds (--like: another table's own design), k-vs-k splits (seed-aware beside
    sentence-only, measured power beside the predicted) and relabelled seed pairs (see results/calibration-cpu)."""
    from ablate.report.calibration import KS, TableDesign, calibrate, parse_design, to_markdown

    if out is not None:
        check_apart(out, local_folders(*sources))
    designs = [d for text in design or [] for d in parse_design(text)]
    designs += [TableDesign.of_sweep(load(table), Path(table.rstrip("/")).name or table) for table in like or []]
    if like_only and not designs:
        raise ReportError("--like-only needs a design to calibrate: add --like TABLE_SOURCE or --design RxK")
    sweep = load_pooled(sources)
    borrowed = borrow_noise(sweep, sigma_from, sources) if sigma_from is not None else None
    calibration = calibrate(
        sweep, split, alpha, tuple(k or KS), draws, shift, relabellings=relabellings, like=designs,
        like_only=like_only, borrowed=borrowed,
    )  # fmt: skip
    text = to_markdown(calibration)
    if out is not None:
        _write(out, text, *sources)
    sys.stdout.write(text)


@app.command("power")
def power_command(
    file: Path = typer.Argument(
        ..., metavar="SWEEP_FILE", help="The sweep file to plan, e.g. sweeps/mission-cpu.yaml."
    ),
    overrides: Optional[list[str]] = typer.Argument(
        None, metavar="[KEY=VALUE]...", help="Config overrides for every trial, as `ablate sweep run` takes them."
    ),
    sigma_from: str = typer.Option(
        ...,
        "--sigma-from",
        metavar="SOURCE",
        help="Seeds of the sweep's base configuration (a calibration sweep): their σ is taken as the true one.",
    ),
    config: Optional[Path] = typer.Option(
        None, "--config", "-c", help="Base config file, as `ablate sweep run` takes it."
    ),
    alpha: float = ALPHA,
) -> None:
    """Before a sweep runs: the minimum detectable effect of its table and the seeds per row a Δ of 1, 2, 3 BLEU
    needs, with the table's own σ and with `ablate table --sigma-from` (docs/reports.md, "Planning a sweep")."""
    for line in sweep_power(file, sigma_from, overrides or [], config, alpha):
        sys.stdout.write(line + "\n")


@app.command("export")
def export_command(
    source: Path = typer.Argument(..., metavar="SWEEP_DIR", help="A sweep output folder (ablate sweep run --out)."),
    out: Path = typer.Argument(..., metavar="RESULTS_DIR", help="Where to write the results, e.g. results/<sweep>."),
    command: Optional[str] = typer.Option(
        None, "--command", help="The exact command that ran the sweep (default: rebuilt from sweep.json)."
    ),
    reference: Optional[str] = typer.Option(
        None,
        "--reference",
        metavar="NAME",
        help="Put the published results beside the table in table.md and table.tex.",
    ),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Draw ablate plot's figures into RESULTS_DIR/plots."),
    force: bool = typer.Option(False, "--force", help="Replace RESULTS_DIR if it exists."),
    commit: Optional[str] = typer.Option(
        None, "--commit", metavar="REV", help="The commit the trials ran, for runs too old to record their own."
    ),
    alpha: float = ALPHA,
    test: Test = TEST,
    samples: int = SAMPLES,
    sigma_from: Optional[str] = sigma_from_option(
        "Test the table and plots with the seed σ pooled with this source's seeds of the base configuration, "
        "as `ablate table --sigma-from` does; the README records SOURCE (not copied) and the command that rebuilds."
    ),
) -> None:
    """Ship a sweep as a results folder that `ablate table RESULTS_DIR` rebuilds the table from.

    It holds table.md and table.tex, the plots, each trial's summary.json and gzip'd test and validation
    hypotheses (with references and sources), and a README with the command, commit, machine, wall time and CPU time.
    """
    from ablate.report.export import export_sweep

    manifest = export_sweep(
        source, out, command, reference, plots, alpha, test.value, samples, force, commit, sigma_from=sigma_from
    )
    log.info("wrote %s (%d trials, %.1f MiB of texts)", out, manifest["trials"], manifest["texts_bytes"] / 2**20)


@app.command("plot")
def plot_command(
    source: str = SOURCE,
    out: Path = typer.Option(Path("plots"), "--out", "-o", help="Folder for the figures (created if missing)."),
    alpha: float = ALPHA,
    test: Test = TEST,
    samples: int = SAMPLES,
    with_significance: bool = SIGNIFICANCE,
    fmt: FigureFormat = typer.Option(FigureFormat("png"), "--format", help="png, or pdf / svg (vector, for papers)."),
    metric: str = METRIC,
    sigma_from: Optional[str] = sigma_from_option(
        "Draw the CIs and † of `ablate table --sigma-from SOURCE`: the seed σ pooled with this source's seeds "
        "of the base configuration."
    ),
) -> None:
    """Figures: test BLEU (or --metric) per variant, Δ and 95% CI per comparison, the score vs tokens/s and
    parameters, learning curves, Δ vs the base per training step, BLEU by length."""
    get_scorer(metric)  # a wrong name fails before any work
    drawn = make_plots(
        source, out, alpha, with_significance, fmt=fmt.value, metric=metric, sigma_from=sigma_from,
        test=test.value, samples=samples,
    )  # fmt: skip
    for path in drawn:  # whole or none
        print(path)


@app.command("score")
def score_command(
    path: Path = typer.Argument(
        ..., metavar="SWEEP_OR_RUN", help="A run folder, or a sweep or results folder of runs."
    ),
    metric: str = typer.Option(
        ..., "--metric", "-m", metavar="NAME", help="The metric to add: chrf, chrf++, ter, bleu or a plugin's."
    ),
) -> None:
    """Add a metric to finished runs from their saved hypotheses, without retraining: writes test_<split>/NAME,
    test/NAME, val/NAME and NAME_signature into each run's summary.json (what it already records is kept)."""
    done = score_runs(path, metric)
    for result in done:
        print(result)
    added = sum(bool(r.added) for r in done)
    log.info("%s: scored %d of %d runs", metric, added, len(done))


TITLE_MAX = 128
"""The longest title a W&B report takes (``wandb_workspaces``' Report: ``max_length=128``)."""

REPORT_SPEC = "report-spec.json"
"""Where ``ablate report --dry-run`` writes the report's spec without ``--out``."""


@app.command("report")
def report_command(
    source: str = typer.Argument(
        ...,
        metavar="SOURCE",
        help="wandb:<entity>/<project>/<group>: the sweep's W&B runs (with --dry-run, a sweep folder too).",
    ),
    title: Optional[str] = typer.Option(None, "--title", help="Report title (default: the sweep's name)."),
    draft: bool = typer.Option(False, "--draft", help="Save the report as a draft."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Build the report offline: print its outline and write its full spec (--out)."
    ),
    out: Optional[Path] = typer.Option(
        None,
        "--out",
        "-o",
        help=f"Where --dry-run writes the report's spec, what publishing would save (default: {REPORT_SPEC}).",
    ),
    reference: Optional[str] = typer.Option(
        None, "--reference", metavar="NAME", help=f"The published table the heading cites: {', '.join(REFERENCES)}."
    ),
    alpha: float = ALPHA,
    test: Test = TEST,
    samples: int = SAMPLES,
    with_significance: bool = SIGNIFICANCE,
    sigma_from: Optional[str] = SIGMA_FROM,
) -> None:
    """Publish a W&B Report: the paper-style table and panels (BLEU bars, BLEU vs tokens/s, curves)."""
    from ablate.report.export import offline_spec, publish

    if not dry_run and not source.startswith(WANDB_PREFIX):
        raise ReportError(
            f"ablate report publishes from the W&B runs, got '{source}': use wandb:<entity>/<project>/<group>, "
            "or add --dry-run to preview a sweep folder's report offline"
        )
    if out is not None and not dry_run:
        raise ReportError("--out is where --dry-run writes the report's spec: add --dry-run")
    if title is not None and len(title) > TITLE_MAX:  # else cut without a word (the default title is ours to cut)
        raise ReportError(f"--title has {len(title)} characters; a W&B report title holds at most {TITLE_MAX}")
    report = make_report(
        source, title, alpha, test.value, samples, with_significance, reference=reference, sigma_from=sigma_from
    )
    if not dry_run:
        print(publish(report, draft=draft))
        return
    print(outline(report))
    path = out or Path(REPORT_SPEC)
    try:  # the full spec, what publishing would save
        atomic_write_json(path, offline_spec(report, draft), sort_keys=False)
    except OSError as err:
        raise ReportError(f"cannot write the report's spec to {path}: {err.strerror or err}") from None
    log.info("wrote the report's spec to %s (what publishing would save)", path)


def outline(report: Any) -> str:
    """A short text outline of a report's blocks and panels (for ``--dry-run``)."""
    from ablate.report.export import place

    lines = [f"{place(report.entity, report.project)}: {report.title}"]
    for block in report.blocks:
        if (panels := getattr(block, "panels", None)) is not None:
            what = ", ".join(f"{type(p).__name__}({p.title!r})" for p in panels)
        else:  # a text block: its first line
            what = (str(getattr(block, "text", "")).splitlines() or [""])[0][:70]
        lines.append(f"  {type(block).__name__}: {what}")
    return "\n".join(lines)
