"""The Ray executor: every trial attempt one Ray task on the cluster ``RAY_ADDRESS`` names, else a local one
(``ablate[ray]``); Ray's own retries are off, so a lost task is relaunched by the planner (docs/sweeps.md).
"""

from __future__ import annotations

import functools
import math
import os
import socket
import time
from pathlib import Path
from typing import Any, Callable, ClassVar, Optional

from ablate.record import LOG_FILE
from ablate.sweep.local import (
    Argv,
    ExecutorArgs,
    Exit,
    Handle,
    Polled,
    bound_log,
    device_overrides,
    start_process,
    stop_group,
)
from ablate.sweep.planner import LaunchOptions
from ablate.sweep.spec import SweepError
from ablate.sweep.state import Trial


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise SweepError("--launcher ray needs Ray: pip install 'ablate[ray]'") from None
    return ray


def run_attempt(command: list[str], run_dir: str, header: str, grace_s: float) -> int:
    """One Ray task: the trainer's exit code; ``ray.cancel`` (``KeyboardInterrupt``) gives it ``grace_s`` to save."""
    log = Path(run_dir) / LOG_FILE
    header = f"{header}, ray worker pid {os.getpid()} on {socket.gethostname()}"
    proc, _ = start_process(command, {**os.environ, "PYTHONUNBUFFERED": "1"}, log, header)
    try:
        while proc.poll() is None:  # not a blocking wait(): ray.cancel's interrupt_main lands between polls only
            time.sleep(0.1)
        return proc.returncode
    except KeyboardInterrupt:
        stop_group(proc.pid, grace_s, proc=proc)
        return proc.returncode


@functools.cache
def _remote() -> Any:
    return _ray().remote(max_retries=0)(run_attempt)


class RayExecutor:
    """Runs attempts as Ray tasks (a fraction of a GPU when trials share one)."""

    outlives_launcher = False  # a driver's tasks end with it; a rerun resumes them from their checkpoints
    can_stop_early = True  # ray.cancel lets the trainer checkpoint and end
    options: ClassVar[tuple[str, ...]] = ("--cpus-per-trial", "--gpus-per-trial", "--parallel", "--trial-timeout")

    def __init__(self, args: ExecutorArgs, opts: LaunchOptions):
        """``--cpus-per-trial`` CPUs (default 1) and ``--gpus-per-trial / --parallel`` GPUs per task."""
        if args.parallel < 1:
            raise SweepError(f"--parallel {args.parallel} must be at least 1 (trials sharing each GPU)")
        self.cpus = 1 if args.cpus_per_trial is None else args.cpus_per_trial  # 0 is refused, not the default
        self.gpus = (args.gpus_per_trial or 0) / args.parallel
        if self.cpus <= 0 or self.gpus < 0:
            raise SweepError("--cpus-per-trial must be > 0 and --gpus-per-trial >= 0 for --launcher ray")
        self.poll_s, self.grace_s, self.log_limit = max(opts.poll_s, 0.5), opts.grace_s, opts.log_limit

    @classmethod
    def from_args(cls, args: ExecutorArgs, opts: LaunchOptions) -> RayExecutor:
        return cls(args, opts)

    def check(self) -> None:
        ray = _ray()
        if not ray.is_initialized():
            try:
                ray.init(include_dashboard=False, log_to_driver=False)
            except ConnectionError as err:  # a head that is down, or one this client holds no token for
                address = os.environ.get("RAY_ADDRESS") or "not set: a local Ray"
                raise SweepError(
                    f"--launcher ray: {str(err).strip().splitlines()[0]} (RAY_ADDRESS {address}); check that "
                    "the cluster is up and reachable from here, or unset RAY_ADDRESS to start a local Ray"
                ) from None

    def capacity(self) -> int:
        self.check()  # describe() reads it before the launcher's check(): Ray must be started to answer
        resources = _ray().cluster_resources()
        fits = [resources.get("CPU", 0) / self.cpus]
        if self.gpus > 0:
            fits.append(resources.get("GPU", 0) / self.gpus)
        return max(0, math.floor(min(fits) + 1e-9))

    def describe(self) -> str:
        gpus = f", {self.gpus:g} GPU" if self.gpus else ""
        return f"Ray: {self.cpus:g} CPU{gpus} per trial, {self.capacity()} at once"

    def start(self, trial: Trial, run_dir: Path, argv: Argv) -> Handle:
        run_dir.mkdir(parents=True, exist_ok=True)
        log = run_dir / LOG_FILE
        log_start, since = (log.stat().st_size if log.exists() else 0), time.time()
        header = f"ablate sweep (Ray): {trial.name}, attempt {trial.attempts + 1}, {time.ctime()}"
        task = _remote().options(num_cpus=self.cpus, num_gpus=self.gpus, name=f"ablate-{trial.name}"[:120])
        command = argv(device_overrides(self.gpus, threads=max(1, int(self.cpus))))  # Ray sets CUDA_VISIBLE_DEVICES
        ref = task.remote(command, str(run_dir.resolve()), header, self.grace_s)
        trial.devices = []
        return Handle(trial, "Ray task", since=since, log_start=log_start, tag="Ray task", ref=(ref, log))

    def poll(self, handles: list[Handle]) -> Polled:
        ray, polled = _ray(), Polled()
        by_ref = {h.ref[0]: h for h in handles}
        ready, _ = ray.wait(list(by_ref), num_returns=len(by_ref), timeout=0) if by_ref else ([], [])
        for ref in ready:
            polled.ended.append((by_ref[ref], self._exit(ref)))
        for handle in handles:
            bound_log(handle.ref[1], handle.log_start, self.log_limit)
        return polled

    @staticmethod
    def _exit(ref: Any) -> Exit:
        """The trainer's exit code, or a lost attempt when Ray lost its task or a signal killed the trainer (the OOM
        killer, ``kill -9``: relaunched as a local trial is)."""
        ray = _ray()
        try:
            code = ray.get(ref)
            return Exit(code, lost=code is not None and code < 0)
        except ray.exceptions.RayTaskError as err:  # run_attempt itself raised: this machine's problem, not lost
            return Exit(1, reason=f"Ray task failed: {str(err).strip().splitlines()[-1]}")
        except ray.exceptions.RayError as err:
            return Exit(None, lost=True, reason=f"Ray task lost ({type(err).__name__})")

    def stop(self, handle: Handle) -> None:
        _ray().cancel(handle.ref[0], force=False)

    def kill(self, handle: Handle) -> None:
        _ray().cancel(handle.ref[0], force=True)

    def release(self, handle: Handle) -> None:
        pass

    def adopt(self, trial: Trial, say: Callable[[str], None]) -> Optional[Handle]:
        trial.pid = trial.pid_start = None
        return None
