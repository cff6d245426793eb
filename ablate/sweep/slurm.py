"""SLURM sweeps through submitit: one batch job per trial (:class:`SlurmExecutor`, :class:`TrialJob`), or
packed workers running several trials per job (:class:`PackedWorker`, watched by :class:`PackedSweep`);
docs/sweeps.md says how jobs requeue and how a dead worker's trials go back in the plan.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional

from ablate.config import read_yaml
from ablate.record import LOG_FILE, RunFiles, RunStatus, SweepFiles
from ablate.sweep.local import (
    Argv,
    ExecutorArgs,
    Exit,
    Handle,
    LaunchRefused,
    LocalExecutor,
    Polled,
    child_env,
    device_overrides,
    plan_slots,
    signals_raise_interrupt,
    wind_down,
)
from ablate.sweep.planner import LaunchOptions, Planner, Say, SweepResult, quiet, trainer_command
from ablate.sweep.spec import SweepError, SweepSpec, safe_name
from ablate.sweep.state import (
    STYLES,
    SweepLock,
    SweepState,
    Trial,
    ended_line,
    exit_reason,
    log_tail,
    outcome,
    read_summary,
    state_lock,
)
from ablate.utils.io import atomic_write_text, regular, unlinked

ACTIVE = {  # a job in these states may still run (or run again)
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING",
    "SUSPENDED", "STAGE_OUT", "SIGNALING", "RESV_DEL_HOLD",
}  # fmt: skip
LOST = {"CANCELLED", "NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "TIMEOUT", "DEADLINE"}  # the cluster ended it: resubmit
KILLED = "Killed: trainer killed by "  # TrialJob's last line in trial.log when a signal killed the trainer
REQUEUED = "requeued: SLURM runs this job again and it resumes from its checkpoint (nothing to run by hand)\n"
POLL_S = 5.0  # seconds between squeues
REQUEUE_GRACE_S = 20.0
REQUEUE_WINDOW_S = 300.0
SET_BY_OPTIONS = {
    "time": "--time", "signal": "--signal-delay", "partition": "--partition", "mem": "--mem",
    "cpus_per_task": "--cpus-per-trial", "nodes": "--nodes-per-trial", "gpus_per_node": "--gpus-per-trial",
    "job_name": "the sweep's trial names", "ntasks_per_node": "--gpus-per-trial (one task per GPU)",
    "output": "the sweep folder's slurm/ logs", "error": "the sweep folder's slurm/ logs",
}  # fmt: skip
"""The #SBATCH options ablate writes, and where a user sets each: a ``--slurm-arg`` would silently replace them."""
WORKER_LOG = ".workers"  # in the sweep folder: one line per trial each worker starts or ends


def parse_time(text: str) -> int:
    """SLURM's time formats (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM:SS``) in whole minutes, seconds
    rounded up as ``sbatch`` does; 0 is sbatch's "no time limit" (``man sbatch``), any other time at least 1."""
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", str(text).strip())
    if not m:
        raise SweepError(f"--time {text!r}: use HH:MM:SS, D-HH:MM:SS or minutes")
    days, *rest = m.groups()
    parts = [int(x) for x in rest if x is not None]
    units = (3600, 60, 1) if days is not None or len(parts) == 3 else (60, 1)  # D-HH[:MM[:SS]], HH:MM:SS; MM[:SS]
    return -(-(int(days or 0) * 86400 + sum(p * u for p, u in zip(parts, units))) // 60)


def _need(command: str) -> str:
    path = shutil.which(command)
    if path is None:
        raise SweepError(f"SLURM's '{command}' is not on PATH: run --launcher slurm on a login node of the cluster")
    return path


def job_states(job_ids: list[str]) -> dict[str, str]:
    """``{job id: state}`` for the jobs SLURM still knows."""
    if not job_ids:
        return {}
    result = subprocess.run(
        [_need("squeue"), "-h", "--states=all", "-o", "%i %T", "-j", ",".join(job_ids)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if result.returncode != 0 and "Invalid job id" not in result.stderr:
        raise SweepError(
            f"squeue failed: {result.stderr.strip().splitlines()[-1] if result.stderr.strip() else result.returncode}"
        )
    return {p[0]: p[1].rstrip("+") for line in result.stdout.splitlines() if len(p := line.split()) == 2}


def requeues(run_dir: Path) -> int:
    """How often the trial's job requeued itself (``ablate sweep status`` shows it)."""
    try:
        return int(regular(RunFiles(run_dir).requeues).read_text() or 0)  # a received folder's pipe: never waited on
    except (OSError, ValueError):
        return 0


# ---- One job per trial ----


def killed(run_dir: Path, log_start: int = 0) -> Optional[str]:
    """The line saying the trial's last attempt (its ``trial.log`` from ``log_start``) ended with its trainer killed
    by a signal inside the job (lost from outside, as a job SLURM cancelled is), else ``None``."""
    tail = log_tail(RunFiles(run_dir).log, log_start, lines=1)
    return tail[-1].removeprefix("Killed: ") if tail and tail[-1].startswith(KILLED) else None


def _ignore_usr2() -> None:  # in the trainer between fork and exec: the job's signal is for the parent
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


def _wait_exited(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait up to ``timeout`` s for ``proc`` to exit, without reaping it; whether it did.

    For a signal handler that interrupted ``proc.wait()``: that call holds the Popen's wait lock until
    the handler returns, so ``proc.wait(timeout)`` in the handler can never reap the child and always
    ran out its whole timeout. ``waitid(WNOWAIT)`` needs no lock and leaves the exit status to ``wait()``.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # already reaped
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


class TrialJob:
    """What runs inside a SLURM job, once per task: one trial's ``argv`` in ``run_dir``; on ``SIGUSR2``,
    :meth:`checkpoint` stops the trainer (it saves ``last.ckpt``) and requeues the same job."""

    def __init__(self, argv: list[str], run_dir: Path, grace_s: float = 60.0):
        self.argv, self.run_dir, self.grace_s = list(argv), Path(run_dir), grace_s
        self._proc: Optional[subprocess.Popen] = None  # while it trains (submitit pickles the job before)

    def __call__(self) -> int:
        """Train; returns 0, or raises with the trainer's last line when it fails."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        rank, job = os.environ.get("SLURM_PROCID", "0"), os.environ.get("SLURM_JOB_ID", "?")
        log = self.run_dir / (LOG_FILE if rank == "0" else f"trial.rank{rank}.log")
        with open(unlinked(log), "a") as out:
            out.write(f"\n=== SLURM job {job} task {rank} on {os.uname().nodename}, {time.ctime()} ===\n")
            out.flush()
            env = child_env({**os.environ, "PYTHONUNBUFFERED": "1"})  # the log shows progress as it happens
            self._proc = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=_ignore_usr2
            )
            code = self._proc.wait()
            if code < 0:  # killed from outside (the OOM killer, kill -9): the launcher relaunches it (:func:`killed`)
                out.write(f"Killed: trainer {exit_reason(code)} in SLURM job {job}\n")
        if code != 0:
            tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-1:]
            raise RuntimeError(f"trainer exited with code {code}: {tail[0] if tail else ''}")
        return code

    def checkpoint(self, *args: Any, **kwargs: Any):
        import submitit

        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            if not _wait_exited(proc, self.grace_s):
                proc.kill()
        if os.environ.get("SLURM_PROCID", "0") == "0":
            atomic_write_text(RunFiles(self.run_dir).requeues, str(requeues(self.run_dir) + 1))  # never through a link
            with open(unlinked(self.run_dir / LOG_FILE), "a") as log:  # below the trainer's "run ... again"
                log.write(REQUEUED)
        return submitit.helpers.DelayedSubmission(TrialJob(self.argv, self.run_dir, self.grace_s))


class SlurmExecutor:
    """Runs attempts as SLURM batch jobs (one per attempt), at most ``max_concurrent`` at once."""

    outlives_launcher = True  # Ctrl-C stops watching; the jobs keep running and a rerun adopts them
    can_stop_early = False  # hyperband's early_terminate is not applied to jobs
    options: ClassVar[tuple[str, ...]] = (
        "--gpus-per-trial", "--cpus-per-trial", "--trials-per-job", "--partition", "--nodes-per-trial",
        "--max-concurrent", "--time", "--mem", "--signal-delay", "--slurm-arg",
    )  # fmt: skip

    def __init__(self, args: ExecutorArgs, out: Path, grace_s: float = 30.0):
        """``args``: the ``--partition`` ... ``--slurm-arg`` options (``gpus_per_trial`` per node, one task each;
        ``None`` or 0: CPU jobs)."""
        self.gpus = args.gpus_per_trial or 0
        if self.gpus < 0 or args.nodes_per_trial < 1 or args.max_concurrent < 1:
            raise SweepError("--gpus-per-trial must be >= 0, --nodes-per-trial and --max-concurrent >= 1")
        if args.signal_delay_s < 0:
            raise SweepError(f"--signal-delay {args.signal_delay_s} must be at least 0 (seconds before the time limit)")
        self.minutes = parse_time(args.time)  # a bad --time fails before anything is submitted
        if self.minutes and args.signal_delay_s >= self.minutes * 60:  # --time 0: no limit, no signal before it
            raise SweepError(
                f"--signal-delay {args.signal_delay_s} is not below --time {args.time} ({self.minutes} min): every "
                "job would checkpoint and requeue as it starts; raise --time or lower --signal-delay"
            )
        self.extra = {}  # more #SBATCH options
        for item in args.slurm_args:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise SweepError(f"--slurm-arg {item!r}: use KEY=VALUE, e.g. account=abc")
            key = key.strip().replace("-", "_")
            if key in SET_BY_OPTIONS:
                raise SweepError(f"--slurm-arg {item}: ablate sets it; use {SET_BY_OPTIONS[key]}")
            self.extra[key] = value
        if args.mem is not None and not re.fullmatch(r"\d+[KMGT]?", str(args.mem).strip(), re.IGNORECASE):
            raise SweepError(f"--mem {args.mem!r}: use a size in megabytes or with K, M, G or T (e.g. 32G)")
        self.args, self.out, self.grace_s, self.poll_s = args, Path(out), grace_s, POLL_S
        self._ended_since: dict[str, float] = {}

    @classmethod
    def from_args(cls, args: ExecutorArgs, opts: LaunchOptions) -> SlurmExecutor:
        return cls(args, opts.out, opts.grace_s)

    def trainer_overrides(self) -> list[str]:
        return device_overrides(self.gpus, self.args.nodes_per_trial, self.args.cpus_per_trial)

    def submitit(self, job_name: str, nodes: int, tasks: int, gpus: int, cpus: Optional[int]) -> Any:
        """A ``submitit.SlurmExecutor`` whose jobs ask for this shape."""
        import submitit

        a = self.args
        executor = submitit.SlurmExecutor(folder=SweepFiles(self.out).slurm / "%j", max_num_timeout=20)
        optional: dict[str, Any] = dict(gpus_per_node=gpus, cpus_per_task=cpus, partition=a.partition, mem=a.mem)
        if child_env({}).get("PYTHONSAFEPATH"):  # as a local trial: the job's `python -m submitit...` runs in the
            optional["setup"] = ["export PYTHONSAFEPATH=1"]  # submission folder and would import a module planted there
        optional["additional_parameters"] = dict(self.extra)  # each of these only where given
        executor.update_parameters(
            job_name=job_name[:120],
            time=self.minutes,
            nodes=nodes,
            ntasks_per_node=tasks,
            signal_delay_s=a.signal_delay_s,
            stderr_to_stdout=True,
            **{k: v for k, v in optional.items() if v},
        )
        return executor

    def capacity(self) -> int:
        return self.args.max_concurrent

    def describe(self) -> str:
        a = self.args
        return (
            f"SLURM: {a.nodes_per_trial} node(s) x {self.gpus or 'no'} GPU(s) per trial, "
            f"at most {a.max_concurrent} jobs, {self.time_limit()}"
        )

    def time_limit(self) -> str:
        """``--time`` as the user gave it, or "no time limit" for 0."""
        return str(self.args.time) if self.minutes else "no time limit"

    def check(self) -> None:
        _need("squeue")

    def start(self, trial: Trial, run_dir: Path, argv: Argv) -> Handle:
        _need("sbatch")
        run_dir.mkdir(parents=True, exist_ok=True)
        log = run_dir / LOG_FILE
        log_start = log.stat().st_size if log.exists() else 0
        job = TrialJob(argv(self.trainer_overrides()), run_dir.resolve(), grace_s=self.grace_s)
        try:
            # safe_name: a received sweep.json's trial name, newlines and all, goes into the sbatch script
            name, cpus = safe_name(f"{self.args.name}-{trial.name}"), self.args.cpus_per_trial
            executor = self.submitit(name, self.args.nodes_per_trial, max(self.gpus, 1), self.gpus, cpus)
            submitted = executor.submit(job)
        except Exception as err:  # noqa: BLE001 - sbatch refused (bad partition, limits): the trial says why
            raise LaunchRefused(f"sbatch refused the job: {str(err).strip().splitlines()[-1]}") from None
        trial.job_id, trial.job_state = str(submitted.job_id), "PENDING"
        return self._handle(trial, log_start)

    @staticmethod
    def _handle(trial: Trial, log_start: int = 0) -> Handle:
        return Handle(trial, f"SLURM job {trial.job_id}", since=None, log_start=log_start, tag=f"job {trial.job_id}")

    def adopt(self, trial: Trial, say: Callable[[str], None]) -> Optional[Handle]:
        return self._handle(trial) if trial.job_id else None

    def _settled(self, trial: Trial) -> bool:
        """Whether a job seen ended can be read back: at once when the trial ended by itself, else (it may be
        mid-requeue) after ``REQUEUE_GRACE_S``."""
        summary = read_summary(self.out / trial.name)
        if summary is not None and summary.status in (RunStatus.FINISHED, RunStatus.FAILED):
            return True
        requeued = RunFiles(self.out / trial.name).requeues
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
                # ended without finishing or failing by itself (cancelled, node failure, requeue lost): its
                # checkpoint is there, so it runs again and resumes
                kill = killed(self.out / trial.name, handle.log_start)
                lost = state in LOST or state is None or kill is not None
                reason = kill or f"SLURM job {trial.job_id} {trial.job_state}"
                polled.ended.append((handle, Exit(0 if state in (None, "COMPLETED") else 1, lost=lost, reason=reason)))
        return polled

    def _scancel(self, handle: Handle, *flags: str) -> None:
        subprocess.run([_need("scancel"), *flags, str(handle.trial.job_id)], capture_output=True, timeout=60)

    def stop(self, handle: Handle) -> None:
        self._scancel(handle, "--signal=TERM", "--full")

    def kill(self, handle: Handle) -> None:
        self._scancel(handle)

    def release(self, handle: Handle) -> None:
        self._ended_since.pop(handle.trial.name, None)


# ---- Packed workers: several trials per job ----


@dataclass(frozen=True)
class WorkerShape:
    """What one worker job holds: ``trials`` slots sharing the job's ``gpus`` (0: CPU), ``cpus_per_trial`` each."""

    trials: int
    gpus: int = 0
    cpus_per_trial: Optional[int] = None

    @property
    def cpus(self) -> Optional[int]:
        """The job's CPUs (``None``: SLURM's default)."""
        return self.trials * self.cpus_per_trial if self.cpus_per_trial else None


def note(out: Path, job: str, line: str) -> None:
    """Append ``TIME LINE`` to ``.workers/<job>.log`` in the sweep folder."""
    folder = out / WORKER_LOG
    folder.mkdir(exist_ok=True)
    with open(unlinked(folder / f"{job}.log"), "a") as log:
        log.write(f"{time.time():.1f} {line}\n")


class PackedWorker:
    """Runs inside one SLURM job: pulls trials from the sweep's state and runs up to ``shape.trials`` at once."""

    def __init__(self, spec: SweepSpec, opts: LaunchOptions, shape: WorkerShape):
        self.spec, self.opts, self.shape = spec, opts, shape
        self._draining = False
        self._running: dict[str, tuple[Handle, float]] = {}
        self._executor: Optional[LocalExecutor] = None

    def __call__(self) -> int:
        """Pull and run trials until the plan is empty (or the job is told to stop); returns trials started."""
        signal.signal(signal.SIGTERM, self._drain)  # scancel: stop pulling; the trials checkpoint on their own SIGTERM
        self.job = os.environ.get("SLURM_JOB_ID", f"pid{os.getpid()}")
        s = self.shape
        slots = plan_slots("auto" if s.gpus else "cpu", max(s.gpus, 1), s.trials, cores=s.cpus)[: s.trials]
        header = f"ablate sweep worker (SLURM job {self.job})"
        self._executor = LocalExecutor(slots, poll_s=self.opts.poll_s, grace_s=self.opts.grace_s, header=header)
        self.planner = Planner(self.spec, self.opts)
        self.command = self.opts.command or trainer_command(self.opts.config)
        started = 0
        while True:
            self._reap()
            if not self._draining:
                started += self._claim()
            if not self._running:
                return started
            time.sleep(self.opts.poll_s)

    def _drain(self, signum: int, frame: Any) -> None:
        self._draining = True

    def _claim(self) -> int:
        """Start planned trials on the free slots; returns how many."""
        assert self._executor is not None
        count = 0
        while len(self._running) < self._executor.capacity():
            with state_lock(self.opts.out):
                self.planner.open()
                self.planner.launched.clear()  # what runs elsewhere is `running` in the state, not handed out
                trial = self.planner.next_trial()
                if trial is None:
                    return count
                argv = self.planner.argv(trial, self.command, device_overrides(self.shape.gpus, nodes=1))
                handle = self._executor.start(trial, self.opts.out / trial.name, argv)
                trial.job_id, trial.job_state = self.job, "RUNNING"
                self.planner.started(trial, handle.since or time.time())
            self._running[trial.name] = (handle, time.monotonic())
            note(self.opts.out, self.job, f"start {trial.name} {handle.where}")
            count += 1
        return count

    def _reap(self) -> None:
        """Record attempts that ended (``interrupted`` when this worker was told to stop)."""
        assert self._executor is not None
        for handle, exit in self._executor.poll([h for h, _ in self._running.values()]).ended:
            name = handle.trial.name
            _, mono = self._running.pop(name)
            result = outcome(self.opts.out / name, exit.code, self.spec.metric, handle.since, handle.log_start)
            with state_lock(self.opts.out):
                self.planner.open()
                trial = self.planner.state.trial(name)
                if trial.status == RunStatus.RUNNING and trial.job_id == self.job:  # still ours
                    trial.pid = trial.pid_start = None
                    trial.job_state = "DONE"
                    stop = "shutdown" if self._draining else None
                    retry = self.planner.ended(trial, result, exit, stop, time.monotonic() - mono)
                    note(self.opts.out, self.job, f"end {name} {trial.status}")
                    if retry:
                        self.planner.say(retry, "yellow")
            self._executor.release(handle)

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """Near the time limit or preempted (SIGUSR2): stop the trials (they checkpoint), record them, requeue."""
        import submitit

        self._draining = True
        if self._executor is not None:
            wind_down(self._executor, lambda: [h for h, _ in self._running.values()], self._reap, self.opts.grace_s)
        return submitit.helpers.DelayedSubmission(PackedWorker(self.spec, self.opts, self.shape))


class PackedSweep:
    """The watcher on the login node: plans, keeps up to ``max_concurrent`` workers going, puts the trials of
    workers SLURM no longer runs back in the plan, and returns once every trial is done."""

    def __init__(self, spec: SweepSpec, opts: LaunchOptions, slurm: SlurmExecutor, trials: int, say: Say = quiet):
        if trials < 1:
            raise SweepError("--trials-per-job must be >= 1")
        if slurm.args.nodes_per_trial != 1:
            raise SweepError("--trials-per-job packs trials into one-node jobs: drop --nodes-per-trial")
        opts.out = Path(opts.out).resolve()
        self.spec, self.opts, self.slurm, self.say = spec, opts, slurm, say
        self.shape = WorkerShape(trials, slurm.gpus, slurm.args.cpus_per_trial)
        self.planner = Planner(spec, self.opts, say)
        self._seen: Optional[dict[str, tuple[int, float]]] = None  # each trial's attempts and time at the last look

    def describe(self) -> str:
        gpus = f"{self.shape.gpus} GPU(s) shared" if self.shape.gpus else "CPU"
        jobs = f"at most {self.slurm.args.max_concurrent} worker jobs x {self.shape.trials} trials at once"
        return f"SLURM: {jobs} ({gpus}), {self.slurm.time_limit()}"

    def _submit(self) -> str:
        executor = self.slurm.submitit(f"{self.spec.name}-worker", 1, 1, self.shape.gpus, self.shape.cpus)
        try:
            job = executor.submit(PackedWorker(self.spec, self.opts, self.shape))
        except Exception as err:  # noqa: BLE001 - sbatch refused (bad partition, limits): one line
            raise SweepError(f"sbatch refused the worker job: {str(err).strip().splitlines()[-1]}") from None
        return str(job.job_id)

    def _tick(self) -> bool:
        """Look once; returns whether the sweep still has work (planned, running, or workers alive)."""
        seen = job_states(list(self.planner.state.workers))
        with state_lock(self.opts.out):
            self.planner.open()
            self.planner.launched.clear()
            state = self.planner.state
            for job in state.workers:
                state.workers[job] = seen.get(job, "GONE")
            alive = {job for job, job_state in state.workers.items() if job_state in ACTIVE}
            for trial in self.planner.left_running():
                if trial.job_id not in alive:  # its worker is gone: finished if it said so, else resumed
                    self.planner.recovered(trial)
                    trial.pid = trial.pid_start = None
                    note(self.opts.out, trial.job_id or "unknown", f"end {trial.name} {trial.status} (worker gone)")
                    gone = state.workers.get(trial.job_id or "", "GONE").lower()
                    self.say(f"{trial.status:<8} {trial.name} (worker job {trial.job_id} {gone})", "yellow")
            self._events(state)
            work = self.planner.next_trial() is not None
            while work and len(alive) < self.slurm.args.max_concurrent:
                job = self._submit()
                state.workers[job] = "PENDING"
                alive.add(job)
                self.say(f"submitted worker job {job} ({self.shape.trials} slots)", "")
            self.planner.save()
            return work or bool(self.planner.left_running())

    def _events(self, state: SweepState) -> None:
        """Say what the workers did since the last look, as the local launcher says it: each attempt that ended
        (its trial's time grew by the attempt's) and each that started."""
        seen, self._seen = self._seen, {t.name: (t.attempts, t.duration_s) for t in state.trials}
        if seen is None:  # the first look: what ran before is no news
            return
        for t in state.trials:
            attempts, duration_s = seen.get(t.name, (0, 0.0))
            if t.duration_s > duration_s:  # running again: the attempt ended lost, and its worker relaunched it
                ended = replace(t, status=RunStatus.INTERRUPTED) if t.status == RunStatus.RUNNING else t
                line = ended_line(ended, self.spec.metric, f"job {t.job_id}", t.duration_s - duration_s)
                self.say(line, STYLES.get(ended.status, "yellow"))
            if t.attempts > attempts and t.status == RunStatus.RUNNING:
                self.say(f"started  {t.name} [worker job {t.job_id}]", "")

    def run(self) -> SweepResult:
        """Plan, then keep workers going until every trial is done (Ctrl-C stops watching; the workers keep going)."""
        if self.opts.config is not None:
            read_yaml(self.opts.config)
        self.slurm.check()
        with SweepLock(self.opts.out), signals_raise_interrupt():
            with state_lock(self.opts.out):
                self.planner.open()
                skipped = self.planner.prepare()
                before = sum(t.attempts for t in self.planner.state.trials)
                idle = self.planner.next_trial() is None and not self.planner.left_running()
                self.planner.save()
            if idle:
                self.say(self.planner.nothing_to_do(), "")
                return SweepResult(self.planner.state, 0, skipped, False)
            if skipped_line := self.planner.skipped():
                self.say(skipped_line, "")
            try:
                while self._tick():
                    time.sleep(self.slurm.poll_s)
            except KeyboardInterrupt:
                self.say(
                    "stopped watching: the worker jobs keep running; run the same command again to collect them",
                    "yellow",
                )
                return SweepResult(self.planner.state, 0, skipped, True)
            launched = sum(t.attempts for t in self.planner.state.trials) - before
            return SweepResult(self.planner.state, launched, skipped, False)
