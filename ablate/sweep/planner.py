"""The planner: which trials a sweep runs, in which order, what becomes of each attempt, and the state file.

It knows nothing about processes or jobs (that is the executor's part, :mod:`ablate.sweep.executor`):
it plans trials with W&B's search (:mod:`ablate.sweep.search`; grid and random up front, bayes one
at a time as results arrive), checks each trial's config before anything runs (an impossible
variant is recorded failed with the reason), hands out the next trial to start, reads back how an
attempt ended and decides whether it is done, failed, or relaunched (``--retries``, for attempts
ended from outside), feeds running trials' metrics to hyperband (``early_terminate``), and saves
``sweep.json`` after every change.

With a repeat seed (``seed: {repeat: N}``) each point the search proposes is a configuration that
becomes N trials, one per seed, named as replicates (``lr=0.0044-seed=1``, ``lr=0.0044-seed=2``);
the search is given one run per configuration (:func:`ablate.sweep.search.search_runs`), the
caps count configurations, and hyperband stops a configuration's seeds together.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Optional

from ablate.config import ConfigError, flatten, load_config, read_yaml
from ablate.record import RunStatus
from ablate.sweep.executor import Exit
from ablate.sweep.options import GRID_LIMIT, LaunchOptions
from ablate.sweep.progress import best_trial
from ablate.sweep.search import (
    Point,
    best_configuration,
    configuration_key,
    load_engine,
    next_points,
    planned_configurations,
    planned_trials,
    replicates,
    search_runs,
    to_stop,
    trial_cap,
    upfront,
)
from ablate.sweep.spec import SEED, SweepError, SweepSpec
from ablate.sweep.state import SweepState, Trial, load_state, new_group, save_state, undrawn_group
from ablate.sweep.trial import (
    Outcome,
    live_metric,
    outcome,
    read_summary,
    reported_history,
    time_limit,
    trial_name,
    trial_overrides,
)

Say = Callable[[str, str], None]
"""``(line, style)``: a progress line (:meth:`ablate.sweep.progress.Progress.event`)."""
Tick = Callable[[str, int, int], None]
"""``(what, done, total)``: how far planning has come (:class:`ablate.sweep.views.PlanProgress`)."""


def signature(spec: SweepSpec, opts: LaunchOptions) -> str:
    """What defines a sweep's trials; a folder started with another signature is not reused.

    The base config counts by what it says (its keys and values), not by its file name, so editing
    ``--config`` between two runs of a sweep is caught rather than mixing trials of two configs.
    """
    base = flatten(read_yaml(opts.config)) if opts.config else None
    blob = {"method": spec.method, "parameters": spec.parameters, "overrides": list(opts.overrides), "config": base}
    return hashlib.sha1(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:12]


def check_trial_count(spec: SweepSpec, cap: Optional[int], limit: int) -> Optional[int]:
    """The number of trials the sweep plans, counted without planning.

    A grid is enumerated lazily (:func:`ablate.sweep.points.grid_points`), so a cap (``--max-trials``,
    ``run_cap``) bounds the planning of any grid. Beyond :data:`~ablate.sweep.options.GRID_LIMIT`
    trials no ``--trial-limit`` helps (one launcher would hold them all), so the refusal then says to
    split the sweep or cap it instead of raising the limit.
    """
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


def _quiet(line: str, style: str = "") -> None:
    pass


def _still(what: str, done: int, total: int) -> None:
    pass


class Planner:
    """The decisions of one sweep run over its folder's :class:`~ablate.sweep.state.SweepState`.

    Args:
        spec: the sweep file.
        opts: the run's options (folder, overrides, retries, caps).
        say: prints a progress line.
        tick: told how far planning has come (a progress bar of a long plan).
    """

    def __init__(self, spec: SweepSpec, opts: LaunchOptions, say: Say = _quiet, tick: Tick = _still):
        self.spec, self.opts, self.say, self.tick = spec, opts, say, tick
        self.out = Path(opts.out)
        self.cap = trial_cap(spec, opts.max_trials)
        self.launched: set[str] = set()  # trials started by this run (not handed out again unless retried)
        self.exhausted = False
        self.state: SweepState
        self._names: set[str] = set()  # the trials' names, kept as trials are added (a clash check per trial)

    # ---- the state file ----------------------------------------------------------------

    def save(self) -> None:
        save_state(self.out, self.state)

    def open(self) -> None:
        """Load the folder's state (or start one); a folder of another sweep is refused."""
        sig = signature(self.spec, self.opts)
        state = load_state(self.out)
        if state is None:
            state = SweepState(
                name=self.spec.name,
                source=str(self.spec.path),
                signature=sig,
                overrides=list(self.opts.overrides) + list(self.opts.axes),
                group=new_group(self.spec.name),
            )
        elif state.signature != sig:
            raise SweepError(
                f"{self.out} holds a sweep started from {state.source} with other parameters or overrides "
                f"({' '.join(state.overrides) or 'none'}) or another base config (--config contents); rerun that "
                f"command, or pass another --out"
            )
        self.state = state
        self.state.wandb_sweep = self.opts.wandb_sweep or self.state.wandb_sweep

    def left_running(self) -> list[Trial]:
        """Trials the state says are running: a previous launcher's (before :meth:`prepare`)."""
        return [t for t in self.state.trials if t.status == RunStatus.RUNNING]

    def recovered(self, trial: Trial) -> None:
        """A trial a dead launcher left running, of which nothing runs now: finished if it said so, else resumed."""
        summary = read_summary(self.out / trial.name)
        done = None
        if summary is not None and summary.status == RunStatus.FINISHED:
            done = outcome(self.out / trial.name, 0, self.spec.metric)
        if done and done.status == RunStatus.FINISHED:
            trial.status, trial.metric, trial.summary, trial.error = RunStatus.FINISHED, done.metric, done.summary, None
        else:
            trial.status = RunStatus.INTERRUPTED

    def prepare(self) -> int:
        """Reset failures for ``--retry-failed``, plan, save; returns the trials already done."""
        if self.opts.retry_failed:
            for t in self.state.trials:
                if t.status == RunStatus.FAILED:
                    t.status, t.error = RunStatus.PENDING, None
        load_engine(self.spec)
        self.plan()
        self.save()
        return self.state.count(RunStatus.FINISHED, RunStatus.STOPPED)

    # ---- which trials, in which order --------------------------------------------------

    def overrides(self, trial: Trial) -> list[str]:
        return trial_overrides(self.spec, trial.point, trial.name, self.state.group) + list(self.opts.overrides)

    def _runs(self) -> list[Any]:
        return search_runs(self.spec, self.state.trials)

    def _add(self, point: dict[str, Any]) -> Trial:
        if len(self._names) != len(self.state.trials):  # a state loaded or replaced since
            self._names = {t.name for t in self.state.trials}
        trial = Trial(name=trial_name(self.spec, point, self._names), point=point)
        self.state.trials.append(trial)
        self._names.add(trial.name)
        return trial

    def _propose(self, point: Point) -> list[Trial]:
        """The trials of a point the search proposed: the point, or with a repeat seed one trial per seed."""
        seeds = self.spec.repeat_seeds
        if seeds is None:
            return [self._add(point)]
        return [self._add({**point, SEED: seed}) for seed in seeds]

    def _proposed(self) -> int:
        """How many points the search has proposed: trials, or with a repeat seed configurations."""
        if self.spec.repeat_seeds is None:
            return len(self.state.trials)
        return len(replicates(self.state.trials))

    def _new_points(self, n: int) -> list[Point]:
        """Up to ``n`` points from the search; with a repeat seed never a configuration proposed before
        (more proposals are asked for where the first repeat one; fewer when the search has nothing new)."""
        if self.spec.repeat_seeds is None:
            return next_points(self.spec, self.state.trials, n)
        fresh: list[Point] = []
        for ask in (n, 8 * n):
            points = next_points(self.spec, self.state.trials, ask)
            seen, fresh = set(replicates(self.state.trials)), []
            for point in points:
                key = configuration_key(point)
                if key not in seen and len(fresh) < n:
                    seen.add(key)
                    fresh.append(point)
            if len(fresh) == n or len(points) < ask:
                break
        return fresh

    def _validate(self, trial: Trial) -> bool:
        """Check the trial's config; an impossible one is recorded failed without running."""
        try:
            load_config(self.opts.config, self.overrides(trial))
        except ConfigError as err:
            trial.status, trial.error = RunStatus.FAILED, f"invalid config: {err}"
            return False
        return True

    def time_limit(self, trial: Trial) -> Optional[float]:
        """Seconds an attempt of ``trial`` may run (:func:`ablate.sweep.trial.time_limit`), ``None``: no limit."""
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
        once = self.spec.repeat_seeds is not None and self.spec.method == "random" and self.state.trials
        if upfront(self.spec) and not once:  # random search with a repeat seed plans once: a rerun adds nothing
            points = planned_configurations(self.spec, self.cap) if count is not None else None
            room = (points if points is not None else GRID_LIMIT) - self._proposed()
            for point in self._new_points(room):
                self._propose(point)
        for i, t in enumerate(self.state.trials):
            if t.status in (RunStatus.PENDING, RunStatus.INTERRUPTED):
                self._validate(t)
            self.tick("checking trials", i + 1, len(self.state.trials))

    def preview(self) -> list[Trial]:
        """The trials a fresh run would plan, validated, without touching the disk (bayes: the first), with
        the W&B group the run will use: the folder's own, or :func:`undrawn_group` before its first run."""
        saved = load_state(self.out)
        same = saved is not None and saved.group and saved.signature == signature(self.spec, self.opts)
        group = saved.group if same and saved is not None else undrawn_group(self.spec.name)
        self.state = SweepState(name=self.spec.name, source=str(self.spec.path), signature="", group=group)
        self.plan()
        if not upfront(self.spec):
            self.next_trial()
        return self.state.trials

    def _best_metric(self) -> Optional[float]:
        """The best trial's metric, or with a repeat seed the best mean of a configuration whose seeds are done."""
        if self.spec.repeat_seeds is None:
            best = best_trial(self.state, self.spec.goal)
            return best.metric if best is not None else None
        best = best_configuration(self.state.trials, self.spec.goal)
        return best[0] if best is not None else None

    def _target_reached(self) -> bool:
        target = (self.spec.config.get("metric") or {}).get("target")
        best = self._best_metric()
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
            if not self._can_propose():
                return None
            points = self._new_points(1)
            if not points:
                self.exhausted = True
                return None
            invalid = [t for t in self._propose(points[0]) if not self._validate(t)]
            if invalid:
                self.save()
            for trial in invalid:
                self.say(f"failed   {trial.name}: {trial.error}", "red")

    def _can_propose(self) -> bool:
        return not upfront(self.spec) and not self.exhausted and self._proposed() < (self.cap or 0)

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

    def ended(self, trial: Trial, result: Outcome, exit: Exit, stop: Optional[str], elapsed: float) -> None:
        """Record an ended attempt (``result``: :func:`ablate.sweep.trial.outcome`); relaunch one lost from outside.

        ``stop`` is why the launcher ended it: ``"early"`` (hyperband: ``stopped``, final) or ``"shutdown"``
        (Ctrl-C: ``interrupted``, resumed by a rerun), ``None`` when it ended by itself.
        """
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
        if stop is None and outside:
            reason = exit.reason or trial.error or RunStatus.INTERRUPTED
            if trial.attempts <= self.opts.retries:
                trial.status, trial.error = RunStatus.INTERRUPTED, None
                self.launched.discard(trial.name)  # relaunch it: it resumes from its checkpoint
                self.say(
                    f"retrying {trial.name} ({reason}; attempt {trial.attempts + 1} of {self.opts.retries + 1})",
                    "yellow",
                )
            elif exit.reason:
                trial.status, trial.error = RunStatus.FAILED, f"{exit.reason}; {result.error or ''}".rstrip("; ")
        self.save()

    def early_stops(self, running: list[Trial], since: dict[str, float], last_step: dict[str, int]) -> set[str]:
        """Hyperband: update running trials' metric histories; the names ``early_terminate`` drops now.

        ``since`` is each trial's attempt start (to skip an older ``summary.json``); ``last_step`` the step of
        the last value sampled from a trainer that keeps no history (updated here).
        """
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
        stop = set(to_stop(self.spec, self._runs()))
        if self.spec.repeat_seeds is not None:  # a configuration's seeds stop together; those not started never start
            stop = {t.name for t in self.state.trials if configuration_key(t.point) in stop}
            for trial in self.state.trials:
                if trial.name in stop and trial.status.resumable and trial.name not in self.launched:
                    trial.status = RunStatus.STOPPED
        self.save()
        return stop

    def nothing_to_do(self) -> str:
        total, failed = len(self.state.trials), self.state.count(RunStatus.FAILED)
        note = f" ({failed} failed: --retry-failed runs them again)" if failed else ""
        return f"nothing to train: all {total} trials of {self.spec.name} are done{note}"
