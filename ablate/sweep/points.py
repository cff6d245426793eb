"""Grid and random points, planned as W&B's ``sweeps`` engine plans them, without it.

W&B's engine pins numpy<2; these two methods need nothing of it. A grid is enumerated lazily in
W&B's order (:func:`grid_points`: parameters sorted by name, the last varying fastest, equal values
once) and counted without enumerating it (:func:`grid_size`); a random point is drawn from W&B's
distributions with a seeded Python generator (:func:`random_point`), the same point for the same
seed, though not W&B's own draw. ``tests/sweep/test_points.py`` compares the grid with W&B's engine.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from typing import Any, Iterator, Optional

Point = dict[str, Any]
"""One configuration: ``{parameter name: value}`` (constants included)."""


def axis_values(name: str, param: dict[str, Any]) -> list[Any]:
    """The values a grid takes for one parameter, in W&B's order, each once.

    ``value``: that one; ``values``: in order, a value equal to an earlier one (as W&B hashes them:
    its YAML, an integral float as the int) dropped, the later spelling kept as W&B keeps it;
    ``int_uniform`` (integer ``min``/``max``): ``min..max``; ``q_uniform``: ``min, min+q, ...`` below ``max``.

    Raises:
        ValueError: a distribution a grid cannot enumerate (W&B's own words).
    """
    if "value" in param:
        return [param["value"]]
    if "values" in param and "probabilities" not in param and param.get("distribution", "categorical") == "categorical":
        unique: dict[str, Any] = {}
        for value in param["values"]:
            unique[value_key(value)] = value  # a repeat keeps the first one's place and takes its spelling
        return list(unique.values())
    low, high, kind = param.get("min"), param.get("max"), param.get("distribution")
    if kind in (None, "int_uniform") and isinstance(low, int) and isinstance(high, int) and "q" not in param:
        return list(range(low, high + 1))
    if kind == "q_uniform":
        q = param.get("q", 1)
        count = max(0, math.ceil((high - low) / q))
        return [low + i * q for i in range(count)]
    raise ValueError(
        f"Parameter {name} is a disallowed type with grid search. Grid search requires all parameters to be "
        f"categorical, constant, int_uniform, or q_uniform. Specification of probabilities for categorical "
        f"parameters is disallowed in grid search"
    )


def value_key(value: Any) -> str:
    """What makes two grid values the same for W&B (an integral float is its int: ``3e6`` is ``3000000``)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return json.dumps(value, sort_keys=True, default=str)


def grid_key(point: Point, parameters: dict[str, Any]) -> tuple[str, ...]:
    """A point's grid position: :func:`value_key` of each parameter's value (names sorted, constants too)."""
    return tuple(value_key(point.get(name)) for name in sorted(parameters))


def grid_points(parameters: dict[str, Any]) -> Iterator[Point]:
    """Every point of the grid, lazily, in W&B's order: parameters sorted by name, the last varying fastest.

    Nothing is built up front, so a grid of 10^6 points costs its axes in memory; :func:`grid_size`
    counts it without enumerating.
    """
    names = sorted(parameters)
    axes = [axis_values(name, parameters[name]) for name in names]
    for values in itertools.product(*axes):
        yield dict(zip(names, values))


def random_point(parameters: dict[str, Any], rng: random.Random) -> Point:
    """One draw of every parameter (names sorted, as W&B draws them), from W&B's distributions.

    ``uniform``, ``int_uniform``, ``q_uniform``; ``log_uniform`` / ``inv_log_uniform`` (bounds are
    exponents) and their ``_values`` forms (bounds are values); ``normal``, ``log_normal``, ``beta``
    and their ``q_`` forms; ``categorical`` (``probabilities`` as weights); constants. Without a
    ``distribution``: ``values`` is categorical, integer ``min``/``max`` int_uniform, else uniform.
    """
    return {name: _draw(parameters[name], rng) for name in sorted(parameters)}


def _draw(param: dict[str, Any], rng: random.Random) -> Any:
    if "value" in param:
        return param["value"]
    if "values" in param:
        return rng.choices(param["values"], weights=param.get("probabilities"))[0]
    low, high = param.get("min"), param.get("max")
    kind = param.get("distribution") or ("int_uniform" if isinstance(low, int) and isinstance(high, int) else "uniform")
    base, _, _ = kind.removeprefix("q_").partition("_values")
    draw = {
        "uniform": lambda: rng.uniform(low, high),
        "int_uniform": lambda: rng.randint(low, high),
        "log_uniform": lambda: math.exp(rng.uniform(*_bounds(kind, low, high))),
        "inv_log_uniform": lambda: math.exp(-rng.uniform(*_bounds(kind, low, high))),
        "normal": lambda: rng.gauss(param.get("mu", 0.0), param.get("sigma", 1.0)),
        "log_normal": lambda: math.exp(rng.gauss(param.get("mu", 0.0), param.get("sigma", 1.0))),
        "beta": lambda: rng.betavariate(param.get("a", 1.0), param.get("b", 1.0)),
    }
    if base not in draw:
        raise ValueError(f"distribution {kind!r}: not one of W&B's ({', '.join(sorted(draw))}, and their q_ forms)")
    value = draw[base]()
    if kind.startswith("q_"):
        q = param.get("q", 1)
        value = round(value / q) * q
        return int(value) if isinstance(q, int) else value
    return value


def _bounds(kind: str, low: float, high: float) -> tuple[float, float]:
    """The uniform range of a log distribution: exponents as given, or the logs of ``_values`` bounds."""
    if not kind.endswith("_values"):
        return low, high
    if kind.endswith("inv_log_uniform_values"):
        return -math.log(high), -math.log(low)  # 1/X log-uniform: X = exp(-U(log 1/max, log 1/min))
    return math.log(low), math.log(high)


def grid_size(parameters: dict[str, Any]) -> Optional[int]:
    """How many points a grid over ``parameters`` has, counted without enumerating it (None: not a grid)."""
    total = 1
    for name, param in parameters.items():
        if not isinstance(param, dict):
            return None
        try:
            total *= len(axis_values(name, param))
        except ValueError:  # a distribution: no grid
            return None
    return total
