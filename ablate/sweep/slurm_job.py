"""What runs inside a SLURM job: one trial's ``python -m ablate train``, checkpointed and requeued on preemption.

submitit pickles a :class:`TrialJob` into the job's folder and calls it on the compute node, once
per task (``nodes x tasks-per-node``; Lightning's SLURM environment turns the tasks into one DDP
run). Before the time limit, or when the cluster preempts the job, SLURM sends ``SIGUSR2``
(``--signal=USR2@DELAY``); submitit then calls :meth:`TrialJob.checkpoint`, which asks the trainer
to stop (SIGTERM: it saves ``last.ckpt`` at the next step and exits), and returns the same job for
submitit to requeue under the same job id. The requeued job runs the same command, which resumes
from ``last.ckpt`` in the same run directory, with the same W&B run id.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

from ablate.sweep.process import child_env

REQUEUES = ".requeues"
"""A file in the run directory counting the requeues of its job (``ablate sweep status`` shows it)."""


def _ignore_usr2() -> None:  # in the trainer between fork and exec: the job's signal is for the parent
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


class TrialJob:
    """Runs ``argv`` (a ``python -m ablate train`` command) in ``run_dir``; picklable, so submitit can ship it.

    Args:
        argv: the trainer command.
        run_dir: the trial's folder (its ``trial.log`` gets the trainer's output).
        grace_s: how long the trainer gets to checkpoint after SIGTERM before SIGKILL.
    """

    def __init__(self, argv: list[str], run_dir: Path, grace_s: float = 60.0):
        self.argv, self.run_dir, self.grace_s = list(argv), Path(run_dir), grace_s
        self._proc: Optional[subprocess.Popen] = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_proc"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._proc = None

    def __call__(self) -> int:
        """Train; returns 0, or raises with the trainer's last line when it fails."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        rank = os.environ.get("SLURM_PROCID", "0")
        log = self.run_dir / ("trial.log" if rank == "0" else f"trial.rank{rank}.log")
        with open(log, "a") as out:
            out.write(
                f"\n=== SLURM job {os.environ.get('SLURM_JOB_ID', '?')} task {rank} on "
                f"{os.uname().nodename}, {time.ctime()} ===\n"
            )
            out.flush()
            env = child_env({**os.environ, "PYTHONUNBUFFERED": "1"})  # the log shows progress as it happens
            self._proc = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=_ignore_usr2
            )
            code = self._proc.wait()
        if code != 0:
            tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-1:]
            raise RuntimeError(f"trainer exited with code {code}: {tail[0] if tail else ''}")
        return code

    def checkpoint(self, *args: Any, **kwargs: Any):
        """Preempted or near the time limit: let the trainer save, then requeue this same job."""
        import submitit

        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=self.grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
        if os.environ.get("SLURM_PROCID", "0") == "0":
            path = self.run_dir / REQUEUES
            count = int(path.read_text() or 0) if path.exists() else 0
            path.write_text(str(count + 1))
        return submitit.helpers.DelayedSubmission(TrialJob(self.argv, self.run_dir, self.grace_s))


def requeues(run_dir: Path) -> int:
    """How many times the trial's job was requeued."""
    try:
        return int((Path(run_dir) / REQUEUES).read_text() or 0)
    except (OSError, ValueError):
        return 0
