"""The sweep loop: the planner hands out trials, an executor (from :data:`EXECUTORS`, ``--launcher``) runs them;
each tick also applies hyperband, ``--trial-timeout`` and ``--stall-warning`` (docs/sweeps.md).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ablate.config import read_yaml
from ablate.errors import did_you_mean
from ablate.record import RunFiles, RunStatus
from ablate.sweep.local import (
    Executor,
    ExecutorArgs,
    Exit,
    Handle,
    LaunchRefused,
    LocalExecutor,
    signals_raise_interrupt,
    trains,
    wind_down,
)
from ablate.sweep.planner import LaunchOptions, Planner, SweepResult, trainer_command
from ablate.sweep.ray_cluster import RayExecutor
from ablate.sweep.slurm import SlurmExecutor
from ablate.sweep.spec import SweepError, SweepSpec
from ablate.sweep.state import (
    STYLES,
    SweepLock,
    SweepState,
    Trial,
    best_trial,
    clock,
    ended_line,
    outcome,
    record_timeout,
    score,
)

log = logging.getLogger(__name__)


class ExecutorClass(Protocol):
    """A registry entry: a class that builds its executor from the command line (docs/extending.md);
    ``options``: those of ``ablate sweep run``'s launcher options it reads (another launcher's is refused)."""

    @property
    def options(self) -> tuple[str, ...]: ...

    def from_args(self, args: ExecutorArgs, opts: LaunchOptions) -> Executor: ...


EXECUTORS: dict[str, ExecutorClass] = {
    "local": LocalExecutor,  # processes over this machine's GPU/CPU slots
    "slurm": SlurmExecutor,  # one batch job per trial through submitit, from a login node
    "ray": RayExecutor,  # one Ray task per trial on a Ray cluster (the optional extra ablate[ray])
}  # the CLI's choices, help and did-you-mean come from here


def executor_class(name: str) -> ExecutorClass:
    """The registry entry ``--launcher NAME`` names (a one-line error with did-you-mean for another name)."""
    if name not in EXECUTORS:
        hint = did_you_mean(name, EXECUTORS, cutoff=0.4)
        raise SweepError(f"--launcher {name!r}: choose one of {', '.join(EXECUTORS)}{hint}")
    return EXECUTORS[name]


def make_executor(name: str, args: ExecutorArgs, opts: LaunchOptions) -> Executor:
    """The executor ``--launcher NAME`` names, built from the command line's options."""
    return executor_class(name).from_args(args, opts)


# ---- Live progress ----


@dataclass(frozen=True)
class Stats:
    """What the panel shows: ``done`` counts finished, stopped and failed trials."""

    total: int
    done: int
    failed: int
    running: int
    elapsed_s: float
    eta_s: Optional[float]
    best: Optional[Trial]


def stats(state: SweepState, goal: str, total: int, elapsed_s: float, slots: int, durations: list[float]) -> Stats:
    """Counts, and an ETA from the trials this launcher finished."""
    done = state.count(RunStatus.FINISHED, RunStatus.STOPPED, RunStatus.FAILED)
    remaining = max(0, total - done)
    eta = None if remaining else 0.0
    if durations and remaining:
        eta = sum(durations) / len(durations) * remaining / max(1, min(slots, remaining))
    running, failed = state.count(RunStatus.RUNNING), state.count(RunStatus.FAILED)
    return Stats(total, done, failed, running, elapsed_s, eta, best_trial(state, goal))


class Progress:
    """Prints events and, on a terminal, keeps a live panel of the sweep up to date."""

    def __init__(self, console: Optional[Console] = None, metric: Optional[str] = None, goal: str = "maximize"):
        self.console = console or Console()
        self.metric, self.goal = metric, goal
        self._live: Optional[Live] = None
        self._started = self._drawn = time.monotonic()

    def start(self) -> None:
        self._started = time.monotonic()
        if self.console.is_terminal:
            self._live = Live(console=self.console, auto_refresh=False, transient=True)
            self._live.start()

    def event(self, text: str, style: str = "") -> None:
        self.console.print(Text(text, style=style))

    def update(
        self, state: SweepState, total: int, slots: int, durations: list[float], running: dict[str, float]
    ) -> None:
        """Redraw the panel, twice a second at most (``running``: trial name -> ``time.monotonic()`` at its start)."""
        now = time.monotonic()
        if self._live is not None and now - self._drawn >= 0.5:
            self._drawn = now
            snap = stats(state, self.goal, total, now - self._started, slots, durations)
            self._live.update(self._render(snap, running, now), refresh=True)

    def _render(self, snap: Stats, running: dict[str, float], now: float) -> Group:
        failed = (f"{snap.failed}", "red" if snap.failed else "")
        head: list[str | tuple[str, str]] = [("done ", "bold"), f"{snap.done}/{snap.total}  "]
        head += [("running ", "bold"), f"{snap.running}  ", ("failed ", "bold"), failed, "  "]
        head += [("elapsed ", "bold"), f"{clock(snap.elapsed_s)}  "]
        lines: list[Any] = [Text.assemble(*head, ("ETA ", "bold"), clock(snap.eta_s))]
        if snap.best is not None and self.metric:
            lines.append(Text(f"best {self.metric} = {score(snap.best.metric)} ({snap.best.name})", style="green"))
        if running:
            table = Table(show_header=True, header_style="dim", box=None, pad_edge=False)
            table.add_column(str(RunStatus.RUNNING))
            table.add_column("for", justify="right")
            for name, since in running.items():
                table.add_row(name, clock(now - since))
            lines.append(table)
        return Group(*lines)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


# ---- The loop ----


@dataclass
class _Running:
    handle: Handle
    mono: float  # time.monotonic() at the attempt's start
    stop: Optional[str] = None  # "early" (hyperband), "shutdown" (Ctrl-C) or TIMED_OUT: why the launcher ended it
    kill_at: Optional[float] = None
    limit_s: Optional[float] = None  # the attempt's time limit (--trial-timeout), None: none
    moved: float = 0.0  # time.time() of the last change seen to its log or record
    stalled: bool = False  # warned about, and silent since


TIMED_OUT = "time limit"  # the ``stop`` of an attempt that ran past its time limit


class Launcher:
    """Runs one sweep folder to completion (or until interrupted) on ``executor`` (default: local ``opts.slots``)."""

    def __init__(
        self,
        spec: SweepSpec,
        opts: LaunchOptions,
        progress: Optional[Progress] = None,
        executor: Optional[Executor] = None,
    ):
        self.spec, self.opts = spec, opts
        self.out = Path(opts.out)
        self.progress = progress or Progress(metric=spec.metric, goal=spec.goal)
        self.executor: Executor = executor or LocalExecutor(
            opts.slots, opts.poll_s, opts.grace_s, log_limit=opts.log_limit
        )
        self.command = opts.command or trainer_command(opts.config)
        self.planner = Planner(spec, opts, self.progress.event)
        self.running: dict[str, _Running] = {}
        self.started: set[str] = set()
        self.durations: list[float] = []
        self.last_step: dict[str, int] = {}

    @property
    def state(self) -> SweepState:
        return self.planner.state

    # ---- starting and ending attempts --------------------------------------------------

    def _track(self, handle: Handle, limit_s: Optional[float] = None) -> None:
        started_at = handle.trial.started_at or time.time()
        mono = time.monotonic() - max(0.0, time.time() - started_at)
        self.running[handle.trial.name] = _Running(handle, mono, limit_s=limit_s, moved=time.time())

    def _launch(self, trial: Trial) -> None:
        try:
            handle = self.executor.start(trial, self.out / trial.name, self.planner.argv(trial, self.command))
        except LaunchRefused as err:
            self.planner.refused(trial, str(err))
            return
        self.planner.started(trial, handle.since or time.time())
        self.started.add(trial.name)
        # a backend whose trials outlive the launcher (SLURM) has its own limit (--time)
        self._track(handle, None if self.executor.outlives_launcher else self.planner.time_limit(trial))
        self.progress.event(f"started  {trial.name} [{handle.where}]")

    def _reap(self, run: _Running, exit: Exit) -> None:
        trial, elapsed = run.handle.trial, time.monotonic() - run.mono
        run_dir, since, log_start = self.out / trial.name, run.handle.since, run.handle.log_start
        result = outcome(run_dir, exit.code, self.spec.metric, since, log_start)
        if run.stop == TIMED_OUT and result.status != RunStatus.FINISHED:
            record_timeout(run_dir, f"timeout: stopped after {clock(run.limit_s)}, its time limit (--trial-timeout)")
            result = outcome(run_dir, exit.code, self.spec.metric, since, log_start)
        self.executor.release(run.handle)
        del self.running[trial.name]
        self.last_step.pop(trial.name, None)
        retry = self.planner.ended(trial, result, exit, run.stop, elapsed)
        if trial.status == RunStatus.FINISHED:
            self.durations.append(elapsed)
        self.progress.event(
            ended_line(trial, self.spec.metric, run.handle.tag, elapsed), STYLES.get(trial.status, "yellow")
        )
        if retry:
            self.progress.event(retry, "yellow")

    def _collect(self) -> None:
        polled = self.executor.poll([r.handle for r in self.running.values()])
        for handle, exit in polled.ended:
            self._reap(self.running[handle.trial.name], exit)
        if polled.changed:
            self.planner.save()

    def _early_terminate(self) -> None:
        if not self.executor.can_stop_early or not self.running:
            return
        trials = [r.handle.trial for r in self.running.values()]
        since = {name: r.handle.since for name, r in self.running.items() if r.handle.since is not None}
        drop = self.planner.early_stops(trials, since, self.last_step)
        for name, run in self.running.items():
            if name in drop and run.stop is None:
                self._stop(run, "early", f"stopping {name} early (hyperband)", "yellow")

    def _time_limits(self) -> None:
        for name, run in self.running.items():
            if run.limit_s is not None and run.stop is None and time.monotonic() - run.mono > run.limit_s:
                line = f"stopping {name}: it ran past its time limit of {clock(run.limit_s)}"
                self._stop(run, TIMED_OUT, line, "red")

    def _stop(self, run: _Running, why: str, line: str, style: str) -> None:
        """Stop an attempt for ``why`` (it checkpoints); it is killed if still running ``--grace`` s later."""
        run.stop, run.kill_at = why, time.monotonic() + self.opts.grace_s
        self.executor.stop(run.handle)
        self.progress.event(line, style)

    def _stalls(self) -> None:
        if self.opts.stall_s <= 0:
            return
        now = time.time()
        for name, run in self.running.items():
            files = RunFiles(self.out / name)
            moved = max([run.moved] + [p.stat().st_mtime for p in (files.log, files.summary) if p.exists()])
            if moved > run.moved:
                run.moved, run.stalled = moved, False
            elif not run.stalled and now - run.moved > self.opts.stall_s:
                run.stalled, silent = True, clock(now - run.moved)
                log.warning("trial %s has written nothing for %s (still running; its log: %s)", name, silent, files.log)

    def _tick(self) -> None:
        self._collect()
        self._time_limits()
        self._stalls()
        for run in self.running.values():
            if run.kill_at is not None and time.monotonic() > run.kill_at:
                self.executor.kill(run.handle)
        self._early_terminate()
        while len(self.running) < self.executor.capacity():
            trial = self.planner.next_trial()
            if trial is None:
                break
            self._launch(trial)

    # ---- the run -----------------------------------------------------------------------

    def _recover(self) -> None:
        for trial in self.planner.left_running():
            if trial.job_id is not None and not self.executor.outlives_launcher:  # only SLURM's launcher sees it end
                raise SweepError(
                    f"trial {trial.name} was left running as SLURM job {trial.job_id}: rerun with --launcher slurm "
                    f"(and its options), which collects it; another launcher would train it twice at once"
                )
            if trial.pid is not None and not trains(trial.pid, self.out / trial.name):  # a received folder's pid
                trial.pid = trial.pid_start = None
            handle = self.executor.adopt(trial, self.progress.event)
            if handle is None:
                self.planner.recovered(trial)
            else:
                self.planner.launched.add(trial.name)
                self._track(handle)

    def run(self) -> SweepResult:
        if self.opts.config is not None:
            read_yaml(self.opts.config)  # a missing or malformed base config fails once, up front
        self.executor.check()
        if "early_terminate" in self.spec.config and not self.executor.can_stop_early:
            self.progress.event(
                f"note: early_terminate is not applied to these trials ({self.executor.describe()}); "
                "every trial runs to its budget",
                "yellow",
            )
        with SweepLock(self.out), signals_raise_interrupt():
            self.planner.open()
            self._recover()
            skipped = self.planner.prepare()
            if not self.running and self.planner.next_trial() is None:
                self.progress.event(self.planner.nothing_to_do())
                return SweepResult(self.state, 0, skipped, False)
            if skipped_line := self.planner.skipped():
                self.progress.event(skipped_line)
            if self.running:
                self.progress.event(f"watching {len(self.running)} trials a previous launcher started")
            return self._loop(skipped)

    def _loop(self, skipped: int) -> SweepResult:
        interrupted = False
        self.progress.start()
        try:
            while True:
                self._tick()
                if not self.running and self.planner.next_trial() is None:
                    break
                mono = {name: r.mono for name, r in self.running.items()}
                self.progress.update(self.state, self.planner.total(), self.executor.capacity(), self.durations, mono)
                time.sleep(self.executor.poll_s)
        except KeyboardInterrupt:
            interrupted = True
            self.progress.close()
            self._interrupted()
        finally:
            self.progress.close()
            self.planner.save()
        return SweepResult(self.state, len(self.started), skipped, interrupted)

    def _interrupted(self) -> None:
        if self.executor.outlives_launcher:
            self.progress.event(
                f"stopped watching: the trials keep running ({self.executor.describe()}); "
                "run the same command again to collect them",
                "yellow",
            )
            return
        self.progress.event("interrupted: stopping running trials (they resume on rerun) ...", "yellow")
        for run in self.running.values():
            run.stop = run.stop or "shutdown"
        wind_down(self.executor, lambda: [r.handle for r in self.running.values()], self._collect, self.opts.grace_s)
