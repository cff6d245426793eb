"""Where trials run: the :class:`Executor` protocol every launcher backend implements.

The sweep's loop (:mod:`ablate.sweep.launcher`) decides nothing about processes or jobs; the
planner (:mod:`ablate.sweep.planner`) decides nothing about where trials run. An executor only
starts a trial's command somewhere, says when it ended and how, stops it when asked, and takes
over trials a previous launcher left running. One class per backend, no shared base class
(composition, torchtune's "no implementation inheritance"); :data:`ablate.sweep.executors.EXECUTORS`
names them for ``--launcher``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from ablate.sweep.spec import SweepError
from ablate.sweep.state import Trial

Argv = Callable[[list[str]], list[str]]
"""``(backend overrides) -> argv`` of one trial: the trial's command with what the backend adds
(``train.devices=2`` for a two-GPU slot, ``train.nodes=2`` for a two-node job)."""


class LaunchRefused(SweepError):
    """The backend would not start the trial (``sbatch`` refused the job): the trial is failed with the reason."""


@dataclass
class Handle:
    """One started attempt of a trial, as its executor knows it.

    Attributes:
        trial: the trial (the executor records its own ids in it: ``pid``, ``job_id``).
        where: where it runs, for the progress line (``"GPU 0"``, ``"SLURM job 12"``).
        since: a ``summary.json`` older than this ``time.time()`` is an earlier attempt's (``None``: read any).
        log_start: bytes of ``trial.log`` before this attempt (earlier attempts' output is before it).
        tag: a short name for the end-of-trial line (``"job 12"``), when there is one.
        ref: the executor's own (a process and its slot, a job id).
    """

    trial: Trial
    where: str
    since: Optional[float] = None
    log_start: int = 0
    tag: Optional[str] = None
    ref: Any = None


@dataclass(frozen=True)
class Exit:
    """How an attempt ended, as far as its backend can tell (the trial's ``summary.json`` says the rest).

    Attributes:
        code: the exit code :func:`ablate.sweep.trial.outcome` reads: ``0``, a trainer's code, ``-N`` for signal N,
            ``None`` when the process vanished.
        lost: ended from outside (a signal, preempted, cancelled, node failure), not by the trial's own error:
            the planner relaunches it (``--retries``) and it resumes from its checkpoint.
        reason: the backend's words for a lost attempt (``"SLURM job 12 TIMEOUT"``); when retries are used up,
            a lost attempt with a reason is recorded failed with it.
    """

    code: Optional[int]
    lost: bool = False
    reason: Optional[str] = None


@dataclass
class Polled:
    """What one :meth:`Executor.poll` saw: the attempts that ended, and whether a trial's recorded state changed."""

    ended: list[tuple[Handle, Exit]] = field(default_factory=list)
    changed: bool = False


@dataclass(frozen=True)
class ExecutorArgs:
    """What ``ablate sweep run`` was told about where trials run; each backend reads its own fields.

    Attributes:
        name: the sweep's name.
        devices, gpus_per_trial, parallel: the local slots (``--devices``, ``--gpus-per-trial``, ``--parallel``);
            ``gpus_per_trial`` is ``None`` when not given (1 locally, 0 on SLURM).
        partition, nodes_per_trial, max_concurrent, time, cpus_per_trial, mem, signal_delay_s, slurm_args:
            the SLURM job's shape (``--partition`` ... ``--slurm-arg``).
    """

    name: str = "sweep"
    devices: str = "auto"
    gpus_per_trial: Optional[int] = None
    parallel: int = 1
    partition: Optional[str] = None
    nodes_per_trial: int = 1
    max_concurrent: int = 8
    time: str = "04:00:00"
    cpus_per_trial: Optional[int] = None
    mem: Optional[str] = None
    signal_delay_s: int = 120
    slurm_args: tuple[str, ...] = ()


class Executor(Protocol):
    """A launcher backend. The loop calls, in this order of a trial's life: :meth:`start`, :meth:`poll` every
    tick (until it reports the attempt ended), :meth:`release`; :meth:`stop` then :meth:`kill` to end an attempt
    early; :meth:`adopt` once per trial a previous launcher left ``running``.

    Attributes:
        poll_s: seconds between two ticks of the loop.
        outlives_launcher: attempts keep running when the launcher stops (SLURM jobs): Ctrl-C leaves them
            running, and a rerun adopts them; otherwise Ctrl-C stops every attempt (they resume on rerun).
        can_stop_early: :meth:`stop` lets the trial checkpoint and end, so hyperband's ``early_terminate`` applies.
    """

    poll_s: float
    outlives_launcher: bool
    can_stop_early: bool

    def capacity(self) -> int:
        """How many attempts may run at once."""
        ...

    def describe(self) -> str:
        """One line saying where trials run (``"slots: GPU 0, GPU 1"``)."""
        ...

    def check(self) -> None:
        """Fail with a one-line :class:`SweepError` before anything starts when the backend cannot run here."""
        ...

    def start(self, trial: Trial, run_dir: Any, argv: Argv) -> Handle:
        """Start one attempt of ``trial`` in ``run_dir``; raises :class:`LaunchRefused` when the backend says no."""
        ...

    def poll(self, handles: list[Handle]) -> Polled:
        """Look at the running attempts once (never blocks for long)."""
        ...

    def stop(self, handle: Handle) -> None:
        """Ask the attempt to save a checkpoint and end (SIGTERM)."""
        ...

    def kill(self, handle: Handle) -> None:
        """End the attempt now (SIGKILL); :meth:`poll` reports it soon after."""
        ...

    def release(self, handle: Handle) -> None:
        """The attempt has ended and been read back: free its place, forget its ids."""
        ...

    def adopt(self, trial: Trial, say: Callable[[str], None]) -> Optional[Handle]:
        """A trial a previous launcher left ``running``: a handle to keep watching it, or ``None`` once nothing of
        it runs any more (the planner then reads back how it ended). ``say`` prints a progress line."""
        ...
