"""Rows, base detection and seed aggregation on constructed run records."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import pytest

from ablate.report.stats import aggregate, curve, stat
from ablate.report.trials import ReportError, Trial, collect

from tests.helpers.records import PARAMS, SPLITS, TEST_BLEU


def test_stat_is_mean_sample_std_and_n():
    s = stat([1.0, 2.0, 4.0])
    assert s.mean == pytest.approx(7 / 3) and s.n == 3
    assert s.std == pytest.approx(statistics.stdev([1.0, 2.0, 4.0]))
    one = stat([5.0])
    assert (one.mean, one.std, one.n) == (5.0, None, 1)
    assert stat([]) is None and stat([float("nan")]) is None


def test_variant_rows_aggregate_seeds_exactly(variant_sweep):
    sweep = aggregate(collect(str(variant_sweep)))
    assert [r.name for r in sweep.rows] == ["base", "A-heads1", "A-heads8", "B-dk16", "E-learned"]
    assert sweep.base.is_base and sweep.base.name == "base"
    for row in sweep.rows:
        values = [v for v in TEST_BLEU[row.name] if v is not None]
        for key, shift in [("test/bleu", 0.0), (f"test_{SPLITS[1]}/bleu", -2.0)]:
            st = row.stats[key]
            assert st.n == len(values) == len(row.trials)
            assert st.mean == pytest.approx(statistics.mean(values) + shift)
            assert st.std == pytest.approx(statistics.stdev(values))
        assert row.stats["params"].mean == PARAMS[row.name] and row.stats["params"].std == 0.0
    assert sweep.rows[3].seeds == [1, 2]  # B-dk16: seed 3 failed, not averaged in


def test_columns_groups_and_changes_follow_table_3(variant_sweep):
    sweep = aggregate(collect(str(variant_sweep)))
    # Table 3's columns always, in its order, then what else varies
    assert sweep.keys == [
        "model.layers",
        "model.d_model",
        "model.d_ff",
        "model.heads",
        "model.d_k",
        "model.d_v",
        "model.dropout",
        "train.label_smoothing",
        "model.positions",
    ]
    rows = {r.name: r for r in sweep.rows}
    assert [r.group for r in sweep.rows] == ["base", "A", "A", "B", "E"]
    assert rows["A-heads1"].changed == ("model.heads", "model.d_k", "model.d_v")
    assert rows["A-heads1"].settings["model.heads"] == 1
    assert rows["B-dk16"].changed == ("model.d_k", "model.d_v")
    assert rows["base"].changed == ()
    assert sweep.test_splits == sorted(SPLITS)


def test_unfinished_trials_are_kept_aside(variant_sweep):
    sweep = aggregate(collect(str(variant_sweep)))
    assert sorted((t.name, t.status) for t in sweep.unfinished) == [
        ("B-dk16-s3", "failed"),
        ("E-learned-s3", "running"),
    ]


def test_grid_without_variants_finds_the_one_at_a_time_base(grid_sweep):
    sweep = aggregate(collect(str(grid_sweep)))
    # heads=4 + sinusoidal differs from each other point in one key: it is the base,
    # although heads=1 sorts first.
    assert {k: sweep.base.settings[k] for k in ("model.heads", "model.positions")} == {
        "model.heads": 4,
        "model.positions": "sinusoidal",
    }
    assert [r.name for r in sweep.rows] == ["base", "model.heads=1", "model.heads=8", "model.positions=learned"]
    assert [r.group for r in sweep.rows] == ["base", "model.heads", "model.heads", "model.positions"]
    assert all(len(r.trials) == 2 for r in sweep.rows)


def test_rows_do_not_depend_on_trial_order(variant_sweep):
    trials = collect(str(variant_sweep))
    a, b = aggregate(trials), aggregate(list(reversed(trials)))
    assert [(r.name, r.stats) for r in a.rows] == [(r.name, r.stats) for r in b.rows]


def test_no_finished_trial_is_an_error():
    with pytest.raises(ReportError, match="no finished trial"):
        aggregate([Trial("x", "failed", "boom")])


def test_curve_interpolates_seeds_onto_shared_steps():
    t1 = Trial(
        "a", "finished", config={"seed": 1}, history=({"step": 0, "val/bleu": 0.0}, {"step": 10, "val/bleu": 10.0})
    )
    t2 = Trial(
        "b",
        "finished",
        config={"seed": 2},
        history=({"step": 0, "val/bleu": 2.0}, {"step": 5, "val/bleu": 4.0}, {"step": 10, "val/bleu": 6.0}),
    )
    row = aggregate([t1, t2]).rows[0]
    steps, mean, std = curve(row)
    assert steps.tolist() == [0, 5, 10]
    np.testing.assert_allclose(mean, [1.0, 4.5, 8.0])  # seed 1 interpolated to 5.0 at step 5
    np.testing.assert_allclose(std, [np.std([0, 2], ddof=1), np.std([5, 4], ddof=1), np.std([10, 6], ddof=1)])


@pytest.mark.parametrize("recorded", [False, True])
def test_rows_show_the_head_sizes_the_model_used(variant_sweep, recorded, tmp_path):
    """d_k/d_v left unset (None) are shown as the model built them: d_model / h, and d_v = d_k.
    Old summaries are derived from their config; new ones carry the trainer's ``resolved`` values."""
    import json
    import shutil

    root = variant_sweep
    if recorded:
        root = tmp_path / "sweep"
        shutil.copytree(variant_sweep, root)
        for path in root.glob("*/summary.json"):
            summary = json.loads(path.read_text())
            if summary.get("status") == "finished":
                summary["resolved"] = {"model.d_k": 7, "model.d_v": 9}  # what the trainer recorded wins
                path.write_text(json.dumps(summary))
    rows = {r.name: r for r in aggregate(collect(str(root))).rows}
    sizes = {name: (r.settings["model.d_k"], r.settings["model.d_v"]) for name, r in rows.items()}
    if recorded:
        assert sizes["base"] == (7, 9) and sizes["B-dk16"] == (16, 9)  # an explicit d_k stays explicit
    else:  # d_model 128: h=4 -> 32, h=1 -> 128, h=8 -> 16; d_k=16 -> d_v 16
        assert sizes == {
            "base": (32, 32),
            "A-heads1": (128, 128),
            "A-heads8": (16, 16),
            "B-dk16": (16, 16),
            "E-learned": (32, 32),
        }
        assert rows["base"].config["model.d_k"] is None  # the declared config is kept as written


def test_auto_scale_is_shown_as_the_rule_each_score_used():
    """``scale: auto`` resolves per score (Vaswani: 1/sqrt(d_k); Bahdanau: none), whatever d_k."""
    from ablate.config import Config, replace, to_dict
    from ablate.report.trials import from_summary

    trials = []
    for score, heads in (("dot", 4), ("dot", 1), ("additive", 4)):
        cfg = replace(Config(), **{"model.attention.score": score, "model.heads": heads})
        trials.append(from_summary(f"{score}{heads}", {"status": "finished", "test/bleu": 1.0, "config": to_dict(cfg)}))
    sweep = aggregate(trials)
    scales = {r.name: r.settings["model.attention.scale"] for r in sweep.rows}
    assert sorted(scales.values()) == ["1/sqrt(d_k)", "1/sqrt(d_k)", "none"]
    assert {r.settings["model.d_k"] for r in sweep.rows} == {32, 128}


# The base row as the sweep declares it --------------------------------------------------------

# docs/python-api.md's sweep: TINY as the base (model.heads=2), a bare "heads-2" and "heads-1"
DOCS_TINY = {
    "data.builtin_pairs": 300,
    "data.vocab_size": 300,
    "model.layers": 1,
    "model.d_model": 32,
    "model.heads": 2,
    "model.d_ff": 64,
    "train.max_steps": 30,
    "train.max_tokens": 1024,
}
DOCS_VARIANTS = ["heads-2", {"name": "heads-1", "model.heads": 1}]


def _planned_sweep(root, parameters: dict, constants: dict = DOCS_TINY):
    """A sweep folder as `ablate sweep run` leaves it: the planner's points in sweep.json, one
    finished summary per trial (made-up BLEU), from a sweep configuration's parameters."""
    import json

    from ablate.sweep.planner import next_points
    from ablate.sweep.spec import resolve, spec_from_dict, trial_name

    from tests.helpers.records import trial_summary, write_trial

    params = {**{k: {"value": v} for k, v in constants.items()}, **parameters}
    spec = spec_from_dict({"name": "notebook-heads", "method": "grid", "parameters": params}, name="notebook-heads")
    planned, taken = [], set()
    for i, point in enumerate(next_points(spec, [], 100)):
        name = trial_name(spec, point, taken)
        taken.add(name)
        values = {k: v for k, v in resolve(point).items() if k != "seed"}
        variant = (
            point["variant"] if isinstance(point.get("variant"), str) else (point.get("variant") or {}).get("name")
        )
        summary = trial_summary(name, variant, values, point.get("seed", 1), 20.0 + i, 1000 * (i + 1), {}, spec.name)
        write_trial(root, name, summary)
        planned.append({"name": name, "point": point, "status": "finished", "error": None})
    (root / "sweep.json").write_text(json.dumps({"name": spec.name, "trials": planned}))
    return aggregate(collect(str(root)))


def test_the_python_api_docs_sweep_tables_its_bare_variant_as_the_base(tmp_path):
    sweep = _planned_sweep(tmp_path, {"variant": {"values": DOCS_VARIANTS}})
    assert sweep.base.name == "heads-2" and sweep.base.settings["model.heads"] == 2
    heads1 = next(r for r in sweep.rows if r.name == "heads-1")
    assert not heads1.is_base and "model.heads" in heads1.changed and heads1.settings["model.heads"] == 1


def test_the_sweep_files_base_parameter_names_the_base_row(tmp_path):
    variants = [
        {"name": "h1", "model.heads": 1},
        {"name": "h4", "model.heads": 4},  # fewest differences: the base, undeclared
        {"name": "h4-learned", "model.heads": 4, "model.positions": "learned"},
    ]
    assert _planned_sweep(tmp_path / "a", {"variant": {"values": variants}}).base.name == "h4"
    declared = _planned_sweep(tmp_path / "b", {"variant": {"values": variants}, "base": {"value": "h1"}})
    assert declared.base.name == "h1"
    assert [r.name for r in declared.rows if r.changed == ()] == ["h1"]


def test_a_tie_for_the_base_is_refused_in_one_line_naming_the_fix(tmp_path):
    variants = [{"name": "heads-1", "model.heads": 1}, {"name": "heads-4", "model.heads": 4}]  # neither is TINY
    with pytest.raises(ReportError, match=r"base is ambiguous: heads-1, heads-4 .*base: \{value: heads-1\}") as err:
        _planned_sweep(tmp_path, {"variant": {"values": variants}})
    assert "\n" not in str(err.value)


def test_a_grid_tie_is_broken_by_a_declared_point_else_refused(tmp_path):
    grid = {"model.heads": {"values": [1, 2]}}  # neither is ablate's default
    with pytest.raises(ReportError, match=r"base is ambiguous.*base: \{value: \{model.heads: 1\}\}"):
        _planned_sweep(tmp_path / "a", grid)
    declared = _planned_sweep(tmp_path / "b", {**grid, "base": {"value": {"model.heads": 2}}})
    assert declared.base.settings["model.heads"] == 2 and declared.base.name == "base"


def test_a_registered_wandb_sweeps_bare_variant_is_the_base():
    """A run of a sweep registered by ablate holds its variant's name and the ``variants`` table."""
    from ablate.report.trials import from_summary

    from tests.helpers.records import trial_summary

    trials = []
    for i, (variant, overrides) in enumerate([("heads-2", {}), ("heads-1", {"model.heads": 1})]):
        summary = trial_summary(variant, variant, {**DOCS_TINY, **overrides}, 1, 20.0 + i, 1000, {})
        config = {**summary["config"], "variant": variant, "variants": {"heads-1": {"model.heads": 1}}}
        trials.append(from_summary(variant, summary, config=config))
    assert aggregate(trials).base.name == "heads-2"


SWEEPS = sorted((Path(__file__).resolve().parents[2] / "sweeps").glob("*.yaml"))


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_every_shipped_sweeps_table_has_its_base(path, tmp_path):
    """Each sweep file's table finds its base without a tie: a variant named or bare, or ``base:``."""
    from ablate.sweep.spec import load_spec

    params = {k: v for k, v in load_spec(path).parameters.items() if k != "plugins"}
    if "seed" in params:
        params["seed"] = {"values": [1]}
    sweep = _planned_sweep(tmp_path, params, constants={})
    assert sweep.base.is_base and sweep.base.changed == ()


def test_a_base_whose_records_are_unreadable_is_named_not_a_tie(tmp_path):
    # the base's summary.json files damaged: the table said the base was ambiguous between two other rows and
    # asked for a base: parameter in the sweep file
    variants = ["dot", {"name": "learned", "model.positions": "learned"}, {"name": "none", "model.positions": "none"}]
    _planned_sweep(tmp_path, {"variant": {"values": variants}, "seed": {"values": [1, 2]}})
    for seed in (1, 2):
        (tmp_path / f"dot-seed={seed}" / "summary.json").write_text('{"status": "fin')
    with pytest.raises(ReportError, match=r"base cannot be told: .* 2 trials without a readable record") as err:
        aggregate(collect(str(tmp_path)))
    assert "dot-seed=1 (unreadable summary.json" in str(err.value) and "dot-seed=2 (" in str(err.value)
    assert "ambiguous" not in str(err.value) and "\n" not in str(err.value)


ONE_CLOSEST = [  # without "dot", heads-4 differs from the others in the fewest keys
    "dot",
    {"name": "heads-1", "model.heads": 1},
    {"name": "heads-4", "model.heads": 4},
    {"name": "heads-4-learned", "model.heads": 4, "model.positions": "learned"},
]
FULL_GRID = {"model.heads": {"values": [1, 4]}, "model.positions": {"values": ["sinusoidal", "learned"]}}


@pytest.mark.parametrize(
    ("parameters", "constants", "damaged"),
    [
        ({"variant": {"values": ONE_CLOSEST}, "seed": {"values": [1, 2]}}, DOCS_TINY, ["dot-seed=1", "dot-seed=2"]),
        (FULL_GRID, {}, ["heads=4-positions=sinusoidal"]),  # ablate's defaults: without it, heads=1, learned
    ],
    ids=["variants", "grid"],
)
def test_a_base_whose_records_are_unreadable_is_not_replaced_by_the_closest_row(
    tmp_path, parameters, constants, damaged
):
    # the table took the row closest to the rest as its base, every Δ against it, and said nothing
    _planned_sweep(tmp_path, parameters, constants)
    for name in damaged:
        (tmp_path / name / "summary.json").write_text('{"status": "fin')
    with pytest.raises(ReportError, match=rf"base cannot be told: .* {len(damaged)} trials without a readable record"):
        aggregate(collect(str(tmp_path)))


def test_unreadable_trials_of_rows_the_table_has_or_that_cannot_be_the_base_leave_it_alone(tmp_path):
    sweep = {"variant": {"values": ONE_CLOSEST}, "seed": {"values": [1, 2]}}
    _planned_sweep(tmp_path, sweep)
    for name in ("dot-seed=1", "heads-1-seed=1", "heads-1-seed=2"):  # a base seed; a whole row, not bare
        (tmp_path / name / "summary.json").write_text('{"status": "fin')
    table = aggregate(collect(str(tmp_path)))
    assert table.base.name == "dot" and [r.name for r in table.rows] == ["dot", "heads-4", "heads-4-learned"]
    _planned_sweep(tmp_path / "grid", {**FULL_GRID, "seed": {"values": [1, 2]}}, {})
    (tmp_path / "grid" / "heads=4-positions=sinusoidal-seed=1" / "summary.json").write_text('{"status": "fin')
    assert aggregate(collect(str(tmp_path / "grid"))).base.settings["model.heads"] == 4


def _unfinish(folder, prefix: str, how: str) -> None:
    """The trials whose names start with ``prefix`` failed (records readable) or were not run yet (``pending``)."""
    import json
    import shutil

    state = json.loads((folder / "sweep.json").read_text())
    for trial in state["trials"]:
        if trial["name"].startswith(prefix):
            if how == "pending":
                shutil.rmtree(folder / trial["name"])
                trial["status"] = "pending"
            else:
                summary = json.loads((folder / trial["name"] / "summary.json").read_text())
                (folder / trial["name"] / "summary.json").write_text(json.dumps({**summary, "status": "failed"}))
    (folder / "sweep.json").write_text(json.dumps(state))


@pytest.mark.parametrize("how", ["failed", "pending"])
def test_a_bare_base_variant_with_no_finished_trial_is_waited_for_not_replaced(tmp_path, how):
    # the base variant's trials failed (their records readable) or not run yet (a sweep in progress): the table took
    # heads-4, the row closest to the rest, as its base, every Δ against it, and said nothing
    _planned_sweep(tmp_path, {"variant": {"values": ONE_CLOSEST}, "seed": {"values": [1, 2]}})
    _unfinish(tmp_path, "dot-", how)
    with pytest.raises(
        ReportError,
        match=rf"^the table's base cannot be told yet: variant dot \(no overrides\) has "
        rf"no finished trial \(dot-seed=1: {how}, dot-seed=2: {how}\); wait for it or rerun it",
    ):
        aggregate(collect(str(tmp_path)))


@pytest.mark.parametrize("how", ["failed", "pending"])
def test_a_grid_base_point_with_no_finished_trial_is_waited_for_not_replaced(tmp_path, how):
    # ablate's defaults (heads 4, sinusoidal) are the base of this 2x2 grid; with its trials failed (records readable)
    # or not run yet, the table took heads=1, learned, the finished point closest to the rest, as its base
    _planned_sweep(tmp_path, {**FULL_GRID, "seed": {"values": [1, 2]}}, {})
    _unfinish(tmp_path, "heads=4-positions=sinusoidal", how)
    with pytest.raises(
        ReportError,
        match=rf"^the table's base cannot be told yet: point model.heads=4, model.positions=sinusoidal has no finished "
        rf"trial \(heads=4-positions=sinusoidal-seed=1: {how}, heads=4-positions=sinusoidal-seed=2: {how}\); "
        "wait for it or rerun it",
    ):
        aggregate(collect(str(tmp_path)))


def test_a_grid_base_point_is_waited_for_where_the_finished_points_share_its_other_values(tmp_path):
    # only heads=1 has finished: model.heads does not vary among the finished rows, and the rule over the points
    # of the finished rows' varying keys alone took heads=1, sinusoidal as the base
    _planned_sweep(tmp_path, FULL_GRID, {})
    _unfinish(tmp_path, "heads=4", "pending")
    with pytest.raises(
        ReportError, match=r"^the table's base cannot be told yet: point model.heads=4, model.positions=sinusoidal has"
    ):
        aggregate(collect(str(tmp_path)))


def test_a_grid_in_progress_whose_base_point_finished_keeps_it(tmp_path):
    _planned_sweep(tmp_path, {**FULL_GRID, "seed": {"values": [1, 2]}}, {})
    _unfinish(tmp_path, "heads=1-positions=learned", "pending")
    sweep = aggregate(collect(str(tmp_path)))
    assert (sweep.base.settings["model.heads"], sweep.base.settings["model.positions"]) == (4, "sinusoidal")
    assert len(sweep.rows) == 3
