"""Search: which points to try next, decided by W&B's own algorithms.

W&B's server proposes runs with the ``sweeps`` package (grid, random, bayes) from the sweep
configuration and the runs seen so far. We call the same functions with the trials on disk, so a
local sweep tries what ``wandb agent`` would: the grid in the same order, random points from the
same distributions, Bayesian proposals from the same Gaussian process.

With a repeat seed (``seed: {repeat: N}``, :mod:`ablate.sweep.spec`) the engine searches the
configuration without the seed: :func:`search_runs` gives it one run per configuration, whose
metric is the mean over that configuration's finished seeds, so it neither chases a lucky seed nor
proposes a configuration again.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from typing import Any, Iterable, Optional, Protocol, Sequence

import numpy as np

from ablate.record import RunStatus
from ablate.sweep.spec import SEED, SweepError, SweepSpec
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


class Attempted(Protocol):
    """What :func:`search_runs` reads of a trial (:class:`ablate.sweep.state.Trial` has it)."""

    name: str
    point: Point
    status: RunStatus
    metric: Optional[float]
    history: list[float]


def configuration(point: Point) -> Point:
    """A point without its seed: what the search proposed, shared by its repeats."""
    return {k: v for k, v in point.items() if k != SEED}


def configuration_key(point: Point) -> str:
    """A stable text naming the configuration of ``point`` (its seed left out)."""
    return json.dumps(configuration(point), sort_keys=True, default=str)


def _finite(value: Optional[float]) -> bool:
    return value is not None and math.isfinite(value)


def _mean(values: Sequence[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None


def _mean_history(histories: Sequence[Sequence[float]]) -> list[float]:
    """The mean at each validation over the seeds that reached it (seeds may be at different steps)."""
    longest = max((len(h) for h in histories), default=0)
    return [sum(vals) / len(vals) for i in range(longest) if (vals := [h[i] for h in histories if len(h) > i])]


def replicate_status(trials: Sequence[Attempted]) -> RunStatus:
    """One status for a configuration's seeds: running until every seed is done, then finished if one
    finished, stopped if hyperband stopped them, else failed."""
    if any(not t.status.done for t in trials):
        return RunStatus.RUNNING
    for status in (RunStatus.FINISHED, RunStatus.STOPPED):
        if any(t.status == status for t in trials):
            return status
    return RunStatus.FAILED


def replicates(trials: Sequence[Attempted]) -> dict[str, list[Attempted]]:
    """Trials grouped by configuration (:func:`configuration_key`), in plan order."""
    groups: dict[str, list[Attempted]] = {}
    for t in trials:
        groups.setdefault(configuration_key(t.point), []).append(t)
    return groups


def replicate_metric(trials: Sequence[Attempted]) -> Optional[float]:
    """The mean metric over a configuration's finished seeds (over its stopped ones when none finished)."""
    ended = [t.metric for t in trials if t.status == RunStatus.FINISHED and _finite(t.metric)]
    ended = ended or [t.metric for t in trials if t.status == RunStatus.STOPPED and _finite(t.metric)]
    return _mean(ended)  # type: ignore[arg-type]


def best_configuration(trials: Sequence[Attempted], goal: str) -> Optional[tuple[float, list[Attempted]]]:
    """The configuration whose seeds are all done with the best mean metric: ``(mean, its trials)``."""
    done = [
        (mean, seeds)
        for seeds in replicates(trials).values()
        if replicate_status(seeds).done and (mean := replicate_metric(seeds)) is not None
    ]
    if not done:
        return None
    return (max if goal == "maximize" else min)(done, key=lambda pair: pair[0])


def search_runs(spec: SweepSpec, trials: Sequence[Attempted]) -> list[Any]:
    """The ``sweeps.SweepRun`` W&B's engine reads: one per trial, or with a repeat seed one per configuration.

    A configuration's run has its point without the seed, the mean metric of its seeds
    (:func:`replicate_metric`), their mean history at each validation, and is running until every
    seed is done (:func:`replicate_status`). Its name is :func:`configuration_key`.
    """
    if spec.repeat_seeds is None:
        return [as_sweep_run(t.name, t.point, t.status, spec.metric, t.metric, t.history) for t in trials]
    return [
        as_sweep_run(
            key,
            configuration(seeds[0].point),
            replicate_status(seeds),
            spec.metric,
            replicate_metric(seeds),
            _mean_history([t.history for t in seeds]),
        )
        for key, seeds in replicates(trials).items()
    ]


def next_points(spec: SweepSpec, runs: list[Any], n: int) -> list[Point]:
    """Up to ``n`` new points after ``runs`` (fewer when a grid is exhausted).

    Random sampling is seeded from the sweep name and the number of runs so far, so a sweep
    re-planned from the same state proposes the same points (numpy's generator and Python's, which
    W&B's random search draws from).
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
            proposals = sweeps.next_runs(spec.search_config, runs, validate=False, n=n)
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


def planned_configurations(spec: SweepSpec, cap: Optional[int]) -> Optional[int]:
    """How many points the search proposes: the grid's size (at most ``cap``), else ``cap``."""
    size = grid_size(spec.search_config["parameters"]) if spec.method == "grid" else None
    if size is None:
        return cap
    return size if cap is None else min(size, cap)


def planned_trials(spec: SweepSpec, cap: Optional[int]) -> Optional[int]:
    """How many trials the sweep will have: the points the search proposes, times the repeat seeds."""
    count = planned_configurations(spec, cap)
    return None if count is None else count * len(spec.repeat_seeds or [None])


def trial_cap(spec: SweepSpec, max_trials: Optional[int]) -> Optional[int]:
    """How many points the search proposes at most: ``--max-trials``, else ``run_cap``, else the grid.

    A point is a trial, or with a repeat seed a configuration (each trains once per seed).
    """
    if max_trials is not None:
        return max_trials
    return spec.run_cap


def to_stop(spec: SweepSpec, runs: list[Any]) -> set[str]:
    """Names of the ``runs`` that W&B's early termination (hyperband) would stop now."""
    if "early_terminate" not in spec.config or not runs:
        return set()
    sweeps = _sweeps()
    with sweeps_engine():
        stopped = sweeps.stop_runs(spec.search_config, runs)
    return {run.name for run in stopped}
