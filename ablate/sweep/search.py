"""Search: which points to try next, as W&B's own algorithms decide them.

W&B's server proposes runs with the ``sweeps`` package (grid, random, bayes) from the sweep
configuration and the runs seen so far. A local sweep tries what ``wandb agent`` would: the grid
in the same order (enumerated here, lazily: :func:`grid_points`), random points from the same
distributions (drawn here from Python's generator, seeded: :func:`random_point`), and Bayesian
proposals from W&B's own Gaussian process (the optional ``sweeps`` package, ``pip install
'ablate[bayes]'``, which pins numpy<2; also hyperband's ``early_terminate``).

With a repeat seed (``seed: {repeat: N}``, :mod:`ablate.sweep.spec`) the engine searches the
configuration without the seed: :func:`search_runs` gives it one run per configuration, whose
metric is the mean over that configuration's finished seeds, so it neither chases a lucky seed nor
proposes a configuration again.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
from typing import Any, Iterable, Optional, Protocol, Sequence

from ablate.record import RunStatus
from ablate.sweep.points import Point, grid_key, grid_points, grid_size, random_point
from ablate.sweep.spec import BAYES_EXTRA, SEED, SweepError, SweepSpec
from ablate.utils.commands import sweeps_engine

_TERMINAL: dict[str, str] = {
    RunStatus.FINISHED: "finished",
    RunStatus.FAILED: "failed",
    RunStatus.STOPPED: "killed",
}  # ours -> W&B's


def _sweeps():
    """W&B's ``sweeps`` engine (bayes search, hyperband), an optional extra."""
    try:
        with sweeps_engine():
            import sweeps
    except ImportError:
        raise SweepError(
            f"method 'bayes' and early_terminate use W&B's sweeps engine, which is not installed: {BAYES_EXTRA}"
        ) from None
    return sweeps


def load_engine(spec: SweepSpec) -> None:
    """Import W&B's engine now where ``spec`` uses it (bayes, hyperband), not seconds into a running sweep."""
    if spec.method == "bayes" or "early_terminate" in spec.config:
        _sweeps()


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


def next_points(spec: SweepSpec, trials: Sequence[Attempted], n: int) -> list[Point]:
    """Up to ``n`` new points after ``trials`` (fewer when a grid is exhausted).

    Grid: the next points of :func:`grid_points` that no trial has yet (with a repeat seed, no
    configuration). Random: :func:`random_point` ``n`` times, seeded from the sweep name and the
    number of runs so far, so a sweep re-planned from the same state proposes the same points. Bayes:
    W&B's engine, told :func:`search_runs`, under the same seed (numpy's generator and Python's).
    """
    if n <= 0:
        return []
    known = len(replicates(trials)) if spec.repeat_seeds is not None else len(trials)
    seed = int(hashlib.sha1(f"{spec.name}:{known}".encode()).hexdigest()[:8], 16)
    parameters = spec.search_config["parameters"]
    if spec.method == "grid":
        seen = {grid_key(t.point, parameters) for t in trials}  # a repeat seed is not a parameter here
        fresh = (p for p in grid_points(parameters) if grid_key(p, parameters) not in seen)
        try:
            return list(itertools.islice(fresh, n))
        except ValueError as err:  # a distribution in a grid
            raise SweepError(f"{spec.describe()}: {err}") from None
    if spec.method == "random":
        rng = random.Random(seed)
        return [random_point(parameters, rng) for _ in range(n)]
    return _bayes_points(spec, search_runs(spec, trials), n, seed)


def _bayes_points(spec: SweepSpec, runs: list[Any], n: int, seed: int) -> list[Point]:
    sweeps = _sweeps()
    import numpy as np

    saved = np.random.get_state(), random.getstate()
    np.random.seed(seed)  # W&B's bayes search draws from numpy's generator
    random.seed(seed)
    try:
        with sweeps_engine():
            proposals = sweeps.next_runs(spec.search_config, runs, validate=False, n=n)
    except ValueError as err:
        raise SweepError(f"{spec.describe()}: {str(err).splitlines()[0]}") from None
    finally:
        np.random.set_state(saved[0])
        random.setstate(saved[1])
    return [point_of(run.config) for run in proposals if run is not None]


def upfront(spec: SweepSpec) -> bool:
    """Whether every point can be planned before any result (grid and random), unlike bayes."""
    return spec.method in ("grid", "random")


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
