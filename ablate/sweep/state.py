"""The sweep's state on disk: one JSON file, written atomically, guarded by a lock.

``DIR/sweep.json`` lists every trial with its point, status and result; each trial trains in
``DIR/<trial name>/``. The launcher is the only writer. Every write goes to a temporary file in
the same folder, is flushed to disk, then renamed over the old file, so a kill or power cut at any
moment leaves either the old or the new state, never a torn one. ``DIR/.lock`` is held (``filelock``,
an ``flock``) while a launcher runs; the kernel drops it when the launcher dies, even by SIGKILL.
Packed SLURM workers (:mod:`ablate.sweep.packed`) share the state: each read-modify-write of
``sweep.json`` by a worker or its watcher happens under :class:`StateLock` (``DIR/.state.lock``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ablate.record import RecordError, RunStatus, RunSummary, SweepFiles, headline
from ablate.sweep.spec import SweepError
from ablate.utils import io

VERSION = 1

STATUSES = tuple(RunStatus)
"""A trial's statuses (:class:`~ablate.record.RunStatus`); ``stopped``: ended early by hyperband, final."""
DONE = tuple(s for s in RunStatus if s.done)


@dataclass
class Trial:
    """One point of the sweep and what became of it.

    Attributes:
        name: unique within the sweep; also its folder (the trainer's ``--run-dir``).
        point: the sampled W&B parameters ``{name: value}``, constants and ``variant`` included.
        status: see :class:`~ablate.record.RunStatus`.
        error: one line saying why it failed.
        metric: the sweep metric from its ``summary.json`` (``None`` until finished).
        summary: its ``summary.json`` as far as the sweep keeps it: ``sweep.json`` holds the headline
            numbers (BLEU, perplexity, throughput; :func:`~ablate.record.headline`) as ``results``.
        attempts: how many times a process was started for it.
        duration_s: seconds of training over all attempts.
        pid, pid_start: the running process and its start time (to recognise it after a crash).
        devices: the GPU ids it runs on (empty on CPU).
        job_id, job_state: its SLURM job and that job's last seen state (``--launcher slurm``).
        history: the metric each time the trainer reported it (for hyperband).
    """

    name: str
    point: dict[str, Any]
    status: RunStatus = RunStatus.PENDING
    error: Optional[str] = None
    metric: Optional[float] = None
    summary: Optional[RunSummary] = None
    attempts: int = 0
    duration_s: float = 0.0
    started_at: Optional[float] = None
    pid: Optional[int] = None
    pid_start: Optional[int] = None
    devices: list[str] = field(default_factory=list)
    history: list[float] = field(default_factory=list)
    job_id: Optional[str] = None
    job_state: Optional[str] = None

    @property
    def results(self) -> dict[str, Any]:
        """The headline numbers of its summary (empty until it wrote one)."""
        return headline(self.summary) if self.summary is not None else {}

    def to_json(self) -> dict[str, Any]:
        """As ``sweep.json`` holds it: the summary as ``results``, in field order."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "summary":
                out["results"] = self.results
            else:
                out[f.name] = (
                    list(value) if isinstance(value, list) else dict(value) if isinstance(value, dict) else value
                )
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trial:
        """From ``sweep.json``'s record (:class:`~ablate.record.RecordError` for an unknown status)."""
        data = dict(data)
        results = data.pop("results", None) or {}
        if "status" in data:
            data["status"] = RunStatus.parse(data["status"], f"trial {data.get('name')}")
        summary = RunSummary.from_json(results, strict=False) if isinstance(results, dict) and results else None
        return cls(**data, summary=summary)


@dataclass
class SweepState:
    """Everything a rerun needs to carry on where the last launcher stopped.

    Attributes:
        name: the sweep name.
        source: the sweep file it was started from.
        signature: a digest of what defines the trials (method, parameters, base config,
            command-line overrides); a rerun with a different one is refused.
        trials: in the order they were planned.
        group: the W&B run group of its trials: the sweep's name and a short id made once per
            sweep folder (:func:`new_group`), so two ``--out`` folders of one file are two W&B
            groups; ``None`` in folders started before it (their trials keep the sweep's name).
        wandb_sweep: ``entity/project/id`` of the W&B sweep object ``--wandb-sweep`` registered.
        workers: packed SLURM worker jobs (``--trials-per-job``) ``{job id: last seen state}``.
    """

    name: str
    source: str
    signature: str
    overrides: list[str] = field(default_factory=list)
    trials: list[Trial] = field(default_factory=list)
    group: Optional[str] = None
    wandb_sweep: Optional[str] = None
    workers: dict[str, str] = field(default_factory=dict)
    created_at: float = field(default_factory=time.time)
    version: int = VERSION

    def trial(self, name: str) -> Trial:
        return next(t for t in self.trials if t.name == name)

    def count(self, *statuses: RunStatus) -> int:
        return sum(t.status in statuses for t in self.trials)

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["overrides"] = list(self.overrides)
        out["workers"] = dict(self.workers)
        out["trials"] = [t.to_json() for t in self.trials]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SweepState:
        trials = [Trial.from_json(t) for t in data.pop("trials", [])]
        return cls(trials=trials, **data)


def new_group(name: str) -> str:
    """A W&B group for a new sweep folder: ``<sweep name>-<6 hex digits>``."""
    return f"{name}-{uuid.uuid4().hex[:6]}"


UNDRAWN = "xxxxxx"
"""The 6 hex digits of a group a dry run shows for a folder no sweep has started in: they are drawn
(:func:`new_group`) when the sweep first runs there, so a dry run never shows an id the run will not use."""


def undrawn_group(name: str) -> str:
    return f"{name}-{UNDRAWN}"


def state_path(out_dir: Path) -> Path:
    return SweepFiles(out_dir).state


def save_state(out_dir: Path, state: SweepState) -> None:
    io.atomic_write_json(state_path(out_dir), state.to_json(), indent=1, sort_keys=False)


def load_state(out_dir: Path) -> Optional[SweepState]:
    """The saved state of ``out_dir``, or ``None`` if no sweep ran there yet."""
    path = state_path(out_dir)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise TypeError(f"it holds {type(data).__name__}, not a JSON object")
        if data.get("version") != VERSION:
            raise SweepError(f"{path} was written by another version of ablate (version {data.get('version')})")
        trials = data.get("trials", [])
        if not isinstance(trials, list) or not all(isinstance(t, dict) for t in trials):
            raise TypeError("its trials are not a list of points")
        state = SweepState.from_json(data)
        if not all(isinstance(t.point, dict) for t in state.trials):
            raise TypeError("its trials are not a list of points")
        return state
    except SweepError:
        raise
    except RecordError as err:
        raise SweepError(f"{path} is not a sweep state file ({err}); move it away or use another --out") from None
    except (ValueError, TypeError, KeyError, AttributeError) as err:  # UnicodeDecodeError, JSONDecodeError too
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise SweepError(f"{path} is not a sweep state file ({reason}); move it away or use another --out") from None


class SweepLock:
    """An exclusive lock on ``DIR/.lock`` (:class:`~ablate.utils.io.HolderLock`): one launcher per sweep folder.

    The lock belongs to the open file, so it is released when the launcher exits or is killed;
    trial processes do not inherit it (``close_fds``).
    """

    def __init__(self, out_dir: Path):
        self.path = SweepFiles(out_dir).lock
        self._lock = io.HolderLock(self.path, holder=str(os.getpid()))

    def __enter__(self) -> SweepLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire()
        except io.LockHeld as held:
            raise SweepError(
                f"another launcher (pid {held.holder}) is running the sweep in {self.path.parent}; "
                f"wait for it or stop it first"
            ) from None
        return self

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()


class StateLock:
    """``with StateLock(DIR):`` one read-modify-write of ``DIR/sweep.json`` at a time (waits its turn).

    Held for milliseconds by each packed worker and by their watcher, across the machines that share
    the folder (an ``flock`` on the shared filesystem); the kernel drops it when its holder dies.
    """

    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / STATE_LOCK
        self._lock = io.HolderLock(self.path, wait=True)

    def __enter__(self) -> StateLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()


STATE_LOCK = ".state.lock"
"""The file :class:`StateLock` holds in the sweep folder."""


def is_locked(out_dir: Path) -> bool:
    """Whether a launcher currently holds ``out_dir`` (used by ``sweep status``)."""
    return bool(io.is_held(SweepFiles(out_dir).lock))
