"""Search: which points to try next, decided by W&B's own algorithms.

W&B's server proposes runs with the ``sweeps`` package (grid, random, bayes) from the sweep
configuration and the runs seen so far. We call the same functions with the trials on disk, so a
local sweep tries what ``wandb agent`` would: the grid in the same order, random points from the
same distributions, Bayesian proposals from the same Gaussian process.
"""

from __future__ import annotations

import hashlib
import math
import random
from typing import Any, Iterable, Optional

import numpy as np

from ablate.record import RunStatus
from ablate.sweep.spec import SweepError, SweepSpec
from ablate.utils.warning_filters import sweeps_engine

Point = dict[str, Any]
"""One sampled configuration: ``{parameter name: value}`` (constants included)."""

_TERMINAL: dict[str, str] = {
    RunStatus.FINISHED: "finished",
    RunStatus.FAILED: "failed",
    RunStatus.STOPPED: "killed",
}  # ours -> W&B's


def _sweeps():
    with sweeps_engine():
        import sweeps
    return sweeps


def point_of(run_config: dict[str, Any]) -> Point:
    """A W&B run config ``{name: {"value": v}}`` -> ``{name: v}``."""
    return {
        name: entry["value"] if isinstance(entry, dict) and "value" in entry else entry
        for name, entry in run_config.items()
    }


def as_sweep_run(
    name: str,
    point: Point,
    status: str,
    metric_name: Optional[str],
    metric: Optional[float],
    history: Iterable[float] = (),
) -> Any:
    """A trial as the ``sweeps.SweepRun`` W&B's search algorithms read."""
    sweeps = _sweeps()
    summary = {}
    if metric_name is not None and metric is not None and math.isfinite(metric):
        summary[metric_name] = metric
    history_rows = [{metric_name: v} for v in history] if metric_name else []
    state = _TERMINAL.get(status, "running")
    return sweeps.SweepRun(
        name=name,
        config={k: {"value": v} for k, v in point.items()},
        state=state,
        summary_metrics=summary,
        history=history_rows,
    )


def next_points(spec: SweepSpec, runs: list[Any], n: int) -> list[Point]:
    """Up to ``n`` new points after ``runs`` (fewer when a grid is exhausted).

    Random sampling is seeded from the sweep name and the number of runs so far, so a sweep
    re-planned from the same state proposes the same points.
    """
    if n <= 0:
        return []
    sweeps = _sweeps()
    seed = int(hashlib.sha1(f"{spec.name}:{len(runs)}".encode()).hexdigest()[:8], 16)
    saved = np.random.get_state(), random.getstate()
    np.random.seed(seed)  # W&B's bayes search draws from numpy's generator,
    random.seed(seed)  # its random search from Python's (random.uniform, then each distribution's ppf)
    try:
        with sweeps_engine():
            proposals = sweeps.next_runs(spec.config, runs, validate=False, n=n)
    except ValueError as err:  # e.g. a distribution in a grid
        raise SweepError(f"{spec.describe()}: {str(err).splitlines()[0]}") from None
    finally:
        np.random.set_state(saved[0])
        random.setstate(saved[1])
    return [point_of(run.config) for run in proposals if run is not None]


def upfront(spec: SweepSpec) -> bool:
    """Whether every point can be planned before any result (grid and random), unlike bayes."""
    return spec.method in ("grid", "random")


def grid_size(parameters: dict[str, Any]) -> Optional[int]:
    """How many points a grid over ``parameters`` has, counted without expanding it (None: unbounded)."""
    total = 1
    for param in parameters.values():
        if not isinstance(param, dict):
            return None
        if "values" in param:
            count = len(param["values"])
        elif "value" in param:
            count = 1
        elif "parameters" in param:
            count = grid_size(param["parameters"])
        elif (
            isinstance(param.get("min"), int)
            and isinstance(param.get("max"), int)
            and "q" not in param
            and param.get("distribution", "int_uniform") == "int_uniform"
        ):
            count = max(0, param["max"] - param["min"] + 1)
        elif param.get("distribution") == "q_uniform":
            count = len(np.arange(param["min"], param["max"], param.get("q", 1)))
        else:
            return None
        if count is None:
            return None
        total *= count
    return total


def planned_trials(spec: SweepSpec, cap: Optional[int]) -> Optional[int]:
    """How many trials the sweep will have: the grid's size (at most ``cap``), else ``cap``."""
    size = grid_size(spec.parameters) if spec.method == "grid" else None
    if size is None:
        return cap
    return size if cap is None else min(size, cap)


def trial_cap(spec: SweepSpec, max_trials: Optional[int]) -> Optional[int]:
    """How many trials the sweep runs at most: ``--max-trials``, else ``run_cap``, else the grid."""
    if max_trials is not None:
        return max_trials
    return spec.run_cap


def to_stop(spec: SweepSpec, runs: list[Any]) -> set[str]:
    """Names of the ``runs`` that W&B's early termination (hyperband) would stop now."""
    if "early_terminate" not in spec.config or not runs:
        return set()
    sweeps = _sweeps()
    with sweeps_engine():
        stopped = sweeps.stop_runs(spec.config, runs)
    return {run.name for run in stopped}
