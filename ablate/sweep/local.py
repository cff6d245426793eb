"""The local executor: every trial its own process on a device slot of this machine.

Each attempt is ``python -m ablate train`` started by :func:`ablate.sweep.process.start` (its own
session, so one ``killpg`` stops it and its workers; it dies with the launcher) with the slot's
``CUDA_VISIBLE_DEVICES`` and thread count (:mod:`ablate.sweep.slots`). Its pid and start time go
into the trial's record, so a rerun after a crash recognises a survivor and stops it before the
trial resumes in the same folder.
"""

from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path
from typing import Callable, Optional

import ablate.sweep.process as process  # the module: the package (callable) imports ablate.sweep.api
from ablate.sweep.executor import Argv, ExecutorArgs, Exit, Handle, Polled
from ablate.sweep.options import LOG_LIMIT, LaunchOptions
from ablate.sweep.slots import Slot, plan_slots
from ablate.sweep.state import Trial
from ablate.sweep.trial import LOG


class LocalExecutor:
    """Runs attempts as processes over ``slots``, at most one per slot.

    Args:
        slots: where trials may run at once (:func:`ablate.sweep.slots.plan_slots`).
        poll_s: seconds between two looks at the processes.
        grace_s: seconds a survivor of a dead launcher gets to checkpoint when a rerun stops it.
        header: the first words of each attempt's block in ``trial.log``.
        log_limit: bytes of ``trial.log`` one attempt may fill (:func:`ablate.sweep.process.bound_log`); 0: no limit.
    """

    outlives_launcher = False
    can_stop_early = True

    def __init__(
        self,
        slots: list[Slot],
        poll_s: float = 0.2,
        grace_s: float = 30.0,
        header: str = "ablate sweep",
        log_limit: int = LOG_LIMIT,
    ):
        self.slots, self.poll_s, self.grace_s, self.header = list(slots), poll_s, grace_s, header
        self.log_limit = log_limit
        self._busy: set[int] = set()

    @classmethod
    def from_args(cls, args: ExecutorArgs, opts: LaunchOptions) -> LocalExecutor:
        """From ``ablate sweep run``'s options."""
        slots = plan_slots(args.devices, 1 if args.gpus_per_trial is None else args.gpus_per_trial, args.parallel)
        return cls(slots, poll_s=opts.poll_s, grace_s=opts.grace_s, log_limit=opts.log_limit)

    def capacity(self) -> int:
        return len(self.slots)

    def describe(self) -> str:
        return "slots: " + ", ".join(s.describe() for s in self.slots)

    def check(self) -> None:
        pass

    def start(self, trial: Trial, run_dir: Path, argv: Argv) -> Handle:
        slot = next(s for s in self.slots if s.index not in self._busy)
        run_dir.mkdir(parents=True, exist_ok=True)
        command = argv(slot.overrides())
        with open(run_dir / LOG, "a") as log:
            log.write(
                f"\n=== {self.header}: {trial.name}, attempt {trial.attempts + 1}, "
                f"{slot.describe()}, {time.ctime()} ===\n$ {shlex.join(command)}\n"
            )
        log_start, since = (run_dir / LOG).stat().st_size, time.time()
        proc = process.start(command, slot.env(dict(os.environ)), run_dir / LOG)
        self._busy.add(slot.index)
        trial.pid, trial.pid_start = proc.pid, process.start_time(proc.pid)
        trial.devices = list(slot.gpus or [])
        return Handle(trial, slot.describe(), since=since, log_start=log_start, ref=(proc, slot, run_dir / LOG))

    def poll(self, handles: list[Handle]) -> Polled:
        polled = Polled()
        for handle in handles:
            code = handle.ref[0].poll()
            if code is not None:
                polled.ended.append((handle, Exit(code, lost=code < 0)))
            process.bound_log(handle.ref[2], handle.log_start, self.log_limit)
        return polled

    def stop(self, handle: Handle) -> None:
        process.signal_group(handle.ref[0].pid, signal.SIGTERM)

    def kill(self, handle: Handle) -> None:
        process.signal_group(handle.ref[0].pid, signal.SIGKILL)

    def release(self, handle: Handle) -> None:
        proc, slot, _ = handle.ref
        process.signal_group(proc.pid, signal.SIGKILL)  # stray workers of an ended trial
        self._busy.discard(slot.index)
        handle.trial.pid = handle.trial.pid_start = None

    def adopt(self, trial: Trial, say: Callable[[str], None]) -> Optional[Handle]:
        """A process cannot be re-parented: stop a survivor (it checkpoints), and the trial resumes here."""
        if process.is_same_process(trial.pid, trial.pid_start):
            say(f"stopping {trial.name} (pid {trial.pid}) left running by a previous launcher")
            assert trial.pid is not None
            process.stop_group(trial.pid, self.grace_s)
        trial.pid = trial.pid_start = None
        return None


def run_to_end(executor: LocalExecutor, handle: Handle, grace_s: float = 30.0) -> Exit:
    """Wait for one attempt to end (a poll loop, so Ctrl-C gets through); stop it if the wait is interrupted."""
    ended: Optional[Exit] = None
    try:
        while ended is None:
            polled = executor.poll([handle])
            ended = polled.ended[0][1] if polled.ended else None
            if ended is None:
                time.sleep(executor.poll_s)
    finally:
        if ended is None:
            process.stop_group(handle.ref[0].pid, grace_s=grace_s, proc=handle.ref[0])
        executor.release(handle)
    return ended
