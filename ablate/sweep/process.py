"""Trial processes: start each in its own session, tied to the launcher's life, and stop them.

Each trial is the leader of a new session (and so of a new process group), which lets the
launcher stop the trial *and everything it started* (DDP ranks, data workers) with one
``killpg``. On Linux the trial also asks the kernel for SIGTERM when the launcher dies
(``PR_SET_PDEATHSIG``), so even a SIGKILLed launcher leaves no trainer behind; and because the
state records each trial's pid with its start time, a rerun recognises and stops any survivor
before it resumes that trial in the same folder.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path
from typing import Any, Optional

_PR_SET_PDEATHSIG = 1

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
"""The folder that holds this ``ablate`` package: a checkout, or site-packages when installed."""


def ablate_argv(*args: str) -> list[str]:
    """``python -m ablate ARGS`` with this interpreter (the ``ablate`` command line in a child process)."""
    return [sys.executable, "-m", "ablate", *args]


def child_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with :data:`PACKAGE_ROOT` first on ``PYTHONPATH`` unless it is already an installed path.

    So ``python -m ablate`` in a child runs this same copy of the code, also from a checkout used
    without installing (``python cli.py ...``) and whatever the working directory.
    """
    installed = {str(Path(p).resolve()) for p in (sysconfig.get_path("purelib"), sysconfig.get_path("platlib"))}
    if str(PACKAGE_ROOT) in installed:
        return dict(env)
    paths = [str(PACKAGE_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except Exception:  # not Linux: the launcher's own cleanup still stops its trials
        pass


def start(command: list[str], env: dict[str, str], log_path: Path, cwd: Optional[Path] = None) -> subprocess.Popen:
    """Start ``command`` with stdout and stderr appended to ``log_path`` (``env`` through :func:`child_env`)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            command,
            env=child_env(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )


CUT_MARK = b"\n[... ablate sweep cut this attempt's output here: trial.log keeps its first and last lines ...]\n"


def bound_log(log_path: Path, start: int, limit: int) -> bool:
    """Keep the output a running trial appends to ``log_path`` from byte ``start`` on within ``limit`` bytes.

    Past the limit the log keeps the attempt's first ``limit // 2`` bytes, :data:`CUT_MARK` and its last
    ``limit // 4`` bytes, and grows again from there (the trial appends, so it writes on after the cut).
    A line the trial writes during the cut itself (microseconds) may land before the kept tail.
    Returns whether it cut.
    """
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
    """The kernel's start time of ``pid`` (clock ticks since boot), or ``None`` if it is gone.

    A pid can be reused after a reboot or much later; pid and start time together name a
    process uniquely.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None if sys.platform.startswith("linux") else (0 if _alive(pid) else None)
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":  # a zombie has finished
        return None
    return int(fields[19])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_same_process(pid: Optional[int], started: Optional[int]) -> bool:
    """Whether the process recorded as (``pid``, ``started``) is still running."""
    return pid is not None and started is not None and start_time(pid) == started


def stop_group(pid: int, grace_s: float = 30.0, proc: Optional[subprocess.Popen] = None) -> None:
    """SIGTERM the trial's process group, wait up to ``grace_s``, then SIGKILL what is left.

    Args:
        pid: the trial's pid, which is also its process-group id.
        grace_s: time the trainer gets to save its state and write ``summary.json``.
        proc: the ``Popen`` when the caller is the parent (so the child is also reaped).
    """
    signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        if proc is None and start_time(pid) is None:
            break
        time.sleep(0.05)
    signal_group(pid, signal.SIGKILL)  # the rest of the group (workers, DDP ranks)
    if proc is not None:
        proc.wait()


def signal_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the trial's process group, ignoring a group that is already gone."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class signals_raise_interrupt:
    """While running, SIGTERM and SIGHUP stop the sweep as Ctrl-C does (trials are stopped too).

    On leaving, a signal received meanwhile is passed on to the handler that was there before when that
    is a Python function (a host program's, a test session's), so it learns of it too; the default
    action is not taken again (the sweep has already stopped, and says so).
    """

    def __enter__(self) -> None:
        self.saved: dict[int, Any] = {}
        self.received: list[int] = []
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self.saved[sig] = signal.signal(sig, self._raise_interrupt)

    def _raise_interrupt(self, signum: int, frame: Any) -> None:
        self.received.append(signum)
        raise KeyboardInterrupt(f"signal {signum}")

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(self.received):
            if callable(self.saved.get(sig)):
                self.saved[sig](sig, None)
