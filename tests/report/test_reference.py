"""Published tables beside ours (``ablate table --reference``) on stand-in runs."""

from __future__ import annotations

import dataclasses
import re
import statistics

import numpy as np
import pytest
from scipy.stats import fisher_exact
from typer.testing import CliRunner

from ablate.config import valid_keys
from ablate.report import table as report_table
from ablate.report.commands import app
from ablate.report.papers import (
    REFERENCES,
    effective,
    get,
    load_reference,
    match,
    side_by_side,
    to_markdown,
)
from ablate.report.trials import ReportError

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
        ({"model__d_k": 8, "model__d_v": 16}, "(B) d_k=32"),
        ({"model__d_k": 8}, None),  # d_v follows d_k (model.d_v's default): both change, as in no paper row
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


@pytest.mark.parametrize(
    "d_k, d_v, heads",
    [(None, None, 8), (16, None, 8), (None, 32, 8), (16, 32, 8), (20, None, 3), (None, None, 3)],
)
def test_effective_head_sizes_are_the_ones_the_built_model_uses(d_k, d_v, heads):
    """``model.d_k=16`` alone gave the model d_v = 16 (``model.d_v`` defaults to d_k) but ``effective`` said
    d_v = d_model / heads, so a row that changed both was matched to a paper row that changes d_k alone."""
    from ablate.config import ModelConfig, head_dims

    model = ModelConfig(d_model=96, heads=heads, d_k=d_k, d_v=d_v)
    ours = effective({"model.d_model": 96, "model.heads": heads, "model.d_k": d_k, "model.d_v": d_v})
    assert (ours["model.d_k"], ours["model.d_v"]) == head_dims(model)


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


@pytest.fixture(scope="module")
def row_b_sweep(variant_sweep, tmp_path_factory):
    """``variant_sweep`` with B-dk16 a stand-in for Table 3 row (B): d_k 16 with d_v kept at the base's 32, as the
    shipped sweeps write it (``model.d_k`` alone makes d_v 16 too: two changes, as in no paper row)."""
    import json
    import shutil

    root = tmp_path_factory.mktemp("sweeps") / "table3"
    shutil.copytree(variant_sweep, root)
    for path in root.glob("B-dk16-*/summary.json"):
        summary = json.loads(path.read_text())
        summary["config"]["model"]["d_v"] = 32
        path.write_text(json.dumps(summary))
    return root


def test_a_row_that_changes_d_k_alone_in_its_config_changes_d_v_too_and_is_not_row_b(variant_sweep):
    """The table shows B-dk16 (``model.d_k: 16``) with d_v 16, the model's; the side-by-side matched it to
    (B) d_k=32, which keeps d_v."""
    sweep, table = _parts(report_table(str(variant_sweep), significance=False))
    lines = {ln.name: ln for ln in side_by_side(sweep, table, get("vaswani2017-table3")).lines}
    assert lines["B-dk16"].paper is None


@pytest.mark.slow
def test_side_by_side_reads_our_deltas_and_significance_from_the_table(row_b_sweep):
    """Stand-in Table 3 sweep (base h 4): heads 1 -> (A) h=1, heads 8 -> (A) h=16, d_k 16 (half of 32; d_v kept)
    -> (B) d_k=32, learned positions -> (E); BLEU and † come from the table, not from a new test."""
    sweep, table = _parts(report_table(str(row_b_sweep), samples=200))
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
    assert (sbs.all_rows().agree, sbs.all_rows().n) == (sum(ln.agree for ln in sbs.counted), 3)
    assert all(ln.se == ln.se and ln.se > 0 for ln in sbs.lines)  # every Δ's SE from the table's comparison
    assert {r.label for r in sbs.not_run} >= {"(C) N=2", "(A) h=4"} and len(sbs.not_run) == 14


def _clearing(sbs) -> list[str]:
    """The counted rows whose "clears noise" cell is not blank: the rows the headline counts."""
    return [ln.name for ln in sbs.counted if ln.clears(sbs.min_delta)]


def _mean(values) -> float:
    return statistics.mean(v for v in values if v is not None)


@pytest.mark.slow
def test_the_headline_counts_rows_where_either_side_clears_its_own_noise(row_b_sweep):
    """Matched rows with a sign: A-heads1 (paper -0.9), B-dk16 (paper -0.4) and E-learned (paper -0.1).
    The headline keeps a row whose paper |Δ| is at least min_delta or whose Δ here is at least its SE."""
    sweep, table = _parts(report_table(str(row_b_sweep), samples=200))
    ref = get("vaswani2017-table3")
    sbs = side_by_side(sweep, table, ref)
    lines = {ln.name: ln for ln in sbs.lines}
    assert sbs.min_delta == ref.min_delta == 0.5
    assert {ln.name for ln in sbs.counted} == {"A-heads1", "B-dk16", "E-learned"}
    clears = [
        n
        for n in ("A-heads1", "B-dk16", "E-learned")
        if abs(lines[n].paper_delta) >= 0.5 or abs(lines[n].delta) >= lines[n].se
    ]
    assert _clearing(sbs) == clears and "A-heads1" in clears
    assert lines["A-heads1"].clears(0.5) == "both" and lines["B-dk16"].clears(0.5) == ""  # -2.67 (SE 2.0); -1.3 (2.9)
    head = sbs.headline()
    assert (head.agree, head.n) == (sum(lines[n].agree for n in clears), len(clears))
    assert head.paper_up == 0 and head.p_value is None  # every paper Δ here is down: nothing to test

    higher = side_by_side(sweep, table, dataclasses.replace(ref, min_delta=5.0))  # a file's own threshold
    assert higher.min_delta == 5.0
    assert _clearing(higher) == [n for n in clears if abs(lines[n].delta) >= lines[n].se]
    assert higher.headline().n == len(_clearing(higher))
    (label, text), *_ = sbs.summary()
    assert "paper |Δ| ≥ 0.5 BLEU, or our |Δ| ≥ its SE" in label and text == head.text()
    untested = side_by_side(*_parts(report_table(str(row_b_sweep), significance=False)), ref)
    assert _clearing(untested) == ["A-heads1"] and untested.headline().n == 1  # no SE known: the paper's side alone
    assert (untested.all_rows().agree, untested.all_rows().n) == (sbs.all_rows().agree, sbs.all_rows().n)


def test_the_correlation_and_the_ppl_count_use_every_row_with_both_changes(row_b_sweep):
    """Our Δs from the fixture's numbers (test BLEU per seed; dev PPL = 60 - BLEU), the paper's from Table 3."""
    sweep, table = _parts(report_table(str(row_b_sweep), significance=False))
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
    signed = [n for n in names if paper_ppl[n] and our_ppl[n]]  # E-learned: paper PPL Δ 0, no sign
    count = sbs.ppl()
    assert (count.n, count.agree) == (3, sum((paper_ppl[n] > 0) == (our_ppl[n] > 0) for n in signed))
    # our PPL Δs share one base as our BLEU Δs do, so the null keeps both sign margins (Fisher's exact
    # test of the 2 x 2 table of signs, one-sided), not a fair coin per row
    table = [
        [sum((paper_ppl[n] > 0) == up and (our_ppl[n] > 0) == mine for n in signed) for mine in (True, False)]
        for up in (True, False)
    ]
    if 0 < count.paper_up < count.n:
        assert count.p_value == pytest.approx(fisher_exact(table, alternative="greater")[1], rel=1e-9)
    else:
        assert count.p_value is None  # one-way paper signs: every assignment agrees equally often
    ppl_line = dict(sbs.summary())["PPL, paper Δ vs our dev PPL Δ"]
    assert (
        "binomial" not in ppl_line and "Fisher's exact p = " in ppl_line and "expected from our noise" not in ppl_line
    )


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
    sweep, table = _parts(report_table(str(variant_sweep), significance=False))
    sbs = side_by_side(sweep, table, ref)
    assert [(d.key, d.ours, d.paper) for d in sbs.departures] == [
        ("model.norm", "pre", "post"),
        ("train.warmup", 400, 4000),
    ]
    md = to_markdown(sbs)
    assert "Where our base departs from the paper's setup: model.norm: pre (paper: post); " in md
    assert "train.warmup: 400 (paper: 4000).  " in md
    assert "Paper setup without a config key: data: somewhere else, 1M pairs; batch: 4096 tokens." in md
    assert "All matched rows: " in md and "Correlation of paper Δ" in md
    assert "Sensitivity to our base" not in md  # no row is matched: nothing whose count could move
    summary = dict(sbs.summary())
    assert len(summary) == 6  # headline, all rows, PPL, r, 2 setup
    assert summary["Where our base departs from the paper's setup"].startswith("model.norm: pre (paper: post)")


def test_a_received_setup_value_reaches_no_side_by_side_raw(variant_sweep, tmp_path):
    """A received base whose ``model.norm`` holds escape sequences: the departures line of ``--reference`` printed
    it raw under the table (Markdown and the terminal's), so a run folder from someone else could clear the screen."""
    import json
    import shutil

    sweep = tmp_path / "sweep"
    shutil.copytree(variant_sweep, sweep)
    for path in sweep.glob("*/summary.json"):
        summary = json.loads(path.read_text())
        summary["config"]["model"]["norm"] = "pre\x1b[2J\x07"
        path.write_text(json.dumps(summary))
    for fmt in ("md", "rich", "latex"):
        args = ["table", str(sweep), "-f", fmt, "--reference", "vaswani2017-table3", "--no-significance"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert "pre?[2J?" in result.output and not set(result.output) & {"\x1b", "\x07"}, fmt


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


# results/table3-cpu as shipped (2 seeds per row, seed σ 0.708 over 18 df): row, our Δ, its SE.
TABLE3_CPU = [
    ("A-heads1", 1.0739, 0.7083),
    ("A-heads4", 0.3498, 0.7083),
    ("A-heads16", 0.0389, 0.7083),
    ("A-heads32", -0.2951, 0.7083),
    ("B-dk4", -2.1303, 0.7118),
    ("B-dk8", -0.1114, 0.7083),
    ("C-layers1", -0.0511, 0.7083),
    ("C-layers2", 1.7834, 0.7125),
    ("C-layers4", -1.2260, 0.7083),
    ("C-dmodel64", -3.8221, 0.7213),
    ("C-dmodel256", 2.4223, 0.7287),
    ("C-dff256", 0.2156, 0.7083),
    ("C-dff1024", 0.3017, 0.7083),
    ("D-dropout0.0", 3.1112, 0.7222),
    ("D-dropout0.2", -2.2123, 0.7090),
    ("D-ls0.0", 0.2054, 0.7083),
    ("D-ls0.2", -0.2843, 0.7083),
    ("E-learned", 0.2671, 0.7143),
]
TABLE3_CPU_BASE_SE = 0.708320048125117 / 2**0.5  # the seed σ over the base's 2 seeds


def _table3_cpu_side_by_side():
    from ablate.report.papers import Line, SideBySide

    ref = get("vaswani2017-table3")
    rows = _sweep_rows("table3-cpu")
    base_cfg = rows.pop("base")
    lines = []
    for name, delta, se in TABLE3_CPU:
        diff = {k: v for k, v in rows[name].items() if v != base_cfg.get(k)}
        paper = match(diff, base_cfg, ref)
        paper_delta = round(paper.bleu - ref.base.bleu, 6)
        agree = (paper_delta > 0) == (delta > 0) if paper_delta else None
        lines.append(Line(name, diff, paper, paper_delta, None, None, 2, delta, agree, None, None, None, se=se))
    base = Line("base", {}, ref.base, None, None, None, 2, None, None, None, None, None)
    return SideBySide(ref, "BLEU (test)", base, lines, [], ref.min_delta, base_se=TABLE3_CPU_BASE_SE)


def test_the_side_by_side_p_hardly_moves_when_our_base_moves_by_one_se():
    """All 18 Δs of table3-cpu share one base, so moving its mean by ±1 SE (0.50 BLEU) moves every
    sign at once: a coin per row swings from p 0.93 to 0.025. The test that keeps both sign margins
    and carries each Δ's noise moves by under 0.1, on the headline rows and on all of them."""
    sbs = _table3_cpu_side_by_side()
    head, every = sbs.headline(), sbs.all_rows()
    assert (every.agree, every.n, every.paper_up) == (10, 17, 2)
    assert _clearing(sbs) == [
        "A-heads1", "B-dk4", "C-layers1", "C-layers2", "C-layers4", "C-dmodel64", "C-dmodel256",
        "D-dropout0.0", "D-dropout0.2", "D-ls0.0",
    ]  # fmt: skip
    assert (head.agree, head.n) == (6, 10)
    moved = sbs.sensitivity()
    assert [round(m.shift, 2) for m in moved] == [-0.50, 0.50]
    for m in moved:
        assert abs(m.headline.p_value - head.p_value) < 0.1, m
        assert abs(m.all_rows.p_value - every.p_value) < 0.1, m
    assert [(m.all_rows.agree, m.headline.agree, m.headline.n) for m in moved] == [(6, 6, 14), (13, 9, 12)]
    assert moved[0].coin - moved[1].coin > 0.9  # the fair-coin null: 0.93 against 0.025
    assert sbs.correlation().r == pytest.approx(0.14, abs=0.005)  # as shipped; it does not move with the base

    summary = dict(sbs.summary())
    label = "Sensitivity to our base (its mean ± 1 SE = 0.50 BLEU; every one of our Δs moves with it)"
    assert summary[label] == sbs.sensitivity_text()
    assert summary[label].startswith(
        f"base -1 SE (-0.50 BLEU): headline 6 of 14 (p = {moved[0].headline.p_value:.2g}), all rows 6 of 17 "
        f"(p = {moved[0].all_rows.p_value:.2g}; a fair coin per row would give p = 0.93); base +1 SE (+0.50 BLEU): "
        "headline 9 of 12"
    )
    assert f"{label}: {summary[label]}.  " in to_markdown(sbs)


def test_the_headline_test_keeps_its_size_when_which_rows_clear_noise_depends_on_the_pairing(monkeypatch):
    """A sweep with no real effect, 17 rows of 2 seeds and a 2-seed base (σ 0.7): its shared base moves every Δ,
    so the rows whose Δ clears its SE mostly share one sign. Where the paper's few ups are large and its downs
    small, a down row enters the headline only through ours: reassigning the selected rows alone called 15% of
    such nulls "agrees" at p <= 0.10 (7% at 0.05); re-selecting in every assignment keeps the nominal rate."""
    from ablate.report import stats
    from ablate.report.papers import Line, PaperRow, SideBySide

    monkeypatch.setattr(stats, "DRAWS", 400)  # random assignments per test: enough for a size, and fast
    ref, rng, sigma = get("vaswani2017-table3"), np.random.default_rng(5), 0.7
    paper = [1.5, 1.2] + [-0.2] * 15
    ps = []
    for _ in range(600):
        ours = rng.normal(0, sigma, (len(paper), 2)).mean(1) - rng.normal(0, sigma, 2).mean()
        lines = [
            Line(
                f"r{i}", {}, PaperRow(f"r{i}", {}), p, None, None, 2, o, (p > 0) == (o > 0), None, None, None, se=sigma
            )
            for i, (p, o) in enumerate(zip(paper, ours))
        ]
        base = Line("base", {}, ref.base, None, None, None, 2, None, None, None, None, None)
        p_value = SideBySide(ref, "BLEU", base, lines, [], 0.5).headline().p_value
        ps.append(1.0 if p_value is None else p_value)  # not testable: not called agreeing
    assert np.mean(np.array(ps) <= 0.10) < 0.12 and np.mean(np.array(ps) <= 0.05) < 0.06


def test_each_anchor_states_its_own_metric_and_commit():
    """The Transformer anchor is torchtext bleu_score at 5cd630c; the GRU rows are the 2024 notebooks
    (325a9d2) scored with Hugging Face evaluate, so their paper Δ mixes two metrics, and says so."""
    anchors = get("multi30k-anchors")
    assert "bleu_score" in anchors.base.metric and "5cd630c" in anchors.base.source
    for row in anchors.rows:
        assert "evaluate" in row.metric and "325a9d2" in row.source, row.label
    assert {r.label: r.bleu for r in anchors.rows} == {"GRU + Bahdanau attention": 28.3, "GRU without attention": 20.6}
    assert "0.2830" in anchors.rows[0].source and "0.2061" in anchors.rows[1].source

    from ablate.report.papers import Line, SideBySide

    lines = [
        Line(r.label, r.changes, r, r.bleu - anchors.base.bleu, None, None, 3, -3.0, True, True, None, None)
        for r in anchors.rows
    ]
    sbs = SideBySide(
        anchors, "BLEU", Line("base", {}, anchors.base, None, None, None, 3, None, None, None, None, None), lines, []
    )
    text = dict(sbs.summary())["Metric and source of each published number"]
    assert text.startswith("Transformer (3+3, d 256, 8 heads) (36.5): torchtext bleu_score")
    assert text.count("not the base's metric, so its paper Δ mixes two metrics") == 2


def test_a_published_row_without_bleu_still_states_its_metric_and_source():
    from ablate.report.papers import Line, PaperRow, Reference, SideBySide

    base = PaperRow("base", {}, None, metric="BLEU on newstest2013", source="Table 3")
    reference = Reference("x", "X", "", "", {}, base, ())
    sbs = SideBySide(
        reference, "BLEU", Line("base", {}, base, None, None, None, 1, None, None, None, None, None), [], []
    )
    assert sbs.provenance() == "base: BLEU on newstest2013, Table 3"


def test_table3s_setup_states_metric_clipping_and_checkpoints():
    setup = get("vaswani2017-table3").setup
    assert setup.config["train.clip_norm"] == 0.0  # none; ours is 1.0
    metric = setup.facts["metric"]
    assert "Moses-tokenized" in metric and "compound-split" in metric and "newstest2013" in metric
    assert setup.facts["checkpoints"].startswith("the last") and "no averaging" in setup.facts["checkpoints"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["table3-cpu", "table3-budget-cpu"])
def test_the_shipped_table3_side_by_sides_print_every_departure(name):
    """The metric (sacreBLEU 13a on Multi30k test against compound-split multi-bleu on newstest2013 dev),
    the clipping and, for the budget sweep (best of 10 validations), the checkpoint selection; table3-cpu
    validated once, at the end, so it tests its last checkpoint as the paper did: no departure there."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "results" / name
    sweep, table = _parts(report_table(str(root), significance=False))
    md = to_markdown(side_by_side(sweep, table, get("vaswani2017-table3")))
    departs = next(line for line in md.splitlines() if line.startswith("Where our base departs"))
    assert "train.clip_norm: 1.0 (paper: 0.0)" in departs
    assert (
        "metric: sacreBLEU on detokenized output, no compound splitting (nrefs:1|case:mixed|eff:no|tok:13a|" in departs
    )
    assert "on test_2016_flickr (paper: multi-bleu.perl BLEU on Moses-tokenized, compound-split output" in departs
    assert "averag" not in departs.split("checkpoints:")[0]  # no checkpoint averaging: Table 3 did not average either
    if name == "table3-budget-cpu":
        assert (
            "checkpoints: the best of 10 validations by dev BLEU (best.ckpt; the last one in 10 of 12 trials) (paper: the last one"
            in departs
        )
    else:
        assert "checkpoints:" not in departs
        assert "checkpoints: the last one, no averaging" in md  # the paper's, among its other facts


def _parts(result):
    return result.sweep, result.table


def test_the_side_by_side_under_a_latex_table_is_latex_too(variant_sweep):
    """`ablate table --format latex --reference`: the paper beside ours as a second booktabs table with its
    summary lines as notes, not Markdown pasted after the LaTeX (pipes and ** in a .tex file)."""
    result = runner.invoke(app, ["table", str(variant_sweep), "--format", "latex", "--reference", "vaswani2017-table3"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.count(r"\begin{tabular}") == 2 and out.count(r"\end{table}") == 2
    assert "**" not in out and not any(line.startswith("|") for line in out.splitlines())
    beside = out.split(r"\end{table}")[1]
    assert r"(A) h=1 & " in beside and r"\caption{Beside Vaswani" in beside
    assert (
        r"Headline, rows where either side clears its own noise (paper \textbar{}$\Delta$\textbar{} $\geq$ 0.5 BLEU"
        in beside
    )
    assert not re.findall(r"[^\x00-\x7f]", out)


def test_csv_with_a_reference_is_refused_in_one_line(variant_sweep):
    """`--format csv --reference` wrote the table's CSV, a blank line and the side-by-side's CSV (another
    header, other columns) into one stream: `pandas.read_csv` read the second header as a data row. One CSV holds
    one table, so the pair is refused before any work, naming the formats that hold both."""
    result = runner.invoke(app, ["table", str(variant_sweep), "--format", "csv", "--reference", "vaswani2017-table3"])
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1 and "--format md" in result.output
    assert "Traceback" not in result.output


def test_the_side_by_side_under_a_rich_table_is_a_rich_table(variant_sweep):
    """`ablate table --reference` in the terminal format printed the side-by-side as raw Markdown (`| ... |`,
    `**`) under the rich table; now a rich table too, its headline and notes below it."""
    result = runner.invoke(app, ["table", str(variant_sweep), "--reference", "vaswani2017-table3"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "**" not in out and not any(line.lstrip().startswith("| ") for line in out.splitlines())
    assert "Beside Vaswani" in out and "(A) h=1" in out and "paper BLEU" in out
    assert "All matched rows: " in out


def test_the_rich_table_written_with_out_has_a_rich_side_by_side_too(variant_sweep, tmp_path):
    """`ablate table --reference --out FILE` (the rich format into a file) wrote the rich table, then the
    side-by-side as Markdown (`| ... |`, `**`)."""
    out = tmp_path / "table.txt"
    args = ["table", str(variant_sweep), "--reference", "vaswani2017-table3", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "**" not in text and not any(line.startswith("| ") for line in text.splitlines())
    assert "Beside Vaswani" in text and "(A) h=1" in text and "All matched rows: " in text
