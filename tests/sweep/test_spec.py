"""Sweep files: every shipped file is valid W&B, expands, and yields valid trial configs."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

from ablate.config import ConfigError, load_config, parse_override
from ablate.sweep import spec as spec_module
from ablate.sweep.planner import next_points
from ablate.sweep.spec import (
    SweepError,
    format_value,
    load_spec,
    resolve,
    spec_from_dict,
    to_overrides,
    trial_name,
    trial_overrides,
)

from tests.helpers.sweep import small_spec

SWEEPS = sorted((Path(__file__).resolve().parents[2] / "sweeps").glob("*.yaml"))
EXPECTED = {
    "quickstart": 8,
    "table3": 57,
    "table3-cpu": 38,
    "calibration-cpu": 16,
    "calibration-cpu-17-32": 16,
    "table3-budget-cpu": 12,
    "mission-budget-cpu": 9,
    "defaults-cpu": 4,
    "mission-cpu": 30,
    "scoring": 72,
    "positions": 15,
    "heads": 18,
    "rnn-vs-transformer": 9,
    "rnn-vs-transformer-builtin": 6,
    "soak": 12,
}


def expand(spec) -> list[dict]:
    return next_points(spec, [], 10_000)


def test_every_expected_sweep_file_is_shipped():
    assert {p.stem for p in SWEEPS} == set(EXPECTED)


@pytest.mark.slow
@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_shipped_sweep_is_valid_wandb_and_every_trial_config_loads(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sweeps import SweepConfig

    raw = yaml.safe_load(path.read_text())
    SweepConfig(raw)  # W&B's own validation (raises on any schema violation)
    assert "#" in path.read_text(), "sweep files explain themselves in comments"
    spec = load_spec(path)
    points = expand(spec)
    assert len(points) == EXPECTED[path.stem]
    names: set[str] = set()
    for point in points:
        name = trial_name(spec, point, names)
        names.add(name)
        cfg = load_config(None, trial_overrides(spec, point, name))  # raises ConfigError if impossible
        assert cfg.tracking.group == spec.name and cfg.tracking.name == name
        for key, value in resolve(point).items():  # every parameter reaches the config unchanged
            node = cfg
            for part in key.split("."):
                node = getattr(node, part)
            assert node == (tuple(value) if isinstance(value, list) else value), (name, key)
    assert len(names) == len(points) and all("-2" not in n for n in names)


CURVE_POINTS = 8  # validations per trial: enough for a learning curve and a Δ-vs-step figure


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in SWEEPS if p.stem != "soak"], ids=lambda p: p.stem)
def test_shipped_sweeps_validate_often_enough_for_a_curve(path):
    """Every trial validates at least CURVE_POINTS times (every val_every steps, and at the end), so
    ``ablate plot`` draws learning curves and Δ vs step from it (soak.yaml is a fault-injection test)."""
    for point in expand(load_spec(path)):
        train = load_config(None, to_overrides(resolve(point))).train
        assert train.max_steps and train.val_every, f"{path.name}: set train.max_steps and train.val_every"
        points = train.max_steps // train.val_every + (train.max_steps % train.val_every > 0)
        assert points >= CURVE_POINTS, f"{path.name}: {points} validations per trial"


@pytest.mark.slow
@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_shipped_sweeps_budget_every_trial_by_the_same_number_of_steps(path):
    """A wall-clock budget gives a bigger or slower row fewer steps, and a busy machine a different model."""
    spec = load_spec(path)
    budgets = set()
    for point in expand(spec):
        train = load_config(None, to_overrides(resolve(point))).train
        assert train.max_time is None and train.max_epochs is None and train.max_steps > 0, (path.stem, point)
        budgets.add((train.max_steps, train.max_tokens, train.accumulate))
    assert len(budgets) == 1, f"{path.stem}: trials train different amounts: {budgets}"


def test_table3_rows_change_one_thing_from_the_paper_base():
    spec = load_spec(next(p for p in SWEEPS if p.stem == "table3"))
    base = load_config(None, to_overrides(resolve({**_constants(spec), "variant": "base"})))
    m = base.model
    assert (m.layers, m.d_model, m.d_ff, m.heads, m.dropout, base.train.label_smoothing) == (6, 512, 2048, 8, 0.1, 0.1)
    assert base.data.source == "hf:bentrevett/multi30k"
    variants = {v["name"] if isinstance(v, dict) else v: v for v in spec.parameters["variant"]["values"]}
    assert variants["B-dk16"] == {"name": "B-dk16", "model.d_k": 16, "model.d_v": 64}
    rows = {name[0] for name in variants if name != "base"}
    assert rows == set("ABCDE") and spec.parameters["seed"]["values"] == [1, 2, 3]


def _constants(spec) -> dict:
    return {k: p["value"] for k, p in spec.parameters.items() if "value" in p}


def test_variants_apply_on_top_of_the_base_and_name_the_trial():
    spec = small_spec(
        {
            "model.heads": {"value": 4},
            "seed": {"values": [1, 2]},
            "variant": {
                "values": [
                    "base",
                    {"name": "one-head", "model.heads": 1, "model": {"attention": {"score": "additive"}}},
                ]
            },
        }
    )
    points = expand(spec)
    assert len(points) == 4
    one = next(p for p in points if p["variant"] != "base" and p["seed"] == 2)
    assert trial_name(spec, one, set()) == "one-head-seed=2"
    assert resolve(one)["model.heads"] == 1 and resolve(one)["model.attention.score"] == "additive"
    cfg = load_config(None, trial_overrides(spec, one, "one-head-seed=2"))
    assert cfg.model.heads == 1 and cfg.model.attention.score == "additive" and cfg.seed == 2
    assert cfg.tracking.tags == ("one-head", "seed=2")


@pytest.mark.parametrize("tags", [["paper"], "paper", ["seed=2", "paper", "paper"]])
def test_a_sweeps_own_tags_add_to_each_trials_labels(tags):
    """A constant ``tracking.tags`` parameter (or a command-line ``tracking.tags=``) replaced each trial's tags
    (``["paper"]`` for every trial): the labels W&B filters a sweep's runs by were gone."""
    spec = small_spec({"seed": {"values": [1, 2]}, "model.heads": {"values": [2, 4]}, "tracking.tags": {"value": tags}})
    point = next(p for p in expand(spec) if p["seed"] == 2 and p["model.heads"] == 4)
    overrides = trial_overrides(spec, point, "heads=4-seed=2", extra=["tracking.tags=[cli, paper]"])
    assert sum(o.startswith("tracking.tags=") for o in overrides) == 1
    assert load_config(None, overrides).tracking.tags == ("heads=4", "seed=2", "paper", "cli")
    wrong = small_spec({"seed": {"values": [1, 2]}, "tracking.tags": {"value": 5}})  # refused as the trainer does
    with pytest.raises(ConfigError, match="tracking.tags=5 is not valid"):
        load_config(None, trial_overrides(wrong, expand(wrong)[0], "seed=1"))


def test_the_declared_base_is_about_the_table_not_an_override_of_any_trial():
    from ablate.sweep.spec import expand_variant

    spec = small_spec({"variant": {"values": ["two", {"name": "one", "model.heads": 1}]}, "base": {"value": "two"}})
    points = next_points(spec, [], 10)
    assert [p["base"] for p in points] == ["two", "two"]  # in every point, so every record carries it
    assert all("base" not in resolve(p) for p in points)
    assert expand_variant(["base=two", "variant=two", "model.heads=2"]) == ["model.heads=2", "tracking.variant=two"]


@pytest.mark.parametrize(
    "value",
    [
        1e-05,
        0.0005,
        0.1,
        3.0,
        1e20,
        -2.5e-7,
        4,
        True,
        False,
        None,
        "additive",
        "1e-3",
        "true",
        "hf:bentrevett/multi30k",
        "a b",
        ["x", "seed=2"],
        "",
        "[red]x",  # not YAML at all (a flow sequence, then text): quoted, not a ParserError traceback
        "{a: 1} b",
    ],
)
def test_override_values_read_back_as_written(value):
    key, parsed = parse_override(to_overrides({"k": value})[0])
    assert key == "k" and parsed == value and type(parsed) is type(value)
    assert "\n" not in format_value(value)


BAD = [
    ("method: grid\nparameters: {seed: {values: [1]}}\nfoo: 1\n", "unknown top-level key 'foo'"),
    ("method: grid\nparamters: {seed: {values: [1]}}\n", "did you mean 'parameters'?"),
    ("method: grdi\nparameters: {seed: {values: [1]}}\n", "method"),
    ("parameters: {seed: {values: [1]}}\n", "missing required key: 'method'"),
    ("method: grid\nparameters: {seed: {valuess: [1]}}\n", "parameters.seed: not a valid W&B parameter"),
    ("method: grid\nparameters: {model.head: {values: [1]}}\n", "did you mean 'model.heads'?"),
    ("method: grid\nparameters: {model.nonsense: {values: [1]}}\n", "'model.nonsense' (see `ablate train --help`"),
    ("method: grid\nparameters: {model.lr: {values: [1]}}\n", "did you mean 'train.lr'?"),
    ("method: grid\nparameters: {seed: {min: 3, max: 1}}\n", "seed"),
    ("method: grid\nparameters: {model: {parameters: {heads: {value: 2}}}}\n", "write dotted names"),
    ("method: grid\nparameters: {variant: {value: a}}\n", "must list 'values'"),
    ("method: grid\nparameters: {variant: {values: [a, a]}}\n", "duplicate variant name 'a'"),
    (f"method: grid\nparameters: {{variant: {{values: [{'v' * 300}]}}}}\n", "is 300 characters long: use at most 64"),
    ("method: grid\nparameters: {variant: {values: ['a/b']}}\n", "'a/b' holds characters unsafe in a folder name"),
    ('method: grid\nparameters: {variant: {values: [{name: "x\\n|y"}]}}\n', "e.g. 'x_y'"),
    ("method: grid\nparameters: {variant: {values: [..]}}\n", "starting with a letter or digit"),
    ("method: grid\nparameters: {variant: {values: [{model.heads: 2}]}}\n", "'name'"),
    ("method: grid\nparameters: {variant: {values: [{name: x, model.hedas: 2}]}}\n", "values[0] (x)"),
    ("method: bayes\nparameters: {seed: {values: [1]}}\n", "needs a 'metric'"),
    ("method: grid\nparameters: {comparisons: {values: [a]}}\n", "comparisons is a constant"),
    ("method: grid\nparameters: {comparisons: {value: [{between: model.head}]}}\n", "did you mean 'model.heads'?"),
    ("method: grid\nparameters: {comparisons: {value: [{between: seed, values: [1]}]}}\n", "reference value first"),
    ("method: grid\nparameters: {comparisons: {value: [{vs: seed}]}}\n", "write {between: <key>, values: [...]}"),
    ("method: grid\nparameters: {variant: {values: [a, b]}, base: {value: c}}\n", "'c' is not one of them; write base"),
    ("method: grid\nparameters: {model.heads: {values: [1, 2]}, base: {value: {model.heads: 4}}}\n", "model.heads=4"),
    (
        "method: grid\nparameters: {model.heads: {values: [1, 2]}, base: {value: {model.d_k: 4}}}\n",
        "'model.d_k' is not",
    ),
    ("method: grid\nparameters: {model.heads: {values: [1, 2]}, base: {value: one}}\n", "the base point of the grid"),
    (
        "method: grid\nparameters:\n  seed: {values: [1, 2]\n  model.heads: {value: 2}\n",
        "line 4: expected ',' or '}', but got '<scalar>' (while parsing a flow mapping started on line 3)",
    ),
    ("- a\n- b\n", "must hold a W&B sweep configuration"),
    ("method: grid\nparameters: {seed: {distribution: normal}}\n", "Parameter seed is a disallowed type with grid"),
    (
        "method: grid\nparameters: {seed: {values: [1, 2]}, variant: {values: [base, {name: fixed, seed: 7}]}}\n",
        "values[1] (fixed) sets seed, which the sweep varies (parameters.seed): its trials would be identical replicates",
    ),
]


@pytest.mark.parametrize("text, message", BAD, ids=[m for _, m in BAD])
def test_a_bad_sweep_file_is_one_line_naming_the_problem(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SweepError) as err:
        load_spec(path)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("param", [{"distribution": "uniform", "max": 1.0}, {"distribution": "q_uniform", "min": 1}])
def test_without_the_sweeps_engine_a_range_lacking_min_or_max_is_refused_in_one_line(monkeypatch, param):
    """W&B's schema (read from ``sweeps``) refuses it; without ``sweeps``, planning raised a TypeError."""
    monkeypatch.setattr(spec_module, "_schema_validator", lambda: None)
    for method in ("grid", "random"):
        with pytest.raises(SweepError, match="parameters.train.lr: not a valid W&B parameter"):
            spec_from_dict({"method": method, "parameters": {"train.lr": param}})


def test_the_sweep_name_comes_from_the_file_or_its_stem(tmp_path):
    path = tmp_path / "my sweep.yaml"
    path.write_text("method: grid\nparameters: {seed: {values: [1]}}\n")
    assert load_spec(path).name == "my_sweep"
    path.write_text("name: heads/v2\nmethod: grid\nparameters: {seed: {values: [1]}}\n")
    assert load_spec(path).name == "heads_v2"
    assert spec_from_dict({"method": "grid", "parameters": {"seed": {"value": 1}}}).varying == []


def test_comparisons_are_a_constant_that_never_reaches_the_trainer():
    """``comparisons`` (which rows a table compares) is a W&B constant, so ``wandb sweep`` accepts it and
    each W&B run's config carries it to ``ablate table wandb:...``; the trainer never sees it."""
    from ablate.sweep.spec import parse_comparisons

    spec = load_spec(next(p for p in SWEEPS if p.stem == "scoring"))
    assert parse_comparisons(spec.parameters["comparisons"]["value"]) == [
        ("model.attention.score", ["dot", "additive"]),
        ("model.attention.scale", [True, False]),
    ]
    point = expand(spec)[0]
    assert point["comparisons"] == spec.parameters["comparisons"]["value"]  # in every sampled point
    assert "comparisons" not in resolve(point) and "comparisons" not in spec.varying
    assert not any(o.startswith("comparisons=") for o in trial_overrides(spec, point, "x"))


def test_a_long_grid_value_gives_a_bounded_stable_folder_name():
    spec = spec_from_dict(
        {
            "method": "grid",
            "parameters": {"data.source": {"values": ["x" * 300, "x" * 299 + "y"]}, "seed": {"value": 1}},
        }
    )
    names = [trial_name(spec, p, set()) for p in expand(spec)]
    assert all(len(n) <= 120 for n in names) and len(set(names)) == 2
    assert names == [trial_name(spec, p, set()) for p in expand(spec)]  # the same point, the same name


def test_a_variant_fixing_a_swept_key_is_refused_by_a_dry_run_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from ablate.cli import app

    path = tmp_path / "clash.yaml"
    path.write_text(
        "method: grid\nparameters:\n  seed: {values: [1, 2]}\n  variant: {values: [{name: fixed, seed: 7}]}\n"
    )
    result = CliRunner().invoke(app, ["sweep", "run", str(path), "--dry-run", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output  # it planned fixed-seed=1 and fixed-seed=2, both seed 7, rc 0
    assert "identical replicates" in result.output and len(result.output.strip().splitlines()) == 1


def test_a_sweep_file_nested_5000_deep_is_one_line_not_a_traceback(tmp_path):
    from typer.testing import CliRunner

    from ablate.cli import app

    path = tmp_path / "deep.yaml"
    path.write_text("method: grid\nparameters:\n  seed: {values: " + "[" * 5000 + "1" + "]" * 5000 + "}\n")
    result = CliRunner().invoke(app, ["sweep", "run", str(path), "--dry-run", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output  # was a RecursionError traceback, exit 1
    assert "line 3: lists and mappings nest more than 100 levels deep" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "parameters, overrides",
    [
        ("  tracking.name: {value: x}\n", []),
        ("  variant: {values: [a, {name: b, tracking.name: x}]}\n", []),
        ("", ["tracking.name=x"]),
    ],
)
def test_one_run_name_for_every_trial_is_refused_in_one_line(tmp_path, parameters, overrides):
    """``tracking.name=x`` on a sweep (a constant, a variant's, on the command line) gave every trial (every seed)
    the W&B run name ``x``, applied after the trial's own; a varying ``tracking.name`` still names each trial."""
    from typer.testing import CliRunner

    from ablate.cli import app

    path = tmp_path / "named.yaml"
    path.write_text("method: grid\nparameters:\n  seed: {values: [1, 2]}\n" + parameters)
    args = ["sweep", "run", str(path), "--dry-run", "--out", str(tmp_path / "out"), *overrides]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output  # rc 0, both trials "tracking.name=x"
    assert "tracking.group" in result.output and len(result.output.strip().splitlines()) == 1, result.output
    path.write_text("method: grid\nparameters:\n  tracking.name: {values: [a, b]}\n")
    result = CliRunner().invoke(app, ["sweep", "run", str(path), "--dry-run", "--out", str(tmp_path / "other")])
    assert result.exit_code == 0 and "tracking.name=a" in result.output, result.output


@pytest.mark.parametrize("engine", [True, False])
def test_a_misspelled_distribution_is_one_line_naming_w_and_bs_distributions(monkeypatch, engine):
    """Without the ``[bayes]`` extra (the default install) a random sweep with ``log_unifrom_values`` ended in a
    ValueError traceback when planned; with it the line said 'use value, values, or a distribution (min/max)',
    which the parameter already was, and named no distribution."""
    if engine:
        pytest.importorskip("sweeps")
    else:
        monkeypatch.setattr(spec_module, "_schema_validator", lambda: None)
    param = {"min": 0.001, "max": 0.1, "distribution": "log_unifrom_values"}
    with pytest.raises(SweepError) as err:
        spec = spec_from_dict({"method": "random", "run_cap": 2, "parameters": {"train.lr": param}})
        next_points(spec, [], 2)
    assert str(err.value).startswith(
        "sweep: parameters.train.lr.distribution: 'log_unifrom_values' is not one of W&B's"
    )
    assert "(did you mean 'log_uniform_values'?)" in str(err.value) and "q_beta" in str(err.value)


def test_a_misspelled_early_terminate_type_names_the_choice():
    """W&B's schema error for a oneOf read 'early_terminate: {...} is not valid under any of the given schemas'."""
    pytest.importorskip("sweeps")
    config = {"method": "random", "run_cap": 2, "metric": {"name": "val/bleu", "goal": "maximize"}}
    config |= {"early_terminate": {"type": "hyperbnd", "min_iter": 3}, "parameters": {"train.lr": {"values": [1]}}}
    with pytest.raises(SweepError, match=r"^sweep: early_terminate.type: 'hyperbnd' is not one of \['hyperband'\]$"):
        spec_from_dict(config)
