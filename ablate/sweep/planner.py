"""The planner: which trials a sweep runs, in which order, and what becomes of each attempt (docs/architecture.md).

It knows nothing about processes or jobs (:mod:`ablate.sweep.local`); bayes and hyperband use W&B's optional
``sweeps`` engine, and with a repeat seed the engine sees one run per configuration (:func:`search_runs`).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ablate.config import (
    NOT_TRAINING,
    ConfigError,
    closest_key,
    flatten,
    load_config,
    override_list,
    parse_override,
    read_yaml,
    valid_keys,
)
from ablate.record import RunStatus, SweepFiles
from ablate.sweep.local import LOG_LIMIT, Argv, Exit, Slot, ablate_argv
from ablate.sweep.spec import (
    SEED,
    Point,
    SweepError,
    SweepSpec,
    axis_overrides,
    check_unswept,
    engine_missing,
    foreign_key,
    grid_key,
    grid_points,
    grid_size,
    load_spec,
    needs_engine,
    random_point,
    resolve,
    split_axes,
    to_overrides,
    trial_name,
    trial_overrides,
    with_axes,
)
from ablate.sweep.state import (
    Outcome,
    SweepState,
    Trial,
    best_configuration,
    best_trial,
    configuration,
    configuration_key,
    live_metric,
    load_state,
    new_group,
    outcome,
    read_summary,
    replicate_metric,
    replicate_status,
    replicates,
    reported_history,
    save_state,
    undrawn_group,
)
from ablate.utils.commands import sweeps_engine

TrialCommand = Callable[[Path, list[str]], list[str]]  # (run_dir, overrides) -> argv of one trial process
Say = Callable[[str, str], None]  # (line, style): a progress line
Tick = Callable[[str, int, int], None]  # (what, done, total): how far planning has come

GRID_LIMIT = 100_000  # the most trials one sweep plans (all held in sweep.json)
TRIAL_LIMIT = 10_000  # more is refused unless --trial-limit raises it: a typo far more often than a plan
STALL_S = 600.0  # seconds without a change to a running trial's log or record before a warning
ASSUMED_STEP_S = 2.0
"""Seconds per step assumed for the default time limit: the shipped CPU runs take 1.1-1.4 s a step with
validation and test decoding (``results/calibration-cpu``: 350 steps in 400-480 s)."""
TIME_FACTOR = 4.0  # times the assumed budget a trial may take before the default limit stops it
ALLOWANCE_S = 1800.0  # seconds on top: start-up, building data caches, the test set's decoding
_TERMINAL = {RunStatus.FINISHED: "finished", RunStatus.FAILED: "failed", RunStatus.STOPPED: "killed"}  # -> W&B's


def trainer_command(config: Optional[Path] = None) -> TrialCommand:
    """The real trial: ``python -m ablate train --run-dir RUN_DIR [--config BASE] key=value ...``."""

    def command(run_dir: Path, overrides: list[str]) -> list[str]:
        argv = ablate_argv("train", "--run-dir", str(run_dir))
        return argv + (["--config", str(config)] if config is not None else []) + list(overrides)

    return command


def default_out(spec: SweepSpec) -> Path:
    return Path("runs") / spec.name


@dataclass
class LaunchOptions:
    """How to run a sweep (``ablate sweep run``'s options; ``command``: the trial's, tests inject a fake).
    ``retries`` relaunch a trial stopped from outside (preempted, OOM-killed), never one that failed by itself;
    ``trial_timeout_s`` ``None``: from the budget (:func:`time_limit`), ``0``: none; ``stall_s`` ``0``: never."""

    out: Path
    slots: list[Slot]
    overrides: list[str] = field(default_factory=list)
    axes: list[str] = field(default_factory=list)
    config: Optional[Path] = None
    command: Optional[TrialCommand] = None
    wandb_sweep: Optional[str] = None
    retry_failed: bool = False
    retries: int = 2
    max_trials: Optional[int] = None
    trial_limit: int = TRIAL_LIMIT
    grace_s: float = 30.0
    trial_timeout_s: Optional[float] = None
    stall_s: float = STALL_S
    log_limit: int = LOG_LIMIT
    poll_s: float = 0.2

    def __post_init__(self) -> None:
        seconds = {"--grace": self.grace_s, "--trial-timeout": self.trial_timeout_s, "--stall-warning": self.stall_s}
        for flag, value in seconds.items():
            if value is not None and not value >= 0:  # nan too, which no comparison stops (a hung trial never killed)
                raise SweepError(f"{flag} {value:g} must be at least 0 (seconds)")


@dataclass
class SweepResult:
    """What a launcher run did."""

    state: SweepState
    launched: int
    skipped: int
    interrupted: bool


def check_overrides(overrides: Sequence[str]) -> list[str]:
    """Each ``key=value`` is well formed and names a config key (so no trial fails for a typo)."""
    keys, overrides = set(valid_keys()), override_list(overrides)
    for item in overrides:
        key, _ = parse_override(item)
        if key not in keys:
            close = closest_key(key)
            hint = f"; did you mean '{close}'?" if close else "; see `ablate train --help` for the keys"
            raise ConfigError(f"override '{item}': unknown config key '{key}'{hint}")
    return list(overrides)


def launch_options(
    file: Path, overrides: Sequence[str], out: Optional[Path], **options: Any
) -> tuple[SweepSpec, LaunchOptions]:
    """The sweep ``file`` with the comma lists of ``overrides`` as grid axes, and the :class:`LaunchOptions` that
    run it in ``out`` (default ``runs/<name>``; ``options``: the other fields)."""
    plain, axes = split_axes(check_overrides(overrides))
    spec = with_axes(load_spec(file), axes)
    check_unswept(spec, plain)
    return spec, LaunchOptions(out or default_out(spec), [], plain, axis_overrides(axes), **options)


def time_limit(max_steps: int, max_time: Optional[float], flag: Optional[float] = None) -> Optional[float]:
    """Seconds a trial may run (``None``: no limit): ``flag`` (``--trial-timeout``, ``0``: none), else
    :data:`ALLOWANCE_S` + :data:`TIME_FACTOR` x the budget (``max_time``, else ``max_steps`` x :data:`ASSUMED_STEP_S`)."""
    if flag is not None:
        return float(flag) if flag > 0 else None
    if max_time is not None and max_time > 0:
        return ALLOWANCE_S + TIME_FACTOR * float(max_time)
    if max_steps > 0:
        return ALLOWANCE_S + TIME_FACTOR * ASSUMED_STEP_S * max_steps
    return None


def signature(
    spec: SweepSpec, opts: LaunchOptions, every_key: bool = False, overrides: Optional[list[str]] = None
) -> str:
    """What defines a sweep's trials: a folder of another signature is not reused. The overrides and base config
    keys that leave the trained model alone (:data:`~ablate.config.NOT_TRAINING`) are left out, as from a run's
    fingerprint, so a rerun may change them; ``every_key``: hash them too, as folders written before did
    (``overrides``: those instead of ``opts.overrides``)."""
    base = flatten(read_yaml(opts.config)) if opts.config else None
    overrides = list(opts.overrides) if overrides is None else overrides
    if not every_key:
        overrides = training_overrides(overrides)
        base = None if base is None else {k: v for k, v in base.items() if not k.startswith(NOT_TRAINING)}
    blob = {"method": spec.method, "parameters": spec.parameters, "overrides": overrides, "config": base}
    return hashlib.sha1(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:12]


def training_overrides(overrides: Sequence[str]) -> list[str]:
    """``overrides`` less those of a :data:`~ablate.config.NOT_TRAINING` key, in their order."""
    return [o for o in overrides if not _key(o).startswith(NOT_TRAINING)]


def same_sweep(state: SweepState, spec: SweepSpec, opts: LaunchOptions) -> bool:
    """Whether ``state`` was planned by ``spec`` and ``opts`` up to :data:`~ablate.config.NOT_TRAINING` keys; an
    older folder's signature hashed every override: its recorded ones (``state.overrides``, then ``opts.axes``)
    stand in for this run's, whose training overrides must be the same."""
    if state.signature == signature(spec, opts):
        return True
    axes = list(opts.axes)
    recorded = list(state.overrides)[: len(state.overrides) - len(axes)]
    if list(state.overrides)[len(recorded) :] != axes:
        return False
    same_training = training_overrides(recorded) == training_overrides(opts.overrides)
    return same_training and state.signature == signature(spec, opts, every_key=True, overrides=recorded)


# ---- W&B's search ----


def _sweeps(spec: SweepSpec) -> Any:
    """W&B's ``sweeps`` engine, which ``spec`` needs (:func:`needs_engine`)."""
    try:
        with sweeps_engine():
            import sweeps
    except ImportError:  # found when the sweep file was checked, gone since (a resume on another machine)
        raise engine_missing(spec.describe(), spec.config) from None
    return sweeps


def point_of(run_config: dict[str, Any]) -> Point:
    """A W&B run config ``{name: {"value": v}}`` -> ``{name: v}``."""
    return {k: v["value"] if isinstance(v, dict) and "value" in v else v for k, v in run_config.items()}


def _sweep_run(spec: SweepSpec, name: str, point: Point, status: RunStatus, metric: Any, history: Any) -> Any:
    """A trial (or a configuration) as the ``sweeps.SweepRun`` W&B's search algorithms read."""
    metric_name = spec.metric
    finite = metric_name is not None and metric is not None and math.isfinite(metric)
    return _sweeps(spec).SweepRun(
        name=name,
        config={k: {"value": v} for k, v in point.items()},
        state=_TERMINAL.get(status, "running"),
        summary_metrics={metric_name: metric} if finite else {},
        history=[{metric_name: v} for v in history] if metric_name else [],
    )


def search_runs(spec: SweepSpec, trials: Sequence[Trial]) -> list[Any]:
    """The ``sweeps.SweepRun`` W&B's engine reads: one per trial, or with a repeat seed one per configuration
    (its seeds' mean metric and mean history, running until every seed is done)."""
    if spec.repeat_seeds is None:
        return [_sweep_run(spec, t.name, t.point, t.status, t.metric, t.history) for t in trials]
    runs = []
    for key, seeds in replicates(trials).items():
        steps = itertools.zip_longest(*(t.history for t in seeds))  # None where a seed has not reported yet
        history = [sum(v) / len(v) for v in ([x for x in step if x is not None] for step in steps)]
        point, status = configuration(seeds[0].point), replicate_status(seeds)
        runs.append(_sweep_run(spec, key, point, status, replicate_metric(seeds), history))
    return runs


def proposed(spec: SweepSpec, trials: Sequence[Trial]) -> int:
    """How many points the search has proposed: trials, or with a repeat seed configurations."""
    return len(trials) if spec.repeat_seeds is None else len(replicates(trials))


def next_points(spec: SweepSpec, trials: Sequence[Trial], n: int) -> list[Point]:
    """Up to ``n`` new points after ``trials``, seeded from the sweep name and the runs so far (the same state
    proposes the same points)."""
    if n <= 0:
        return []
    seed = int(hashlib.sha1(f"{spec.name}:{proposed(spec, trials)}".encode()).hexdigest()[:8], 16)
    parameters = spec.search_config["parameters"]
    if spec.method == "grid":
        seen = {grid_key(t.point, parameters) for t in trials}  # a repeat seed is not a parameter here
        fresh = (p for p in grid_points(parameters) if grid_key(p, parameters) not in seen)
        return list(itertools.islice(fresh, n))  # spec_from_dict refused a distribution in a grid
    if spec.method == "random":
        rng = random.Random(seed)
        return [random_point(parameters, rng) for _ in range(n)]
    sweeps = _sweeps(spec)
    import numpy as np

    saved = np.random.get_state(), random.getstate()
    np.random.seed(seed)  # W&B's bayes search draws from numpy's generator
    random.seed(seed)
    try:
        with sweeps_engine():
            proposals = sweeps.next_runs(spec.search_config, search_runs(spec, trials), validate=False, n=n)
    except ValueError as err:
        raise SweepError(f"{spec.describe()}: {str(err).splitlines()[0]}") from None
    finally:
        np.random.set_state(saved[0])
        random.setstate(saved[1])
    return [point_of(run.config) for run in proposals if run is not None]


def new_points(spec: SweepSpec, trials: Sequence[Trial], n: int) -> list[Point]:
    """Up to ``n`` points from the search after ``trials``, with a repeat seed never a configuration proposed before."""
    if spec.repeat_seeds is None:
        return next_points(spec, trials, n)
    fresh: list[Point] = []
    for ask in (n, 8 * n):
        points = next_points(spec, trials, ask)
        seen, fresh = set(replicates(trials)), []
        for point in points:
            key = configuration_key(point)
            if key not in seen and len(fresh) < n:
                seen.add(key)
                fresh.append(point)
        if len(fresh) == n or len(points) < ask:
            break
    return fresh


def upfront(spec: SweepSpec) -> bool:
    """Whether every point can be planned before any result (not bayes)."""
    return spec.method in ("grid", "random")


def planned_trials(spec: SweepSpec, cap: Optional[int]) -> Optional[int]:
    """How many trials the sweep will have (``None``: unbounded); random search with a repeat seed draws its
    configurations to count them, since one drawn twice runs once."""
    count = planned_configurations(spec, cap)
    if spec.method == "random" and spec.repeat_seeds is not None and count is not None and count <= GRID_LIMIT:
        count = len(new_points(spec, [], count))
    return None if count is None else count * len(spec.repeat_seeds or [None])


def planned_configurations(spec: SweepSpec, cap: Optional[int]) -> Optional[int]:
    size = grid_size(spec.search_config["parameters"]) if spec.method == "grid" else None
    return cap if size is None else size if cap is None else min(size, cap)


def trial_cap(spec: SweepSpec, max_trials: Optional[int]) -> Optional[int]:
    """How many points the search proposes at most: ``--max-trials``, else ``run_cap``."""
    if max_trials is not None and max_trials < 1:  # run_cap's schema says the same; the Python API comes here too
        raise SweepError(f"--max-trials {max_trials} must be at least 1")
    return max_trials if max_trials is not None else spec.run_cap


def check_trial_count(spec: SweepSpec, cap: Optional[int], limit: int) -> Optional[int]:
    """The number of trials the sweep plans, counted without planning; too many is refused."""
    count = planned_trials(spec, cap)
    if count is not None and count > GRID_LIMIT:
        over = f"over the limit of {limit:,}" if count > limit else f"more than {GRID_LIMIT:,} can be planned"
        raise SweepError(
            f"{spec.describe()}: {count:,} trials is {over}; narrow the grid, run part of it with --max-trials N, "
            f"or split it into sweep files of at most {GRID_LIMIT:,} trials each (one value of an axis per file)"
        )
    if count is not None and count > limit:
        raise SweepError(
            f"{spec.describe()}: {count:,} trials is over the limit of {limit:,}; narrow the grid, "
            f"or raise the limit with --trial-limit {count}"
        )
    return count


def _config_error(path: Optional[Path], overrides: tuple[str, ...]) -> Optional[str]:
    """``load_config``'s error for ``overrides`` on ``path`` (``None``: valid). A ``data.source`` path that is no
    folder from here is refused (SweepError): every trial runs from here and would fail on it, which no config
    change of the trial's fixes. Only a value written as a path (``/``, no ``kind:`` before it): hub and plugin
    kinds are the trial's to resolve."""
    try:
        source = load_config(path, list(overrides)).data.source
    except ConfigError as err:
        return str(err)
    if "/" in source and ":" not in source.partition("/")[0] and not Path(source).expanduser().is_dir():
        raise SweepError(
            f"data.source={source!r} is not a folder seen from {Path.cwd()}, where the trials run: run the sweep "
            "from the folder it is relative to, or give its absolute path"
        )
    return None


def quiet(*args: Any) -> None:
    """A :data:`Say` or :data:`Tick` that shows nothing."""


# ---- The planner ----


_LABELS = ("tracking.name", "tracking.tags", "tracking.group")


def _key(override: str) -> str:
    return override.partition("=")[0].strip()


class Planner:
    """The decisions of one sweep run over its folder's :class:`~ablate.sweep.state.SweepState`."""

    def __init__(self, spec: SweepSpec, opts: LaunchOptions, say: Say = quiet, tick: Tick = quiet):
        self.spec, self.opts, self.say, self.tick = spec, opts, say, tick
        self.out = Path(opts.out)
        self.cap = trial_cap(spec, opts.max_trials)
        self.launched: set[str] = set()  # trials started by this run (not handed out again unless retried)
        self.exhausted = False
        self.state: SweepState
        self._names: set[str] = set()  # the trials' names, kept as trials are added (a clash check per trial)
        self._check = functools.lru_cache(maxsize=10_000)(_config_error)  # remembered for this run

    def save(self) -> None:
        save_state(self.out, self.state)

    def open(self) -> None:
        """Load the folder's state (or start one); a folder of another sweep is refused."""
        state = load_state(self.out)
        if state is None:
            state = SweepState(
                name=self.spec.name,
                source=str(self.spec.path),
                signature=signature(self.spec, self.opts),
                overrides=list(self.opts.overrides) + list(self.opts.axes),
                group=new_group(self.spec.name),
            )
        else:
            self._same_sweep(state)
        for trial in state.trials:  # what the folder says was planned is data: run only what this file plans
            key = foreign_key(self.spec, trial.point)
            if key is not None:
                value = f"{key}={trial.point[key]!r}"[:120]
                raise SweepError(
                    f"{SweepFiles(self.out).state} holds trial {trial.name} with {value}, which the sweep file "
                    f"{self.spec.describe()} does not give: it was not planned from that file, and running it could "
                    f"import code the folder names; move the folder away or pass another --out"
                )
        for entry in sorted(self.out.iterdir()) if self.out.is_dir() else []:  # a trial's folder, as planted
            if entry.is_symlink() and self.out.resolve() not in entry.resolve().parents:
                raise SweepError(
                    f"{entry} is a link to {entry.resolve()}, outside {self.out}: a trial's run would be written "
                    f"there; replace the link by the folder itself, or pass another --out"
                )
        if state.metric != self.spec.metric:  # the file names another metric: read it from the ended trials
            for trial in state.trials:
                if trial.status in (RunStatus.FINISHED, RunStatus.STOPPED):
                    trial.metric = outcome(self.out / trial.name, 0, self.spec.metric).metric
            state.metric = self.spec.metric
        state.goal, state.repeat = self.spec.goal, self.spec.repeat_seeds is not None
        self.state = state
        self.state.wandb_sweep = self.opts.wandb_sweep or self.state.wandb_sweep

    def _same_sweep(self, state: SweepState) -> None:
        """A folder holding a sweep of another signature is refused (a dry run too: the run would be)."""
        if not same_sweep(state, self.spec, self.opts):
            raise SweepError(
                f"{self.out} holds a sweep started from {state.source} with other parameters or overrides "
                f"({' '.join(state.overrides) or 'none'}) or another base config (--config contents); rerun that "
                f"command, or pass another --out"
            )

    def left_running(self) -> list[Trial]:
        return [t for t in self.state.trials if t.status == RunStatus.RUNNING]

    def recovered(self, trial: Trial) -> None:
        """A trial a dead launcher left running, of which nothing runs now: finished if it said so, else resumed."""
        done = outcome(self.out / trial.name, 0, self.spec.metric)
        if done.status == RunStatus.FINISHED:
            trial.status, trial.metric, trial.summary, trial.error = RunStatus.FINISHED, done.metric, done.summary, None
        else:
            trial.status = RunStatus.INTERRUPTED

    def prepare(self) -> int:
        """Reset failures for ``--retry-failed``, plan, save; returns the trials already done. The folder records
        this run's overrides (a rerun may change :data:`~ablate.config.NOT_TRAINING` ones: ``ablate export``
        rebuilds the latest command) under this version's signature (an older folder's hashed every key)."""
        self.state.overrides = list(self.opts.overrides) + list(self.opts.axes)
        self.state.signature = signature(self.spec, self.opts)
        for t in self.state.trials:
            if self.opts.retry_failed and t.status == RunStatus.FAILED:
                t.status, t.error, t.relaunches = RunStatus.PENDING, None, 0
            summary = SweepFiles(self.out).trial(t.name).summary
            if t.status == RunStatus.FINISHED and not summary.exists():  # its folder deleted, to train it again
                t.status, t.metric, t.summary = RunStatus.PENDING, None, None
                self.say(f"pending  {t.name}: its folder holds no {summary.name} (deleted?); it trains again", "yellow")
        if needs_engine(self.spec.config):
            _sweeps(self.spec)  # W&B's engine imported now, not seconds into a running sweep
        self.plan()
        self.save()
        return self.state.count(RunStatus.FINISHED, RunStatus.STOPPED)

    # ---- which trials, in which order --------------------------------------------------

    def overrides(self, trial: Trial) -> list[str]:
        return trial_overrides(self.spec, trial.point, trial.name, self.state.group, self.opts.overrides)

    def argv(self, trial: Trial, command: TrialCommand, backend: Sequence[str] = ()) -> Argv:
        """The command line of an attempt of ``trial`` (``backend``: the trainer's share, e.g. its GPUs), given
        the executor's own overrides."""
        run_dir = self.out / trial.name
        return lambda extra: command(run_dir, self.overrides(trial) + list(backend) + extra)

    def _propose(self, point: Point) -> list[Trial]:
        """The trials of a point the search proposed: the point, or with a repeat seed one trial per seed."""
        if len(self._names) != len(self.state.trials):  # a state loaded or replaced since
            self._names = {t.name for t in self.state.trials}
        added = []
        for p in [point] if self.spec.repeat_seeds is None else [{**point, SEED: s} for s in self.spec.repeat_seeds]:
            trial = Trial(name=trial_name(self.spec, p, self._names), point=p)
            self.state.trials.append(trial)
            self._names.add(trial.name)
            added.append(trial)
        return added

    def _validate(self, trial: Trial) -> bool:
        """Check the trial's config; an impossible one is recorded failed without running.

        No cross-field check reads the seed (:func:`ablate.config.validate`), and the run's labels
        (``tracking.name/tags/group``) are strings ablate writes itself, so a configuration is checked once
        for all its seeds, and the seed and the labels the user set (command line, parameters) on their own:
        a 10^5-point grid of seeds x configurations builds each configuration's config once, not each point's."""
        overrides = [o for o in self.overrides(trial) if _key(o) not in _LABELS]
        seed = tuple(o for o in overrides if _key(o) == "seed")[-1:]
        if seed:  # seed=1 is in range: the configuration's own check cannot fail on it
            overrides = [o for o in overrides if _key(o) != "seed"] + ["seed=1"]
        labels = [o for o in [*self.opts.overrides, *to_overrides(resolve(trial.point))] if _key(o) in _LABELS]
        error = self._check(self.opts.config, tuple(overrides)) or (self._check(None, seed) if seed else None)
        error = error or (self._check(None, tuple(labels)) if labels else None)  # the user's own, as given
        if error is not None:
            trial.status, trial.error = RunStatus.FAILED, f"invalid config: {error}"
        return error is None

    def time_limit(self, trial: Trial) -> Optional[float]:
        """Seconds an attempt of ``trial`` may run (:func:`time_limit`)."""
        if self.opts.trial_timeout_s is not None:
            return time_limit(0, None, self.opts.trial_timeout_s)
        try:
            train = load_config(self.opts.config, self.overrides(trial)).train
        except ConfigError:  # the trial fails on its own, at once
            return None
        return time_limit(train.max_steps, train.max_time)

    def plan(self) -> None:
        """Add every trial grid or random search can plan now; validate what will run."""
        if self.spec.method != "grid" and self.cap is None:
            raise SweepError(
                f"{self.spec.describe()}: method '{self.spec.method}' needs run_cap in the file or --max-trials N"
            )
        count = check_trial_count(self.spec, self.cap, self.opts.trial_limit)
        if upfront(self.spec):
            points = planned_configurations(self.spec, self.cap) if count is not None else None
            if self.spec.repeat_seeds is not None and self.spec.method == "random":  # drawn as a fresh plan is,
                seen = replicates(self.state.trials)  # so a rerun never redraws, and a larger cap adds the rest
                fresh = [p for p in new_points(self.spec, [], points or 0) if configuration_key(p) not in seen]
            else:
                missing = (points if points is not None else GRID_LIMIT) - proposed(self.spec, self.state.trials)
                fresh = new_points(self.spec, self.state.trials, missing)
            for point in fresh:
                self._propose(point)
        for i, t in enumerate(self.state.trials):
            if t.status in (RunStatus.PENDING, RunStatus.INTERRUPTED):
                self._validate(t)
            self.tick("checking trials", i + 1, len(self.state.trials))

    def preview(self) -> list[Trial]:
        """The trials a fresh run would plan (bayes: the first), validated, without touching the disk."""
        saved = load_state(self.out)
        if saved is not None:
            self._same_sweep(saved)
        group = saved.group if saved is not None and saved.group else undrawn_group(self.spec.name)
        self.state = SweepState(name=self.spec.name, source=str(self.spec.path), signature="", group=group)
        self.plan()
        if not upfront(self.spec):
            self.next_trial()
        return self.state.trials

    def _target_reached(self) -> bool:
        """Whether the best trial (or configuration mean) reached the metric's ``target``."""
        target = (self.spec.config.get("metric") or {}).get("target")
        if self.spec.repeat_seeds is None:
            best = getattr(best_trial(self.state, self.spec.goal), "metric", None)
        else:
            best = (best_configuration(self.state.trials, self.spec.goal) or (None,))[0]
        if target is None or best is None:
            return False
        return best >= target if self.spec.goal == "maximize" else best <= target

    def next_trial(self) -> Optional[Trial]:
        """The trial to start next (pending or interrupted, in plan order; bayes proposes one), or ``None``."""
        if self._target_reached():
            return None
        while True:
            for t in self.state.trials:
                if t.status in (RunStatus.PENDING, RunStatus.INTERRUPTED) and t.name not in self.launched:
                    return t
            if upfront(self.spec) or self.exhausted or proposed(self.spec, self.state.trials) >= (self.cap or 0):
                return None
            points = new_points(self.spec, self.state.trials, 1)
            if not points:
                self.exhausted = True
                return None
            invalid = [t for t in self._propose(points[0]) if not self._validate(t)]
            if invalid:
                self.save()
            for trial in invalid:
                self.say(f"failed   {trial.name}: {trial.error}", "red")

    def total(self) -> int:
        if upfront(self.spec) or self.cap is None:
            return len(self.state.trials)
        return max(self.cap * len(self.spec.repeat_seeds or [None]), len(self.state.trials))

    # ---- what becomes of an attempt ----------------------------------------------------

    def started(self, trial: Trial, at: float) -> None:
        trial.status, trial.error = RunStatus.RUNNING, None
        trial.attempts += 1
        trial.started_at = at
        self.launched.add(trial.name)
        self.save()

    def refused(self, trial: Trial, reason: str) -> None:
        trial.status, trial.error = RunStatus.FAILED, reason
        self.save()
        self.say(f"failed   {trial.name}: {trial.error}", "red")

    def ended(self, trial: Trial, result: Outcome, exit: Exit, stop: Optional[str], elapsed: float) -> Optional[str]:
        """Record an ended attempt; relaunch one lost from outside. ``stop``: why the launcher ended it
        (``"early"``: hyperband, ``"shutdown"``: Ctrl-C, ``None``: it ended by itself). Returns the ``retrying``
        line of a relaunch, for the caller to print after how the attempt ended."""
        trial.summary = result.summary or trial.summary
        if stop == "early":
            trial.status, trial.error = RunStatus.STOPPED, None
            ran = result.status == RunStatus.FINISHED
            trial.metric = result.metric if ran else (trial.history[-1] if trial.history else None)
        elif stop == "shutdown":
            trial.status = RunStatus.FINISHED if result.status == RunStatus.FINISHED else RunStatus.INTERRUPTED
            trial.metric = result.metric
        else:
            trial.status, trial.error, trial.metric = result.status, result.error, result.metric
        trial.duration_s += elapsed
        outside = result.status == RunStatus.INTERRUPTED or (result.status == RunStatus.FAILED and exit.lost)
        retry = None
        if stop is None and outside:
            # an interrupted trainer's error is its advice to whoever ran it ("run the same command again"): not ours
            own = trial.error if result.status == RunStatus.FAILED else "interrupted from outside, checkpointed"
            reason = exit.reason or own or RunStatus.INTERRUPTED
            if trial.relaunches < self.opts.retries:  # a resume after Ctrl-C is no relaunch: it keeps its retries
                trial.status, trial.error, trial.relaunches = RunStatus.INTERRUPTED, None, trial.relaunches + 1
                self.launched.discard(trial.name)  # relaunch it: it resumes from its checkpoint
                retry = f"retrying {trial.name} ({reason}; relaunch {trial.relaunches} of {self.opts.retries})"
            elif exit.reason:
                trial.status, trial.error = RunStatus.FAILED, f"{exit.reason}; {result.error or ''}".rstrip("; ")
        self.save()
        return retry

    def early_stops(self, running: list[Trial], since: dict[str, float], last_step: dict[str, int]) -> set[str]:
        """Hyperband: update running trials' metric histories; the names ``early_terminate`` drops now."""
        if "early_terminate" not in self.spec.config:
            return set()
        changed = False
        for trial in running:
            summary = read_summary(self.out / trial.name, since.get(trial.name))
            history = reported_history(summary, self.spec.metric or "")
            if history is not None:  # the trainer's own record of every validation
                changed |= history != trial.history
                trial.history = history
                continue
            seen = live_metric(self.out / trial.name, self.spec.metric)  # else: sample as we go
            if seen is not None and seen[0] != last_step.get(trial.name):
                last_step[trial.name] = seen[0]
                trial.history.append(seen[1])
                changed = True
        if not changed:
            return set()
        runs, stop = search_runs(self.spec, self.state.trials), set()
        if runs:
            with sweeps_engine():
                stop = {run.name for run in _sweeps(self.spec).stop_runs(self.spec.search_config, runs)}
        if self.spec.repeat_seeds is not None:  # a configuration's seeds stop together; those not started never start
            stop = {t.name for t in self.state.trials if configuration_key(t.point) in stop}
            for trial in self.state.trials:
                if trial.name in stop and trial.status.resumable and trial.name not in self.launched:
                    trial.status = RunStatus.STOPPED
        self.save()
        return stop

    def skipped(self) -> str:
        """What a rerun skips, in one line: the trials that finished, that hyperband stopped and that failed when
        they ran (not the invalid ones, which fail again), with how to run those again; ``""`` where none."""
        counts = {s: self.state.count(s) for s in (RunStatus.FINISHED, RunStatus.STOPPED)}
        counts[RunStatus.FAILED] = sum(t.status == RunStatus.FAILED and t.attempts > 0 for t in self.state.trials)
        retry = " (--retry-failed runs the failed again)" if counts[RunStatus.FAILED] else ""
        done = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
        return f"{done} trials skipped{retry}" if done else ""

    def nothing_to_do(self) -> str:
        total, failed = len(self.state.trials), self.state.count(RunStatus.FAILED)
        note = f" ({failed} failed: --retry-failed runs them again)" if failed else ""
        return f"nothing to train: all {total} trials of {self.spec.name} are done{note}"
