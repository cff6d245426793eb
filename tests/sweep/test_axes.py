"""Comma-list overrides as grid axes (``ablate sweep run FILE key=a,b``)."""

from __future__ import annotations

import pytest

from ablate.sweep.planner import next_points
from ablate.sweep.spec import (
    SweepError,
    SweepSpec,
    axis_overrides,
    spec_from_dict,
    split_axes,
    split_top_level,
    with_axes,
)


@pytest.mark.parametrize(
    "raw, parts",
    [
        ("4,8", ["4", "8"]),
        ("8", ["8"]),
        ("[a,b]", ["[a,b]"]),
        ("[a,b],[c]", ["[a,b]", "[c]"]),
        ('"a,b"', ['"a,b"']),
        ("'a,b',c", ["'a,b'", "c"]),
        ("{x: 1, y: 2}", ["{x: 1, y: 2}"]),
    ],
)
def test_commas_split_only_at_the_top_level(raw, parts):
    assert split_top_level(raw) == parts


def test_split_axes_keeps_plain_overrides_and_parses_each_value():
    plain, axes = split_axes(["train.max_steps=3", "model.heads=4,8", "train.lr=0.001,2.0e-3", 'tracking.name="a,b"'])
    assert plain == ["train.max_steps=3", 'tracking.name="a,b"']
    assert axes == {"model.heads": [4, 8], "train.lr": [1e-3, 2e-3]}
    assert axis_overrides(axes) == ["model.heads=4,8", "train.lr=0.001,0.002"]


@pytest.mark.slow
def test_an_axis_replaces_the_files_parameter_and_crosses_the_grid():
    spec = spec_from_dict(
        {"method": "grid", "parameters": {"seed": {"values": [1, 2]}, "model.heads": {"value": 2}}}, name="s"
    )
    crossed = with_axes(spec, {"model.heads": [4, 8]})
    assert crossed.parameters["model.heads"] == {"values": [4, 8]} and spec.parameters["model.heads"] == {"value": 2}
    points = next_points(crossed, [], 100)
    assert sorted((p["seed"], p["model.heads"]) for p in points) == [(1, 4), (1, 8), (2, 4), (2, 8)]
    assert with_axes(spec, {}) is spec


def test_a_bad_axis_key_is_a_sweep_error():
    spec = spec_from_dict({"method": "grid", "parameters": {"seed": {"values": [1]}}}, name="s")
    with pytest.raises(SweepError, match="unknown config key 'model.headz'"):
        with_axes(spec, {"model.headz": [1, 2]})


def test_the_reserved_parameters_take_no_comma_list():
    with pytest.raises(SweepError, match="'variant' is set in the sweep file"):
        split_axes(["variant=a,b"])


def test_random_and_bayes_proposals_are_the_same_when_planned_again():
    """A dry-run lists the points the real run trains: W&B's random search draws from Python's
    generator and its bayes search from numpy's; both are seeded by the sweep name and state."""
    import random

    import numpy as np

    for method in ("random", "bayes"):
        spec = SweepSpec(
            name=f"r-{method}",
            path=None,
            config={
                "method": method,
                "metric": {"name": "val/bleu", "goal": "maximize"},
                "parameters": {"train.lr": {"min": 1e-4, "max": 1e-3}, "model.heads": {"values": [1, 2, 4, 8]}},
            },
        )
        first = next_points(spec, [], 3)
        random.random(), np.random.random()  # whatever else the process drew in between
        assert next_points(spec, [], 3) == first, method
