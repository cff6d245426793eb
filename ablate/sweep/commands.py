"""``ablate sweep``: run a sweep file locally, on SLURM or Ray, or through W&B across machines, and show it.

Bad input ends with one red line and exit code 2, never a traceback.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ablate.config import complete_overrides, read_yaml
from ablate.record import TEST_BLEU, RunFiles, RunStatus, SweepFiles, is_number
from ablate.sweep import slurm
from ablate.sweep.launcher import EXECUTORS, Launcher, Progress, executor_class, make_executor
from ablate.sweep.local import ExecutorArgs, check_slot_options, is_same_process, plan_slots, trains
from ablate.sweep.planner import (
    ALLOWANCE_S,
    ASSUMED_STEP_S,
    STALL_S,
    TIME_FACTOR,
    TRIAL_LIMIT,
    Planner,
    check_overrides,
    check_trial_count,
    default_out,
    launch_options,
    trial_cap,
)
from ablate.sweep.spec import SweepError, SweepSpec, load_spec, replaced_variants
from ablate.sweep.state import (
    STYLES,
    SweepState,
    best_configuration,
    best_trial,
    clock,
    is_locked,
    load_state,
    score,
    undrawn_group,
)
from ablate.utils.commands import fail, typer_app
from ablate.utils.io import printable

FAILED = 1  # exit status of a sweep with a failed or unfinished trial (a dry run: an invalid one)


class PlanProgress:
    """A :data:`~ablate.sweep.planner.Tick`: a progress bar on stderr once planning has run past :attr:`after_s`."""

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


def trial_count(n: int) -> str:
    """``1 trial``, ``10,000 trials`` ("1 trials" was)."""
    return f"{n:,} trial{'' if n == 1 else 's'}"


def preview(console: Console, planner: Planner, progress: PlanProgress, counted: bool = False) -> int:
    """Print the trials a run would plan, one line each, then how many (unless ``counted``: the first line said
    it) and how many are invalid; returns how many are invalid."""
    planner.tick = progress
    try:
        trials = planner.preview()
        if planner.spec.method == "bayes":
            seeds, what = planner.spec.repeat_seeds, "configurations" if planner.spec.repeat_seeds else "trials"
            each = f", each trained with seeds {', '.join(map(str, seeds))} and searched on their mean" if seeds else ""
            line = f"bayes proposes {what} as results arrive (up to {planner.cap}{each}); the first:"
            console.print(line, highlight=False)
        for i, t in enumerate(trials):
            overrides = " ".join(planner.overrides(t))
            error = t.error if t.status == RunStatus.FAILED else None
            if console.is_terminal:  # as text, never markup: values and errors are the user's
                console.print(
                    Text.assemble((t.name, "bold"), f"  {overrides}", (f"\n  {error}" if error else "", "red"))
                )
            else:  # a listing for a file or a pipe: one plain line per trial, without rich's layout per line
                console.file.write(f"{t.name}  {overrides}\n" + (f"  {error}\n" if error else ""))
            progress("listing trials", i + 1, len(trials))
    finally:
        progress.close()
    invalid = sum(t.status == RunStatus.FAILED for t in trials)
    listed = trial_count(len(trials))
    if planner.spec.method == "bayes":
        line = listed + " listed (the first proposal)" + (f", {invalid} invalid" if invalid else "")
        console.print(line, highlight=False)
    elif invalid:
        console.print(f"{invalid} of the {listed} {'is' if invalid == 1 else 'are'} invalid", highlight=False)
    elif not counted:
        console.print(listed, highlight=False)
    if planner.state.group == undrawn_group(planner.spec.name):  # a status line: stdout keeps only the listing
        sys.stderr.write(
            f"W&B group {planner.state.group}: its digits are drawn when the sweep first runs in {planner.out}\n"
        )
    return invalid


def _best(console: Console, state: SweepState, metric: Optional[str], goal: str, repeat: bool = False) -> None:
    """The best trial, or with a repeat seed the best configuration by its mean (not a lucky seed)."""
    if not metric:
        return
    if repeat and (config := best_configuration(state.trials, goal)) is not None:
        names = ", ".join(t.name for t in config[1])
        _print(console, f"best {metric} = {score(config[0])}, the mean of {len(config[1])} seeds ({names})", "green")
    elif not repeat and (best := best_trial(state, goal)) is not None:
        _print(console, f"best {metric} = {score(best.metric)} ({best.name})", "green")


def _print(console: Console, line: str, style: Optional[str] = None) -> None:
    """``line`` as text, never markup, each control character a ``?``: names, paths and errors are the user's."""
    console.print(printable(line), style=style, markup=False, highlight=False)


COUNTED = [RunStatus(s) for s in "finished failed running interrupted stopped pending".split()]  # in this order


def _counts(state: SweepState) -> str:
    return ", ".join(f"{state.count(s)} {s}" for s in COUNTED if state.count(s))


def report(
    console: Console, state: SweepState, metric: Optional[str], goal: str, out: Path, repeat: bool = False
) -> None:
    """The lines after a run: counts by status (SLURM jobs may still be running), the W&B group, the best trial,
    where to look next."""
    _print(console, f"sweep {state.name}: {_counts(state)}")
    if state.group:
        _print(console, f"W&B group {state.group}", "dim")
    _best(console, state, metric, goal, repeat)
    _print(console, f"details: ablate sweep status {out}", "dim")


def live_jobs(state: SweepState, out: Path) -> dict[str, str]:
    """SLURM's state now (``GONE``: no longer listed) of the running trials' jobs and the workers where no launcher
    watches them (after Ctrl-C they run on); ``{}`` where a launcher does, or squeue cannot answer (a copied folder)."""
    jobs = sorted({t.job_id for t in state.trials if t.status == RunStatus.RUNNING and t.job_id} | set(state.workers))
    if not jobs or is_locked(out):
        return {}
    try:
        seen = slurm.job_states(jobs)
    except (SweepError, OSError, subprocess.SubprocessError):
        return {}
    return {job: seen.get(job, "GONE") for job in jobs}


def status_table(state: SweepState, out: Path, metric: Optional[str], live: dict[str, str]) -> Table:
    """One row per trial: status, metric, test BLEU, time (its attempts' sum: what it cost), tries (and the SLURM
    job: ``live`` states first), error."""
    on_slurm = any(t.job_id for t in state.trials)
    table = Table(title=Text(printable(f"sweep {state.name} ({state.source})")), title_justify="left")
    spent = ">time, all tries" if any(t.attempts > 1 for t in state.trials) else ">time"  # said where it sums
    columns = ["trial", "status", ">" + (metric or "metric"), ">" + TEST_BLEU.key, spent, ">tries"]
    for col in columns + (["SLURM job", ">requeues"] if on_slurm else []) + ["error"]:
        table.add_column(col.lstrip(">"), justify="right" if col[0] == ">" else "left", overflow="fold")
    for t in state.trials:
        test_bleu = t.results.get(TEST_BLEU.key)
        row: list[Any] = [
            Text(printable(t.name)),
            Text(t.status, style=STYLES.get(t.status, "")),  # pending has no style: never "[]" markup
            score(t.metric),
            score(test_bleu) if is_number(test_bleu) else "",
            clock(t.duration_s) if t.duration_s else "",
            str(t.attempts),
        ]
        if on_slurm:
            job_state = live.get(t.job_id or "", t.job_state) if t.status == RunStatus.RUNNING else t.job_state
            row += [f"{t.job_id} {(job_state or '').lower()}" if t.job_id else "", str(slurm.requeues(out / t.name))]
        table.add_row(*row, Text(printable(t.error or "")))  # names and errors are text, never markup or escapes
    return table


def _left_running(console: Console, state: SweepState, out: Path, jobs: dict[str, str]) -> None:
    """Name the trials ``running`` in ``sweep.json`` that nothing runs: a SLURM job that ended since a launcher last
    looked (``jobs``: :func:`live_jobs`), or, with no launcher, a local trial whose process is gone (it dies with its
    launcher)."""
    running = [t for t in state.trials if t.status == RunStatus.RUNNING]
    if jobs:
        ended = [t.name for t in running if t.job_id in jobs and jobs[str(t.job_id)] not in slurm.ACTIVE]
        if ended:
            whose = "1 trial's SLURM job has" if len(ended) == 1 else f"{len(ended)} trials' SLURM jobs have"
            again = f"run the sweep command again to collect {'it' if len(ended) == 1 else 'them'}"
            _print(console, f"{whose} ended since a launcher last looked ({', '.join(ended)}): {again}", "yellow")
    if is_locked(out):
        return
    alive = [t for t in running if t.pid is not None and is_same_process(t.pid, t.pid_start)]
    gone = [t.name for t in running if t.job_id is None and not (t in alive and trains(t.pid or 0, out / t.name))]
    if gone:
        whose = "1 trial was" if len(gone) == 1 else f"{len(gone)} trials were"
        them = "it" if len(gone) == 1 else "them"
        line = f"{whose} left running by a launcher that is gone and nothing trains {them} ({', '.join(gone)}): "
        line += f"run the sweep command again to resume {them}"
        _print(console, line, "yellow")


def show_status(console: Console, state: SweepState, out: Path) -> None:
    """``ablate sweep status``: the table, the counts, whether a launcher holds the folder, workers, the best."""
    try:
        spec: Optional[SweepSpec] = load_spec(state.source)
    except (SweepError, OSError):
        spec = None
    metric, goal = (spec.metric, spec.goal) if spec is not None else (None, None)
    if state.metric and state.goal:  # what its trials hold, read wherever this runs (source is relative to the run's)
        metric, goal = state.metric, state.goal
    repeat = state.repeat if state.repeat is not None else spec is not None and spec.repeat_seeds is not None
    jobs = live_jobs(state, out)
    console.print(status_table(state, out, metric, jobs))
    live = "a launcher is running" if is_locked(out) else "no launcher running"
    console.print(f"{trial_count(len(state.trials))}: {_counts(state) or 'none'} ({live})", highlight=False)
    _left_running(console, state, out, jobs)
    for job, job_state in state.workers.items():
        names = [t.name for t in state.trials if t.status == RunStatus.RUNNING and t.job_id == job]
        shown = jobs.get(job, job_state).lower()
        _print(console, f"worker job {job} {shown}: {', '.join(names) or 'no trial'}")
    if goal is not None:
        _best(console, state, metric, goal, repeat)


# --------------------------------------------------------------------------------------
# The commands
# --------------------------------------------------------------------------------------

app = typer_app(
    help="Ablation sweeps from W&B sweep files: locally over every GPU/CPU slot (resumable), "
    "or through a W&B server across machines.",
    no_args_is_help=True,
)
console = Console()

SLURM = "SLURM (--launcher slurm)"  # the help panel of the options only the SLURM launcher reads
DEVICES_HELP = "auto (every visible GPU, else CPU), cpu, or GPU ids such as 0,1,2,3."


def user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn W&B's own errors (no API key, server unreachable: not bugs) into one red line, exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as err:
            if type(err).__module__.split(".")[0] != "wandb":
                raise
            fail("W&B: " + (" ".join(str(err).split()) or type(err).__name__))

    return wrapper


def _complete_launcher(incomplete: str) -> list[str]:
    return [name for name in EXECUTORS if name.startswith(incomplete)]


def _slurm(default: Any, flag: str, help: str, **kwargs: Any) -> Any:
    """An option only the SLURM launcher reads, in its own help panel."""
    return typer.Option(default, flag, rich_help_panel=SLURM, help=help, **kwargs)


PROJECT = typer.Option(None, "--project", help="W&B project (default: WANDB_PROJECT or ablate).")
ENTITY = typer.Option(None, "--entity", help="W&B entity (user or team).")
CONFIG = typer.Option(None, "--config", help="Base YAML config for every trial.")


def _check_launcher_options(ctx: typer.Context, launcher: str) -> None:
    """An option only other launchers read (``options`` of their :data:`EXECUTORS` class) is refused, not ignored."""
    reads = executor_class(launcher).options
    for param in ctx.command.params:
        flag, name = param.opts[0], param.name or ""
        owners = [key for key, cls in EXECUTORS.items() if flag in cls.options]
        if owners and flag not in reads and getattr(ctx.get_parameter_source(name), "name", "") == "COMMANDLINE":
            raise SweepError(
                f"{flag} is read by --launcher {' and '.join(owners)}, not by --launcher {launcher}: drop it "
                f"(or run with --launcher {owners[0]})"
            )


@app.command("run")
@user_errors
def run(
    ctx: typer.Context,
    file: Path = typer.Argument(..., help="Sweep file (W&B sweep configuration), e.g. sweeps/quickstart.yaml."),
    overrides: Optional[list[str]] = typer.Argument(
        None,
        help="key=value config overrides for every trial; key=a,b adds a grid axis (one trial per value, "
        "crossed with the file's); quote a literal comma for YAML: 'key=\"a,b\"'.",
        autocompletion=complete_overrides,
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", help="Sweep folder (state + one folder per trial). Default: runs/<sweep name>."
    ),
    devices: str = typer.Option("auto", "--devices", help=DEVICES_HELP),
    gpus_per_trial: Optional[int] = typer.Option(
        None,
        "--gpus-per-trial",
        help="GPUs per trial; more than one trains with DDP. Default: 1 locally, 0 (CPU jobs) on SLURM.",
    ),
    parallel: int = typer.Option(
        1, "--parallel", help="Trials at once on CPU (cores are split evenly), or per GPU group on GPUs."
    ),
    launcher: str = typer.Option(
        "local",
        "--launcher",
        help="Where trials run: " + ", ".join(EXECUTORS) + ". local: processes on this machine's slots; slurm: one "
        "batch job per trial through submitit (run it on the cluster's login node); ray: one Ray task per trial "
        "on the cluster RAY_ADDRESS names (else a local one), --cpus-per-trial and --gpus-per-trial / --parallel each.",
        autocompletion=_complete_launcher,
    ),
    partition: Optional[str] = _slurm(None, "--partition", "partition for the jobs."),
    nodes_per_trial: int = _slurm(1, "--nodes-per-trial", "nodes per trial (DDP across them)."),
    max_concurrent: int = _slurm(8, "--max-concurrent", "jobs of this sweep queued or running at once."),
    time_limit: str = _slurm(
        "04:00:00",
        "--time",
        "job time limit, HH:MM:SS or D-HH:MM:SS (0: none, as sbatch reads it); trials checkpoint and requeue before it.",
    ),
    cpus_per_trial: Optional[int] = _slurm(
        None, "--cpus-per-trial", "CPUs per task (also the trainer's torch threads).", min=1
    ),
    mem: Optional[str] = _slurm(None, "--mem", "memory per node, e.g. 32G."),
    signal_delay: int = _slurm(
        120, "--signal-delay", "seconds before the time limit at which a job checkpoints and requeues itself."
    ),
    slurm_arg: Optional[list[str]] = _slurm(
        None, "--slurm-arg", "another #SBATCH option as KEY=VALUE (repeatable), e.g. account=abc or qos=high."
    ),
    trials_per_job: Optional[int] = _slurm(
        None,
        "--trials-per-job",
        "pack trials: --max-concurrent worker jobs, each running this many trials at once (sharing the job's "
        "--gpus-per-trial GPUs, --cpus-per-trial CPUs each) and pulling the next planned trial until none is left.",
        min=1,
    ),
    max_trials: Optional[int] = typer.Option(
        None,
        "--max-trials",
        help="Run at most this many trials (required for random/bayes without run_cap; with seed: {repeat: N}, "
        "configurations of N trials each).",
    ),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Run failed trials again."),
    retries: int = typer.Option(
        2,
        "--retries",
        min=0,
        help="Relaunch a trial killed from outside (preempted, OOM-killed) up to N times; it resumes from its checkpoint.",
    ),
    config: Optional[Path] = CONFIG,
    grace: float = typer.Option(30.0, "--grace", help="Seconds a stopped trial gets to save a checkpoint."),
    trial_timeout: Optional[float] = typer.Option(
        None,
        "--trial-timeout",
        min=0,
        help="Seconds a trial may run before it is stopped and recorded 'timeout' (the sweep goes on); 0: no limit. "
        f"Default: {ALLOWANCE_S:.0f} s plus {TIME_FACTOR:g} x its budget (train.max_time, else train.max_steps x "
        f"{ASSUMED_STEP_S:g} s); none for a budget in epochs only. Local and Ray trials only (SLURM: --time).",
    ),
    stall_warning: float = typer.Option(
        STALL_S,
        "--stall-warning",
        min=0,
        help="Warn on stderr when a running trial's log and summary.json have not changed for this many seconds; 0: never. "
        "Not for packed SLURM sweeps (--trials-per-job), whose workers run the trials.",
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the trials and their overrides; train nothing."),
    wandb_sweep: bool = typer.Option(
        False,
        "--wandb-sweep",
        help="When W&B is online, also register the sweep with the W&B server (once per --out) and attach "
        "every trial to it, so the project's Sweeps page (parameter importance, parallel coordinates) "
        "lists them; trials still train here.",
    ),
    trial_limit: int = typer.Option(TRIAL_LIMIT, "--trial-limit", min=1, help="Refuse to plan more trials than this."),
) -> None:
    """Run a sweep on this machine (one process per trial over device slots), on a SLURM cluster
    (one job per trial) or on a Ray cluster (one task per trial); rerun the same command to resume, collect
    and resubmit.

    Exit status:
    0: every trial finished (--dry-run: every trial is valid);
    1: some trial failed or did not finish (--dry-run: some trial's config is invalid);
    2: a bad command line, sweep file or config;
    130: interrupted (rerun to resume).
    """
    spec, opts = launch_options(
        file, overrides or [], out, config=config, retry_failed=retry_failed, retries=retries, max_trials=max_trials,
        grace_s=grace, trial_limit=trial_limit, trial_timeout_s=trial_timeout, stall_s=stall_warning,
    )  # fmt: skip
    args = ExecutorArgs(
        name=spec.name, devices=devices, gpus_per_trial=gpus_per_trial, parallel=parallel, partition=partition,
        nodes_per_trial=nodes_per_trial, max_concurrent=max_concurrent, time=time_limit, cpus_per_trial=cpus_per_trial,
        mem=mem, signal_delay_s=signal_delay, slurm_args=tuple(slurm_arg or ()),
    )  # fmt: skip
    if trials_per_job is not None and launcher != "slurm":
        raise SweepError(f"--trials-per-job packs trials into SLURM jobs: add --launcher slurm (not {launcher!r})")
    _check_launcher_options(ctx, launcher)
    for note in replaced_variants(spec, opts.overrides):  # on stderr: a dry run's stdout is its listing
        typer.secho(note, fg=typer.colors.YELLOW, err=True)
    if dry_run and launcher == "local":  # trains nothing, so it plans no slots (never imports torch to count GPUs)
        check_slot_options(devices, 1 if gpus_per_trial is None else gpus_per_trial, parallel)
    else:  # SLURM's and Ray's options are checked, not their cluster: a dry run refuses what the run would
        executor = make_executor(launcher, args, opts)
    count = check_trial_count(spec, trial_cap(spec, max_trials), trial_limit)  # at once, before any planning
    if count is not None:
        console.print(f"{spec.name}: {trial_count(count)}", highlight=False)
    if dry_run:
        if config is not None:  # as the run: one line for a missing or malformed base config, not every trial's
            read_yaml(config)
        if preview(console, Planner(spec, opts), PlanProgress(), counted=count is not None):
            raise typer.Exit(FAILED)
        return
    if trials_per_job is not None:
        assert isinstance(executor, slurm.SlurmExecutor)  # --launcher slurm, checked above
        packed = slurm.PackedSweep(spec, opts, executor, trials_per_job, _say)
        _run(packed, wandb_sweep, packed.describe())
        return
    _run(Launcher(spec, opts, Progress(console, spec.metric, spec.goal), executor), wandb_sweep, executor.describe())


def _say(line: str, style: str = "") -> None:
    console.print(Text(line, style=style))  # as written: paths and reasons are the user's, never markup


def _run(launcher: Launcher | slurm.PackedSweep, wandb_sweep: bool, where: str) -> None:
    """Run the sweep, report, and exit with its status (0, 1 some trial unfinished, 130 interrupted)."""
    spec, opts = launcher.spec, launcher.opts
    if wandb_sweep:
        from ablate.sweep.wandb_server import attach_local_sweep

        opts.wandb_sweep = attach_local_sweep(spec, opts, _say)
    console.print(Text.assemble("sweep ", (spec.name, "bold"), f" ({spec.method}) -> {opts.out}  {where}"))
    try:
        result = launcher.run()
    except KeyboardInterrupt:  # before any trial started: nothing to stop
        _say("interrupted: rerun the same command to resume", "yellow")
        raise typer.Exit(130) from None
    report(console, result.state, spec.metric, spec.goal, opts.out, spec.repeat_seeds is not None)
    if result.interrupted:
        _say("interrupted: rerun the same command to resume", "yellow")
        raise typer.Exit(130)
    if result.state.count(RunStatus.FAILED, RunStatus.INTERRUPTED, RunStatus.RUNNING):  # stopped by hyperband: done
        raise typer.Exit(FAILED)


@app.command("status")
@user_errors
def status(
    target: Path = typer.Argument(
        ..., help="Sweep folder or its sweep.json (or the sweep file, for its default folder)."
    ),
) -> None:
    """Show a sweep's trials: status, metric, time, error."""
    if target.is_file() and target.name == SweepFiles(target.parent).state.name:  # the folder's own state file
        target = target.parent
    out = default_out(load_spec(target)) if target.is_file() else target
    state = load_state(out)
    if state is None and SweepFiles(out.parent).state.is_file():
        raise SweepError(f"{out} is a trial of the sweep in {out.parent}; run 'ablate sweep status {out.parent}'")
    if state is None and RunFiles(out).summary.is_file():
        raise SweepError(f"{out} is a run folder, not a sweep's: its record is {RunFiles(out).summary}")
    if state is None:
        raise SweepError(f"no sweep state in {out} (expected {out}/sweep.json); run 'ablate sweep run FILE' first")
    show_status(console, state, out)


@app.command("create")
@user_errors
def create(
    file: Path = typer.Argument(..., help="Sweep file to register with the W&B server."),
    project: Optional[str] = PROJECT,
    entity: Optional[str] = ENTITY,
) -> None:
    """Register a sweep with the W&B server and print its id (then run 'ablate sweep agent ID')."""
    from ablate.sweep.wandb_server import create_sweep

    spec = load_spec(file)
    sweep_id = create_sweep(spec, project=_project(project), entity=entity)
    console.print(f"created W&B sweep {spec.name}: {sweep_id}", highlight=False)
    console.print(
        f"run trials on each machine with: ablate sweep agent {sweep_id} --devices auto", style="dim", highlight=False
    )
    print(sweep_id)


def _project(project: Optional[str]) -> str:
    return project or os.environ.get("WANDB_PROJECT") or "ablate"


@app.command("agent")
@user_errors
def agent(
    sweep_id: str = typer.Argument(..., help="W&B sweep id from 'ablate sweep create'."),
    overrides: Optional[list[str]] = typer.Argument(
        None, help="key=value config overrides for every trial.", autocompletion=complete_overrides
    ),
    devices: str = typer.Option("auto", "--devices", help=DEVICES_HELP + " One W&B agent per slot."),
    gpus_per_trial: int = typer.Option(1, "--gpus-per-trial", help="GPUs per trial; more than one trains with DDP."),
    parallel: int = typer.Option(1, "--parallel", help="Agents at once on CPU, or per GPU group."),
    project: Optional[str] = PROJECT,
    entity: Optional[str] = ENTITY,
    count: Optional[int] = typer.Option(None, "--count", help="Runs per agent (default: until the sweep is done)."),
    out: Path = typer.Option(Path("runs") / "wandb", "--out", help="Trials run in OUT/<sweep name>/<run>-<W&B id>."),
    config: Optional[Path] = CONFIG,
    threads: Optional[int] = typer.Option(
        None, "--threads", min=1, hidden=True, help="Torch threads per trial: the share of one of several agents."
    ),
) -> None:
    """Serve a W&B sweep: one agent per device slot, each trial its own 'ablate train' process."""
    from ablate.sweep.wandb_server import AgentOptions, run_agents

    slots = [replace(s, threads=threads or s.threads) for s in plan_slots(devices, gpus_per_trial, parallel)]
    checked = check_overrides(overrides or [])
    opts = AgentOptions(out, _project(project), entity, count, overrides=checked, config=config)
    code = run_agents(sweep_id, slots, opts)
    if code:
        raise typer.Exit(code)
