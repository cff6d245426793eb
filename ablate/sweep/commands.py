"""``ablate sweep``: run a sweep file locally, or through W&B across machines, and inspect it.

Mounted by :mod:`ablate.cli` as ``app.add_typer(sweep_app, name="sweep")``. Bad input ends with one red
line and exit code 2, never a traceback.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import typer
from rich.console import Console

import ablate.sweep.views as views  # the module: the package (callable) imports ablate.sweep.api
from ablate.config import complete_overrides
from ablate.errors import AblateError
from ablate.sweep.axes import axis_overrides, split_axes, with_axes
from ablate.sweep.executors import EXECUTORS, ExecutorArgs, executor_class, make_executor
from ablate.sweep.launcher import Launcher, LaunchOptions, check_trial_count, default_out
from ablate.sweep.options import STALL_S, TRIAL_LIMIT, check_overrides
from ablate.sweep.planner import Planner
from ablate.sweep.progress import Progress
from ablate.sweep.search import trial_cap
from ablate.sweep.slots import plan_slots
from ablate.sweep.spec import SweepError, load_spec
from ablate.sweep.state import load_state
from ablate.sweep.trial import ALLOWANCE_S, ASSUMED_STEP_S, TIME_FACTOR
from ablate.utils.commands import fail, typer_app

if TYPE_CHECKING:
    from ablate.sweep.packed import PackedSweep

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


def _complete_launcher(incomplete: str) -> list[str]:
    return [name for name in EXECUTORS if name.startswith(incomplete)]


FILE = typer.Argument(..., help="Sweep file (W&B sweep configuration), e.g. sweeps/quickstart.yaml.")
OVERRIDES = typer.Argument(
    None,
    help="key=value config overrides for every trial; key=a,b adds a grid axis (one trial per value, "
    "crossed with the file's); quote a literal comma for YAML: 'key=\"a,b\"'.",
    autocompletion=complete_overrides,
)
OUT = typer.Option(None, "--out", help="Sweep folder (state + one folder per trial). Default: runs/<sweep name>.")
GPUS_PER_TRIAL = typer.Option(
    None,
    "--gpus-per-trial",
    help="GPUs per trial; more than one trains with DDP. Default: 1 locally, 0 (CPU jobs) on SLURM.",
)
PARALLEL = typer.Option(
    1, "--parallel", help="Trials at once on CPU (cores are split evenly), or per GPU group on GPUs."
)
LAUNCHER = typer.Option(
    "local",
    "--launcher",
    help="Where trials run: " + ", ".join(EXECUTORS) + ". local: processes on this machine's slots; slurm: one "
    "batch job per trial through submitit (run it on the cluster's login node); ray: one Ray task per trial "
    "on the cluster RAY_ADDRESS names (else a local one), --cpus-per-trial and --gpus-per-trial / --parallel each.",
    autocompletion=_complete_launcher,
)
PARTITION = typer.Option(None, "--partition", rich_help_panel=SLURM, help="partition for the jobs.")
NODES = typer.Option(1, "--nodes-per-trial", rich_help_panel=SLURM, help="nodes per trial (DDP across them).")
MAX_CONCURRENT = typer.Option(
    8, "--max-concurrent", rich_help_panel=SLURM, help="jobs of this sweep queued or running at once."
)
TIME = typer.Option(
    "04:00:00",
    "--time",
    rich_help_panel=SLURM,
    help="job time limit, HH:MM:SS or D-HH:MM:SS; trials checkpoint and requeue before it.",
)
CPUS = typer.Option(
    None, "--cpus-per-trial", rich_help_panel=SLURM, help="CPUs per task (also the trainer's torch threads)."
)
TRIALS_PER_JOB = typer.Option(
    None,
    "--trials-per-job",
    min=1,
    rich_help_panel=SLURM,
    help="pack trials: --max-concurrent worker jobs, each running this many trials at once (sharing the job's "
    "--gpus-per-trial GPUs, --cpus-per-trial CPUs each) and pulling the next planned trial until none is left.",
)
MEM = typer.Option(None, "--mem", rich_help_panel=SLURM, help="memory per node, e.g. 32G.")
SIGNAL_DELAY = typer.Option(
    120,
    "--signal-delay",
    rich_help_panel=SLURM,
    help="seconds before the time limit at which a job checkpoints and requeues itself.",
)
SLURM_ARG = typer.Option(
    None,
    "--slurm-arg",
    rich_help_panel=SLURM,
    help="another #SBATCH option as KEY=VALUE (repeatable), e.g. account=abc or qos=high.",
)
MAX_TRIALS = typer.Option(
    None,
    "--max-trials",
    help="Run at most this many trials (required for random/bayes without run_cap; with seed: {repeat: N}, "
    "configurations of N trials each).",
)
RETRIES = typer.Option(
    2,
    "--retries",
    min=0,
    help="Relaunch a trial killed from outside (preempted, OOM-killed) up to N times; it resumes from its checkpoint.",
)
TRIAL_TIMEOUT = typer.Option(
    None,
    "--trial-timeout",
    min=0,
    help="Seconds a trial may run before it is stopped and recorded 'timeout' (the sweep goes on); 0: no limit. "
    f"Default: {ALLOWANCE_S:.0f} s plus {TIME_FACTOR:g} x its budget (train.max_time, else train.max_steps x "
    f"{ASSUMED_STEP_S:g} s); none for a budget in epochs only. Local trials only (SLURM: --time).",
)
STALL_WARNING = typer.Option(
    STALL_S,
    "--stall-warning",
    min=0,
    help="Warn on stderr when a running trial's log and summary.json have not changed for this many seconds; 0: never.",
)
WANDB_SWEEP = typer.Option(
    False,
    "--wandb-sweep",
    help="When W&B is online, also register the sweep with the W&B server (once per --out) and attach "
    "every trial to it, so the project's Sweeps page (parameter importance, parallel coordinates) "
    "lists them; trials still train here.",
)


@app.command("run")
@user_errors
def run(
    file: Path = FILE,
    overrides: Optional[list[str]] = OVERRIDES,
    out: Optional[Path] = OUT,
    devices: str = typer.Option("auto", "--devices", help=DEVICES_HELP),
    gpus_per_trial: Optional[int] = GPUS_PER_TRIAL,
    parallel: int = PARALLEL,
    launcher: str = LAUNCHER,
    partition: Optional[str] = PARTITION,
    nodes_per_trial: int = NODES,
    max_concurrent: int = MAX_CONCURRENT,
    time_limit: str = TIME,
    cpus_per_trial: Optional[int] = CPUS,
    mem: Optional[str] = MEM,
    signal_delay: int = SIGNAL_DELAY,
    slurm_arg: Optional[list[str]] = SLURM_ARG,
    trials_per_job: Optional[int] = TRIALS_PER_JOB,
    max_trials: Optional[int] = MAX_TRIALS,
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Run failed trials again."),
    retries: int = RETRIES,
    config: Optional[Path] = typer.Option(None, "--config", help="Base YAML config for every trial."),
    grace: float = typer.Option(30.0, "--grace", help="Seconds a stopped trial gets to save a checkpoint."),
    trial_timeout: Optional[float] = TRIAL_TIMEOUT,
    stall_warning: float = STALL_WARNING,
    dry_run: bool = typer.Option(False, "--dry-run", help="List the trials and their overrides; train nothing."),
    wandb_sweep: bool = WANDB_SWEEP,
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
    plain, axes = split_axes(check_overrides(overrides or []))
    spec = with_axes(load_spec(file), axes)
    opts = LaunchOptions(
        out=out or default_out(spec),
        slots=[],
        overrides=plain,
        axes=axis_overrides(axes),
        config=config,
        retry_failed=retry_failed,
        retries=retries,
        max_trials=max_trials,
        grace_s=grace,
        trial_limit=trial_limit,
        trial_timeout_s=trial_timeout,
        stall_s=stall_warning,
    )
    args = ExecutorArgs(
        name=spec.name, devices=devices, gpus_per_trial=gpus_per_trial, parallel=parallel, partition=partition,
        nodes_per_trial=nodes_per_trial, max_concurrent=max_concurrent, time=time_limit, cpus_per_trial=cpus_per_trial,
        mem=mem, signal_delay_s=signal_delay, slurm_args=tuple(slurm_arg or ()),
    )  # fmt: skip
    if trials_per_job is not None and launcher != "slurm":
        raise SweepError(f"--trials-per-job packs trials into SLURM jobs: add --launcher slurm (not {launcher!r})")
    if dry_run:  # trains nothing, so it plans no device slots (and never imports torch to count GPUs)
        executor_class(launcher)
    else:
        executor = make_executor(launcher, args, opts)
    count = check_trial_count(spec, trial_cap(spec, max_trials), trial_limit)  # at once, before any planning
    if count is not None:
        console.print(f"{spec.name}: {count:,} trials", highlight=False)
    if dry_run:
        if views.preview(console, Planner(spec, opts), views.PlanProgress()):
            raise typer.Exit(views.FAILED)
        return
    if trials_per_job is not None:
        from ablate.sweep.packed import PackedSweep

        packed = PackedSweep.from_args(spec, args, opts, trials_per_job, _say)
        _run(packed, wandb_sweep, packed.describe())
        return
    _run(Launcher(spec, opts, Progress(console, spec.metric, spec.goal), executor), wandb_sweep, executor.describe())


def _say(line: str, style: str = "") -> None:
    console.print(line, style=style, highlight=False)


def _run(launcher: Launcher | PackedSweep, wandb_sweep: bool, where: str) -> None:
    """Run the sweep, report, and exit with its status (0, 1 some trial unfinished, 130 interrupted)."""
    spec, opts = launcher.spec, launcher.opts
    if wandb_sweep:
        from ablate.sweep.wandb_agent import attach_local_sweep

        opts.wandb_sweep = attach_local_sweep(spec, opts, _say)
    _say(f"sweep [bold]{spec.name}[/bold] ({spec.method}) -> {opts.out}  {where}")
    try:
        result = launcher.run()
    except KeyboardInterrupt:  # before any trial started: nothing to stop
        _say("interrupted: rerun the same command to resume", "yellow")
        raise typer.Exit(130) from None
    views.report(console, result.state, spec.metric, spec.goal, opts.out, spec.repeat_seeds is not None)
    if result.interrupted:
        _say("interrupted: rerun the same command to resume", "yellow")
        raise typer.Exit(130)
    if views.unfinished(result.state):
        raise typer.Exit(views.FAILED)


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
    views.status(console, state, out)


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
