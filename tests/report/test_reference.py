"""Published tables beside ours (``ablate table --reference``) on stand-in runs."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ablate.config import valid_keys
from ablate.report.commands import app, sweep_and_table
from ablate.report.records import ReportError
from ablate.report.reference import REFERENCES, effective, get, match, side_by_side

runner = CliRunner()
# A scaled-down Table 3 base (N 3, d_model 128, d_ff 512, h 8, so d_k = d_v = 16), as table3-cpu.yaml.
SMALL = effective(
    {
        "model.layers": 3,
        "model.d_model": 128,
        "model.d_ff": 512,
        "model.heads": 8,
        "model.d_k": None,
        "model.d_v": None,
        "model.dropout": 0.1,
        "train.label_smoothing": 0.1,
        "model.positions": "sinusoidal",
        "model.attention.score": "dot",
    }
)


def changed(**overrides) -> dict:
    """What a row with ``overrides`` (dots as ``__``) changes from ``SMALL``, effective d_k/d_v included."""
    row = effective(
        {**SMALL, "model.d_k": None, "model.d_v": None, **{k.replace("__", "."): v for k, v in overrides.items()}}
    )
    return {k: v for k, v in row.items() if v != SMALL.get(k)}


def test_every_shipped_reference_loads_with_real_config_keys():
    keys = set(valid_keys())
    assert {"vaswani2017-table3", "multi30k-anchors"} <= set(REFERENCES)
    for name in REFERENCES:
        ref = get(name)
        assert ref.rows and ref.base.bleu is not None
        for row in ref.rows:
            assert set(row.changes) <= keys & set(ref.settings), (name, row.label)  # ratios need the base value
    table3 = get("vaswani2017-table3")
    assert len(table3.rows) == 18 and (table3.base.bleu, table3.base.ppl, table3.base.params) == (25.8, 4.92, 65)
    assert [(r.bleu, r.ppl) for r in table3.rows if r.label == "(C) d_ff=4096"] == [(26.2, 4.75)]


def test_an_unknown_reference_is_one_line_listing_the_valid_names():
    with pytest.raises(ReportError, match=r"unknown reference 'vaswani'.*vaswani2017-table3"):
        get("vaswani")
    result = runner.invoke(app, ["table", "/nonexistent", "--reference", "vaswani"])
    assert result.exit_code == 2 and result.output.count("\n") == 1 and "choose from" in result.output


@pytest.mark.parametrize(
    "overrides, label",
    [
        ({"model__heads": 1}, "(A) h=1"),  # d_k 128 of 16 = 512 of 64
        ({"model__heads": 4}, "(A) h=4"),
        ({"model__heads": 32}, "(A) h=32"),
        ({"model__d_k": 4, "model__d_v": 16}, "(B) d_k=16"),  # an explicit d_v equal to the base's is no change
        ({"model__d_k": 8}, "(B) d_k=32"),
        ({"model__layers": 1}, "(C) N=2"),  # 1/3 of the base, as 2 of 6
        ({"model__layers": 2}, "(C) N=4"),
        ({"model__layers": 4}, "(C) N=8"),
        ({"model__d_model": 64}, "(C) d_model=256"),
        ({"model__d_model": 256}, "(C) d_model=1024"),
        ({"model__d_ff": 256}, "(C) d_ff=1024"),
        ({"model__dropout": 0.0}, "(D) P_drop=0.0"),
        ({"model__dropout": 0.2}, "(D) P_drop=0.2"),
        ({"train__label_smoothing": 0.0}, "(D) eps_ls=0.0"),
        ({"model__positions": "learned"}, "(E) learned positions"),
        ({"model__positions": "none"}, None),  # no such row in the paper
        ({"model__attention__score": "additive"}, None),
        ({"model__heads": 1, "model__dropout": 0.0}, None),  # two changes at once: no paper row
    ],
)
def test_rows_match_the_paper_row_that_changes_the_same_keys_by_the_same_ratio(overrides, label):
    row = match(changed(**overrides), SMALL, get("vaswani2017-table3"))
    assert (row.label if row else None) == label


def test_the_rnn_baselines_match_the_multi30k_anchors():
    anchors = get("multi30k-anchors")
    assert (
        match(changed(model__arch="rnn", model__attention__score="additive"), SMALL, anchors).label
        == "GRU + Bahdanau attention"
    )
    assert (
        match(changed(model__arch="rnn", model__attention__score="none"), SMALL, anchors).label
        == "GRU without attention"
    )
    assert match(changed(model__heads=1), SMALL, anchors) is None


def test_side_by_side_reads_our_deltas_and_significance_from_the_table(variant_sweep):
    """Stand-in Table 3 sweep (base h 4): heads 1 -> (A) h=1, heads 8 -> (A) h=16, d_k 16 (half of 32)
    -> (B) d_k=32, learned positions -> (E); BLEU and † come from the table, not from a new test."""
    sweep, table = sweep_and_table(str(variant_sweep), samples=200)
    sbs = side_by_side(sweep, table, get("vaswani2017-table3"))
    lines = {ln.name: ln for ln in sbs.lines}
    assert {n: ln.paper.label for n, ln in lines.items()} == {
        "A-heads1": "(A) h=1",
        "A-heads8": "(A) h=16",
        "B-dk16": "(B) d_k=32",
        "E-learned": "(E) learned positions",
    }
    assert lines["A-heads1"].delta == pytest.approx((24.0 + 24.5 + 26.0) / 3 - 27.5)
    assert lines["A-heads1"].paper_delta == pytest.approx(-0.9)
    assert lines["A-heads1"].agree is True and lines["E-learned"].agree is False  # paper -0.1, ours +1.5
    assert lines["A-heads8"].agree is None  # the paper's h=16 changes BLEU by 0: no sign
    col = next(i for i, c in enumerate(table.columns) if c.split)
    marks = {r.name: bool(r.cells[col].mark) for r in table.rows}
    assert {n: ln.significant for n, ln in lines.items()} == {n: marks[n] for n in lines}
    assert marks["A-heads1"] and marks["E-learned"]
    k = sum(ln.agree for ln in sbs.lines if ln.agree is not None)
    m = sum(marks[n] for n, ln in lines.items() if ln.agree is not None)
    assert sbs.summary().startswith(f"{k} of 3 rows agree in sign with the paper; {m} significant")
    assert {r.label for r in sbs.not_run} >= {"(C) N=2", "(A) h=4"} and len(sbs.not_run) == 14


def test_table_command_prints_the_side_by_side(variant_sweep):
    result = runner.invoke(
        app, ["table", str(variant_sweep), "-f", "md", "--samples", "100", "--reference", "vaswani2017-table3"]
    )
    assert result.exit_code == 0, result.output
    assert "| base | base |" in result.output  # the table itself comes first
    assert "| A-heads1 | (A) h=1 | 24.9 | -0.9 |" in result.output
    assert "rows agree in sign with the paper;" in result.output
    csv_out = runner.invoke(
        app, ["table", str(variant_sweep), "-f", "csv", "--no-significance", "--reference", "multi30k-anchors"]
    )
    assert csv_out.exit_code == 0 and "row,paper row,paper BLEU" in csv_out.output


def _sweep_rows(stem: str) -> dict[str, dict]:
    """Variant name -> its effective flat config, as the sweep file's trials would run it."""
    from pathlib import Path

    from ablate.config import Config, flatten, to_dict
    from ablate.sweep.spec import load_spec, resolve

    spec = load_spec(Path(__file__).resolve().parents[2] / "sweeps" / f"{stem}.yaml")
    defaults = flatten(to_dict(Config()))
    rows = {}
    for value in spec.parameters["variant"]["values"]:
        point = {k: p["value"] for k, p in spec.parameters.items() if "value" in p}
        point["variant"] = value
        rows[value if isinstance(value, str) else value["name"]] = effective({**defaults, **resolve(point)})
    return rows


def test_every_table3_cpu_row_matches_its_own_paper_row():
    """The shipped CPU Table 3 is built so that each of its 18 rows is one distinct row of the paper."""
    rows, ref = _sweep_rows("table3-cpu"), get("vaswani2017-table3")
    base = rows.pop("base")
    matched = {}
    for name, cfg in rows.items():
        diff = {k: v for k, v in cfg.items() if v != base.get(k)}
        found = match(diff, base, ref)
        assert found is not None, name
        matched[name] = found.label
    assert sorted(matched.values()) == sorted(r.label for r in ref.rows)  # one to one, all 18 rows


def test_mission_cpu_rows_match_the_multi30k_anchors_and_table3_positions():
    rows = _sweep_rows("mission-cpu")
    base = rows.pop("base")
    diff = lambda name: {k: v for k, v in rows[name].items() if v != base.get(k)}  # noqa: E731
    anchors = get("multi30k-anchors")
    assert match(diff("rnn-bahdanau"), base, anchors).label == "GRU + Bahdanau attention"
    assert match(diff("rnn-no-attention"), base, anchors).label == "GRU without attention"
    assert match(diff("positions-learned"), base, get("vaswani2017-table3")).label == "(E) learned positions"


def test_mission_cpu_names_ten_comparisons_among_its_own_variants():
    from pathlib import Path

    from ablate.sweep.spec import load_spec, parse_comparisons

    spec = load_spec(Path(__file__).resolve().parents[2] / "sweeps" / "mission-cpu.yaml")
    names = {v if isinstance(v, str) else v["name"] for v in spec.parameters["variant"]["values"]}
    plan = parse_comparisons(spec.parameters["comparisons"]["value"])
    assert all(key == "variant" and set(values) <= names for key, values in plan)
    assert sum(len(values) - 1 for _, values in plan) == 10
