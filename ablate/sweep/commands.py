"""``ablate sweep``: run a sweep file locally, or through W&B across machines, and inspect it.

Mounted by :mod:`ablate.cli` as ``app.add_typer(sweep_app, name="sweep")``. Bad input ends with one red
line and exit code 2, never a traceback.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ablate.config import ConfigError, complete_overrides, load_config, parse_override, valid_keys
from ablate.errors import AblateError, did_you_mean
from ablate.record import TEST_BLEU, RunStatus
from ablate.sweep.axes import axis_overrides, split_axes, with_axes
from ablate.sweep.launcher import Launcher, LaunchOptions, check_trial_count, default_out
from ablate.sweep.options import TRIAL_LIMIT
from ablate.sweep.progress import Progress, best_trial, clock
from ablate.sweep.search import trial_cap
from ablate.sweep.slots import plan_slots
from ablate.sweep.spec import SweepError, load_spec
from ablate.sweep.state import is_locked, load_state
from ablate.utils.commands import fail, typer_app

app = typer_app(
    help="Ablation sweeps from W&B sweep files: locally over every GPU/CPU slot (resumable), "
    "or through a W&B server across machines.",
    no_args_is_help=True,
)
console = Console()

SLURM = "SLURM (--launcher slurm)"
"""The help panel of the options that only the SLURM launcher reads."""
DEVICES_HELP = "auto (every visible GPU, else CPU), cpu, or GPU ids such as 0,1,2,3."


def user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn W&B's own errors (no API key, server unreachable: not bugs) into one red line, exit code 2.

    Sweep and config mistakes (:class:`~ablate.errors.AblateError`) end the same way through the app.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AblateError:
            raise
        except Exception as err:
            if type(err).__module__.split(".")[0] != "wandb":
                raise
            fail("W&B: " + (" ".join(str(err).split()) or type(err).__name__))

    return wrapper


def check_overrides(overrides: list[str]) -> list[str]:
    """Each ``key=value`` is well formed and names a config key (so no trial fails for a typo)."""
    keys = set(valid_keys())
    for item in overrides:
        key, _ = parse_override(item)
        if key not in keys:
            hint = did_you_mean(key, sorted(keys), cutoff=0.5) or "; see `ablate train --help` for the keys"
            raise ConfigError(f"override '{item}': unknown config key '{key}'{hint}")
    return list(overrides)


@app.command("run")
@user_errors
def run(
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
        help="local (this machine) or slurm (one batch job per "
        "trial through submitit; run it on the cluster's login node).",
    ),
    partition: Optional[str] = typer.Option(None, "--partition", rich_help_panel=SLURM, help="partition for the jobs."),
    nodes_per_trial: int = typer.Option(
        1, "--nodes-per-trial", rich_help_panel=SLURM, help="nodes per trial (DDP across them)."
    ),
    max_concurrent: int = typer.Option(
        8, "--max-concurrent", rich_help_panel=SLURM, help="jobs of this sweep queued or running at once."
    ),
    time_limit: str = typer.Option(
        "04:00:00",
        "--time",
        rich_help_panel=SLURM,
        help="job time limit, HH:MM:SS or D-HH:MM:SS; trials checkpoint and requeue before it.",
    ),
    cpus_per_trial: Optional[int] = typer.Option(
        None, "--cpus-per-trial", rich_help_panel=SLURM, help="CPUs per task (also the trainer's torch threads)."
    ),
    mem: Optional[str] = typer.Option(None, "--mem", rich_help_panel=SLURM, help="memory per node, e.g. 32G."),
    signal_delay: int = typer.Option(
        120,
        "--signal-delay",
        rich_help_panel=SLURM,
        help="seconds before the time limit at which a job checkpoints and requeues itself.",
    ),
    slurm_arg: Optional[list[str]] = typer.Option(
        None,
        "--slurm-arg",
        rich_help_panel=SLURM,
        help="another #SBATCH option as KEY=VALUE (repeatable), e.g. account=abc or qos=high.",
    ),
    max_trials: Optional[int] = typer.Option(
        None, "--max-trials", help="Run at most this many trials (required for random/bayes without run_cap)."
    ),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Run failed trials again."),
    retries: int = typer.Option(
        2,
        "--retries",
        min=0,
        help="Relaunch a trial killed from outside "
        "(preempted, OOM-killed) up to N times; it resumes from its checkpoint.",
    ),
    config: Optional[Path] = typer.Option(None, "--config", help="Base YAML config for every trial."),
    grace: float = typer.Option(30.0, "--grace", help="Seconds a stopped trial gets to save a checkpoint."),
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
    """Run a sweep on this machine (one process per trial over device slots) or on a SLURM cluster
    (one job per trial); rerun the same command to resume, collect and resubmit.

    Exit status:
    0: every trial finished (--dry-run: every trial is valid);
    1: some trial failed or did not finish (--dry-run: some trial's config is invalid);
    2: a bad command line, sweep file or config;
    130: interrupted (rerun to resume).
    """
    if launcher not in ("local", "slurm"):
        raise SweepError(f"--launcher {launcher!r}: choose local or slurm")
    plain, axes = split_axes(check_overrides(overrides or []))
    spec = with_axes(load_spec(file), axes)
    slurm = launcher == "slurm"
    opts = LaunchOptions(
        out=out or default_out(spec),
        slots=[] if slurm else plan_slots(devices, 1 if gpus_per_trial is None else gpus_per_trial, parallel),
        overrides=plain,
        axes=axis_overrides(axes),
        config=config,
        retry_failed=retry_failed,
        retries=retries,
        max_trials=max_trials,
        grace_s=grace,
        trial_limit=trial_limit,
    )
    count = check_trial_count(spec, trial_cap(spec, max_trials), trial_limit)  # at once, before any planning
    if count is not None:
        console.print(f"{spec.name}: {count:,} trials", highlight=False)
    if slurm:
        from ablate.sweep.slurm import SlurmLauncher, SlurmOptions

        extra = {}
        for item in slurm_arg or []:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise SweepError(f"--slurm-arg {item!r}: use KEY=VALUE, e.g. account=abc")
            extra[key.strip().replace("-", "_")] = value
        options = SlurmOptions(
            partition=partition,
            gpus_per_trial=gpus_per_trial or 0,
            nodes_per_trial=nodes_per_trial,
            cpus_per_trial=cpus_per_trial,
            max_concurrent=max_concurrent,
            time=time_limit,
            signal_delay_s=signal_delay,
            mem=mem,
            extra=extra,
        )
        make = functools.partial(SlurmLauncher, spec, opts, options)
        where = (
            f"SLURM: {options.nodes_per_trial} node(s) x {options.gpus_per_trial or 'no'} GPU(s) per trial, "
            f"at most {options.max_concurrent} jobs, {options.time}"
        )
    else:
        make = functools.partial(Launcher, spec, opts)
        where = "slots: " + ", ".join(s.describe() for s in opts.slots)
    if dry_run:
        if _preview(make()):
            raise typer.Exit(FAILED)
        return
    if wandb_sweep:
        opts.wandb_sweep = _register(spec, opts)
    console.print(f"sweep [bold]{spec.name}[/bold] ({spec.method}) -> {opts.out}  {where}", highlight=False)
    try:
        result = make(Progress(console, spec.metric, spec.goal)).run()
    except KeyboardInterrupt:  # before any trial started: nothing to stop
        console.print("interrupted: rerun the same command to resume", style="yellow")
        raise typer.Exit(130) from None
    _report(result.state, spec.metric, spec.goal, opts.out)
    if result.interrupted:
        console.print("interrupted: rerun the same command to resume", style="yellow")
        raise typer.Exit(130)
    if unfinished(result.state):
        raise typer.Exit(FAILED)


def _register(spec: Any, opts: LaunchOptions) -> Optional[str]:
    """The W&B sweep of ``--wandb-sweep`` (made once per folder), its id in the trials' environment."""
    import os

    from ablate.sweep.wandb_agent import register_local_sweep
    from ablate.training.tracking import resolve_mode

    tracking = load_config(opts.config, opts.overrides).tracking
    if resolve_mode(tracking) != "online":
        console.print("--wandb-sweep: W&B is not online (no login, or offline mode); no W&B sweep", style="yellow")
        return None
    state = load_state(opts.out)
    path = state.wandb_sweep if state is not None and state.wandb_sweep else None
    path = path or register_local_sweep(spec, tracking.project, tracking.entity)
    os.environ["WANDB_SWEEP_ID"] = path.rsplit("/", 1)[-1]  # wandb.init in every trial attaches to it
    console.print(f"W&B sweep {path}", highlight=False)
    return path


FAILED = 1
"""Exit status of a sweep with a failed or unfinished trial (and of a dry run listing an invalid one)."""


def unfinished(state: Any) -> int:
    """Trials that failed or were left interrupted (hyperband's ``stopped`` and ``finished`` are done)."""
    return state.count(RunStatus.FAILED, RunStatus.INTERRUPTED, RunStatus.RUNNING)


def _preview(launcher: Launcher) -> int:
    """Print the trials a run would plan; returns how many are invalid."""
    trials = launcher.preview()
    if launcher.spec.method == "bayes":
        console.print(f"bayes proposes trials as results arrive (up to {launcher.cap}); the first:")
    for t in trials:
        line = f"[bold]{t.name}[/bold]  {' '.join(launcher.overrides(t))}"
        console.print(line + (f"\n  [red]{t.error}[/red]" if t.status == RunStatus.FAILED else ""), highlight=False)
    invalid = sum(t.status == RunStatus.FAILED for t in trials)
    console.print(f"{len(trials)} trials" + (f", {invalid} invalid" if invalid else ""), highlight=False)
    return invalid


def _report(state: Any, metric: Optional[str], goal: str, out: Path) -> None:
    counts = {
        s: state.count(s)
        for s in (RunStatus.FINISHED, RunStatus.FAILED, RunStatus.INTERRUPTED, RunStatus.STOPPED, RunStatus.PENDING)
    }
    parts = [f"{n} {s}" for s, n in counts.items() if n]
    console.print(f"sweep {state.name}: " + ", ".join(parts), highlight=False)
    if state.group:
        console.print(f"W&B group {state.group}", style="dim", highlight=False)
    best = best_trial(state, goal)
    if best is not None and metric:
        console.print(f"best {metric} = {best.metric:.4g} ({best.name})", style="green", highlight=False)
    console.print(f"details: ablate sweep status {out}", style="dim", highlight=False)


@app.command("status")
@user_errors
def status(
    target: Path = typer.Argument(..., help="Sweep folder (or the sweep file, for its default folder)."),
) -> None:
    """Show a sweep's trials: status, metric, time, error."""
    out = default_out(load_spec(target)) if target.is_file() else target
    state = load_state(out)
    if state is None:
        raise SweepError(f"no sweep state in {out} (expected {out}/sweep.json); run 'ablate sweep run FILE' first")
    metric, goal = _metric_of(state)
    slurm = any(t.job_id for t in state.trials)
    table = Table(title=f"sweep {state.name} ({state.source})", title_justify="left")
    columns = [
        ("trial", "left"),
        ("status", "left"),
        (metric or "metric", "right"),
        (TEST_BLEU.key, "right"),
        ("time", "right"),
        ("tries", "right"),
    ]
    if slurm:
        columns += [("SLURM job", "left"), ("requeues", "right")]
    for col, just in [*columns, ("error", "left")]:
        table.add_column(col, justify=just, overflow="fold")
    styles = {
        RunStatus.FINISHED: "green",
        RunStatus.FAILED: "red",
        RunStatus.RUNNING: "cyan",
        RunStatus.INTERRUPTED: "yellow",
        RunStatus.STOPPED: "yellow",
    }
    for t in state.trials:
        row = [
            Text(t.name),
            Text(t.status, style=styles.get(t.status, "")),  # pending has no style: never "[]" markup
            f"{t.metric:.4g}" if t.metric is not None else "",
            _num(t.results.get(TEST_BLEU.key)),
            clock(t.duration_s) if t.duration_s else "",
            str(t.attempts),
        ]
        if slurm:
            from ablate.sweep.slurm_job import requeues

            row += [f"{t.job_id} {(t.job_state or '').lower()}" if t.job_id else "", str(requeues(out / t.name))]
        table.add_row(*row, Text(t.error or ""))  # names and errors are text, never markup
    console.print(table)
    live = "a launcher is running" if is_locked(out) else "no launcher running"
    counts = ", ".join(
        f"{state.count(s)} {s}"
        for s in (RunStatus.FINISHED, RunStatus.FAILED, RunStatus.RUNNING, RunStatus.INTERRUPTED, RunStatus.PENDING)
        if state.count(s)
    )
    console.print(f"{len(state.trials)} trials: {counts or 'none'} ({live})", highlight=False)
    best = best_trial(state, goal)
    if best is not None and metric:
        console.print(f"best {metric} = {best.metric:.4g} ({best.name})", style="green", highlight=False)


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def _metric_of(state: Any) -> tuple[Optional[str], str]:
    """The sweep's metric and goal, from its file when that is still there."""
    try:
        spec = load_spec(state.source)
        return spec.metric, spec.goal
    except (SweepError, OSError):
        return None, "maximize"


@app.command("create")
@user_errors
def create(
    file: Path = typer.Argument(..., help="Sweep file to register with the W&B server."),
    project: Optional[str] = typer.Option(None, "--project", help="W&B project (default: WANDB_PROJECT or ablate)."),
    entity: Optional[str] = typer.Option(None, "--entity", help="W&B entity (user or team)."),
) -> None:
    """Register a sweep with the W&B server and print its id (then run 'ablate sweep agent ID')."""
    from ablate.sweep.wandb_agent import create_sweep

    spec = load_spec(file)
    sweep_id = create_sweep(spec, project=_project(project), entity=entity)
    console.print(f"created W&B sweep {spec.name}: {sweep_id}", highlight=False)
    console.print(
        f"run trials on each machine with: ablate sweep agent {sweep_id} --devices auto", style="dim", highlight=False
    )
    print(sweep_id)


def _project(project: Optional[str]) -> str:
    import os

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
    project: Optional[str] = typer.Option(None, "--project", help="W&B project (default: WANDB_PROJECT or ablate)."),
    entity: Optional[str] = typer.Option(None, "--entity", help="W&B entity (user or team)."),
    count: Optional[int] = typer.Option(None, "--count", help="Runs per agent (default: until the sweep is done)."),
    out: Path = typer.Option(Path("runs") / "wandb", "--out", help="Trials run in OUT/<sweep name>/<run>-<W&B id>."),
    config: Optional[Path] = typer.Option(None, "--config", help="Base YAML config for every trial."),
) -> None:
    """Serve a W&B sweep: one agent per device slot, each trial its own 'ablate train' process."""
    from ablate.sweep.wandb_agent import AgentOptions, run_agents

    slots = plan_slots(devices, gpus_per_trial, parallel)
    opts = AgentOptions(
        out=out,
        project=_project(project),
        entity=entity,
        count=count,
        overrides=check_overrides(overrides or []),
        config=config,
    )
    code = run_agents(sweep_id, slots, opts)
    if code:
        raise typer.Exit(code)
