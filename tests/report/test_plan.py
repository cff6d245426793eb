"""Named comparisons: a sweep's ``comparisons`` decide which rows the table tests, Holm over them."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from ablate.report import table as report_table
from ablate.report.render import render
from ablate.report.stats import aggregate, compare, planned_pairs
from ablate.report.trials import ReportError, collect, from_summary

from tests.helpers.records import _corrupt, references, trial_summary, write_trial

COMPARISONS = [
    {"between": "model.attention.score", "values": ["dot", "additive"]},
    {"between": "model.attention.scale", "values": [True, False]},
]
BASE = {"model.attention.score": "dot", "model.attention.scale": True, "model.d_k": 32}  # a full grid names its base


def _rate(score: str, scale: bool, d_k: int) -> float:
    return 0.2 + (0.2 if score == "additive" else 0.0) + (0.0 if scale else 0.05) + d_k / 1000


@pytest.fixture(scope="module")
def scoring_sweep(tmp_path_factory) -> Path:
    """score x scale x d_k x 2 seeds, with the comparisons and the declared base of sweeps/scoring.yaml in sweep.json."""
    root = tmp_path_factory.mktemp("sweeps") / "scoring"
    refs = {"test_2016_flickr": references()["test_2016_flickr"]}
    vocab = [f"w{i}" for i in range(300)]
    state = []
    for score, scale, d_k, seed in itertools.product(["dot", "additive"], [True, False], [32, 64], [1, 2]):
        point = {"model.attention.score": score, "model.attention.scale": scale, "model.d_k": d_k}
        name = f"{score}-{scale}-{d_k}-s{seed}"
        summary = trial_summary(name, None, point, seed, 20.0, 1_000_000, point, "scoring")
        rate = _rate(score, scale, d_k)
        hyps = {"test_2016_flickr": _corrupt(refs["test_2016_flickr"], rate, random.Random(name), vocab)}
        write_trial(root, name, summary, hyps, refs)
        state.append({"name": name, "point": {**point, "seed": seed, "comparisons": COMPARISONS, "base": BASE}})
    (root / "sweep.json").write_text(json.dumps({"name": "scoring", "trials": state}))
    return root


def test_the_sweep_names_the_pairs_it_compares(scoring_sweep):
    sweep = aggregate(collect(str(scoring_sweep)))
    assert sweep.comparisons == [(c["between"], c["values"]) for c in COMPARISONS]
    rows = {r.name: r.config for r in sweep.rows}
    pairs = planned_pairs(sweep)
    assert len(pairs) == 8  # score: 2 d_k x 2 scalings; scale: 2 scores x 2 d_k
    for ref, other in pairs:
        a, b = rows[ref], rows[other]
        differ = {k for k in a if a[k] != b[k]}
        assert len(differ) == 1  # all else equal
        key = differ.pop()
        assert (a[key], b[key]) in {("dot", "additive"), (True, False)}  # the reference value first


def test_table_lists_the_named_comparisons_with_holm(scoring_sweep):
    found = compare(aggregate(collect(str(scoring_sweep))), n_samples=300)
    assert len(found) == 8 and all(c.p_adjusted >= c.p_value for c in found)
    table = report_table(str(scoring_sweep), samples=300).table
    assert len(table.comparisons) == 8
    md = render(table, "md")
    assert "Holm-Bonferroni over all 8 comparisons" in md
    assert "named comparisons: model.attention.score (dot as reference vs additive) with all else equal" in md
    # a cell is marked only for a named comparison whose reference is the base; the others are only listed
    sweep = aggregate(collect(str(scoring_sweep)))
    vs_base = {c.row for c in found if c.reference == sweep.base.name and c.significant(0.05)}
    assert {r.name for r in table.rows if any(c.mark for c in r.cells)} == vs_base and vs_base
    line = next(x for x in table.comparisons if x.startswith("score additive vs dot at d_k=32, d_v=32, scale=true"))
    assert "ΔBLEU -" in line and "Holm p" in line and line.endswith("†")  # additive is worse by construction
    assert sum(x.startswith("scale false vs true at ") for x in table.comparisons) == 4


def test_wandb_runs_carry_the_comparisons_in_their_config():
    trial = from_summary("r", {"status": "finished"}, config={"model.heads": 4, "comparisons": COMPARISONS})
    assert trial.comparisons == COMPARISONS and "comparisons" not in trial.config


def test_malformed_comparisons_are_a_one_line_report_error():
    trial = from_summary("r", {"status": "finished", "test/bleu": 1.0}, config={"comparisons": [{"vs": "x"}]})
    with pytest.raises(ReportError, match="between"):
        aggregate([trial])


def test_with_named_comparisons_the_cells_still_mark_rows_that_differ_from_the_base(variant_sweep, tmp_path):
    """A † in a cell always means "against the base"; a pair of two other rows is only listed below."""
    import shutil

    root = tmp_path / "named"
    shutil.copytree(variant_sweep, root)
    named = [
        {"between": "variant", "values": ["base", "A-heads1", "E-learned"]},
        {"between": "variant", "values": ["A-heads1", "A-heads8"]},
    ]
    trials = []
    for path in sorted(root.glob("*/summary.json")):
        summary = json.loads(path.read_text())
        variant = summary.get("variant") or path.parent.name.rsplit("-s", 1)[0]
        trials.append({"name": path.parent.name, "point": {"variant": variant, "comparisons": named}})
    (root / "sweep.json").write_text(json.dumps({"name": "table3", "trials": trials}))
    table = report_table(str(root), samples=300).table
    split = next(i for i, c in enumerate(table.columns) if c.split)
    marks = {row.name: row.cells[split].mark for row in table.rows}
    assert marks["A-heads1"] == marks["E-learned"] == "†"  # clearly worse / better than the base
    assert marks["A-heads8"] == marks["B-dk16"] == marks["base"] == ""  # A-heads8 is compared with A-heads1 only
    assert any(line.startswith("A-heads8 vs A-heads1") for line in table.comparisons)
    assert "In the cells, † compares a row with the base" in render(table, "md")
