"""The W&B source and the W&B Report, through stand-ins for the public API (no network)."""

from __future__ import annotations

import json

import pytest
import wandb
import wandb_workspaces.reports.v2 as wr
import wandb_workspaces.reports.v2.interface as interface
from typer.testing import CliRunner

from ablate.report import make_report, table as report_table
from ablate.report.commands import app
from ablate.report.render import FORMATS, render, to_markdown
from ablate.report.trials import ReportError

from tests.helpers.records import SPLITS


@pytest.mark.slow
def test_wandb_source_gives_the_folder_table(variant_sweep, wandb_api):
    local = report_table(str(variant_sweep), samples=400).table  # enough resamples for a p under 0.05 after Holm (x8)
    remote = report_table("wandb:me/ablate/table3", samples=400, api=wandb_api).table
    assert remote == local
    for fmt in FORMATS:
        assert render(remote, fmt) == render(local, fmt)
    assert any("†" in c.mark for r in remote.rows for c in r.cells)  # hypotheses came through too
    assert [str(u).split(":")[0] for u in remote.unfinished] == [
        "B-dk16-s3 (variant B-dk16, seed 3)",
        "E-learned-s3 (variant E-learned, seed 3)",
    ]


def _report(wandb_api, **kwargs):
    return make_report("wandb:me/ablate/table3", samples=100, api=wandb_api, **kwargs)


@pytest.mark.slow
def test_report_holds_the_table_and_three_panels(variant_sweep, wandb_api):
    report = _report(wandb_api)
    assert isinstance(report, wr.Report)
    assert (report.entity, report.project, report.title) == ("me", "ablate", "Ablation: table3")
    kinds = [type(b).__name__ for b in report.blocks]
    assert kinds == ["P", "H2", "MarkdownBlock", "H2", "PanelGrid"]
    markdown = report.blocks[2].text
    assert markdown == to_markdown_of(variant_sweep)
    assert "| base | base |" in markdown and "B-dk16-s3" in markdown and "†" in markdown
    grid = report.blocks[4]
    (runset,) = grid.runsets
    assert (runset.entity, runset.project, runset.filters, runset.groupby) == (
        "me",
        "ablate",
        "Group = 'table3'",
        ["config.variant"],
    )
    bar, scatter, line = grid.panels
    assert isinstance(bar, wr.BarPlot) and isinstance(scatter, wr.ScatterPlot) and isinstance(line, wr.LinePlot)
    assert [m.name for m in bar.metrics] == [f"test_{s}/bleu" for s in sorted(SPLITS)]
    assert (bar.groupby, bar.groupby_aggfunc, bar.groupby_rangefunc) == ("config.variant", "mean", "stddev")
    assert (scatter.x.name, scatter.y.name) == ("train/tokens_per_sec", f"test_{SPLITS[0]}/bleu")
    assert (line.x, line.y, line.groupby_rangefunc) == ("trainer/global_step", ["val/bleu"], "stddev")


def to_markdown_of(folder):
    return to_markdown(report_table(str(folder), samples=100).table)


@pytest.mark.slow
def test_report_spec_serialises_up_to_the_network(wandb_api, monkeypatch):
    """Everything but the GraphQL call: the project-id lookup and ``save`` are stand-ins."""
    calls = []
    monkeypatch.setattr(interface, "_get_api", lambda: None)
    monkeypatch.setattr(interface, "execute_graphql", lambda api, query, variables: {"project": {"internalId": "p1"}})
    report = _report(wandb_api)
    spec = json.loads(report._to_model().spec.model_dump_json(by_alias=True, exclude_none=True))
    types = [b["type"] for b in spec["blocks"]]
    assert "panel-grid" in types and "markdown-block" in types
    grid = next(b for b in spec["blocks"] if b["type"] == "panel-grid")
    runset = grid["metadata"]["runSets"][0]
    assert runset["filters"]["filters"][0]["value"] == "table3"
    assert len(grid["metadata"]["panelBankSectionConfig"]["panels"]) == 3

    def save(self, draft=False, clone=False):
        calls.append((self.title, draft))
        self.id = "r123"
        return self

    monkeypatch.setattr(wr.Report, "save", save)
    monkeypatch.setattr(wr.Report, "url", property(lambda self: f"https://wandb.ai/{self.entity}/reports/{self.id}"))
    monkeypatch.setattr(wandb, "Api", lambda *a, **k: wandb_api)
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)  # a stand-in key: the reader refuses to start without one
    result = CliRunner().invoke(app, ["report", "wandb:me/ablate/table3", "--samples", "100", "--draft"])
    assert result.exit_code == 0, result.output
    assert calls == [("Ablation: table3", True)]
    assert "https://wandb.ai/me/reports/r123" in result.output


def test_report_dry_run_prints_the_outline(wandb_api, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # where the spec goes without --out
    monkeypatch.setattr(wandb, "Api", lambda *a, **k: wandb_api)
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)  # a stand-in key: the reader refuses to start without one
    monkeypatch.setattr(wr.Report, "save", lambda *a, **k: pytest.fail("dry run must not save"))
    result = CliRunner().invoke(app, ["report", "wandb:me/ablate/table3", "--dry-run", "--no-significance"])
    assert result.exit_code == 0, result.output
    assert "PanelGrid: BarPlot(" in result.output and "LinePlot(" in result.output
    assert json.loads((tmp_path / "report-spec.json").read_text())["displayName"] == "Ablation: table3"


def test_report_heading_names_the_sweep_and_its_reference(wandb_api, monkeypatch, tmp_path):
    """The results heading names the sweep and the published table given with ``--reference``, never a
    hard-coded paper."""
    monkeypatch.chdir(tmp_path)  # where the spec goes without --out
    monkeypatch.setattr(wandb, "Api", lambda *a, **k: wandb_api)
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
    monkeypatch.setattr(wr.Report, "save", lambda *a, **k: pytest.fail("dry run must not save"))
    base = ["report", "wandb:me/ablate/table3", "--dry-run", "--no-significance"]
    for extra, heading in (
        ([], "Results of table3"),
        (["--reference", "vaswani2017-table3"], "Results of table3, beside Vaswani et al. (2017), Table 3"),
    ):
        result = CliRunner().invoke(app, [*base, *extra])
        assert result.exit_code == 0, result.output
        headings = [
            line.strip()[len("H2: ") :] for line in result.output.splitlines() if line.strip().startswith("H2:")
        ]
        assert headings == [heading, "Panels"]


def test_report_of_a_folder_is_a_dry_run_only(variant_sweep):
    result = CliRunner().invoke(app, ["report", str(variant_sweep), "--no-significance"])
    assert result.exit_code == 2 and "add --dry-run" in result.output


@pytest.mark.slow
def test_save_failure_is_one_line(wandb_api, monkeypatch):
    from ablate.report.export import publish

    def fail(self, draft=False, clone=False):
        raise ConnectionError("Max retries exceeded\nwith url: api.wandb.ai")

    monkeypatch.setattr(wr.Report, "save", fail)
    with pytest.raises(ReportError, match="could not save the W&B report: Max retries exceeded with url") as err:
        publish(_report(wandb_api))
    assert "\n" not in str(err.value)


def test_report_dry_run_writes_the_full_spec_without_a_login(variant_sweep, tmp_path, monkeypatch):
    """``ablate report DIR --dry-run --out FILE`` writes, with no W&B login, the request publishing would
    save: the title, the blocks (the table as Markdown), the panels and the runset of the sweep's group."""
    from wandb_workspaces.reports.v2 import internal

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setattr(wandb, "Api", lambda *a, **k: pytest.fail("a dry run must not reach W&B"))
    monkeypatch.setattr(wr.Report, "save", lambda *a, **k: pytest.fail("a dry run must not save"))
    out = tmp_path / "spec" / "report.json"
    result = CliRunner().invoke(
        app, ["report", str(variant_sweep), "--dry-run", "--no-significance", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "PanelGrid: BarPlot(" in result.output  # the outline is still printed
    saved = json.loads(out.read_text())
    report = make_report(str(variant_sweep), significance=False)
    assert (saved["entityName"], saved["projectName"], saved["type"]) == (report.entity, report.project, "runs")
    assert saved["displayName"] == report.title and saved["description"] == report.description
    spec = internal.Spec.model_validate(saved["spec"])  # W&B's own report format, as save() sends it
    padding = {"type": "paragraph", "children": [{"text": ""}]}  # W&B's empty first and last paragraphs
    kinds = [b["type"] for b in saved["spec"]["blocks"] if b != padding]
    assert kinds == ["paragraph", "heading", "markdown-block", "heading", "panel-grid"]
    (markdown,) = [b["content"] for b in saved["spec"]["blocks"] if b["type"] == "markdown-block"]
    assert markdown == report.blocks[2].text and "| base |" in markdown
    (grid,) = [b for b in spec.blocks if getattr(b, "type", None) == "panel-grid"]
    (runset,) = [b for b in saved["spec"]["blocks"] if b["type"] == "panel-grid"][0]["metadata"]["runSets"]
    assert json.dumps(runset["filters"]).count('"table3"') == 1  # the sweep's W&B group
    assert [g["name"] for g in runset["grouping"]] == ["variant.value"]  # config.variant, as W&B keys it
    titles = [p.config.chart_title for p in grid.metadata.panel_bank_section_config.panels]
    assert titles == [p.title for p in report.blocks[4].panels]


def test_report_of_runs_without_an_entity_names_the_project_alone(variant_sweep, tmp_path):
    """Runs that never set ``tracking.entity`` (W&B's default entity, known only online): the dry run's outline
    and the report's text name the project, not ``/ablate`` with an empty entity before the slash."""
    result = CliRunner().invoke(
        app, ["report", str(variant_sweep), "--dry-run", "--no-significance", "--out", str(tmp_path / "r.json")]
    )
    assert result.exit_code == 0, result.output
    assert "project ablate: Ablation: table3" in result.output.splitlines()  # the outline's head
    report = make_report(str(variant_sweep), significance=False)
    assert report.description == "Paper-style ablation table and panels for group `table3` of project ablate."
    assert " /ablate" not in report.blocks[0].text


def test_report_out_needs_the_dry_run(variant_sweep, tmp_path):
    result = CliRunner().invoke(app, ["report", "wandb:me/ablate/table3", "--out", str(tmp_path / "r.json")])
    assert result.exit_code != 0 and "add --dry-run" in result.output and not (tmp_path / "r.json").exists()


def test_a_report_title_longer_than_w_and_b_takes_is_refused_not_cut(variant_sweep, tmp_path):
    """``--title`` of 129 characters was cut to W&B's 128 without a word; 128 is the report's own limit."""
    spec = tmp_path / "r.json"
    args = ["report", str(variant_sweep), "--dry-run", "--no-significance", "--out", str(spec), "--title"]
    result = CliRunner().invoke(app, [*args, "t" * 129])
    assert result.exit_code == 2 and len(result.output.splitlines()) == 1, result.output
    assert "--title has 129 characters; a W&B report title holds at most 128" in result.output
    assert not spec.exists()
    result = CliRunner().invoke(app, [*args, "t" * 128])
    assert result.exit_code == 0, result.output
    assert "t" * 128 in spec.read_text()


@pytest.mark.parametrize("group", ["it's-a1b2c3", "lr=1e-3", 'a"b\\c', "x<y>z and w", "Config('x') within_last 5 days"])
def test_the_runset_filter_selects_exactly_the_group_whatever_its_characters(variant_sweep, group):
    """A group with ``'`` made ``Group = 'it's'``, a filter W&B's expression parser refuses (SyntaxError when the
    report is serialised); with ``=``, ``<`` or ``>`` it selected another group (the parser rewrites ``=`` to
    ``==`` inside the quotes: 'lr==1e-3'). The filter string, parsed as W&B parses it, is the group's name."""
    from wandb_workspaces import expr

    from ablate.report.export import build_report

    result = report_table(str(variant_sweep), significance=False)
    report = build_report("me", "ablate", group, result.table, result.sweep)
    (runset,) = report.blocks[4].runsets
    (clause,) = expr.filters_tree_to_v2(expr.expr_to_filters(runset.filters))["filters"]
    assert (clause["key"], clause["op"], clause["value"]) == ({"section": "run", "name": "group"}, "=", group)
