"""A W&B Report of one sweep (``wandb-workspaces``: ``wandb_workspaces.reports.v2``).

The report holds the paper-style table as a Markdown block (the same text as
``ablate table --format md``) and a panel grid over the sweep's runs (the W&B group):

* test BLEU by configuration: bars grouped by variant, mean ± std over seeds;
* test BLEU against training tokens/s: one point per run;
* learning curves: validation BLEU against ``trainer/global_step``, mean ± std per variant.

:func:`build_report` touches no network; only ``Report.save`` (in :func:`publish`) does.
:func:`offline_spec` serialises what ``save`` would send, without a login (``ablate report --dry-run``).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from ablate.record import DEV_BLEU, TEST_BLEU, TOKENS_PER_SEC
from ablate.report.aggregate import Sweep
from ablate.report.formats import to_markdown
from ablate.report.records import ReportError
from ablate.report.table import Table

STEP_KEY = "trainer/global_step"
"""History x axis: Lightning's ``WandbLogger`` logs the optimizer step under this key."""


def _workspaces():
    try:
        import wandb_workspaces.reports.v2 as wr
    except ImportError:  # pragma: no cover - a declared dependency
        raise ReportError("W&B reports need the wandb-workspaces package: pip install wandb-workspaces") from None
    return wr


def group_keys(sweep: Sweep) -> list[str]:
    """W&B group-by keys that separate the table's rows: the variant (a name in every run's config: local,
    SLURM and agent runs alike), else the varying keys."""
    if sweep.uses_variants:
        return ["config.variant"]
    return [f"config.{k}" for k in sweep.keys]


def heading(sweep: Sweep, beside: Optional[str] = None) -> str:
    """The heading above the table: the sweep's name, and the published table it stands beside."""
    return f"Results of {sweep.name or 'the sweep'}" + (f", beside {beside}" if beside else "")


def build_report(
    entity: str,
    project: str,
    group: Optional[str],
    table: Table,
    sweep: Sweep,
    title: Optional[str] = None,
    beside: Optional[str] = None,
) -> Any:
    """The ``wandb_workspaces.reports.v2.Report`` for one sweep, not yet saved.

    Args:
        entity, project: where the runs are (and where the report is saved).
        group: the W&B run group of the sweep; None reports every run of the project.
        table: the laid-out table (rendered into a Markdown block).
        sweep: the aggregated sweep (for the test splits and the group-by keys).
        title: report title (default: the table's title).
        beside: the published table the sweep is read against (a reference's title, e.g.
            ``Vaswani et al. (2017), Table 3``), named in the results heading; None names none.
    """
    wr = _workspaces()
    splits = sweep.test_splits
    test_keys = [TEST_BLEU.split_key(s) for s in splits] or [TEST_BLEU.key]
    keys = group_keys(sweep)
    one_key = keys[0] if len(keys) == 1 else None
    runset = wr.Runset(
        entity=entity,
        project=project,
        name=group or project,
        filters=f"Group = '{group}'" if group else "",
        groupby=keys,
    )
    panels = [
        wr.BarPlot(
            title="Test BLEU by variant (mean ± std over seeds)",
            metrics=[wr.SummaryMetric(k) for k in test_keys],
            groupby=one_key,
            groupby_aggfunc="mean",
            groupby_rangefunc="stddev",
            title_y="BLEU",
            layout=wr.Layout(x=0, y=0, w=12, h=8),
        ),
        wr.ScatterPlot(
            title="Test BLEU vs training tokens/s",
            x=wr.SummaryMetric(TOKENS_PER_SEC.key),
            y=wr.SummaryMetric(test_keys[0]),
            layout=wr.Layout(x=12, y=0, w=12, h=8),
        ),
        wr.LinePlot(
            title="Learning curves: validation BLEU (mean ± std over seeds)",
            x=STEP_KEY,
            y=[DEV_BLEU.key],
            groupby=one_key,
            groupby_aggfunc="mean",
            groupby_rangefunc="stddev",
            title_x="step",
            title_y="validation BLEU",
            layout=wr.Layout(x=0, y=8, w=24, h=9),
        ),
    ]
    what = f"group `{group}` of {entity}/{project}" if group else f"{entity}/{project}"
    blocks = [
        wr.P(
            f"Ablation sweep: {what}. {len(sweep.rows)} configurations, "
            f"{sum(len(r.trials) for r in sweep.rows)} finished runs, {len(sweep.unfinished)} unfinished."
        ),
        wr.H2(heading(sweep, beside)),
        wr.MarkdownBlock(to_markdown(table)),
        wr.H2("Panels"),
        wr.PanelGrid(runsets=[runset], panels=panels),
    ]
    return wr.Report(
        project=project,
        entity=entity,
        title=(title or table.title)[:128],
        description=f"Paper-style ablation table and panels for {what}.",
        blocks=blocks,
    )


def offline_spec(report: Any, draft: bool = False) -> dict[str, Any]:
    """What :func:`publish` would save, built without a W&B login: ``Report.save``'s ``upsertView``
    request (``entityName``, ``projectName``, ``displayName``, ``description``, ``type`` and ``spec``,
    the blocks with their panels and runsets as W&B's report format has them).

    The one thing only W&B knows, each runset's internal project id, is left out (W&B looks it up when
    the report is saved); everything else is the payload ``save`` sends.
    """
    with _no_project_lookup():
        model = report._to_model()
    return {
        "entityName": model.project.entity_name,
        "projectName": model.project.name,
        "displayName": model.display_name,
        "description": model.description,
        "type": "runs/draft" if draft else "runs",
        "spec": json.loads(model.spec.model_dump_json(by_alias=True, exclude_none=True)),
    }


@contextmanager
def _no_project_lookup() -> Iterator[None]:
    """``wandb_workspaces`` answering its runset project-id lookup offline (with no id) and refusing any
    other call to W&B in one line, while a report is serialised."""
    import wandb_workspaces.reports.v2.gql as gql
    import wandb_workspaces.reports.v2.interface as interface

    def lookup(api: Any, query: Any, variables: dict[str, Any]) -> dict[str, Any]:
        if query is not gql.projectInternalId:
            raise ReportError("serialising the W&B report offline needed W&B; publish it with a wandb: source")
        return {"project": {"internalId": None, "name": variables.get("projectName")}}

    saved = interface._get_api, interface.execute_graphql
    interface._get_api, interface.execute_graphql = (lambda: None), lookup
    try:
        yield
    finally:
        interface._get_api, interface.execute_graphql = saved


def publish(report: Any, draft: bool = False) -> str:
    """Save ``report`` to W&B (needs the network and a login); return its URL."""
    try:
        saved = report.save(draft=draft)
    except Exception as err:  # noqa: BLE001 - network, auth and server errors all end the command
        raise ReportError(f"could not save the W&B report: {' '.join(str(err).split())[:300]}") from None
    try:
        return str(saved.url)
    except Exception:  # noqa: BLE001 - the URL needs the API; the report is saved regardless
        return f"(saved report id {getattr(saved, 'id', '?')})"
