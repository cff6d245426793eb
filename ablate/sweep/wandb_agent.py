"""Sweeps through a W&B server, across machines: a thin layer over ``wandb.sweep`` / ``wandb.agent``.

``create_sweep`` registers a sweep file with its variants by name (:mod:`ablate.sweep.wandb_form`),
so every W&B run's ``config.variant`` is a name that dashboards group by. ``run_agents`` starts one W&B agent per device
slot, each in its own process with its own ``CUDA_VISIBLE_DEVICES``. For every run the server
hands out, the agent's function starts ``python -m ablate train`` as a subprocess with that run's
parameters as overrides; the W&B agent's environment (``WANDB_RUN_ID``, ``WANDB_SWEEP_ID``) is
inherited, so the trainer's ``wandb.init`` joins the sweep's run, and only the trainer (rank 0)
logs. A crash ends that run only; the agent asks for the next. Here W&B's server is the planner,
and each run it hands out is started, watched and stopped by the local executor
(:class:`ablate.sweep.local.LocalExecutor`, one slot per agent), as ``ablate sweep run`` does.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

import ablate.sweep.process as process  # the module, not the package: ablate.sweep (callable) imports ablate.sweep.api
from ablate.config import ConfigError, load_config
from ablate.record import RunStatus
from ablate.sweep.local import LocalExecutor, run_to_end
from ablate.sweep.options import LaunchOptions, TrialCommand, trainer_command
from ablate.sweep.search import point_of
from ablate.sweep.slots import Slot
from ablate.sweep.spec import REPEAT, SEED, SweepError, SweepSpec, safe_name, spec_from_dict
from ablate.sweep.state import Trial, load_state
from ablate.sweep.trial import LOG, outcome, trial_name, trial_overrides
from ablate.sweep.wandb_form import from_wandb, point_from_wandb, to_wandb


def wandb_sweep_config(spec: SweepSpec, agents: bool = True) -> dict[str, Any]:
    """The configuration sent to W&B: the file's, named after the sweep, variants by name
    (:func:`~ablate.sweep.wandb_form.to_wandb`: every run's ``config.variant`` is its name).

    W&B's server knows no repeat seed (``seed: {repeat: N}``): a sweep its agents run is refused
    (they would train one seed per configuration); one registered for a local sweep's dashboard
    (``agents=False``) lists the seeds as values, for the panels only. Its agents' metric is read from
    each W&B run's summary, which holds a test score per split only (:func:`ablate.training.tracking.one_key_per_score`).

    Raises:
        SweepError: ``agents`` and a repeat seed, or a plain ``test/<name>`` metric.
    """
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
    return config


def create_sweep(
    spec: SweepSpec, project: Optional[str] = None, entity: Optional[str] = None, agents: bool = True
) -> str:
    """Register ``spec`` with the W&B server; returns the sweep id for ``ablate sweep agent``."""
    import wandb

    return wandb.sweep(sweep=wandb_sweep_config(spec, agents), project=project, entity=entity)


def register_local_sweep(spec: SweepSpec, project: Optional[str] = None, entity: Optional[str] = None) -> str:
    """Create the W&B sweep object of a sweep that trains locally; returns ``entity/project/id``.

    No agent ever asks it for runs: ``ablate sweep run`` plans and trains them, each attached to
    it by ``WANDB_SWEEP_ID`` in its environment (what ``wandb.init`` reads), so the project's
    Sweeps page (parameter importance, parallel coordinates) lists them.
    """
    sweep_id = create_sweep(spec, project=project, entity=entity, agents=False)
    return "/".join(p for p in (entity, project, sweep_id) if p)


def fetch_spec(sweep_id: str, project: Optional[str] = None, entity: Optional[str] = None) -> SweepSpec:
    """The sweep's configuration from the W&B server (to name runs by what varies)."""
    import wandb

    path = "/".join(p for p in (entity, project, sweep_id) if p)
    config = from_wandb(dict(wandb.Api().sweep(path).config))
    return spec_from_dict(config, name=str(config.get("name") or sweep_id))


@dataclass
class AgentOptions:
    """How each agent runs its trials.

    Attributes:
        out: folder for trial run dirs (``OUT/<sweep name>/<run name>-<W&B run id>``).
        project, entity: where the sweep lives on W&B.
        count: runs per agent (``None``: until the sweep is done).
        overrides: ``key=value`` added to every trial.
        config: base YAML for every trial.
        command: builds a trial's argv (tests inject a fake trainer).
    """

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
        overrides = trial_overrides(spec, point, name) + list(opts.overrides)
        try:
            load_config(opts.config, overrides)
        except ConfigError as err:
            raise SweepError(f"{name}: invalid config: {err}") from None
        run_dir = Path(opts.out) / spec.name / safe_name(f"{name}-{run_id}")
        executor = LocalExecutor([slot], poll_s=0.5, grace_s=30.0, header=f"W&B run {run_id}")
        handle = executor.start(Trial(name, point), run_dir, lambda extra: command(run_dir, overrides + extra))
        exit = run_to_end(executor, handle)
        result = outcome(run_dir, exit.code, spec.metric, since=handle.since)
        if result.status != RunStatus.FINISHED:
            raise SweepError(f"{name} {result.status}: {result.error or 'see ' + str(run_dir / LOG)}")

    return train_one


def run_agent(sweep_id: str, slot: Slot, opts: AgentOptions) -> None:
    """One W&B agent in this process, training on ``slot``'s devices."""
    import wandb

    os.environ.update(slot.env(dict(os.environ)))  # keeps what the user set (e.g. OMP_WAIT_POLICY)
    spec = fetch_spec(sweep_id, opts.project, opts.entity)
    wandb.agent(
        sweep_id, function=trial_function(spec, slot, opts), project=opts.project, entity=opts.entity, count=opts.count
    )


def agent_argv(sweep_id: str, slot: Slot, opts: AgentOptions) -> list[str]:
    """The command of the child agent that serves ``slot`` (``ablate sweep agent`` on one slot)."""
    devices = ",".join(slot.gpus) if slot.gpus else "cpu"
    argv = process.ablate_argv(
        "sweep",
        "agent",
        sweep_id,
        "--devices",
        devices,
        "--gpus-per-trial",
        str(len(slot.gpus) if slot.gpus else 1),
        "--out",
        str(opts.out),
    )
    for flag, value in (
        ("--project", opts.project),
        ("--entity", opts.entity),
        ("--count", opts.count),
        ("--config", opts.config),
    ):
        if value is not None:
            argv += [flag, str(value)]
    return argv + list(opts.overrides)


def run_agents(sweep_id: str, slots: list[Slot], opts: AgentOptions) -> int:
    """One agent per slot: in this process for one slot, else one child process per slot.

    Returns the worst exit code of the children (0 when every agent ended cleanly).
    """
    if len(slots) == 1:
        run_agent(sweep_id, slots[0], opts)
        return 0
    children = [
        subprocess.Popen(agent_argv(sweep_id, slot, opts), env=process.child_env(dict(os.environ))) for slot in slots
    ]
    try:
        codes = [child.wait() for child in children]
    except KeyboardInterrupt:  # the children got Ctrl-C too (same process group); let them finish
        codes = [child.wait() for child in children]
    return max((abs(c) for c in codes), default=0)


def attach_local_sweep(spec: SweepSpec, opts: LaunchOptions, say: Callable[[str, str], None]) -> Optional[str]:
    """``--wandb-sweep``: the W&B sweep object of a local sweep (made once per folder), its id in the trials'
    environment (``WANDB_SWEEP_ID``, what ``wandb.init`` attaches to); ``None`` when W&B is not online."""
    from ablate.training.tracking import resolve_mode

    tracking = load_config(opts.config, opts.overrides).tracking
    if resolve_mode(tracking) != "online":
        say("--wandb-sweep: W&B is not online (no login, or offline mode); no W&B sweep", "yellow")
        return None
    state = load_state(opts.out)
    path = state.wandb_sweep if state is not None and state.wandb_sweep else None
    path = path or register_local_sweep(spec, tracking.project, tracking.entity)
    os.environ["WANDB_SWEEP_ID"] = path.rsplit("/", 1)[-1]  # wandb.init in every trial attaches to it
    say(f"W&B sweep {path}", "")
    return path
