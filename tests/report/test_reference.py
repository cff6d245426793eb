"""Published tables beside ours (``ablate table --reference``) on stand-in runs."""

from __future__ import annotations

import csv
import io
import statistics

import numpy as np
import pytest
from scipy.stats import binomtest
from typer.testing import CliRunner

from ablate.config import valid_keys
from ablate.report.agreement import SignCount
from ablate.report.commands import app, sweep_and_table
from ablate.report.records import ReportError
from ablate.report.reference import (
    REFERENCES,
    effective,
    get,
    load_reference,
    match,
    side_by_side,
    to_csv,
    to_markdown,
)

from tests.helpers.records import TEST_BLEU

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
        assert ref.min_delta > 0 and ref.setup.config and ref.setup.facts, name
        assert set(ref.setup.config) <= keys, name
    table3 = get("vaswani2017-table3")
    assert len(table3.rows) == 18 and (table3.base.bleu, table3.base.ppl, table3.base.params) == (25.8, 4.92, 65)
    assert [(r.bleu, r.ppl) for r in table3.rows if r.label == "(C) d_ff=4096"] == [(26.2, 4.75)]
    assert table3.min_delta == 0.5
    setup = table3.setup.config  # sec. 3.1, 5.3, 5.4, 6.1 of the paper
    assert (setup["model.norm"], setup["train.schedule"], setup["train.warmup"], setup["train.lr"]) == (
        "post",
        "inverse_sqrt",
        4000,
        None,  # unset: the peak of Eq. 3, d_model^-0.5 * warmup^-0.5
    )
    assert (setup["eval.beam"], setup["eval.length_penalty"], setup["eval.len_penalty"]) == (4, "gnmt", 0.6)
    assert (setup["data.vocab_size"], setup["train.max_steps"], setup["train.betas"]) == (37000, 100000, (0.9, 0.98))


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


@pytest.mark.slow
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
    assert sbs.all_rows() == SignCount(sum(ln.agree for ln in sbs.counted), 3)
    assert {r.label for r in sbs.not_run} >= {"(C) N=2", "(A) h=4"} and len(sbs.not_run) == 14


def _mean(values) -> float:
    return statistics.mean(v for v in values if v is not None)


@pytest.mark.slow
def test_the_headline_counts_significant_rows_with_a_large_paper_change_only(variant_sweep):
    """Matched rows with a sign: A-heads1 (paper -0.9, †), B-dk16 (paper -0.4) and E-learned (paper -0.1, †).
    At min_delta 0.5 only A-heads1 is counted; every one of them stays in the all-rows count."""
    sweep, table = sweep_and_table(str(variant_sweep), samples=200)
    ref = get("vaswani2017-table3")
    sbs = side_by_side(sweep, table, ref)
    lines = {ln.name: ln for ln in sbs.lines}
    assert sbs.min_delta == ref.min_delta == 0.5
    assert lines["E-learned"].significant is True and abs(lines["E-learned"].paper_delta) < 0.5
    assert [ln.name for ln in sbs.headline_rows] == ["A-heads1"]  # E-learned: significant, paper Δ too small
    assert sbs.headline() == SignCount(1, 1)
    assert {ln.name for ln in sbs.counted} == {"A-heads1", "B-dk16", "E-learned"}
    assert sbs.all_rows().n == 3

    lower = side_by_side(sweep, table, ref, min_delta=0.05)  # the argument overrides the file's threshold
    expected = [n for n in ("A-heads1", "B-dk16", "E-learned") if lines[n].significant]
    assert lower.min_delta == 0.05 and [ln.name for ln in lower.headline_rows] == expected
    assert lower.headline() == SignCount(sum(lines[n].agree for n in expected), len(expected))
    assert lower.all_rows() == sbs.all_rows()

    (label, text), *_ = sbs.summary()
    assert "|Δ| ≥ 0.5" in label and text == "1 of 1 agree in sign (binomial p = 0.5 against chance 1/2)"
    assert side_by_side(sweep, table, ref, min_delta=5.0).headline_text() == (
        "no significant row has a paper |Δ| of 5 or more: nothing to count"
    )
    untested = side_by_side(*sweep_and_table(str(variant_sweep), with_significance=False), ref)
    assert untested.headline().n == 0 and untested.all_rows() == sbs.all_rows()
    assert untested.headline_text() == "no row is significant here (significance was not tested): nothing to count"


def test_the_correlation_and_the_ppl_count_use_every_row_with_both_changes(variant_sweep):
    """Our Δs from the fixture's numbers (test BLEU per seed; dev PPL = 60 - BLEU), the paper's from Table 3."""
    sweep, table = sweep_and_table(str(variant_sweep), with_significance=False)
    sbs = side_by_side(sweep, table, get("vaswani2017-table3"))
    base = _mean(TEST_BLEU["base"])
    ours = {n: _mean(TEST_BLEU[n]) - base for n in ("A-heads1", "A-heads8", "B-dk16", "E-learned")}
    paper = {"A-heads1": 24.9 - 25.8, "A-heads8": 0.0, "B-dk16": 25.4 - 25.8, "E-learned": 25.7 - 25.8}
    names = list(ours)
    r = np.corrcoef([paper[n] for n in names], [ours[n] for n in names])[0, 1]
    corr = sbs.correlation()
    assert corr.n == 4 and corr.r == pytest.approx(r, rel=1e-9)  # the paper's 0 of h=16 is in the correlation

    paper_ppl = {"A-heads1": 5.29 - 4.92, "A-heads8": 4.91 - 4.92, "B-dk16": 5.01 - 4.92, "E-learned": 0.0}
    our_ppl = {n: -d for n, d in ours.items()}  # dev PPL = 60 - BLEU in the fixture
    lines = {ln.name: ln for ln in sbs.lines}
    assert {n: lines[n].ppl_delta for n in names} == pytest.approx(our_ppl)
    agree = [(paper_ppl[n] > 0) == (our_ppl[n] > 0) for n in names if paper_ppl[n]]  # E-learned: paper PPL Δ 0
    assert sbs.ppl() == SignCount(sum(agree), 3)
    assert sbs.ppl().p_value == pytest.approx(binomtest(sum(agree), 3, 0.5, alternative="greater").pvalue)


REFERENCE_YAML = """\
name: tiny
title: A tiny reference
data: made up
min_delta: 0.5
base:
  label: base
  settings: {model.heads: 4, model.positions: sinusoidal}
  bleu: 25.0
rows:
  - {label: h=1, changes: {model.heads: 1}, bleu: 24.0}
setup:
  model.norm: post          # ours: pre (the default)
  train.warmup: 4000        # ours: 400
  eval.beam: 5              # as ours
  model.positions: sinusoidal
  train.betas: [0.9, 0.98]  # as ours: a list here, a tuple in a run's config
  data: somewhere else, EXTRA
  batch: 4096 tokens
"""


def test_the_setup_departures_are_the_keys_where_our_base_differs(variant_sweep, tmp_path):
    """The fake sweep runs the config defaults (pre-norm, 400 warm-up steps, beam 5)."""
    path = tmp_path / "tiny.yaml"
    path.write_text(REFERENCE_YAML.replace("EXTRA", "1M pairs"))
    ref = load_reference(path)
    sweep, table = sweep_and_table(str(variant_sweep), with_significance=False)
    sbs = side_by_side(sweep, table, ref)
    assert [(d.key, d.ours, d.paper) for d in sbs.departures] == [
        ("model.norm", "pre", "post"),
        ("train.warmup", 400, 4000),
    ]
    md = to_markdown(sbs)
    assert "Where our base departs from the paper's setup: model.norm: pre (paper: post); " in md
    assert "train.warmup: 400 (paper: 4000).  " in md
    assert "Paper setup without a config key: data: somewhere else, 1M pairs; batch: 4096 tokens." in md
    assert "All matched rows, significant or not: " in md and "Correlation of paper Δ" in md

    rows = list(csv.reader(io.StringIO(to_csv(sbs))))
    blank = rows.index([])
    assert rows[0][:3] == ["row", "paper row", "paper BLEU"] and len(rows[1:blank]) == len(sweep.rows)
    summary = dict(rows[blank + 1 :])
    assert summary == dict(sbs.summary()) and len(summary) == 6
    assert summary["Where our base departs from the paper's setup"].startswith("model.norm: pre (paper: post)")


@pytest.mark.parametrize(
    "setup, message",
    [
        ("  model.nrom: post", r"tiny.yaml: setup: unknown key 'model.nrom'; did you mean 'model.norm'\?"),
        ("  hardware: 8 GPUs", r"unknown key 'hardware'.*one of: data, tokens, batch"),
        ("  eval.beam: four", r"tiny.yaml: setup: .*eval.beam"),
        ("  model.positions: learned", r"model.positions='learned' but the base's settings say 'sinusoidal'"),
    ],
)
def test_a_setup_key_that_is_not_a_config_key_or_a_fact_is_refused_in_one_line(tmp_path, setup, message):
    path = tmp_path / "tiny.yaml"
    text = REFERENCE_YAML.split("setup:")[0] + "setup:\n" + setup + "\n"
    path.write_text(text)
    with pytest.raises(ReportError, match=message) as err:
        load_reference(path)
    assert "\n" not in str(err.value)


def test_an_unknown_field_of_a_reference_file_is_refused(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(REFERENCE_YAML.replace("min_delta:", "min_dleta:"))
    with pytest.raises(ReportError, match=r"tiny.yaml: unknown field 'min_dleta'; did you mean 'min_delta'\?"):
        load_reference(path)
    path.write_text(REFERENCE_YAML.replace("min_delta: 0.5", "min_delta: -1"))
    with pytest.raises(ReportError, match="min_delta must be"):
        load_reference(path)


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


@pytest.mark.slow
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
