"""Local sweeps: every trial its own process, scheduled over device slots, resumable.

The launcher plans trials with W&B's search (:mod:`ablate.sweep.search`), checks each trial's
config before anything runs (an impossible variant is recorded as failed with the reason), then
keeps every slot busy with one ``python -m ablate train`` process per trial. A crash, out-of-memory error or
NaN ends only that trial. The sweep's state is saved after every change; rerunning the same
command skips finished trials and resumes interrupted ones in their own folder (the trainer
resumes from its checkpoint).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import ablate.sweep.process as process  # the module, not the package: ablate.sweep (callable) imports ablate.sweep.api
from ablate.config import ConfigError, flatten, load_config, read_yaml
from ablate.sweep.options import GRID_LIMIT, LaunchOptions, SweepResult, TrialCommand, default_out, trainer_command  # noqa: F401 - re-exported
from ablate.sweep.progress import Progress, best_trial, clock
from ablate.sweep.search import as_sweep_run, grid_size, next_points, planned_trials, to_stop, trial_cap, upfront
from ablate.sweep.slots import Slot
from ablate.sweep.spec import SweepError, SweepSpec
from ablate.sweep.state import SweepLock, SweepState, Trial, load_state, new_group, save_state
from ablate.sweep.trial import LOG, live_metric, outcome, read_summary, reported_history, trial_name, trial_overrides


@dataclass
class _Running:
    trial: Trial
    proc: Any
    slot: Slot
    since: float  # time.time() at launch (to ignore a stale summary.json)
    mono: float  # time.monotonic() at launch
    log_start: int  # size of the trial's log at launch (earlier attempts' output is before it)
    stop: Optional[str] = None  # "early" (hyperband) or "shutdown"
    kill_at: Optional[float] = None
    last_step: Optional[int] = None


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

    A grid larger than ``limit`` is refused even under a cap: W&B's grid search enumerates the
    whole grid to pick the next point, so its size alone decides the planning time and memory.
    """
    size = grid_size(spec.parameters) if spec.method == "grid" else None
    count = planned_trials(spec, cap)
    biggest = max(n for n in (size, count, 0) if n is not None)
    if biggest > limit:
        raise SweepError(
            f"{spec.describe()}: {biggest:,} trials is over the limit of {limit:,}; narrow the grid, "
            f"or raise the limit with --trial-limit {biggest}"
        )
    return count


class Launcher:
    """Runs one sweep folder to completion (or until interrupted). One instance per run."""

    def __init__(self, spec: SweepSpec, opts: LaunchOptions, progress: Optional[Progress] = None):
        self.spec, self.opts = spec, opts
        self.out = Path(opts.out)
        self.progress = progress or Progress(metric=spec.metric, goal=spec.goal)
        self.command = opts.command or trainer_command(opts.config)
        self.cap = trial_cap(spec, opts.max_trials)
        self.running: dict[int, _Running] = {}
        self.launched: set[str] = set()
        self.durations: list[float] = []
        self.exhausted = False
        self.state: SweepState

    # ---- planning ---------------------------------------------------------------------

    def overrides(self, trial: Trial) -> list[str]:
        return trial_overrides(self.spec, trial.point, trial.name, self.state.group) + list(self.opts.overrides)

    def _open_state(self) -> SweepState:
        sig = signature(self.spec, self.opts)
        state = load_state(self.out)
        if state is None:
            return SweepState(
                name=self.spec.name,
                source=str(self.spec.path),
                signature=sig,
                overrides=list(self.opts.overrides) + list(self.opts.axes),
                group=new_group(self.spec.name),
            )
        if state.signature != sig:
            raise SweepError(
                f"{self.out} holds a sweep started from {state.source} with other parameters or overrides "
                f"({' '.join(state.overrides) or 'none'}) or another base config (--config contents); rerun that "
                f"command, or pass another --out"
            )
        return state

    def _recover(self) -> None:
        """Trials a dead launcher left ``running``: stop survivors, then keep or resume them."""
        for t in self.state.trials:
            if t.status != "running":
                continue
            if process.is_same_process(t.pid, t.pid_start):
                self.progress.event(f"stopping {t.name} (pid {t.pid}) left running by a previous launcher")
                process.stop_group(t.pid, self.opts.grace_s)
            summary = read_summary(self.out / t.name) or {}
            done = outcome(self.out / t.name, 0, self.spec.metric) if summary.get("status") == "finished" else None
            if done and done["status"] == "finished":
                t.status, t.metric, t.results, t.error = "finished", done["metric"], done["results"], None
            else:
                t.status = "interrupted"
            t.pid = t.pid_start = None

    def _runs(self) -> list[Any]:
        return [
            as_sweep_run(t.name, t.point, t.status, self.spec.metric, t.metric, t.history) for t in self.state.trials
        ]

    def _add(self, point: dict[str, Any]) -> Trial:
        trial = Trial(name=trial_name(self.spec, point, {t.name for t in self.state.trials}), point=point)
        self.state.trials.append(trial)
        return trial

    def _validate(self, trial: Trial) -> bool:
        """Check the trial's config; an impossible one is recorded failed without running."""
        try:
            load_config(self.opts.config, self.overrides(trial))
        except ConfigError as err:
            trial.status, trial.error = "failed", f"invalid config: {err}"
            return False
        return True

    def plan(self) -> None:
        """Add every trial grid or random search can plan now; validate what will run."""
        if self.spec.method != "grid" and self.cap is None:
            raise SweepError(
                f"{self.spec.describe()}: method '{self.spec.method}' needs run_cap in the file or --max-trials N"
            )
        count = check_trial_count(self.spec, self.cap, self.opts.trial_limit)
        if upfront(self.spec):
            room = (count if count is not None else GRID_LIMIT) - len(self.state.trials)
            for point in next_points(self.spec, self._runs(), room):
                self._add(point)
        for t in self.state.trials:
            if t.status in ("pending", "interrupted"):
                self._validate(t)

    def preview(self) -> list[Trial]:
        """The trials a fresh run would plan, validated, without touching the disk (bayes: the first)."""
        self.state = SweepState(
            name=self.spec.name, source=str(self.spec.path), signature="", group=new_group(self.spec.name)
        )
        self.plan()
        if not upfront(self.spec):
            self._next_trial()
        return self.state.trials

    def _target_reached(self) -> bool:
        target = (self.spec.config.get("metric") or {}).get("target")
        best = best_trial(self.state, self.spec.goal)
        if target is None or best is None:
            return False
        return best.metric >= target if self.spec.goal == "maximize" else best.metric <= target

    def _next_trial(self) -> Optional[Trial]:
        if self._target_reached():
            return None
        while True:
            for t in self.state.trials:
                if t.status in ("pending", "interrupted") and t.name not in self.launched:
                    return t
            if not self._can_propose():
                return None
            points = next_points(self.spec, self._runs(), 1)
            if not points:
                self.exhausted = True
                return None
            trial = self._add(points[0])
            if not self._validate(trial):
                self._save()
                self.progress.event(f"failed   {trial.name}: {trial.error}", "red")

    def _can_propose(self) -> bool:
        return not upfront(self.spec) and not self.exhausted and len(self.state.trials) < (self.cap or 0)

    # ---- running ----------------------------------------------------------------------

    def _save(self) -> None:
        save_state(self.out, self.state)

    def _launch(self, trial: Trial, slot: Slot) -> None:
        run_dir = self.out / trial.name
        run_dir.mkdir(parents=True, exist_ok=True)
        argv = self.command(run_dir, self.overrides(trial) + slot.overrides())
        with open(run_dir / LOG, "a") as log:
            log.write(
                f"\n=== ablate sweep {self.spec.name}: {trial.name}, attempt {trial.attempts + 1}, "
                f"{slot.describe()}, {time.ctime()} ===\n$ {shlex.join(argv)}\n"
            )
        log_start, since = (run_dir / LOG).stat().st_size, time.time()
        proc = process.start(argv, slot.env(dict(os.environ)), run_dir / LOG)
        trial.status, trial.error = "running", None
        trial.attempts += 1
        trial.pid, trial.pid_start = proc.pid, process.start_time(proc.pid)
        trial.devices = list(slot.gpus or [])
        trial.started_at = since
        self.launched.add(trial.name)
        self.running[slot.index] = _Running(trial, proc, slot, since, time.monotonic(), log_start)
        self._save()
        self.progress.event(f"started  {trial.name} [{slot.describe()}]")

    def _reap(self, run: _Running, returncode: int) -> None:
        process.signal_group(run.proc.pid, signal.SIGKILL)  # stray workers of a finished trial
        t, elapsed = run.trial, time.monotonic() - run.mono
        result = outcome(self.out / t.name, returncode, self.spec.metric, run.since, run.log_start)
        t.results = result["results"] or t.results
        if run.stop == "early":
            t.status, t.error = "stopped", None
            t.metric = result["metric"] if result["status"] == "finished" else (t.history[-1] if t.history else None)
        elif run.stop == "shutdown":
            t.status = "finished" if result["status"] == "finished" else "interrupted"
            t.metric = result["metric"]
        else:
            t.status, t.error, t.metric = result["status"], result["error"], result["metric"]
        t.duration_s += elapsed
        if run.stop is None and self._stopped_from_outside(t, result, returncode) and t.attempts <= self.opts.retries:
            reason = t.error or "interrupted"
            t.status, t.error = "interrupted", None
            self.launched.discard(t.name)  # relaunch it: it resumes from its checkpoint
            self.progress.event(
                f"retrying {t.name} ({reason}; attempt {t.attempts + 1} of {self.opts.retries + 1})", "yellow"
            )
        t.pid = t.pid_start = None
        del self.running[run.slot.index]
        if t.status == "finished":
            self.durations.append(elapsed)
        self._save()
        shown = f" {self.spec.metric}={t.metric:.4g}" if t.metric is not None and self.spec.metric else ""
        style = {"failed": "red", "finished": "green"}.get(t.status, "yellow")
        detail = f": {t.error}" if t.status == "failed" else shown
        self.progress.event(f"{t.status:<8} {t.name} ({clock(elapsed)}){detail}", style)

    @staticmethod
    def _stopped_from_outside(trial: Trial, result: dict[str, Any], returncode: int) -> bool:
        """Killed by a signal, or checkpointed and stopped on one, rather than failed by its own error."""
        if result["status"] == "interrupted":
            return True
        return result["status"] == "failed" and returncode is not None and returncode < 0

    def _early_terminate(self) -> None:
        """Feed running trials' metrics to W&B's hyperband and stop the trials it drops."""
        if "early_terminate" not in self.spec.config:
            return
        changed = False
        for run in self.running.values():
            summary = read_summary(self.out / run.trial.name, run.since) or {}
            history = reported_history(summary, self.spec.metric)
            if history is not None:  # the trainer's own record of every validation
                changed |= history != run.trial.history
                run.trial.history = history
                continue
            seen = live_metric(self.out / run.trial.name, self.spec.metric)  # else: sample as we go
            if seen is not None and seen[0] != run.last_step:
                run.last_step = seen[0]
                run.trial.history.append(seen[1])
                changed = True
        if not changed:
            return
        self._save()
        drop = to_stop(self.spec, self._runs())
        for run in self.running.values():
            if run.trial.name in drop and run.stop is None:
                run.stop, run.kill_at = "early", time.monotonic() + self.opts.grace_s
                process.signal_group(run.proc.pid, signal.SIGTERM)
                self.progress.event(f"stopping {run.trial.name} early (hyperband)", "yellow")

    def _stop_all(self) -> None:
        """Stop every running trial (SIGTERM, grace, SIGKILL) and record them interrupted."""
        for run in self.running.values():
            run.stop = run.stop or "shutdown"
            process.signal_group(run.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.opts.grace_s
        while self.running and time.monotonic() < deadline:
            for run in list(self.running.values()):
                if run.proc.poll() is not None:
                    self._reap(run, run.proc.returncode)
            time.sleep(0.05)
        for run in list(self.running.values()):
            process.signal_group(run.proc.pid, signal.SIGKILL)
            self._reap(run, run.proc.wait())

    def _tick(self) -> None:
        for run in list(self.running.values()):
            returncode = run.proc.poll()
            if returncode is not None:
                self._reap(run, returncode)
            elif run.kill_at is not None and time.monotonic() > run.kill_at:
                process.signal_group(run.proc.pid, signal.SIGKILL)
        self._early_terminate()
        for slot in self.opts.slots:
            if slot.index in self.running:
                continue
            trial = self._next_trial()
            if trial is None:
                break
            self._launch(trial, slot)

    def _total(self) -> int:
        if upfront(self.spec) or self.cap is None:
            return len(self.state.trials)
        return max(self.cap, len(self.state.trials))

    def _prepare(self) -> int:
        """Open (or start) the sweep folder's state, recover, plan; returns the trials already done."""
        self.state = self._open_state()
        self.state.wandb_sweep = self.opts.wandb_sweep or self.state.wandb_sweep
        self._recover()
        if self.opts.retry_failed:
            for t in self.state.trials:
                if t.status == "failed":
                    t.status, t.error = "pending", None
        self.plan()
        self._save()
        return self.state.count("finished", "stopped")

    def run(self) -> SweepResult:
        """Plan, then train until every trial is done or the launcher is interrupted."""
        if self.opts.config is not None:
            read_yaml(self.opts.config)  # a missing or malformed base config fails once, up front
        with SweepLock(self.out), process.signals_raise_interrupt():
            skipped = self._prepare()
            if self._next_trial() is None:
                self._report_nothing_to_do()
                return SweepResult(self.state, 0, skipped, False)
            if skipped:
                self.progress.event(f"{skipped} finished trials skipped")
            return self._loop(skipped)

    def _loop(self, skipped: int) -> SweepResult:
        interrupted = False
        self.progress.start()
        try:
            while True:
                self._tick()
                if not self.running and self._next_trial() is None:
                    break
                self.progress.update(
                    self.state,
                    self._total(),
                    len(self.opts.slots),
                    self.durations,
                    {r.trial.name: r.mono for r in self.running.values()},
                )
                time.sleep(self.opts.poll_s)
        except KeyboardInterrupt:
            interrupted = True
            self.progress.close()
            self.progress.event("interrupted: stopping running trials (they resume on rerun) ...", "yellow")
            self._stop_all()
        finally:
            self.progress.close()
            self._save()
        return SweepResult(self.state, len(self.launched), skipped, interrupted)

    def _report_nothing_to_do(self) -> None:
        total, failed = len(self.state.trials), self.state.count("failed")
        note = f" ({failed} failed: --retry-failed runs them again)" if failed else ""
        self.progress.event(f"nothing to train: all {total} trials of {self.spec.name} are done{note}")


def run_sweep(spec: SweepSpec, opts: LaunchOptions, progress: Optional[Progress] = None) -> SweepResult:
    """Run ``spec`` locally as ``opts`` says; see :class:`Launcher`."""
    return Launcher(spec, opts, progress).run()
