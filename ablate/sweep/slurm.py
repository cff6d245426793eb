"""SLURM sweeps: every trial one batch job, submitted through submitit, tracked in the sweep state.

``ablate sweep run FILE --launcher slurm`` plans trials exactly as the local launcher does (the
same planner and loop: same trial names, folders, overrides and ``sweep.json``); this executor
submits each as a job of ``nodes x gpus`` tasks (Lightning's SLURM environment makes them one DDP run), keeps at most
``--max-concurrent`` jobs queued or running, and watches them with ``squeue``. A job that ends
is read back from the trial's ``summary.json``, like a local trial. Jobs ask for ``SIGUSR2``
shortly before their time limit; the trial then checkpoints and requeues itself under the same
job id (:mod:`ablate.sweep.slurm_job`), and resumes in the same run directory and W&B run.

The watcher can be stopped at any time (Ctrl-C, logout): the jobs keep running on the cluster,
and running the same command again re-attaches, collects what finished, resubmits jobs that the
cluster lost (cancelled, node failure, time limit without a checkpoint) and submits the rest.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from ablate.sweep.executor import Argv, ExecutorArgs, Exit, Handle, LaunchRefused, Polled
from ablate.sweep.options import LaunchOptions
from ablate.sweep.slurm_job import REQUEUES, TrialJob
from ablate.sweep.spec import SweepError
from ablate.sweep.state import Trial
from ablate.sweep.trial import LOG, read_summary

ACTIVE = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "RESIZING",
    "SUSPENDED",
    "STAGE_OUT",
    "SIGNALING",
    "RESV_DEL_HOLD",
}
"""Job states in which a job may still run (or run again)."""
LOST = {"CANCELLED", "NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "TIMEOUT", "DEADLINE"}
"""Final states in which the cluster, not the trial, ended the job: the trial is resubmitted."""
REQUEUE_GRACE_S = 20.0
REQUEUE_WINDOW_S = 300.0


@dataclass
class SlurmOptions:
    """What each trial's job asks SLURM for.

    Attributes:
        partition: ``--partition`` (the cluster's default when unset).
        gpus_per_trial: GPUs per node for one trial (one task per GPU); 0 trains on CPU.
        nodes_per_trial: nodes for one trial (DDP across them).
        cpus_per_trial: CPUs per task (and the trainer's torch threads); SLURM's default when unset.
        max_concurrent: jobs of this sweep queued or running at once.
        time: the job time limit, ``[D-]HH:MM:SS`` or minutes.
        signal_delay_s: seconds before the time limit at which the job is told to checkpoint.
        mem: ``--mem`` (e.g. ``16G``), SLURM's default when unset.
        extra: further ``#SBATCH`` options, ``{"account": "abc", "qos": "high"}``.
        poll_s: how often ``squeue`` is asked.
    """

    partition: Optional[str] = None
    gpus_per_trial: int = 0
    nodes_per_trial: int = 1
    cpus_per_trial: Optional[int] = None
    max_concurrent: int = 8
    time: str = "04:00:00"
    signal_delay_s: int = 120
    mem: Optional[str] = None
    extra: dict[str, str] = field(default_factory=dict)
    poll_s: float = 5.0

    def minutes(self) -> int:
        return parse_time(self.time)

    def trainer_overrides(self) -> list[str]:
        """What the trainer must know about the job's shape."""
        if self.gpus_per_trial > 0:
            out = ["train.accelerator=gpu", f"train.devices={self.gpus_per_trial}"]
        else:
            out = ["train.accelerator=cpu", "train.devices=1"]
        out.append(f"train.nodes={self.nodes_per_trial}")
        if self.cpus_per_trial:
            out.append(f"train.threads={self.cpus_per_trial}")
        return out


def parse_time(text: str) -> int:
    """SLURM's time formats (``MM``, ``HH:MM:SS``, ``D-HH:MM:SS``, ``D-HH``) in whole minutes (at least 1)."""
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", str(text).strip())
    if not m:
        raise SweepError(f"--time {text!r}: use HH:MM:SS, D-HH:MM:SS or minutes")
    days, a, b, c = m.groups()
    parts = [int(x) for x in (a, b, c) if x is not None]
    if days is not None:  # D-HH[:MM[:SS]]
        parts += [0] * (3 - len(parts))
        seconds = int(days) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]
    elif len(parts) == 1:  # MM
        seconds = parts[0] * 60
    elif len(parts) == 2:  # MM:SS
        seconds = parts[0] * 60 + parts[1]
    else:  # HH:MM:SS
        seconds = parts[0] * 3600 + parts[1] * 60 + parts[2]
    return max(1, -(-seconds // 60))


def _need(command: str) -> str:
    path = shutil.which(command)
    if path is None:
        raise SweepError(f"SLURM's '{command}' is not on PATH: run --launcher slurm on a login node of the cluster")
    return path


def job_states(job_ids: list[str]) -> dict[str, str]:
    """``{job id: state}`` for the jobs SLURM still knows (``squeue`` keeps ended jobs for ``MinJobAge``)."""
    if not job_ids:
        return {}
    squeue = _need("squeue")
    result = subprocess.run(
        [squeue, "-h", "--states=all", "-o", "%i %T", "-j", ",".join(job_ids)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if result.returncode != 0 and "Invalid job id" not in result.stderr:
        raise SweepError(
            f"squeue failed: {result.stderr.strip().splitlines()[-1] if result.stderr.strip() else result.returncode}"
        )
    states = {}
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1].rstrip("+")
    return states


class SlurmExecutor:
    """Runs attempts as SLURM batch jobs (one per attempt, through submitit), at most ``max_concurrent`` at once.

    Args:
        options: what each job asks SLURM for.
        out: the sweep folder (submitit's job files go to ``out/.slurm/``).
        name: the sweep's name (the jobs' names start with it).
        grace_s: seconds the trainer gets to checkpoint when its job is told to stop.
    """

    outlives_launcher = True  # Ctrl-C stops watching; the jobs keep running and a rerun adopts them
    can_stop_early = False  # hyperband's early_terminate is not applied to jobs

    def __init__(self, options: SlurmOptions, out: Path, name: str, grace_s: float = 30.0):
        if options.gpus_per_trial < 0 or options.nodes_per_trial < 1 or options.max_concurrent < 1:
            raise SweepError("--gpus-per-trial must be >= 0, --nodes-per-trial and --max-concurrent >= 1")
        options.minutes()  # a bad --time fails before anything is submitted
        self.options, self.out, self.name, self.grace_s = options, Path(out), name, grace_s
        self.poll_s = options.poll_s
        self._ended_since: dict[str, float] = {}

    @classmethod
    def from_args(cls, args: ExecutorArgs, opts: LaunchOptions) -> SlurmExecutor:
        """From ``ablate sweep run``'s options."""
        extra = {}
        for item in args.slurm_args:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise SweepError(f"--slurm-arg {item!r}: use KEY=VALUE, e.g. account=abc")
            extra[key.strip().replace("-", "_")] = value
        options = SlurmOptions(
            partition=args.partition,
            gpus_per_trial=args.gpus_per_trial or 0,
            nodes_per_trial=args.nodes_per_trial,
            cpus_per_trial=args.cpus_per_trial,
            max_concurrent=args.max_concurrent,
            time=args.time,
            signal_delay_s=args.signal_delay_s,
            mem=args.mem,
            extra=extra,
        )
        return cls(options, opts.out, args.name, opts.grace_s)

    def capacity(self) -> int:
        return self.options.max_concurrent

    def describe(self) -> str:
        s = self.options
        return (
            f"SLURM: {s.nodes_per_trial} node(s) x {s.gpus_per_trial or 'no'} GPU(s) per trial, "
            f"at most {s.max_concurrent} jobs, {s.time}"
        )

    def check(self) -> None:
        _need("squeue")

    # ---- submitting --------------------------------------------------------------------

    def _submitit(self, trial: Trial) -> Any:
        import submitit

        s = self.options
        executor = submitit.SlurmExecutor(folder=self.out / ".slurm" / "%j", max_num_timeout=20)
        params: dict[str, Any] = {
            "job_name": f"{self.name}-{trial.name}"[:120],
            "time": s.minutes(),
            "nodes": s.nodes_per_trial,
            "ntasks_per_node": max(s.gpus_per_trial, 1),
            "signal_delay_s": s.signal_delay_s,
            "stderr_to_stdout": True,
        }
        optional = {
            "gpus_per_node": s.gpus_per_trial,
            "cpus_per_task": s.cpus_per_trial,
            "partition": s.partition,
            "mem": s.mem,
            "additional_parameters": dict(s.extra),
        }
        params.update({k: v for k, v in optional.items() if v})
        executor.update_parameters(**params)
        return executor

    def start(self, trial: Trial, run_dir: Path, argv: Argv) -> Handle:
        _need("sbatch")
        run_dir.mkdir(parents=True, exist_ok=True)
        command = argv(self.options.trainer_overrides())
        log = run_dir / LOG
        log_start = log.stat().st_size if log.exists() else 0
        try:
            job = self._submitit(trial).submit(TrialJob(command, run_dir.resolve(), grace_s=self.grace_s))
        except Exception as err:  # noqa: BLE001 - sbatch refused (bad partition, limits): the trial says why
            raise LaunchRefused(f"sbatch refused the job: {str(err).strip().splitlines()[-1]}") from None
        trial.job_id, trial.job_state = str(job.job_id), "PENDING"
        return self._handle(trial, log_start)

    @staticmethod
    def _handle(trial: Trial, log_start: int = 0) -> Handle:
        return Handle(trial, f"SLURM job {trial.job_id}", since=None, log_start=log_start, tag=f"job {trial.job_id}")

    def adopt(self, trial: Trial, say: Callable[[str], None]) -> Optional[Handle]:
        """A job a previous watcher submitted is watched again; a local launcher's trial runs again here."""
        return self._handle(trial) if trial.job_id else None

    # ---- watching ----------------------------------------------------------------------

    def _settled(self, trial: Trial) -> bool:
        """Whether a job seen ended can be read back now.

        A trial that finished or failed by itself is read at once. One that stopped half-way may
        be in the middle of a requeue (its job briefly looks ended before it is pending again), so
        it is read only after it has looked ended for ``REQUEUE_GRACE_S``.
        """
        status = (read_summary(self.out / trial.name) or {}).get("status")
        if status in ("finished", "failed"):
            return True
        requeued = self.out / trial.name / REQUEUES
        if requeued.exists() and time.time() - requeued.stat().st_mtime < REQUEUE_WINDOW_S:
            return False  # it requeued itself just now: SLURM shows it again once the requeue completes
        first = self._ended_since.setdefault(trial.name, time.monotonic())
        return time.monotonic() - first >= REQUEUE_GRACE_S

    def poll(self, handles: list[Handle]) -> Polled:
        states = job_states([str(h.trial.job_id) for h in handles])
        polled = Polled()
        for handle in handles:
            trial = handle.trial
            state = states.get(str(trial.job_id))
            if state in ACTIVE:
                self._ended_since.pop(trial.name, None)
                polled.changed |= state != trial.job_state
                trial.job_state = state
            elif self._settled(trial):
                trial.job_state = state or "GONE"
                code = 0 if state in (None, "COMPLETED") else 1
                # ended without finishing or failing by itself (cancelled, node failure, killed, requeue
                # lost): its checkpoint is there, so it runs again and resumes
                lost = state in LOST or state is None
                polled.ended.append(
                    (handle, Exit(code, lost=lost, reason=f"SLURM job {trial.job_id} {trial.job_state}"))
                )
        return polled

    def _scancel(self, handle: Handle, *flags: str) -> None:
        subprocess.run([_need("scancel"), *flags, str(handle.trial.job_id)], capture_output=True, timeout=60)

    def stop(self, handle: Handle) -> None:
        self._scancel(handle, "--signal=TERM", "--full")

    def kill(self, handle: Handle) -> None:
        self._scancel(handle)

    def release(self, handle: Handle) -> None:
        self._ended_since.pop(handle.trial.name, None)
