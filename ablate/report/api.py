"""The report as plain functions: load a sweep, lay out its table, write its figures, build its W&B Report.

:mod:`ablate.report.commands` (the ``table``, ``plot``, ``report`` and ``export`` commands) and
:mod:`ablate.report.export` call these; so can a notebook.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from ablate.report.aggregate import Sweep, aggregate
from ablate.report.formats import render
from ablate.report.metric_values import DEFAULT_METRIC, with_metric
from ablate.report.records import WANDB_PREFIX, ReportError, collect, parse_wandb_path
from ablate.report.significance import DEFAULT_TEST, Comparison, compare
from ablate.report.table import Table, build_table
from ablate.utils.io import check_apart, output_files


def local_folders(source: str) -> list[Path]:
    """The folder a source names, when it names one (a W&B source does not): what an output must stay apart from."""
    return [] if source.startswith(WANDB_PREFIX) else [Path(source)]


def load(source: str, api: Any = None, metric: str = DEFAULT_METRIC) -> Sweep:
    """Collect and aggregate the trials of ``source`` (``api``: a ``wandb.Api`` stand-in), each with
    ``metric`` scored from its saved hypotheses where its summary lacks it."""
    return aggregate(with_metric(collect(source, api=api), metric))


def load_pooled(sources: Sequence[str], api: Any = None, metric: str = DEFAULT_METRIC) -> Sweep:
    """:func:`load` of several sources as one sweep: their trials pooled, so the seeds of one
    configuration trained by two sweeps (``calibration-cpu`` and ``calibration-cpu-17-32``) form one row."""
    return aggregate([trial for source in sources for trial in with_metric(collect(source, api=api), metric)])


def significance(
    sweep: Sweep, enabled: bool = True, test: str = DEFAULT_TEST, samples: int = 0, metric: str = DEFAULT_METRIC
) -> list[Comparison]:
    """The table's comparisons (named by the sweep, else against the base) on ``metric``, Holm-adjusted;
    none when disabled."""
    return compare(sweep, test=test, n_samples=samples, metric=metric) if enabled else []


def sweep_and_table(
    source: str,
    alpha: float = 0.05,
    test: str = DEFAULT_TEST,
    samples: int = 0,
    with_significance: bool = True,
    api: Any = None,
    by_length: bool = False,
    metric: str = DEFAULT_METRIC,
) -> tuple[Sweep, Table]:
    """The aggregated sweep of ``source`` and its laid-out table (see :func:`table_of`)."""
    sweep = load(source, api, metric)
    comps = significance(sweep, with_significance, test, samples, metric)
    extra = None
    if by_length:
        from ablate.report.lengths import bleu_by_length

        lengths = bleu_by_length(sweep)
        if lengths is None:
            raise ReportError(f"--by-length needs saved hypotheses (hyps/<split>.txt), and {source} has none")
        extra = (lengths.columns(), lengths.row_stats(), lengths.note())
    return sweep, build_table(sweep, comps, alpha, test, samples, extra, metric)


def table_of(
    source: str,
    alpha: float = 0.05,
    test: str = DEFAULT_TEST,
    samples: int = 0,
    with_significance: bool = True,
    api: Any = None,
    by_length: bool = False,
    metric: str = DEFAULT_METRIC,
) -> Table:
    """The laid-out table of ``source`` on ``metric`` (BLEU by default), significance included unless
    disabled, and BLEU per source-length bucket as columns with ``by_length``."""
    return sweep_and_table(source, alpha, test, samples, with_significance, api, by_length, metric)[1]


def make_table(
    source: str,
    fmt: str = "md",
    alpha: float = 0.05,
    test: str = DEFAULT_TEST,
    samples: int = 0,
    with_significance: bool = True,
    api: Any = None,
    by_length: bool = False,
    metric: str = DEFAULT_METRIC,
) -> str:
    """The paper-style table of ``source`` on ``metric`` as text in ``fmt`` (rich, md, latex or csv)."""
    return render(table_of(source, alpha, test, samples, with_significance, api, by_length, metric), fmt)


def make_plots(
    source: str,
    out: Path,
    alpha: float = 0.05,
    with_significance: bool = True,
    api: Any = None,
    fmt: str = "png",
    metric: str = DEFAULT_METRIC,
) -> list[Path]:
    """Write the sweep's figures (``fmt``: png, pdf or svg; test scores on ``metric``) into ``out``; return their paths.

    The figures are drawn into a temporary folder and moved into ``out`` once all are drawn
    (:func:`~ablate.utils.io.output_files`): an error or Ctrl-C leaves ``out`` as it was.
    Other files in ``out`` are kept; ``out`` must not be (or lie inside, or contain) the sweep folder.
    """
    from ablate.report.plots import plot_all

    out = Path(out)
    local = local_folders(source)
    check_apart(out, local)  # before any work
    sweep = load(source, api, metric)
    comps = significance(sweep, with_significance, metric=metric)
    with output_files(out, local) as tmp:
        drawn = plot_all(sweep, tmp, comps, alpha, fmt, metric)
    return [out / p.name for p in drawn]


def recorded_place(sweep: Sweep) -> tuple[str, str, Optional[str]]:
    """``(entity, project, group)`` the sweep's runs recorded (``tracking.*`` of their configs); an entity
    never set is ``""`` (W&B's default entity, known only online)."""
    for row in sweep.rows:
        for t in row.trials:
            config = t.summary.to_json().get("config") if t.summary is not None else None
            tracking = config.get("tracking") if isinstance(config, dict) else None
            if isinstance(tracking, dict) and tracking.get("project"):
                return str(tracking.get("entity") or ""), str(tracking["project"]), tracking.get("group")
    raise ReportError(
        "no run of this sweep records a W&B project (tracking.project): use wandb:<entity>/<project>/<group>"
    )


def make_report(
    source: str,
    title: Optional[str] = None,
    alpha: float = 0.05,
    test: str = DEFAULT_TEST,
    samples: int = 0,
    with_significance: bool = True,
    api: Any = None,
    reference: Optional[str] = None,
) -> Any:
    """The (unsaved) W&B Report of a ``wandb:<entity>/<project>[/<group>]`` source, or of a sweep folder
    (for the W&B project and group its runs recorded, :func:`recorded_place`); ``reference`` names
    the published table (:mod:`ablate.report.reference`) its results heading cites."""
    from ablate.report.papers import get as get_reference
    from ablate.report.wandb_report import build_report

    beside = get_reference(reference).title if reference else None  # a wrong name fails before any work
    sweep = load(source, api)
    if source.startswith(WANDB_PREFIX):
        entity, project, group = parse_wandb_path(source[len(WANDB_PREFIX) :])
    else:
        entity, project, group = recorded_place(sweep)
    table = build_table(sweep, significance(sweep, with_significance, test, samples), alpha, test, samples)
    return build_report(entity, project, group, table, sweep, title, beside)
