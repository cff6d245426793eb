"""``ablate table wandb:...`` over runs a W&B sweep agent started.

Such a run's config holds the sweep's ``variant`` parameter as W&B stores it: the whole mapping
``{name: A-heads1, model.heads: 1}``. Reading it used to crash the aggregation
(``TypeError: unhashable type: 'dict'``)."""

from __future__ import annotations

import pytest

from ablate.report import table as report_table

from tests.helpers.records import VARIANTS, FakeApi, make_variant_sweep


def _agent_shaped(api: FakeApi) -> FakeApi:
    for run in api._runs:
        name = run.config.get("variant")
        overrides, _ = VARIANTS[name]
        run.config["variant"] = {"name": name, **overrides} if overrides else name
        run.summary.pop("variant", None)
    return api


@pytest.mark.slow
def test_table_of_agent_shaped_runs(tmp_path):
    root = make_variant_sweep(tmp_path / "table3")
    table = report_table("wandb:me/ablate/table3", api=_agent_shaped(FakeApi(root))).render("csv")
    assert all(name in table for name in ("A-heads1", "A-heads8", "B-dk16", "E-learned"))
    assert table == report_table(str(root)).render("csv")
