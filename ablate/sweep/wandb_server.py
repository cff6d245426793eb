"""Sweeps and W&B's server: registering a sweep, W&B agents across machines (the server plans, each run trains
through the local executor), and ``ablate sync``, which uploads every trial's offline runs once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

from ablate.config import ConfigError, load_config
from ablate.errors import AblateError
from ablate.record import LOG_FILE, RunFiles, RunStatus, RunSummary
from ablate.sweep.local import LocalExecutor, Slot, ablate_argv, child_env, signals_raise_interrupt
from ablate.sweep.planner import LaunchOptions, TrialCommand, point_of, trainer_command
from ablate.sweep.spec import (
    REPEAT,
    SEED,
    SWEEP_COMMAND,
    SweepError,
    SweepSpec,
    check_unswept,
    from_wandb,
    point_from_wandb,
    safe_name,
    spec_from_dict,
    to_wandb,
    trial_name,
    trial_overrides,
)
from ablate.sweep.state import Trial, load_state, outcome
from ablate.training.run_folder import running_status


def wandb_sweep_config(spec: SweepSpec, agents: bool = True) -> dict[str, Any]:
    """The configuration sent to W&B: the file's, named after the sweep, variants by name; a repeat seed (agents
    would train one seed per configuration) and a ``test/<name>`` metric (not in a run's summary) are refused
    for agents, and a local sweep's dashboard (``agents=False``) lists the seeds as values."""
    seeds = spec.repeat_seeds
    metric = spec.metric or ""
    if agents and metric.startswith("test/") and metric != "test/sents_per_sec":
        name = metric.partition("/")[2]
        raise SweepError(
            f"{spec.describe()}: metric {metric} is not in a W&B run's summary, which holds each test score once, "
            f"per split: name test_<split>/{name} (e.g. test_test_2016_flickr/{name}), or val/{name}"
        )
    if seeds is not None and agents:
        raise SweepError(
            f"{spec.describe()}: seed: {{{REPEAT}: {len(seeds)}}} is run by `ablate sweep run` only (W&B's agents would "
            f"train one seed per configuration); run it with `ablate sweep run`, or list seeds with method grid"
        )
    config = to_wandb(spec.config)
    if seeds is not None:
        config["parameters"][SEED] = {"values": seeds}
    config.setdefault("name", spec.name)
    config.setdefault("command", list(SWEEP_COMMAND))  # W&B's default runs `${program} ${args}`: no program here
    return config


def create_sweep(
    spec: SweepSpec, project: Optional[str] = None, entity: Optional[str] = None, agents: bool = True
) -> str:
    """Register ``spec`` with the W&B server; returns the sweep id for ``ablate sweep agent``."""
    import wandb

    return wandb.sweep(sweep=wandb_sweep_config(spec, agents), project=project, entity=entity)


def fetch_spec(sweep_id: str, project: Optional[str] = None, entity: Optional[str] = None) -> SweepSpec:
    """The sweep's configuration from the W&B server."""
    import wandb

    path = "/".join(p for p in (entity, project, sweep_id) if p)
    config = from_wandb(dict(wandb.Api().sweep(path).config))
    return spec_from_dict(config, name=str(config.get("name") or sweep_id))


@dataclass
class AgentOptions:
    """How each agent runs its trials (in ``out/<sweep name>/<run name>-<W&B run id>``; ``count``: runs per agent)."""

    out: Path
    project: Optional[str] = None
    entity: Optional[str] = None
    count: Optional[int] = None
    overrides: list[str] = field(default_factory=list)
    config: Optional[Path] = None
    command: Optional[TrialCommand] = None


def run_params() -> dict[str, Any]:
    """This W&B run's parameters ``{name: value}``, from the file the W&B agent wrote."""
    path = os.environ.get("WANDB_SWEEP_PARAM_PATH")
    if not path:
        raise SweepError("not inside a W&B agent run (WANDB_SWEEP_PARAM_PATH is not set)")
    data = yaml.safe_load(Path(path).read_text()) or {}
    data.pop("wandb_version", None)
    return point_from_wandb(point_of(data))


def trial_function(spec: SweepSpec, slot: Slot, opts: AgentOptions) -> Callable[[], None]:
    """The function ``wandb.agent`` calls once per run: train it in a subprocess, wait, report."""
    command = opts.command or trainer_command(opts.config)

    def train_one() -> None:
        point = run_params()
        name = trial_name(spec, point, set())
        run_id = os.environ.get("WANDB_RUN_ID", "local")
        overrides = trial_overrides(spec, point, name, extra=opts.overrides)
        try:
            load_config(opts.config, overrides)
        except ConfigError as err:
            raise SweepError(f"{name}: invalid config: {err}") from None
        run_dir = Path(opts.out) / spec.name / safe_name(f"{name}-{run_id}")
        executor = LocalExecutor([slot], poll_s=0.5, grace_s=30.0, header=f"W&B run {run_id}")
        handle = executor.start(Trial(name, point), run_dir, lambda extra: command(run_dir, overrides + extra))
        result = outcome(run_dir, executor.run_to_end(handle).code, spec.metric, since=handle.since)
        if result.status != RunStatus.FINISHED:
            raise SweepError(f"{name} {result.status}: {result.error or 'see ' + str(run_dir / LOG_FILE)}")

    return train_one


def run_agent(sweep_id: str, slot: Slot, opts: AgentOptions) -> None:
    """One W&B agent in this process, training on ``slot``'s devices."""
    import wandb

    os.environ.update(slot.env(dict(os.environ)))  # keeps what the user set (e.g. OMP_WAIT_POLICY)
    spec = fetch_spec(sweep_id, opts.project, opts.entity)
    check_unswept(spec, opts.overrides)
    wandb.agent(
        sweep_id, function=trial_function(spec, slot, opts), project=opts.project, entity=opts.entity, count=opts.count
    )


def agent_argv(sweep_id: str, slot: Slot, opts: AgentOptions) -> list[str]:
    """``ablate sweep agent`` on one slot, with its share of the cores (it would plan all of them for itself)."""
    devices, gpus = (",".join(slot.gpus), len(slot.gpus)) if slot.gpus else ("cpu", 1)
    flags = {"--devices": devices, "--gpus-per-trial": gpus, "--out": opts.out, "--threads": slot.threads}
    flags.update({"--project": opts.project, "--entity": opts.entity, "--count": opts.count, "--config": opts.config})
    given = [x for flag, value in flags.items() if value is not None for x in (flag, str(value))]
    return ablate_argv("sweep", "agent", sweep_id, *given, *opts.overrides)


def run_agents(sweep_id: str, slots: list[Slot], opts: AgentOptions) -> int:
    """One agent per slot (in this process for one slot); returns the children's worst exit code."""
    if len(slots) == 1:
        run_agent(sweep_id, slots[0], opts)
        return 0
    children = [subprocess.Popen(agent_argv(sweep_id, slot, opts), env=child_env(dict(os.environ))) for slot in slots]
    with signals_raise_interrupt() as received:
        try:
            codes = [child.wait() for child in children]
        except KeyboardInterrupt:  # Ctrl-C reached the children too (same process group); SIGTERM or SIGHUP did not
            for child in children if received else []:
                child.send_signal(signal.SIGTERM)
            codes = [child.wait() for child in children]
    return max((abs(c) for c in codes), default=0)


def attach_local_sweep(spec: SweepSpec, opts: LaunchOptions, say: Callable[[str, str], None]) -> Optional[str]:
    """``--wandb-sweep``: the W&B sweep of a local sweep (once per folder), its id in ``WANDB_SWEEP_ID`` for the
    trials; ``None`` when W&B is not online."""
    from ablate.training.tracking import resolve_mode

    tracking = load_config(opts.config, opts.overrides).tracking
    if resolve_mode(tracking) != "online":
        say("--wandb-sweep: W&B is not online (no login, or offline mode); no W&B sweep", "yellow")
        return None
    state = load_state(opts.out)
    path = state.wandb_sweep if state is not None and state.wandb_sweep else None
    if path is None:  # registered once per folder; trials still train here
        sweep_id = create_sweep(spec, project=tracking.project, entity=tracking.entity, agents=False)
        path = "/".join(p for p in (tracking.entity, tracking.project, sweep_id) if p)
    os.environ["WANDB_SWEEP_ID"] = path.rsplit("/", 1)[-1]  # wandb.init in every trial attaches to it
    say(f"W&B sweep {path}", "")
    return path


# ---- ablate sync ----


class SyncError(AblateError):
    """A user-facing sync mistake (no such folder, no W&B runs); one line."""


@dataclass
class SyncPlan:
    pending: list[Path] = field(default_factory=list)
    synced: list[Path] = field(default_factory=list)
    running: list[Path] = field(default_factory=list)


def is_synced(record_log: Path) -> bool:
    """W&B's own marker: ``run-<id>.wandb.synced`` beside the record log."""
    return record_log.with_suffix(".wandb.synced").exists()


def plan_sync(folder: str | Path) -> SyncPlan:
    """What ``ablate sync`` would do for a sweep folder (or one run directory)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SyncError(f"folder not found: {folder} (pass a sweep output folder such as runs/<sweep>)")
    out = SyncPlan()
    trials = [p for p in folder.iterdir() if p.is_dir() and (p / "wandb").is_dir()]
    for trial in [folder] if (folder / "wandb").is_dir() else sorted(trials):
        logs = sorted(trial.glob("wandb/offline-run-*/run-*.wandb"))
        if not logs:
            continue
        summary = RunSummary.peek(RunFiles(trial).summary)
        status = str(summary.status if summary is not None else None)
        if running_status(trial, status) == RunStatus.RUNNING:  # a free run lock: killed, so its logs are whole
            out.running.append(trial)
            continue
        for log in logs:
            (out.synced if is_synced(log) else out.pending).append(log.parent)
    if not (out.pending or out.synced or out.running):
        raise SyncError(f"no offline W&B runs under {folder} (trials write them to <trial>/wandb/offline-run-*)")
    return out


def wandb_command() -> list[str]:
    """W&B's command line, run by this Python without the working directory on ``sys.path`` (where ``-m`` puts it):
    ``ablate sync .`` runs inside a run folder, whose ``wandb/`` folder would be imported instead of W&B."""
    main = "import runpy, sys; sys.path[:] = filter(None, sys.path); runpy.run_module('wandb', None, '__main__', True)"
    return [sys.executable, "-c", main]


def sync(
    folder: str | Path,
    project: Optional[str] = None,
    entity: Optional[str] = None,
    run: Optional[Callable[..., subprocess.CompletedProcess]] = None,
    echo=print,
) -> SyncPlan:
    """Upload every pending offline run of ``folder`` with one ``wandb sync`` call."""
    todo = plan_sync(folder)
    for trial in todo.running:
        echo(f"skipped (still running): {trial}")
    if todo.synced:
        echo(f"already synced: {len(todo.synced)} run(s)")
    if not todo.pending:
        return todo
    flags = [x for flag, value in (("--project", project), ("--entity", entity)) if value for x in (flag, value)]
    pending = [str(p.resolve()) for p in todo.pending]  # absolute: W&B resolves nothing against our folder
    argv = [*wandb_command(), "sync", *flags, *pending]
    proc = (run or subprocess.run)(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [line for line in (proc.stderr or proc.stdout or "").splitlines() if line.strip()]
        raise SyncError(f"wandb sync failed: {lines[-1].strip() if lines else f'exit code {proc.returncode}'}")
    left = [p for p in todo.pending if not all(is_synced(log) for log in p.glob("run-*.wandb"))]
    if left:
        raise SyncError(f"wandb sync did not upload {len(left)} run(s), e.g. {left[0]}; see `wandb sync {left[0]}`")
    echo(f"synced {len(todo.pending)} run(s) from {folder}")
    return todo
