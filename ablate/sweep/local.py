"""Where trials run: the :class:`Executor` protocol every launcher backend implements (docs/extending.md), and
this machine's: each trial its own process-group leader over a device slot, stopped with its launcher, and
recognised after a crash by its pid and start time.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import shlex
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Mapping, Optional, Protocol

from ablate.record import LOG_FILE
from ablate.sweep.spec import SweepError
from ablate.sweep.state import Trial
from ablate.utils.io import unlinked

Argv = Callable[[list[str]], list[str]]  # (backend overrides, e.g. train.devices=2) -> argv of one trial
LOG_LIMIT = 64 * 2**20  # bytes of trial.log one attempt may fill (a trainer printing in a loop cannot fill the disk)
CUT_MARK = b"\n[... ablate sweep cut this attempt's output here: trial.log keeps its first and last lines ...]\n"
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # a checkout, or site-packages when installed


class LaunchRefused(SweepError):
    """The backend would not start the trial (``sbatch`` refused the job): the trial is failed with the reason."""


@dataclass
class Handle:
    """One started attempt: ``where`` it runs, ``since`` (an older ``summary.json`` is an earlier attempt's),
    ``log_start`` (bytes of ``trial.log`` before it), ``tag`` (for the end-of-trial line), ``ref`` (the executor's)."""

    trial: Trial
    where: str
    since: Optional[float] = None
    log_start: int = 0
    tag: Optional[str] = None
    ref: Any = None


@dataclass(frozen=True)
class Exit:
    """How an attempt ended as its backend tells: ``code`` (``-N``: signal N, ``None``: vanished), ``lost``
    (ended from outside, so it is relaunched), ``reason`` (recorded when retries are used up)."""

    code: Optional[int]
    lost: bool = False
    reason: Optional[str] = None


@dataclass
class Polled:
    """What one :meth:`Executor.poll` saw: the attempts that ended, and whether a trial's state changed."""

    ended: list[tuple[Handle, Exit]] = field(default_factory=list)
    changed: bool = False


@dataclass(frozen=True)
class ExecutorArgs:
    """What ``ablate sweep run`` was told about where trials run; each backend reads its own fields
    (``gpus_per_trial`` ``None``: not given, so 1 locally and 0 on SLURM)."""

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
    """A launcher backend (docs/extending.md says what the loop uses each member for)."""

    poll_s: float
    outlives_launcher: bool
    can_stop_early: bool

    def capacity(self) -> int: ...
    def describe(self) -> str: ...
    def check(self) -> None: ...
    def start(self, trial: Trial, run_dir: Any, argv: Argv) -> Handle: ...
    def poll(self, handles: list[Handle]) -> Polled: ...
    def stop(self, handle: Handle) -> None: ...
    def kill(self, handle: Handle) -> None: ...
    def release(self, handle: Handle) -> None: ...
    def adopt(self, trial: Trial, say: Callable[[str], None]) -> Optional[Handle]: ...


# ---- Device slots ----


@dataclass(frozen=True)
class Slot:
    """One place a trial can run: ``gpus`` for ``CUDA_VISIBLE_DEVICES`` (``()`` hides every GPU, ``None``
    leaves it as it is), ``threads`` for its torch."""

    index: int
    gpus: Optional[tuple[str, ...]]
    threads: int

    def env(self, base: dict[str, str]) -> dict[str, str]:
        gpus = {} if self.gpus is None else {"CUDA_VISIBLE_DEVICES": ",".join(self.gpus)}
        threads = {"OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads), "PYTHONUNBUFFERED": "1"}
        return {"OMP_WAIT_POLICY": "PASSIVE", **base, **gpus, **threads}  # the wait policy is read when torch starts

    def overrides(self) -> list[str]:
        """DDP over its GPUs when it has more than one."""
        return [f"train.devices={len(self.gpus)}"] if self.gpus and len(self.gpus) > 1 else []

    def describe(self) -> str:
        return f"gpu {','.join(self.gpus)}" if self.gpus else f"cpu x{self.threads}"


def device_overrides(gpus: float, nodes: Optional[int] = None, threads: Optional[int] = None) -> list[str]:
    """What a trainer must know of its share: GPUs (a fraction counts as one) or one CPU, nodes, threads."""
    out = [f"train.accelerator={'gpu' if gpus > 0 else 'cpu'}", f"train.devices={max(1, math.floor(gpus))}"]
    return out + ([f"train.nodes={nodes}"] if nodes else []) + ([f"train.threads={threads}"] if threads else [])


def cpu_count() -> int:
    """Cores this process may use (affinity masks, containers' cpusets)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def visible_gpus() -> list[str]:
    """GPU ids a child may be given: ``CUDA_VISIBLE_DEVICES`` if set, else every CUDA device."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def check_slot_options(devices: str = "auto", gpus_per_trial: int = 1, parallel: int = 1) -> Optional[list[str]]:
    """The form of ``--devices``, ``--gpus-per-trial`` and ``--parallel``, checked without counting GPUs (a dry
    run's check): the GPU ids ``--devices`` lists, ``None`` for ``auto``, ``[]`` for ``cpu``."""
    if parallel < 1 or gpus_per_trial < 1:
        raise SweepError("--parallel and --gpus-per-trial must be at least 1")
    spec = devices.strip().lower()
    if spec in ("auto", "cpu"):
        return None if spec == "auto" else []
    ids = [d.strip() for d in devices.split(",") if d.strip()]
    if not ids or not all(d.isdigit() or d.startswith(("GPU-", "MIG-")) for d in ids):
        raise SweepError(f"--devices {devices!r}: use auto, cpu, or GPU ids such as 0,1,2,3")
    twice = next((d for i, d in enumerate(ids) if d in ids[:i]), None)
    if twice is not None:  # two trials' DDP ranks, or one trial's, on one GPU: --parallel shares a GPU
        raise SweepError(
            f"--devices {devices} lists GPU {twice} twice; list each GPU once (--parallel 2: two trials per GPU)"
        )
    return ids


def plan_slots(
    devices: str = "auto",
    gpus_per_trial: int = 1,
    parallel: int = 1,
    cores: Optional[int] = None,
    gpus: Callable[[], list[str]] = visible_gpus,
) -> list[Slot]:
    """The slots for ``--devices``, ``--gpus-per-trial`` and ``--parallel`` (trials at once on CPU, or per
    GPU group); ``cores`` default to this process's, ``gpus`` lists the visible ids."""
    listed = check_slot_options(devices, gpus_per_trial, parallel)
    cores = cores or cpu_count()
    ids, hide = (gpus() if listed is None else listed), (() if listed == [] else None)
    if listed:
        visible = gpus()
        missing = [d for d in ids if d.isdigit() and d not in visible] if all(v.isdigit() for v in visible) else []
        if missing:  # a trial given an absent GPU would train on CPU under its label
            raise SweepError(
                f"--devices {devices}: no GPU {', '.join(missing)} on this machine "
                f"(visible: {','.join(visible) or 'none'}); use --devices auto, cpu, or visible ids"
            )
    if not ids:
        if gpus_per_trial > 1:
            raise SweepError(f"--gpus-per-trial {gpus_per_trial} needs GPUs, but none are visible")
        return [Slot(i, hide, max(1, cores // parallel)) for i in range(parallel)]
    if len(ids) < gpus_per_trial:
        raise SweepError(f"--gpus-per-trial {gpus_per_trial} needs at least that many GPUs; visible: {','.join(ids)}")
    groups = [tuple(ids[i : i + gpus_per_trial]) for i in range(0, len(ids) - gpus_per_trial + 1, gpus_per_trial)]
    slots = [g for g in groups for _ in range(parallel)]
    return [Slot(i, g, max(1, cores // len(slots))) for i, g in enumerate(slots)]


# ---- Trial processes ----


def ablate_argv(*args: str) -> list[str]:
    """``python -m ablate ARGS`` with this interpreter (the ``ablate`` command line in a child process)."""
    return [sys.executable, "-m", "ablate", *args]


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with :data:`PACKAGE_ROOT` first on ``PYTHONPATH`` (unless installed), so a child runs this code.
    ``python -m ablate`` takes the working directory ``-m`` puts first off ``sys.path`` (``ablate/__main__.py``), so
    where this process imports from it (a notebook) it follows on ``PYTHONPATH``; where not (the ``ablate`` command,
    ``python -P``), ``PYTHONSAFEPATH=1`` keeps any other ``-m`` child (a SLURM job's submitit) off it too: a folder
    someone else made cannot plant a module (``yaml.py``) for every trial to import."""
    here = os.getcwd()
    installed = {str(Path(p).resolve()) for p in (sysconfig.get_path("purelib"), sysconfig.get_path("platlib"))}
    paths = [] if str(PACKAGE_ROOT) in installed else [str(PACKAGE_ROOT)]
    if any(p == "" or os.path.abspath(p) == here for p in sys.path):
        paths.append(here)
    else:
        env = {**env, "PYTHONSAFEPATH": "1"}
    if not paths:
        return dict(env)
    return {**env, "PYTHONPATH": os.pathsep.join(paths + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])}


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # not Linux: the launcher's own cleanup still stops its trials
        pass


def start_process(command: list[str], env: dict[str, str], log_path: Path, header: str) -> tuple[subprocess.Popen, int]:
    """Append ``=== HEADER ===`` and ``$ COMMAND`` to ``log_path``, then start ``command`` in a session of its own,
    its output appended there; returns the process and the log's size before that output."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(unlinked(log_path), "a") as log:  # a received sweep's link out of it is replaced, never appended to
        log.write(f"\n=== {header} ===\n$ {shlex.join(command)}\n")
        log.flush()
        log_start = os.fstat(log.fileno()).st_size
        proc = subprocess.Popen(
            command,
            env=child_env(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
    return proc, log_start


def bound_log(log_path: Path, start: int, limit: int) -> bool:
    """Keep what a trial appends to ``log_path`` after byte ``start`` within ``limit`` bytes: past it, its first
    ``limit // 2`` bytes, :data:`CUT_MARK` and its last ``limit // 4``."""
    try:
        size = log_path.stat().st_size
        if limit <= 0 or size - start <= limit:
            return False
        head_end, keep = start + limit // 2, limit // 4
        with open(log_path, "r+b") as log:
            log.seek(max(head_end, size - keep))
            tail = log.read()[-keep:] if keep else b""
            newline = tail.find(b"\n")
            log.truncate(head_end)
            log.seek(head_end)
            log.write(CUT_MARK + (tail[newline + 1 :] if 0 <= newline < len(tail) - 1 else tail))
        return True
    except OSError:
        return False


def start_time(pid: int) -> Optional[int]:
    """The kernel's start time of ``pid`` (with the pid, it names a process uniquely), ``None`` if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        if sys.platform.startswith("linux"):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return 0
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])  # a zombie has finished


def is_same_process(pid: Optional[int], started: Optional[int]) -> bool:
    """Whether the process recorded as (``pid``, ``started``) is still running."""
    return pid is not None and started is not None and start_time(pid) == started


def trains(pid: int, run_dir: Path) -> bool:
    """Whether process ``pid`` trains ``run_dir`` (its command line's ``--run-dir``, from its working directory): a
    pid a received ``sweep.json`` names may be any process of the user's. Without ``/proc``, taken as said."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return not sys.platform.startswith("linux")
    given = next((value for flag, value in zip(args, args[1:]) if flag == "--run-dir"), None)
    return given is not None and (cwd / given).resolve() == run_dir.resolve()


def stop_group(pid: int, grace_s: float = 30.0, proc: Optional[subprocess.Popen] = None) -> None:
    """SIGTERM the trial's process group, wait up to ``grace_s`` for it to save, SIGKILL the rest; reap ``proc``."""
    signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if (proc.poll() is not None) if proc is not None else start_time(pid) is None:
            break
        time.sleep(0.05)
    signal_group(pid, signal.SIGKILL)  # the rest of the group (workers, DDP ranks)
    if proc is not None:
        proc.wait()


def signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the trial's process group, if any is left."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wind_down(
    executor: Executor, handles: Callable[[], list[Handle]], reap: Callable[[], None], grace_s: float
) -> None:
    """Stop every running attempt (it checkpoints), SIGKILL what is left after ``grace_s``, and ``reap`` them all."""
    for handle in handles():
        executor.stop(handle)
    deadline = time.monotonic() + grace_s
    while handles() and time.monotonic() < deadline:
        reap()
        time.sleep(0.05)
    for handle in handles():
        executor.kill(handle)
    while handles():
        reap()
        time.sleep(0.01)


@contextlib.contextmanager
def signals_raise_interrupt() -> Iterator[list[int]]:
    """SIGTERM and SIGHUP stop the sweep as Ctrl-C does (``as`` names the signals received); on leaving, one
    received is passed on to the previous Python handler (a host program's, a test session's)."""
    received: list[int] = []

    def raise_interrupt(signum: int, frame: Any) -> None:
        received.append(signum)
        raise KeyboardInterrupt(f"signal {signum}")

    signals = (signal.SIGTERM, signal.SIGHUP) if threading.current_thread() is threading.main_thread() else ()
    saved: dict[int, Any] = {sig: signal.signal(sig, raise_interrupt) for sig in signals}
    try:
        yield received
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(received):
            if callable(saved[sig]):
                saved[sig](sig, None)


# ---- The local executor ----


class LocalExecutor:
    """Runs attempts as processes over ``slots`` (:func:`plan_slots`), at most one per slot; ``grace_s`` is what a
    survivor of a dead launcher gets to checkpoint, ``header`` starts each attempt's block in ``trial.log``."""

    outlives_launcher = False
    can_stop_early = True
    options: ClassVar[tuple[str, ...]] = ("--devices", "--gpus-per-trial", "--parallel", "--trial-timeout")

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
    def from_args(cls, args: ExecutorArgs, opts: Any) -> LocalExecutor:
        """From ``ablate sweep run``'s options (``opts``: its :class:`~ablate.sweep.planner.LaunchOptions`)."""
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
        command, log = argv(slot.overrides()), run_dir / LOG_FILE
        header = f"{self.header}: {trial.name}, attempt {trial.attempts + 1}, {slot.describe()}, {time.ctime()}"
        since = time.time()
        proc, log_start = start_process(command, slot.env(dict(os.environ)), log, header)
        self._busy.add(slot.index)
        trial.pid, trial.pid_start = proc.pid, start_time(proc.pid)
        trial.devices = list(slot.gpus or [])
        return Handle(trial, slot.describe(), since=since, log_start=log_start, ref=(proc, slot, log))

    def poll(self, handles: list[Handle]) -> Polled:
        polled = Polled()
        for handle in handles:
            code = handle.ref[0].poll()
            if code is not None:
                polled.ended.append((handle, Exit(code, lost=code < 0)))
            bound_log(handle.ref[2], handle.log_start, self.log_limit)
        return polled

    def stop(self, handle: Handle) -> None:
        signal_group(handle.ref[0].pid, signal.SIGTERM)

    def kill(self, handle: Handle) -> None:
        signal_group(handle.ref[0].pid, signal.SIGKILL)

    def release(self, handle: Handle) -> None:
        proc, slot, _ = handle.ref
        signal_group(proc.pid, signal.SIGKILL)  # stray workers of an ended trial
        self._busy.discard(slot.index)
        handle.trial.pid = handle.trial.pid_start = None

    def adopt(self, trial: Trial, say: Callable[[str], None]) -> Optional[Handle]:
        """A process cannot be re-parented: stop a survivor (it checkpoints), and the trial resumes here."""
        if trial.pid is not None and is_same_process(trial.pid, trial.pid_start):
            say(f"stopping {trial.name} (pid {trial.pid}) left running by a previous launcher")
            stop_group(trial.pid, self.grace_s)
        trial.pid = trial.pid_start = None
        return None

    def run_to_end(self, handle: Handle) -> Exit:
        """Wait for one attempt to end (a poll loop, so Ctrl-C gets through); stop it if the wait is interrupted."""
        ended: list[tuple[Handle, Exit]] = []
        try:
            while not (ended := self.poll([handle]).ended):
                time.sleep(self.poll_s)
        finally:
            if not ended:
                stop_group(handle.ref[0].pid, grace_s=self.grace_s, proc=handle.ref[0])
            self.release(handle)
        return ended[0][1]
