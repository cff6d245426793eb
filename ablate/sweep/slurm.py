"""SLURM sweeps: every trial one batch job, submitted through submitit, tracked in the sweep state.

``ablate sweep run FILE --launcher slurm`` plans trials exactly as the local launcher does (same
trial names, folders, overrides and ``sweep.json``), then submits each as a job of ``nodes x
gpus`` tasks (Lightning's SLURM environment makes them one DDP run), keeps at most
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
from typing import Any, Optional

from ablate.config import read_yaml
from ablate.record import RunStatus
from ablate.sweep.launcher import Launcher, LaunchOptions, SweepResult
from ablate.sweep.progress import Progress, clock
from ablate.sweep.slurm_job import REQUEUES, TrialJob
from ablate.sweep.spec import SweepError, SweepSpec
from ablate.sweep.state import SweepLock, Trial
from ablate.sweep.trial import LOG, outcome, read_summary

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


class SlurmLauncher(Launcher):
    """Runs a sweep folder's trials as SLURM jobs; one instance per ``ablate sweep run``."""

    def __init__(self, spec: SweepSpec, opts: LaunchOptions, slurm: SlurmOptions, progress: Optional[Progress] = None):
        super().__init__(spec, opts, progress)
        self.slurm = slurm
        self._log_start: dict[str, int] = {}
        self._ended_since: dict[str, float] = {}
        if slurm.gpus_per_trial < 0 or slurm.nodes_per_trial < 1 or slurm.max_concurrent < 1:
            raise SweepError("--gpus-per-trial must be >= 0, --nodes-per-trial and --max-concurrent >= 1")
        slurm.minutes()  # a bad --time fails before anything is submitted

    # ---- submitting --------------------------------------------------------------------

    def _executor(self, trial: Trial):
        import submitit

        s = self.slurm
        executor = submitit.SlurmExecutor(folder=self.out / ".slurm" / "%j", max_num_timeout=20)
        params: dict[str, Any] = {
            "job_name": f"{self.spec.name}-{trial.name}"[:120],
            "time": s.minutes(),
            "nodes": s.nodes_per_trial,
            "ntasks_per_node": max(s.gpus_per_trial, 1),
            "signal_delay_s": s.signal_delay_s,
            "stderr_to_stdout": True,
        }
        if s.gpus_per_trial:
            params["gpus_per_node"] = s.gpus_per_trial
        if s.cpus_per_trial:
            params["cpus_per_task"] = s.cpus_per_trial
        if s.partition:
            params["partition"] = s.partition
        if s.mem:
            params["mem"] = s.mem
        if s.extra:
            params["additional_parameters"] = dict(s.extra)
        executor.update_parameters(**params)
        return executor

    def _submit(self, trial: Trial) -> None:
        _need("sbatch")
        run_dir = self.out / trial.name
        run_dir.mkdir(parents=True, exist_ok=True)
        argv = self.command(run_dir, self.overrides(trial) + self.slurm.trainer_overrides())
        log = run_dir / LOG
        self._log_start[trial.name] = log.stat().st_size if log.exists() else 0
        try:
            job = self._executor(trial).submit(TrialJob(argv, run_dir.resolve(), grace_s=self.opts.grace_s))
        except Exception as err:  # noqa: BLE001 - sbatch refused (bad partition, limits): the trial says why
            trial.status, trial.error = RunStatus.FAILED, f"sbatch refused the job: {str(err).strip().splitlines()[-1]}"
            self._save()
            self.progress.event(f"failed   {trial.name}: {trial.error}", "red")
            return
        trial.status, trial.error = RunStatus.RUNNING, None
        trial.attempts += 1
        trial.job_id, trial.job_state = str(job.job_id), "PENDING"
        trial.started_at = time.time()
        self.launched.add(trial.name)
        self._save()
        self.progress.event(f"submitted {trial.name} as SLURM job {trial.job_id}")

    # ---- watching ----------------------------------------------------------------------

    def _active(self) -> list[Trial]:
        return [t for t in self.state.trials if t.status == RunStatus.RUNNING and t.job_id]

    def _collect(self, trial: Trial, state: Optional[str]) -> None:
        """A job that left the queue (or ended): read back how the trial went."""
        run_dir = self.out / trial.name
        code = 0 if state in (None, "COMPLETED") else 1
        result = outcome(run_dir, code, self.spec.metric, None, self._log_start.get(trial.name, 0))
        trial.summary = result.summary or trial.summary
        trial.status, trial.error, trial.metric = result.status, result.error, result.metric
        trial.job_state = state or "GONE"
        if trial.started_at:
            trial.duration_s += time.time() - trial.started_at
        # ended without finishing or failing by itself (cancelled, node failure, killed, requeue lost):
        # its checkpoint is there, so it runs again and resumes
        lost = (
            result.status == RunStatus.INTERRUPTED
            or state in LOST
            or (state is None and result.status != RunStatus.FINISHED)
        )
        if result.status != RunStatus.FINISHED and lost:
            if trial.attempts <= self.opts.retries:  # the cluster ended it: resubmit, it resumes
                trial.status, trial.error = RunStatus.INTERRUPTED, None
                self.launched.discard(trial.name)
                self.progress.event(f"resubmitting {trial.name} (job {trial.job_id} {trial.job_state})", "yellow")
            else:
                trial.status = RunStatus.FAILED
                trial.error = f"SLURM job {trial.job_id} {trial.job_state}; {result.error or ''}".rstrip("; ")
        self._save()
        style = {RunStatus.FAILED: "red", RunStatus.FINISHED: "green"}.get(trial.status, "yellow")
        shown = f" {self.spec.metric}={trial.metric:.4g}" if trial.metric is not None and self.spec.metric else ""
        detail = f": {trial.error}" if trial.status == RunStatus.FAILED else shown
        if trial.status != RunStatus.INTERRUPTED:
            self.progress.event(
                f"{trial.status:<8} {trial.name} (job {trial.job_id}, {clock(trial.duration_s)}){detail}", style
            )

    def _settled(self, trial: Trial) -> bool:
        """Whether a job seen ended can be read back now.

        A trial that finished or failed by itself is read at once. One that stopped half-way may
        be in the middle of a requeue (its job briefly looks ended before it is pending again), so
        it is read only after it has looked ended for ``REQUEUE_GRACE_S``.
        """
        summary = read_summary(self.out / trial.name)
        if summary is not None and summary.status in (RunStatus.FINISHED, RunStatus.FAILED):
            return True
        requeued = self.out / trial.name / REQUEUES
        if requeued.exists() and time.time() - requeued.stat().st_mtime < REQUEUE_WINDOW_S:
            return False  # it requeued itself just now: SLURM shows it again once the requeue completes
        first = self._ended_since.setdefault(trial.name, time.monotonic())
        return time.monotonic() - first >= REQUEUE_GRACE_S

    def _poll(self) -> None:
        active = self._active()
        states = job_states([t.job_id for t in active])
        changed = False
        for trial in active:
            state = states.get(trial.job_id)
            if state in ACTIVE:
                self._ended_since.pop(trial.name, None)
                changed |= state != trial.job_state
                trial.job_state = state
            elif self._settled(trial):
                self._ended_since.pop(trial.name, None)
                self._collect(trial, state)
        if changed:
            self._save()

    def _recover(self) -> None:
        """Trials a previous watcher submitted stay ``running`` with their job ids: watched again."""
        for t in self.state.trials:
            if t.status == RunStatus.RUNNING and not t.job_id:  # a local launcher's trial: run it again here
                t.status = RunStatus.INTERRUPTED

    # ---- the loop ----------------------------------------------------------------------

    def run(self) -> SweepResult:
        _need("squeue")
        if "early_terminate" in self.spec.config:
            self.progress.event(
                "note: early_terminate is not applied to SLURM jobs; every trial runs to its budget", "yellow"
            )
        if self.opts.config is not None:
            read_yaml(self.opts.config)  # a missing or malformed base config fails once, up front
        with SweepLock(self.out):
            skipped = self._prepare()
            self.launched.update(t.name for t in self._active())
            if not self._active() and self._next_trial() is None:
                self._report_nothing_to_do()
                return SweepResult(self.state, 0, skipped, False)
            if self._active():
                self.progress.event(f"watching {len(self._active())} submitted jobs")
            return self._watch(skipped)

    def _watch(self, skipped: int) -> SweepResult:
        interrupted, submitted = False, 0
        self.progress.start()
        try:
            while True:
                self._poll()
                while len(self._active()) < self.slurm.max_concurrent:
                    trial = self._next_trial()
                    if trial is None:
                        break
                    self._submit(trial)
                    submitted += 1
                if not self._active() and self._next_trial() is None:
                    break
                self.progress.update(
                    self.state,
                    self._total(),
                    self.slurm.max_concurrent,
                    self.durations,
                    {t.name: time.monotonic() - (time.time() - (t.started_at or time.time())) for t in self._active()},
                )
                time.sleep(self.slurm.poll_s)
        except KeyboardInterrupt:
            interrupted = True
            self.progress.close()
            self.progress.event(
                "stopped watching: the submitted jobs keep running on the cluster; "
                "run the same command again to collect them",
                "yellow",
            )
        finally:
            self.progress.close()
            self._save()
        return SweepResult(self.state, submitted, skipped, interrupted)
