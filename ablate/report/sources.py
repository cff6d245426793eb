"""What a source (a sweep folder, a results folder, ``wandb:...``) gives: its sweep, table, figures and W&B Report."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional, Sequence

from ablate.metrics import flush_index
from ablate.record import RunStatus
from ablate.report.layout import Table, bleu_by_length, build_table
from ablate.report.render import render, rich_width, to_rich
from ablate.report.stats import (
    DEFAULT_TEST,
    Sweep,
    aggregate,
    lent_for_plan,
    table_comparisons,
)
from ablate.report.trials import DEFAULT_METRIC, WANDB_PREFIX, ReportError, local_folders, parse_wandb_path
from ablate.utils.io import check_apart, output_files


class TableResult:
    """A sweep's paper-style table (``.table``, built from ``.sweep``): ``.df`` (pandas), ``.render(fmt)``,
    and a rich/HTML view in notebooks."""

    def __init__(self, sweep: Sweep, table: Table):
        self.sweep, self.table = sweep, table

    def render(self, fmt: str = "md") -> str:
        """The table as ``ablate table --format`` prints it: ``rich``, ``md``, ``latex`` or ``csv``."""
        return render(self.table, fmt)

    def to_pandas(self) -> Any:
        """One row per table row (``group``, ``name``, the varied keys, per metric ``.mean``/``.std``/``.n``
        and the base comparison's ``.p``, ``.delta``, ...; named pairs without the base, ``vs`` naming their
        reference; unfinished trials last): the CSV format as a DataFrame."""
        import pandas as pd

        return pd.read_csv(io.StringIO(self.render("csv")), keep_default_na=False, na_values=[""])

    df = property(to_pandas)

    def __rich__(self) -> Any:
        return to_rich(self.table)

    def _repr_html_(self) -> str:
        from rich.console import Console

        console = Console(record=True, file=io.StringIO(), width=max(rich_width(self.table), 80))  # cells whole
        console.print(self.__rich__())
        return console.export_html(inline_styles=True, code_format="<pre style='font-size:12px'>{code}</pre>")

    def __str__(self) -> str:
        return self.render("md")

    _repr_markdown_ = __str__

    def __repr__(self) -> str:
        return (
            f"TableResult({self.table.title!r}: {len(self.table.rows)} rows, {len(self.table.unfinished)} unfinished)"
        )


def source_name(source: Any) -> str:
    """A source as the commands take it: a folder or ``wandb:...`` as text, a ``SweepRun`` as its ``out`` folder."""
    return str(getattr(source, "out", source))


def table(
    source: Any,
    *,
    alpha: float = 0.05,
    test: Optional[str] = None,
    samples: int = 0,
    significance: bool = True,
    by_length: bool = False,
    metric: str = DEFAULT_METRIC,
    api: Any = None,
    sigma_from: Optional[str] = None,
) -> TableResult:
    """The table ``ablate table SOURCE`` prints, as an object (see :class:`TableResult`); the options are
    ``ablate table``'s.

    Args:
        source: a sweep folder, a results folder, ``wandb:<entity>/<project>/<group>``, or a ``SweepRun``.
        test: the significance test (default: ``seeds``); ``samples``: its resamples (0: its default).
        api: a ``wandb.Api`` stand-in, for a W&B source.
        sigma_from: another source's seeds of the base configuration, pooled into the seed σ
            (:func:`ablate.report.stats.borrow_noise`): how a table of few seeds gets a σ with enough df.
    """
    source, test = source_name(source), test or DEFAULT_TEST
    sweep, comps = table_comparisons(source, test, samples, significance, metric, sigma_from, api, alpha=alpha)
    lengths = bleu_by_length(sweep) if by_length else None
    if by_length and lengths is None:
        raise ReportError(f"--by-length needs saved hypotheses (hyps/<split>.txt), and {source} has none")
    result = TableResult(sweep, build_table(sweep, comps, alpha, test, samples, lengths, metric))
    flush_index()  # the saved texts' digests, for the next table's statistics (a process may live on)
    return result


def make_plots(
    source: Any,
    out: Path,
    alpha: float = 0.05,
    significance: bool = True,
    api: Any = None,
    fmt: str = "png",
    metric: str = DEFAULT_METRIC,
    sigma_from: Optional[str] = None,
    test: Optional[str] = None,
    samples: int = 0,
) -> list[Path]:
    """Write the figures of ``source`` (what :func:`table` takes; ``fmt``: png, pdf or svg; test scores on ``metric``)
    into ``out``, all or none (other files in ``out`` kept); return their paths. ``test``, ``samples`` and
    ``sigma_from``: as :func:`table` takes them, so the CIs and † drawn are ``ablate table SOURCE``'s with them."""
    from ablate.report.figures import plot_all

    source, out = source_name(source), Path(out)
    local = local_folders(source, sigma_from)  # read, never written
    check_apart(out, local)  # before any work
    sweep, comps = table_comparisons(
        source, test or DEFAULT_TEST, samples, significance, metric, sigma_from, api, alpha=alpha
    )
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
    source: Any,
    title: Optional[str] = None,
    alpha: float = 0.05,
    test: str = DEFAULT_TEST,
    samples: int = 0,
    significance: bool = True,
    api: Any = None,
    reference: Optional[str] = None,
    sigma_from: Optional[str] = None,
) -> Any:
    """The (unsaved) W&B Report of a ``wandb:<entity>/<project>[/<group>]`` source, or of a sweep folder (a path
    or a ``SweepRun``; for the W&B project and group its runs recorded, :func:`recorded_place`); ``reference`` names
    the published table (:mod:`ablate.report.papers`) its results heading cites; ``sigma_from`` as
    :func:`table` takes it, so the report's table is ``ablate table SOURCE --sigma-from``'s."""
    from ablate.report.export import build_report
    from ablate.report.papers import get as get_reference

    beside = get_reference(reference).title if reference else None  # a wrong name fails before any work
    source = source_name(source)
    made = table(
        source, alpha=alpha, test=test, samples=samples, significance=significance, api=api, sigma_from=sigma_from
    )
    if source.startswith(WANDB_PREFIX):
        entity, project, group = parse_wandb_path(source[len(WANDB_PREFIX) :])
    else:
        entity, project, group = recorded_place(made.sweep)
    return build_report(entity, project, group, made.table, made.sweep, title, beside)


def sweep_power(
    file: Path,
    sigma_from: str,
    overrides: Sequence[str] = (),
    config: Optional[Path] = None,
    alpha: float = 0.05,
    api: Any = None,
) -> list[str]:
    """What the table of the sweep ``file`` (with ``overrides`` and ``config`` as ``ablate sweep run`` takes them)
    can find before it runs, planned with the seed σ of ``sigma_from``'s seeds of its base configuration
    (:func:`ablate.report.calibration.plan_lines`): its planned trials read as finished runs give the table's
    rows, seeds and comparisons; the base's config must be the source's (:func:`ablate.report.stats.lent_for_plan`)."""
    from ablate.config import load_config, to_dict
    from ablate.report.calibration import plan_lines
    from ablate.report.trials import from_summary, sweep_facts
    from ablate.sweep.planner import Planner, launch_options

    spec, opts = launch_options(Path(file), list(overrides), None, config=config)
    if spec.method == "bayes":
        raise ReportError(f"{file}: a bayes sweep proposes its configurations as results arrive; no table to plan")
    planner = Planner(spec, opts)
    trials = []
    for t in planner.preview():
        if t.status == RunStatus.FAILED:
            raise ReportError(f"{file}: trial {t.name} is invalid ({t.error}); fix the sweep before planning it")
        cfg = load_config(opts.config, planner.overrides(t))  # valid: preview checked every trial
        record = {"status": RunStatus.FINISHED, "config": to_dict(cfg), "variant": t.point.get("variant"),
                  "sweep": {"name": spec.name, "params": t.point}, "resolved": {}}  # fmt: skip
        # resolved: {} (d_k, peak lr): the design needs none, and deriving them imports the model (torch)
        trials.append(replace(from_summary(t.name, record), **sweep_facts(t.point)))
    sweep = aggregate(trials)
    lent = lent_for_plan(sigma_from, sweep.base.trials[0].config, api)
    return plan_lines(sweep, Path(file).stem, lent, alpha)
