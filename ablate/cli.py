"""The ``ablate`` command line: train, sweep, table, plot, report, attention, bench.

Bad input is one line on stderr and exit status 2, results go to stdout and status lines to stderr
(:mod:`ablate.utils.commands`).
"""

from __future__ import annotations

import os

# The command line, not `import ablate`, lets idle OpenMP threads sleep instead of spin: where cores are
# shared (parallel trials, other programs) spinning threads burn the time slices the working ones need
# (measured in docs/sweeps.md, "Budgets and a busy machine"). OpenMP reads it once, when torch loads, so
# it is set before this module imports anything that may import torch; an explicit OMP_WAIT_POLICY wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from pathlib import Path
from typing import Any, List, Optional

import typer

from ablate.config import complete_overrides
from ablate.record import DEV_BLEU, TEST_BLEU, TOKENS_PER_SEC, RunFiles
from ablate.utils.commands import LazyGroup, PlainFlagsCommand, fail, plugins_option, trust_plugins_option, typer_app


class Commands(LazyGroup):
    """``ablate``'s commands: ``train`` and ``attention`` here, the others imported from their layer when run."""

    lazy = {
        "bench": (
            "ablate.bench.runner",
            "Benchmark every attention variant against torch.nn.Transformer: training and decoding speed, attention "
            "memory, the data stage and start-up; prints tables and ratios (interleaved medians).",
        ),
        "translate": (
            "ablate.inference.commands",
            "Translate text with a trained run: one source sentence per line in, one translation per line out.",
        ),
        "evaluate": (
            "ablate.inference.commands",
            "Score a trained run on any test set (sacreBLEU BLEU and chrF, with their signatures).",
        ),
        "export-model": (
            "ablate.inference.commands",
            "Write a trained model as one TorchScript file (greedy decoding, tokenizers and config inside) that "
            "`torch.jit.load` runs without ablate.",
        ),
        "sync": (
            "ablate.inference.commands",
            "Upload every trial's offline W&B run (`wandb sync`), skipping those already uploaded.",
        ),
        "sweep": (
            "ablate.sweep.commands",
            "Run W&B-format sweeps locally, or through W&B agents across machines.",
        ),
        "table": (
            "ablate.report.commands",
            "Paper-style ablation table (Vaswani et al. 2017, Table 3): base row first, changes only.",
        ),
        "calibrate": (
            "ablate.report.commands",
            "False-positive rate and power of the table's significance test on real runs: relabelled multi-row "
            "tables of one row's seeds (--like: another table's own design), k-vs-k splits (seed-aware beside sentence-only, measured power beside the "
            "predicted) and relabelled seed pairs (see results/calibration-cpu).",
        ),
        "power": (
            "ablate.report.commands",
            "Before a sweep runs: the minimum detectable effect of its table and the seeds per row a Δ of 1, 2, 3 BLEU "
            'needs, with the table\'s own σ and with `ablate table --sigma-from` (docs/reports.md, "Planning a sweep").',
        ),
        "export": (
            "ablate.report.commands",
            "Ship a sweep as a results folder that `ablate table RESULTS_DIR` rebuilds the table from.",
        ),
        "plot": (
            "ablate.report.commands",
            "Figures: test BLEU (or --metric) per variant, Δ and 95% CI per comparison, the score vs tokens/s and "
            "parameters, learning curves, Δ vs the base per training step, BLEU by length.",
        ),
        "score": (
            "ablate.report.commands",
            "Add a metric to finished runs from their saved hypotheses, without retraining: writes test_<split>/NAME, "
            "test/NAME, val/NAME and NAME_signature into each run's summary.json (what it already records is kept).",
        ),
        "report": (
            "ablate.report.commands",
            "Publish a W&B Report: the paper-style table and panels (BLEU bars, BLEU vs tokens/s, curves).",
        ),
    }


app = typer_app(
    cls=Commands,
    help="Ablation studies for encoder-decoder Transformers in machine translation.",
    no_args_is_help=True,
)


def _or_nan(value) -> float:
    return float("nan") if value is None else float(value)


def _show_version(value: bool) -> None:
    if value:
        from ablate.utils.provenance import version_of

        typer.echo(f"ablate {version_of('ablate') or 'unknown (not installed)'}")  # None: a checkout not installed
        raise typer.Exit()


@app.callback()
def _main(
    show_version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Status messages: warnings only."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Status messages: debug detail too."),
) -> None:
    """Ablation studies for encoder-decoder Transformers in machine translation."""
    from ablate.utils import commands

    commands.setup_logging(commands.verbosity_of(quiet, verbose))  # status on stderr, rank zero; results on stdout
    commands.ignore_warnings()


class ConfigKeysHelp(PlainFlagsCommand):
    """``--help`` that ends with every config key: its type or choices, default and one-line doc."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from ablate.config import describe_keys

        rows = [
            f"{key} ({kind}, default {default}): {doc}" if doc else f"{key} ({kind}, default {default})"
            for key, kind, default, doc in describe_keys()
        ]
        self.epilog = "Config keys (set as key=value, or in --config YAML):\n\n" + "\n\n".join(rows)
        super().format_help(ctx, formatter)


@app.command(cls=ConfigKeysHelp, context_settings={"allow_extra_args": False})
def train(
    overrides: Optional[List[str]] = typer.Argument(
        None,
        help="Config overrides as dotted key=value, e.g. model.heads=8 train.max_time=600.",
        autocompletion=complete_overrides,
    ),
    config: Optional[Path] = typer.Option(
        None, "--config", "-c", help="YAML file of config keys (nested or dotted), applied before overrides."
    ),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="Where the run is written (default runs/<name>)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Delete an existing run dir and train from scratch."),
    resume: bool = typer.Option(
        False, "--resume", help="Require an existing run to resume (running the same command resumes anyway)."
    ),
    print_config: bool = typer.Option(False, "--print-config", help="Print the resolved config as YAML and exit."),
) -> None:
    """Train one model, decode the test sets, and record BLEU and throughput (W&B + summary.json)."""
    if resume and overwrite:
        fail("--resume continues the run in --run-dir and --overwrite deletes it: pass one of them")
    import yaml

    from ablate.config import load_config, to_dict
    from ablate.sweep.spec import expand_variant

    cfg = load_config(config, expand_variant(overrides or []))  # a W&B sweep agent passes `variant=...`
    if print_config:
        typer.echo(yaml.safe_dump(to_dict(cfg), sort_keys=False))
        return
    from ablate.training.run_folder import RESUME_ORDER, default_run_dir, has_checkpoint
    from ablate.training.train import RunError, train as run_training

    target = run_dir or default_run_dir(cfg)
    files = RunFiles(target)
    if resume and not has_checkpoint(target):  # what a plain rerun resumes from, a damaged last.ckpt's fallbacks too
        names = f"{', '.join(RESUME_ORDER[:-1])} or {RESUME_ORDER[-1]}"
        fail(f"nothing to resume in {target} (no {names} in {files.checkpoints.relative_to(target)})")
    try:
        summary = run_training(cfg, target, overwrite=overwrite)
    except RunError as err:
        fail(f"training failed: {err} (see {files.summary})", code=1)
    except KeyboardInterrupt:
        again = f"resume from {files.checkpoints}" if has_checkpoint(target) else "start over (no checkpoint yet)"
        fail(f"interrupted; run the same command again to {again}", code=130)
    if summary.get(TEST_BLEU.key) is not None:
        typer.echo(
            f"test BLEU {summary[TEST_BLEU.key]:.2f} | val BLEU {_or_nan(summary.get(DEV_BLEU.key)):.2f} | "
            f"{_or_nan(summary.get(TOKENS_PER_SEC.key)):,.0f} train tokens/s | "
            f"{summary.get('step')} steps | {files.summary}"
        )


@app.command()
def attention(
    run_dir: Path = typer.Argument(..., help="A run directory written by `ablate train`."),
    text: str = typer.Option(..., "--text", "-t", help="Source sentence to translate and visualise."),
    out: Path = typer.Option(Path("attention"), "--out", "-o", help="Folder for the PNG files."),
    beam: Optional[int] = typer.Option(
        None, "--beam", help="Beam size used to produce the translation (default: the run's eval.beam)."
    ),
    plugins: Optional[List[str]] = plugins_option(),
    trust_plugins: bool = trust_plugins_option(),
) -> None:
    """Heatmaps of every attention layer and head for one sentence, and the positional encodings."""
    from ablate.report.attention_maps import plot_attention

    for path in plot_attention(run_dir, text, out, beam, plugins=plugins or [], trust_plugins=trust_plugins):
        typer.echo(str(path))


def main() -> None:
    """Entry point of the ``ablate`` console script."""
    app()
