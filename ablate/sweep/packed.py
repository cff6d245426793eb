"""Packed SLURM workers: a few jobs, each running several trials at once over its own slots.

``ablate sweep run FILE --launcher slurm --trials-per-job N`` submits at most ``--max-concurrent``
worker jobs instead of one job per trial. Each worker (:class:`PackedWorker`, shipped by submitit)
holds the devices of one job and runs the local slot packer inside it (:class:`~ablate.sweep.local.LocalExecutor`
over ``N`` slots): it pulls the next planned trial from ``sweep.json`` on the shared filesystem under
:class:`~ablate.sweep.state.StateLock`, marks it ``running`` under its own job id, trains it, records
how it ended, and pulls the next, until the plan is empty. Every decision (retries, bayes proposals,
what counts as finished) is the :class:`~ablate.sweep.planner.Planner`'s, exactly as for the local launcher.

A worker told to stop (``scancel``: SIGTERM) stops pulling; its trials checkpoint on the same signal
and are recorded ``interrupted``, so another worker resumes them. Near its time limit or when preempted
(``SIGUSR2``) a worker stops its trials the same way and requeues itself. A worker killed outright
leaves its trials ``running`` under a job that SLURM no longer runs: the watcher (:class:`PackedSweep`,
on the login node) sees the job gone and puts them back in the plan (they resume from their
checkpoints), and submits workers while there is work and fewer than ``--max-concurrent`` are queued or
running. Nothing finished is trained again, and a trial is never ``running`` under two live jobs.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import ablate.sweep.process as process  # the module: the package (callable) imports ablate.sweep.api
from ablate.config import read_yaml
from ablate.record import RunStatus
from ablate.sweep.executor import Argv, ExecutorArgs, Exit, Handle
from ablate.sweep.local import LocalExecutor
from ablate.sweep.options import LaunchOptions, SweepResult, trainer_command
from ablate.sweep.planner import Planner
from ablate.sweep.slots import plan_slots
from ablate.sweep.slurm import ACTIVE, SlurmExecutor, SlurmOptions, _need, job_states
from ablate.sweep.spec import SweepError, SweepSpec
from ablate.sweep.state import StateLock, SweepLock, Trial
from ablate.sweep.trial import outcome

WORKER_LOG = ".workers"
"""The folder (in the sweep folder) where each worker appends one line per trial it starts or ends."""

Say = Callable[[str, str], None]


def _quiet(line: str, style: str = "") -> None:
    pass


@dataclass(frozen=True)
class WorkerShape:
    """What one worker job holds.

    Attributes:
        trials: slots in the job: trials it runs at once.
        gpus: GPUs of the job (0: CPU only); its ``trials`` share them.
        cpus_per_trial: CPUs per slot (the job asks ``trials x cpus_per_trial``); ``None``: SLURM's default.
    """

    trials: int
    gpus: int = 0
    cpus_per_trial: Optional[int] = None

    def trainer_overrides(self) -> list[str]:
        """What each trial's trainer must know about its slot."""
        if self.gpus > 0:
            return ["train.accelerator=gpu", f"train.devices={self.gpus}", "train.nodes=1"]
        return ["train.accelerator=cpu", "train.devices=1", "train.nodes=1"]


def note(out: Path, job: str, line: str) -> None:
    """Append ``TIME LINE`` to worker ``job``'s log in the sweep folder (``.workers/<job>.log``)."""
    folder = out / WORKER_LOG
    folder.mkdir(exist_ok=True)
    with open(folder / f"{job}.log", "a") as log:
        log.write(f"{time.time():.1f} {line}\n")


class PackedWorker:
    """Runs inside one SLURM job: pulls trials from the sweep's state and runs up to ``shape.trials`` at once.

    Picklable (submitit ships it). Args:
        spec: the sweep file, as the watcher read it.
        opts: the run's options (folder, overrides, retries); ``opts.out`` is absolute.
        shape: the job's slots.
    """

    def __init__(self, spec: SweepSpec, opts: LaunchOptions, shape: WorkerShape):
        self.spec, self.opts, self.shape = spec, opts, shape
        self._draining = False
        self._running: dict[str, tuple[Handle, float]] = {}
        self._executor: Optional[LocalExecutor] = None

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec, "opts": self.opts, "shape": self.shape}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["spec"], state["opts"], state["shape"])  # type: ignore[misc]

    @property
    def job(self) -> str:
        return os.environ.get("SLURM_JOB_ID", f"pid{os.getpid()}")

    def __call__(self) -> int:
        """Pull and run trials until the plan is empty (or the job is told to stop); returns trials started."""
        signal.signal(signal.SIGTERM, self._drain)  # scancel: stop pulling; the trials checkpoint on their own SIGTERM
        s = self.shape
        cores = s.trials * s.cpus_per_trial if s.cpus_per_trial else None
        slots = plan_slots("auto" if s.gpus else "cpu", max(s.gpus, 1), s.trials, cores=cores)[: s.trials]
        self._executor = LocalExecutor(
            slots,
            poll_s=self.opts.poll_s,
            grace_s=self.opts.grace_s,
            header=f"ablate sweep worker (SLURM job {self.job})",
        )
        self.planner = Planner(self.spec, self.opts)
        started = 0
        while True:
            self._reap(self._executor.poll([h for h, _ in self._running.values()]).ended)
            if not self._draining:
                started += self._claim()
            if not self._running:
                return started
            time.sleep(self.opts.poll_s)

    def _drain(self, signum: int, frame: Any) -> None:
        self._draining = True

    def _note(self, line: str) -> None:
        note(Path(self.opts.out), self.job, line)

    def _claim(self) -> int:
        """Start planned trials on the free slots; returns how many."""
        assert self._executor is not None
        count = 0
        while len(self._running) < self._executor.capacity():
            with StateLock(self.opts.out):
                self.planner.open()
                self.planner.launched.clear()  # what runs elsewhere is `running` in the state, not handed out
                trial = self.planner.next_trial()
                if trial is None:
                    return count
                run_dir = Path(self.opts.out) / trial.name
                handle = self._executor.start(trial, run_dir, self._argv(trial, run_dir))
                trial.job_id, trial.job_state = self.job, "RUNNING"
                self.planner.started(trial, handle.since or time.time())
            self._running[trial.name] = (handle, time.monotonic())
            self._note(f"start {trial.name} {handle.where}")
            count += 1
        return count

    def _argv(self, trial: Trial, run_dir: Path) -> Argv:
        base = self.planner.overrides(trial) + self.shape.trainer_overrides()
        command = self.opts.command or trainer_command(self.opts.config)
        return lambda extra: command(run_dir, base + extra)

    def _reap(self, ended: list[tuple[Handle, Exit]]) -> None:
        """Record attempts that ended (``interrupted`` when this worker was told to stop)."""
        assert self._executor is not None
        for handle, exit in ended:
            name = handle.trial.name
            _, mono = self._running.pop(name)
            run_dir = Path(self.opts.out) / name
            result = outcome(run_dir, exit.code, self.spec.metric, handle.since, handle.log_start)
            with StateLock(self.opts.out):
                self.planner.open()
                trial = self.planner.state.trial(name)
                if trial.status == RunStatus.RUNNING and trial.job_id == self.job:  # still ours
                    trial.pid = trial.pid_start = None
                    trial.job_state = "DONE"
                    stop = "shutdown" if self._draining else None
                    self.planner.ended(trial, result, exit, stop, time.monotonic() - mono)
                    self._note(f"end {name} {trial.status}")
            self._executor.release(handle)

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """Near the time limit or preempted (SIGUSR2): stop the trials (they checkpoint), record them, requeue."""
        import submitit

        self._draining = True
        if self._executor is not None:
            for handle, _ in self._running.values():
                self._executor.stop(handle)
            deadline = time.monotonic() + self.opts.grace_s
            while self._running and time.monotonic() < deadline:
                self._reap(self._executor.poll([h for h, _ in self._running.values()]).ended)
                time.sleep(0.2)
            for handle, _ in self._running.values():
                self._executor.kill(handle)
            while self._running:
                self._reap(self._executor.poll([h for h, _ in self._running.values()]).ended)
                time.sleep(0.05)
        return submitit.helpers.DelayedSubmission(PackedWorker(self.spec, self.opts, self.shape))


class PackedSweep:
    """The watcher on the login node: plans, keeps up to ``options.max_concurrent`` workers queued or running,
    puts the trials of workers SLURM no longer runs back in the plan, and returns once every trial is done.

    Args:
        spec, opts: the sweep and the run's options.
        options: the SLURM job shape (partition, time, memory, ``max_concurrent`` workers).
        shape: each worker's slots.
        say: prints a progress line.
    """

    def __init__(
        self, spec: SweepSpec, opts: LaunchOptions, options: SlurmOptions, shape: WorkerShape, say: Say = _quiet
    ):
        if shape.trials < 1 or options.max_concurrent < 1:
            raise SweepError("--trials-per-job and --max-concurrent must be >= 1")
        options.minutes()  # a bad --time fails before anything is submitted
        self.spec, self.options, self.shape, self.say = spec, options, shape, say
        self.opts = opts
        self.opts.out = Path(opts.out).resolve()
        self.planner = Planner(spec, self.opts, say)

    @classmethod
    def from_args(cls, spec: SweepSpec, args: ExecutorArgs, opts: LaunchOptions, trials: int, say: Say) -> PackedSweep:
        """From ``ablate sweep run --launcher slurm --trials-per-job N``'s options (the job shape as for one job per trial)."""
        options = SlurmExecutor.from_args(args, opts).options
        if options.nodes_per_trial != 1:
            raise SweepError("--trials-per-job packs trials into one-node jobs: drop --nodes-per-trial")
        return cls(spec, opts, options, WorkerShape(trials, options.gpus_per_trial, options.cpus_per_trial), say)

    def describe(self) -> str:
        s = self.options
        gpus = f"{self.shape.gpus} GPU(s) shared" if self.shape.gpus else "CPU"
        return f"SLURM: at most {s.max_concurrent} worker jobs x {self.shape.trials} trials at once ({gpus}), {s.time}"

    def _submit(self) -> str:
        import submitit

        s, shape = self.options, self.shape
        executor = submitit.SlurmExecutor(folder=Path(self.opts.out) / ".slurm" / "%j", max_num_timeout=20)
        params: dict[str, Any] = {
            "job_name": f"{self.spec.name}-worker"[:120],
            "time": s.minutes(),
            "nodes": 1,
            "ntasks_per_node": 1,
            "signal_delay_s": s.signal_delay_s,
            "stderr_to_stdout": True,
        }
        optional = {
            "gpus_per_node": shape.gpus,
            "cpus_per_task": shape.trials * shape.cpus_per_trial if shape.cpus_per_trial else None,
            "partition": s.partition,
            "mem": s.mem,
            "additional_parameters": dict(s.extra),
        }
        params.update({k: v for k, v in optional.items() if v})
        executor.update_parameters(**params)
        try:
            job = executor.submit(PackedWorker(self.spec, self.opts, shape))
        except Exception as err:  # noqa: BLE001 - sbatch refused (bad partition, limits): one line
            raise SweepError(f"sbatch refused the worker job: {str(err).strip().splitlines()[-1]}") from None
        return str(job.job_id)

    def _tick(self) -> bool:
        """Look once; returns whether the sweep still has work (planned, running, or workers alive)."""
        seen = job_states(list(self.planner.state.workers))
        with StateLock(self.opts.out):
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
                    note(
                        Path(self.opts.out), trial.job_id or "unknown", f"end {trial.name} {trial.status} (worker gone)"
                    )
                    self.say(
                        f"{trial.status:<8} {trial.name} (worker job {trial.job_id} {state.workers.get(trial.job_id or '', 'GONE').lower()})",
                        "yellow",
                    )
            work = self.planner.next_trial() is not None
            while work and len(alive) < self.options.max_concurrent:
                job = self._submit()
                state.workers[job] = "PENDING"
                alive.add(job)
                self.say(f"submitted worker job {job} ({self.shape.trials} slots)", "")
            self.planner.save()
            return work or bool(self.planner.left_running())

    def run(self) -> SweepResult:
        """Plan, then keep workers going until every trial is done (Ctrl-C stops watching; the workers keep going)."""
        if self.opts.config is not None:
            read_yaml(self.opts.config)
        _need("squeue")
        with SweepLock(self.opts.out), process.signals_raise_interrupt():
            with StateLock(self.opts.out):
                self.planner.open()
                skipped = self.planner.prepare()
                before = sum(t.attempts for t in self.planner.state.trials)
                idle = self.planner.next_trial() is None and not self.planner.left_running()
                self.planner.save()
            if idle:
                self.say(self.planner.nothing_to_do(), "")
                return SweepResult(self.planner.state, 0, skipped, False)
            if skipped:
                self.say(f"{skipped} finished trials skipped", "")
            try:
                while self._tick():
                    time.sleep(self.options.poll_s)
            except KeyboardInterrupt:
                self.say(
                    "stopped watching: the worker jobs keep running; run the same command again to collect them",
                    "yellow",
                )
                return SweepResult(self.planner.state, 0, skipped, True)
            launched = sum(t.attempts for t in self.planner.state.trials) - before
            return SweepResult(self.planner.state, launched, skipped, False)
