"""Config parsing: types, overrides, one-line errors that name the key and suggest a fix."""

from __future__ import annotations

import pytest

from ablate.config import (
    Config,
    ConfigError,
    fingerprint,
    flatten,
    from_flat,
    load_config,
    replace,
    to_dict,
    valid_keys,
)

UI_KEYS = [
    "data.source",
    "data.src_lang",
    "data.tgt_lang",
    "data.vocab_size",
    "model.arch",
    "model.layers",
    "model.d_model",
    "model.d_ff",
    "model.heads",
    "model.dropout",
    "model.positions",
    "model.attention.score",
    "model.attention.scale",
    "train.max_time",
    "train.max_steps",
    "train.max_epochs",
    "train.max_tokens",
    "train.lr",
    "train.warmup",
    "train.label_smoothing",
    "train.devices",
    "eval.beam",
    "seed",
    "tracking.wandb",
    "tracking.project",
    "model.share_positions",
    "eval.length_penalty",
    "eval.len_penalty",
]


def test_user_interface_keys_exist():
    assert set(UI_KEYS) <= set(valid_keys())


def test_overrides_are_typed_from_yaml():
    cfg = load_config(
        None,
        [
            "model.heads=8",
            "model.attention.scale=false",
            "train.lr=5e-4",
            "train.max_time=600",
            "tracking.tags=[a,b]",
            "train.devices=auto",
        ],
    )
    assert cfg.model.heads == 8 and cfg.model.attention.scale is False
    assert cfg.train.lr == 5e-4 and cfg.train.max_time == 600.0
    assert cfg.tracking.tags == ("a", "b") and cfg.train.devices == "auto"
    assert load_config(None, ["model.attention.scale=0.5"]).model.attention.scale == 0.5


def test_scale_positions_and_length_penalty_defaults_and_choices():
    cfg = load_config(None, [])
    assert cfg.model.attention.scale == "auto" and cfg.model.share_positions is False
    assert (cfg.eval.length_penalty, cfg.eval.len_penalty) == ("fairseq", 1.0)
    for value, expected in (("auto", "auto"), ("true", True), ("false", False), ("1", 1.0), ("0.125", 0.125)):
        assert load_config(None, [f"model.attention.scale={value}"]).model.attention.scale == expected
    cfg = load_config(None, ["eval.length_penalty=gnmt", "eval.len_penalty=0.6", "model.share_positions=true"])
    assert (cfg.eval.length_penalty, cfg.eval.len_penalty, cfg.model.share_positions) == ("gnmt", 0.6, True)


def test_yaml_file_then_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("model:\n  heads: 2\n  d_model: 64\ntrain.max_steps: 7\n")
    cfg = load_config(path, ["model.heads=4"])
    assert (cfg.model.heads, cfg.model.d_model, cfg.train.max_steps) == (4, 64, 7)


@pytest.mark.parametrize(
    "override, expected",
    [
        ("model.head=8", "unknown config key 'model.head'; did you mean 'model.heads'?"),
        # a misspelt section named only itself and guessed a key of another ('modle' -> 'model.d_v')
        ("modle.heads=2", "unknown config key 'modle.heads'; did you mean 'model.heads'?"),
        ("trian.max_steps=3", "unknown config key 'trian.max_steps'; did you mean 'train.max_steps'?"),
        ("modle=2", "unknown config key 'modle'; did you mean 'model'?"),
        # under a section that exists, 'model.' matched every model key and guessed a stranger ('model.rnn')
        ("model.nonsense=3", "unknown config key 'model.nonsense'; valid keys: model.arch, "),
        (
            "model.rnn.nonsense=3",
            "unknown config key 'model.rnn.nonsense'; valid keys: model.rnn.cell, model.rnn.hidden, model.rnn.layers",
        ),
        ("model.lr=0.1", "unknown config key 'model.lr'; did you mean 'train.lr'?"),
        # a weak likeness (difflib ratio 0.6 to 0.7) is a guess: 'nonsense' -> 'nodes' (0.62), 'mode' -> 'nodes'
        ("train.nonsense=1", "unknown config key 'train.nonsense'; valid keys: train.accelerator, "),
        ("train.mode=1", "unknown config key 'train.mode'; valid keys: train.accelerator, "),
        ("model.rnn.hello=1", "unknown config key 'model.rnn.hello'; valid keys: model.rnn.cell, "),
        # ... unless one name holds the other (a key cut short): 'clip' -> 'clip_norm' (0.62)
        ("train.clip=1", "unknown config key 'train.clip'; did you mean 'train.clip_norm'?"),
        ("train.accum=2", "unknown config key 'train.accum'; did you mean 'train.accumulate'?"),
        ("trian.nonsense=1", "unknown config key 'trian.nonsense'; valid keys: data.builtin_eval_pairs, "),
        ("steps=1", "unknown config key 'steps'; did you mean 'train.max_steps'?"),
        ("beam=1", "unknown config key 'beam'; did you mean 'eval.beam'?"),
        (
            "model.atention.score=dot",
            "unknown config key 'model.atention.score'; did you mean 'model.attention.score'?",
        ),
        ("model.attention.score=additve", "did you mean 'additive'?"),
        ("model.positions=rope", "choose from: sinusoidal, learned, none, rotary, alibi"),
        ("model.heads=3", "model.heads=3 does not divide model.d_model=128"),
        ("model.heads=four", "expected an integer"),
        ("train.lr=-1", "train.lr=-1.0 must be positive"),
        ("model.dropout=1.5", "must be in [0, 1)"),
        ("model.attention.scale=autom", "expected auto or bool or float"),
        ("model.attention.scale=-1", "must be positive, auto, true or false"),
        ("eval.length_penalty=gnm", "did you mean 'gnmt'?"),
        ("model", "not of the form key=value"),
        ("data.builtin_pairs=0", "data.builtin_pairs=0 must be positive"),
        ("data.builtin_eval_pairs=-1", "data.builtin_eval_pairs=-1 must be positive"),
        ("train.threads=-2", "train.threads=-2 must not be negative"),
        # the decay floored every step after warm-up at min_lr / lr = 10x the peak: 2.5e-05 ... 7.5e-05, then 0.001
        ("train.lr=1e-4 train.min_lr=1e-3", "train.min_lr=0.001 is above the peak learning rate 0.0001"),
        ("train.min_lr=0.01", "train.min_lr=0.01 is above the peak learning rate 0.004419 (train.lr: d_model^-0.5"),
        ("train.num_workers=-1", "train.num_workers=-1 must not be negative"),
    ],
)
def test_bad_values_fail_with_one_line(override, expected):
    with pytest.raises(ConfigError) as err:
        load_config(None, override.split(" "))
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_malformed_yaml_names_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("model:\n  heads: 4\n   d_model: [\n")
    with pytest.raises(ConfigError, match=r"malformed YAML in .*bad.yaml line \d+"):
        load_config(path)


def test_explicit_d_k_allows_any_heads():
    cfg = load_config(None, ["model.heads=3", "model.d_k=32"])
    assert cfg.model.d_k == 32


def test_round_trip_and_fingerprint():
    cfg = load_config(None, ["model.heads=8"])
    assert from_flat(flatten(to_dict(cfg))) == cfg
    assert fingerprint(cfg) == fingerprint(replace(cfg, **{"tracking.project": "other"}))
    assert fingerprint(cfg) != fingerprint(replace(cfg, **{"model.heads": 4}))
    assert Config() == load_config()


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (["train.max_time=.nan", "train.max_steps=-1"], "train.max_time=nan is not a finite number"),
        (["train.max_time=.inf", "train.max_steps=-1"], "train.max_time=inf is not a finite number"),
        (["train.lr=.nan"], "train.lr=nan is not a finite number"),
        (["model.dropout=.nan"], "model.dropout=nan is not a finite number"),
        (["train.max_epochs=-1", "train.max_steps=-1"], "would train forever"),
        (["train.max_epochs=null", "train.max_steps=-1"], "would train forever"),
        (["train.max_steps=-5"], "train.max_steps=-5 must be a positive number of steps, or -1 for no limit"),
        (["train.max_steps=0"], "train.max_steps=0 must be a positive number"),
        (["train.max_epochs=0"], "train.max_epochs=0 must be a positive number"),
        (["train.weight_decay=-1"], "train.weight_decay=-1.0 must not be negative"),
        (["train.clip_norm=-1"], "train.clip_norm=-1.0 must not be negative"),
        (["train.betas=[0.9, 1.5]"], "train.betas=[0.9, 1.5] must both be in [0, 1)"),
    ],
)
def test_values_that_make_no_sense_are_refused_in_one_line(overrides, expected):
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "overrides",
    [
        ["train.max_epochs=-1", "train.max_steps=-1", "train.max_time=60"],  # no step or epoch limit, a time one
        ["train.max_epochs=null", "train.max_steps=100"],
        ["train.max_epochs=2"],
        ["train.weight_decay=0.01", "train.clip_norm=0"],
    ],
)
def test_a_finite_budget_and_sane_values_pass(overrides):
    load_config(None, overrides)


def test_a_key_given_dotted_and_nested_in_one_file_is_refused(tmp_path):
    path = tmp_path / "both.yaml"
    path.write_text("model.heads: 2\nmodel:\n  heads: 4\n  d_model: 64\n")
    with pytest.raises(ConfigError, match=r"config key 'model.heads' is given twice \(dotted and nested, 2 and 4\)"):
        load_config(path)
    path.write_text("model.heads: 2\nmodel:\n  d_model: 64\n")  # dotted and nested, different keys: fine
    assert (load_config(path).model.heads, load_config(path).model.d_model) == (2, 64)


@pytest.mark.parametrize(
    "overrides, unused",
    [
        (["model.arch=rnn", "model.heads=8", "model.positions=rotary"], ["model.heads=8", "model.positions=rotary"]),
        (
            ["model.arch=rnn", "model.positions=rotary", "model.positions_params.base=500"],
            ["model.positions=rotary", "model.positions_params.base=500.0"],
        ),
        (["model.arch=rnn", "model.heads=4", "model.rnn.hidden=64"], []),  # defaults, and its own keys
        (["model.rnn.hidden=512", "model.heads=8"], ["model.rnn.hidden=512"]),
        (  # the RNN's one attention is cross_score's: score and its params reached nothing, silently
            ["model.arch=rnn", "model.attention.score=gaussian", "model.attention.params.bandwidth=true"]
            + ["model.attention.cross_score=additive"],
            ["model.attention.score=gaussian", "model.attention.params.bandwidth=True"],
        ),
        (["model.arch=rnn", "model.attention.score=gaussian", "model.attention.cross_score=gaussian"], []),
        (["model.attention.score=gaussian", "model.attention.cross_score=additive"], []),  # the Transformer reads both
    ],
)
def test_the_keys_an_architecture_does_not_read_are_named(overrides, unused):
    """An RNN took model.heads=8 or model.positions=rotary and silently ignored them; a sweep sets them for all
    its rows (sweeps/rnn-vs-transformer.yaml), so they are named at training, not refused."""
    from ablate.config import unused_keys

    assert unused_keys(load_config(None, overrides)) == unused


def test_rotary_on_an_rnn_is_not_refused_for_a_head_size_it_does_not_have():
    """``model.rnn.hidden=255`` with rotary was refused as 'rotary needs an even per-head size d_k'."""
    assert (
        load_config(None, ["model.arch=rnn", "model.positions=rotary", "model.rnn.hidden=255"]).model.rnn.hidden == 255
    )
