"""What ``ablate sweep`` prints about a sweep: the dry-run list, the end-of-run report, the status table.

Each function takes the console to print to (the CLI's; tests give a wide one).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Optional

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ablate.record import TEST_BLEU, RunStatus
from ablate.sweep.planner import Planner
from ablate.sweep.progress import best_trial, clock
from ablate.sweep.search import best_configuration
from ablate.sweep.spec import SweepError, load_spec
from ablate.sweep.state import SweepState, is_locked, undrawn_group

FAILED = 1
"""Exit status of a sweep with a failed or unfinished trial (and of a dry run listing an invalid one)."""
STYLES = {
    RunStatus.FINISHED: "green",
    RunStatus.FAILED: "red",
    RunStatus.RUNNING: "cyan",
    RunStatus.INTERRUPTED: "yellow",
    RunStatus.STOPPED: "yellow",
}


def unfinished(state: SweepState) -> int:
    """Trials that failed or were left interrupted (hyperband's ``stopped`` and ``finished`` are done)."""
    return state.count(RunStatus.FAILED, RunStatus.INTERRUPTED, RunStatus.RUNNING)


class PlanProgress:
    """A progress bar on stderr for planning and listing that has run past :attr:`after_s` seconds.

    Called as a :data:`~ablate.sweep.planner.Tick` ``(what, done, total)``; nothing shows for a plan
    that ends sooner, and stdout keeps only the listing.
    """

    after_s = 2.0

    def __init__(self, console: Optional[Console] = None):
        self.console = console or Console(stderr=True)
        self.started = time.monotonic()
        self.bar: Optional[Any] = None
        self.task: Any = None
        self.what = ""

    def __call__(self, what: str, done: int, total: int) -> None:
        if self.bar is None:
            if done % 256 or time.monotonic() - self.started < self.after_s:
                return
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
            self.bar = Progress(*columns, console=self.console, transient=True)
            self.bar.start()
        if what != self.what:
            self.what = what
            self.task = self.bar.add_task(what, total=total)
        self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def preview(console: Console, planner: Planner, progress: Optional[PlanProgress] = None) -> int:
    """Print the trials a run would plan, one line each (plain text where stdout is not a terminal);
    returns how many are invalid. ``progress`` (on stderr) is told how planning and listing go."""
    tick = progress or (lambda what, done, total: None)
    planner.tick = tick
    try:
        trials = planner.preview()
        seeds = planner.spec.repeat_seeds
        if planner.spec.method == "bayes" and seeds is not None:
            console.print(
                f"bayes proposes configurations as results arrive (up to {planner.cap}, each trained with seeds "
                f"{', '.join(map(str, seeds))} and searched on their mean); the first:",
                highlight=False,
            )
        elif planner.spec.method == "bayes":
            console.print(f"bayes proposes trials as results arrive (up to {planner.cap}); the first:")
        for i, t in enumerate(trials):
            overrides = " ".join(planner.overrides(t))
            error = t.error if t.status == RunStatus.FAILED else None
            if console.is_terminal:
                line = f"[bold]{t.name}[/bold]  {overrides}" + (f"\n  [red]{error}[/red]" if error else "")
                console.print(line, highlight=False)
            else:  # a listing for a file or a pipe: one plain line per trial, without rich's layout per line
                console.file.write(f"{t.name}  {overrides}\n" + (f"  {error}\n" if error else ""))
            tick("listing trials", i + 1, len(trials))
    finally:
        if progress is not None:
            progress.close()
    invalid = sum(t.status == RunStatus.FAILED for t in trials)
    console.print(f"{len(trials)} trials" + (f", {invalid} invalid" if invalid else ""), highlight=False)
    if planner.state.group == undrawn_group(planner.spec.name):  # a status line: stdout keeps only the listing
        sys.stderr.write(
            f"W&B group {planner.state.group}: its digits are drawn when the sweep first runs in {planner.out}\n"
        )
    return invalid


def _best(console: Console, state: SweepState, metric: Optional[str], goal: str, repeat: bool = False) -> None:
    if repeat:  # a repeat seed: the best configuration by its mean, not a lucky seed
        config = best_configuration(state.trials, goal)
        if config is not None and metric:
            mean, seeds = config
            names = ", ".join(t.name for t in seeds)
            console.print(
                f"best {metric} = {mean:.4g}, the mean of {len(seeds)} seeds ({names})", style="green", highlight=False
            )
        return
    best = best_trial(state, goal)
    if best is not None and metric:
        console.print(f"best {metric} = {best.metric:.4g} ({best.name})", style="green", highlight=False)


def report(
    console: Console, state: SweepState, metric: Optional[str], goal: str, out: Path, repeat: bool = False
) -> None:
    """The lines after a run: counts by status, the W&B group, the best trial (with a repeat seed,
    the best configuration's mean), where to look next."""
    counts = {
        s: state.count(s)
        for s in (RunStatus.FINISHED, RunStatus.FAILED, RunStatus.INTERRUPTED, RunStatus.STOPPED, RunStatus.PENDING)
    }
    parts = [f"{n} {s}" for s, n in counts.items() if n]
    console.print(f"sweep {state.name}: " + ", ".join(parts), highlight=False)
    if state.group:
        console.print(f"W&B group {state.group}", style="dim", highlight=False)
    _best(console, state, metric, goal, repeat)
    console.print(f"details: ablate sweep status {out}", style="dim", highlight=False)


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def _repeats(state: SweepState) -> bool:
    """Whether the sweep's file (when still there) repeats every configuration over seeds."""
    try:
        return load_spec(state.source).repeat_seeds is not None
    except (SweepError, OSError):
        return False


def metric_of(state: SweepState) -> tuple[Optional[str], str]:
    """The sweep's metric and goal, from its file when that is still there."""
    try:
        spec = load_spec(state.source)
        return spec.metric, spec.goal
    except (SweepError, OSError):
        return None, "maximize"


def status_table(state: SweepState, out: Path, metric: Optional[str]) -> Table:
    """One row per trial: status, metric, test BLEU, time, tries (and the SLURM job), error."""
    slurm = any(t.job_id for t in state.trials)
    table = Table(title=f"sweep {state.name} ({state.source})", title_justify="left")
    columns: list[tuple[str, Any]] = [
        ("trial", "left"),
        ("status", "left"),
        (metric or "metric", "right"),
        (TEST_BLEU.key, "right"),
    ]
    columns += [("time", "right"), ("tries", "right")]
    if slurm:
        columns += [("SLURM job", "left"), ("requeues", "right")]
    for col, just in [*columns, ("error", "left")]:
        table.add_column(col, justify=just, overflow="fold")
    for t in state.trials:
        row: list[Any] = [
            Text(t.name),
            Text(t.status, style=STYLES.get(t.status, "")),  # pending has no style: never "[]" markup
            f"{t.metric:.4g}" if t.metric is not None else "",
            _num(t.results.get(TEST_BLEU.key)),
            clock(t.duration_s) if t.duration_s else "",
            str(t.attempts),
        ]
        if slurm:
            from ablate.sweep.slurm_job import requeues

            row += [f"{t.job_id} {(t.job_state or '').lower()}" if t.job_id else "", str(requeues(out / t.name))]
        table.add_row(*row, Text(t.error or ""))  # names and errors are text, never markup
    return table


def worker_trials(state: SweepState) -> dict[str, list[str]]:
    """``{packed worker job id: names of the trials running under it}`` (``--trials-per-job``)."""
    out: dict[str, list[str]] = {job: [] for job in state.workers}
    for t in state.trials:
        if t.status == RunStatus.RUNNING and t.job_id in out:
            out[t.job_id].append(t.name)
    return out


def status(console: Console, state: SweepState, out: Path) -> None:
    """``ablate sweep status``: the table, the counts, whether a launcher holds the folder, the best trial."""
    metric, goal = metric_of(state)
    console.print(status_table(state, out, metric))
    live = "a launcher is running" if is_locked(out) else "no launcher running"
    counts = ", ".join(
        f"{state.count(s)} {s}"
        for s in (RunStatus.FINISHED, RunStatus.FAILED, RunStatus.RUNNING, RunStatus.INTERRUPTED, RunStatus.PENDING)
        if state.count(s)
    )
    console.print(f"{len(state.trials)} trials: {counts or 'none'} ({live})", highlight=False)
    for job, names in worker_trials(state).items():
        console.print(
            f"worker job {job} {state.workers[job].lower()}: {', '.join(names) or 'no trial'}", highlight=False
        )
    _best(console, state, metric, goal, _repeats(state))
