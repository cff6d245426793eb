"""Grid and random points without W&B's engine: the grid in exactly W&B's order, random seeded."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from ablate.sweep.planner import next_points
from ablate.sweep.spec import SweepError, grid_points, grid_size, load_spec, random_point, spec_from_dict
from ablate.sweep.state import Trial

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p for p in (ROOT / "sweeps").glob("*.yaml") if load_spec(p).method == "grid")
CONSTRUCTED = {
    "mixed kinds": {
        "seed": {"values": [3, 1, 2]},
        "train.lr": {"min": 1, "max": 3, "distribution": "q_uniform", "q": 0.5},
        "model.heads": {"min": 1, "max": 4},
        "data.source": {"value": "builtin"},
    },
    "equal values once": {
        "model.heads": {"values": [2, 4, 2.0, 8]},  # 2.0 is 2 to W&B: the first place, the later spelling
        "variant": {"values": ["a", {"name": "b", "model.layers": 1}]},
        "train.lr": {"values": [0.001, 1e-3, 0.002]},
    },
}


def wandb_grid(parameters: dict, trials: list | None = None) -> list[dict]:
    """W&B's engine's grid, every point (after ``trials``), as points."""
    sweeps = pytest.importorskip("sweeps")
    from ablate.sweep.planner import point_of

    runs = [sweeps.SweepRun(name=t.name, config={k: {"value": v} for k, v in t.point.items()}) for t in trials or []]
    config = {"method": "grid", "parameters": parameters}
    return [point_of(r.config) for r in sweeps.next_runs(config, runs, validate=False, n=10**6) if r is not None]


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_the_grid_of_every_shipped_sweep_is_wandbs(path):
    parameters = load_spec(path).search_config["parameters"]
    ours = list(grid_points(parameters))
    assert ours == wandb_grid(parameters) and len(ours) == grid_size(parameters)


@pytest.mark.parametrize("name", sorted(CONSTRUCTED))
def test_a_grid_of_every_kind_is_wandbs_and_resumes_where_wandb_would(name):
    parameters = CONSTRUCTED[name]
    spec = spec_from_dict({"method": "grid", "parameters": parameters}, name="g")
    ours = next_points(spec, [], 1000)
    assert ours == wandb_grid(parameters) and len(ours) == grid_size(parameters)
    done = [Trial(name=f"t{i}", point=p) for i, p in enumerate(ours[::2])]  # every other point already planned
    assert next_points(spec, done, 1000) == wandb_grid(parameters, done) == ours[1::2]


def test_a_large_grid_is_enumerated_lazily():
    parameters = {"seed": {"values": list(range(1000))}, "train.lr": {"values": [i / 1e4 for i in range(1, 1001)]}}
    points = grid_points(parameters)
    assert grid_size(parameters) == 10**6
    assert next(points) == {"seed": 0, "train.lr": 0.0001} and next(points) == {"seed": 0, "train.lr": 0.0002}


RANDOM = {
    "train.lr": {"distribution": "log_uniform_values", "min": 1e-4, "max": 1e-2},
    "train.warmup": {"min": 10, "max": 20},
    "train.label_smoothing": {"min": 0.0, "max": 0.2},
    "model.dropout": {"distribution": "q_uniform", "min": 0.0, "max": 0.5, "q": 0.1},
    "model.heads": {"values": [1, 2, 4], "probabilities": [0.2, 0.3, 0.5]},
    "data.source": {"value": "builtin"},
}


def test_random_points_are_seeded_and_inside_their_distributions():
    first = [random_point(RANDOM, random.Random(7)) for _ in range(3)]
    assert first == [random_point(RANDOM, random.Random(7)) for _ in range(3)]
    rng = random.Random(1)
    for point in (random_point(RANDOM, rng) for _ in range(500)):
        assert 1e-4 <= point["train.lr"] <= 1e-2 and point["train.warmup"] in range(10, 21)
        assert 0 <= point["train.label_smoothing"] <= 0.2 and point["model.heads"] in (1, 2, 4)
        assert math.isclose(point["model.dropout"] * 10, round(point["model.dropout"] * 10))
        assert point["data.source"] == "builtin" and list(point) == sorted(RANDOM)


def test_random_planning_is_reproducible_without_wandbs_engine():
    spec = spec_from_dict({"method": "random", "run_cap": 5, "parameters": RANDOM}, name="r")
    assert next_points(spec, [], 5) == next_points(spec, [], 5)
    assert next_points(spec, [Trial(name="x", point={})], 5) != next_points(spec, [], 5)  # the next draws


def test_without_wandbs_engine_grid_and_random_plan_and_bayes_names_the_extra(monkeypatch):
    import importlib

    monkeypatch.setitem(__import__("sys").modules, "sweeps", None)  # not installed
    importlib.invalidate_caches()
    grid = spec_from_dict({"method": "grid", "parameters": CONSTRUCTED["mixed kinds"]}, name="g")
    assert len(next_points(grid, [], 1000)) == grid_size(CONSTRUCTED["mixed kinds"])
    assert len(next_points(spec_from_dict({"method": "random", "parameters": RANDOM}, name="r"), [], 3)) == 3
    bayes = {"method": "bayes", "metric": {"name": "val/bleu", "goal": "maximize"}, "parameters": RANDOM}
    with pytest.raises(SweepError, match=r"method 'bayes' needs W&B's sweeps engine.*pip install 'ablate\[bayes\]'"):
        spec_from_dict(bayes, name="b")


def test_a_folder_of_sweep_files_named_sweeps_is_not_wandbs_engine(tmp_path, monkeypatch):
    import sys

    from ablate.sweep.spec import engine_installed

    (tmp_path / "sweeps").mkdir()  # a checkout's sweeps/ (a namespace package on sys.path), not the engine
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.delitem(sys.modules, "sweeps", raising=False)
    assert not engine_installed()


def test_a_missing_sweeps_engine_reads_the_same_from_the_sweep_file_check_and_the_planner(monkeypatch):
    """The file check (``spec_from_dict``) and the planner's import (a sweep resumed where the engine is gone)
    said it in two wordings from two places; one line from one place, naming the sweep, in both."""
    import importlib

    monkeypatch.setitem(__import__("sys").modules, "sweeps", None)  # not installed
    importlib.invalidate_caches()
    bayes = {"method": "bayes", "metric": {"name": "val/bleu", "goal": "maximize"}, "parameters": RANDOM}
    with pytest.raises(SweepError) as checked:
        spec_from_dict(bayes, name="b")
    monkeypatch.setattr("ablate.sweep.spec.engine_installed", lambda: True)  # found when the sweep file was read
    spec = spec_from_dict(bayes, name="b")
    with pytest.raises(SweepError) as imported:
        next_points(spec, [], 1)
    tail = "method 'bayes' needs W&B's sweeps engine, which is not installed: pip install 'ablate[bayes]'"
    assert str(checked.value) == f"sweep: {tail}"
    assert str(imported.value) == f"{spec.describe()}: {tail}"
