"""The sweep folder on disk: ``sweep.json`` (written atomically, under :class:`SweepLock` and :func:`state_lock`)
and how each trial's attempt ended, read from its run folder (:func:`outcome`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math
import os
import re
import signal
import time
import typing
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ablate.errors import closest
from ablate.record import SUMMARY_FILE, RunFiles, RunStatus, RunSummary, SweepFiles, headline, is_number
from ablate.sweep.spec import SEED, Point, SweepError
from ablate.utils import io
from ablate.utils.io import is_folder_name

VERSION = 1
STATE_LOCK = ".state.lock"
UNDRAWN = "xxxxxx"  # a dry run's group digits: drawn (:func:`new_group`) when the sweep first runs


@dataclass
class Trial:
    """One point of the sweep and what became of it: ``name`` (also its folder), ``summary`` (``sweep.json`` keeps
    its headline numbers as ``results``), ``pid`` and ``pid_start`` (to recognise it after a crash), ``history``
    (the metric at each report, for hyperband), ``job_id``, ``job_state`` (its SLURM job), ``relaunches`` (after
    attempts lost from outside, which ``--retries`` bounds; ``--retry-failed`` starts it again)."""

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
    relaunches: int = 0

    @property
    def results(self) -> dict[str, Any]:
        return headline(self.summary) if self.summary is not None else {}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # the summary as its headline numbers, ``results``
            if f.name == "relaunches" and not self.relaunches:  # newer than most folders: written once it counts
                continue
            value = self.results if f.name == "summary" else copy.copy(getattr(self, f.name))
            out["results" if f.name == "summary" else f.name] = value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Trial:
        data = dict(data)
        results = data.pop("results", None) or {}
        if "status" in data:
            data["status"] = RunStatus.parse(data["status"], f"trial {data.get('name')}")
        check_types(cls, data, f"trial {data.get('name')!r:.60}")
        summary = RunSummary.from_json(results, strict=False) if isinstance(results, dict) and results else None
        return cls(**data, summary=summary)


def check_types(cls: type, data: dict[str, Any], what: str) -> None:
    """``TypeError`` (one line) at the first value of ``data`` that is not of its field's type in dataclass ``cls``
    (a number: finite): ablate writes none, but a received or hand-edited ``sweep.json`` may (``"job_state": 5``
    crashed ``ablate sweep status``)."""
    checks = _checks(cls)
    for key, value in data.items():
        if key in checks and not checks[key][0](value):
            raise TypeError(f"{what}: {key} {value!r:.40} is not {checks[key][1]}")


@functools.cache
def _checks(cls: type) -> dict[str, tuple[Callable[[Any], bool], str]]:
    """Each field's test and its type in words, built once per class (a 20,000-trial sweep.json loads in 2 s)."""
    return {key: (_is_a(hint), _word(hint)) for key, hint in typing.get_type_hints(cls).items()}


def _is_a(hint: Any) -> Callable[[Any], bool]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        options = [_is_a(arg) for arg in args]
        return lambda v: any(test(v) for test in options)
    if hint in (int, float):
        return lambda v: is_number(v) and math.isfinite(v)
    if origin in (list, dict) and args[-1] is not Any:
        each = _is_a(args[-1])
        return lambda v: isinstance(v, origin) and all(map(each, v.values() if isinstance(v, dict) else v))
    return lambda v: hint is Any or isinstance(v, origin or hint)


def _word(hint: Any) -> str:
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    if typing.get_origin(hint) is typing.Union:
        return _word(args[0])
    if typing.get_origin(hint) in (list, dict):
        return f"a {'list' if typing.get_origin(hint) is list else 'mapping'} of {_word(args[-1]).split(' ', 1)[-1]}s"
    return {int: "a number", float: "a number", str: "a string", bool: "a boolean", Any: "a value"}.get(
        hint, f"a {hint}"
    )


@dataclass
class SweepState:
    """Everything a rerun needs: ``signature`` (what defines the trials), ``group`` (the W&B group; ``None`` in
    older folders), ``wandb_sweep`` (``--wandb-sweep``'s), ``workers`` (packed SLURM jobs' last seen states),
    ``metric`` and ``goal`` (the sweep metric its trials' ``metric`` holds and its goal), ``repeat`` (whether a
    repeat seed groups its trials by configuration); the last three ``None`` in older folders."""

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
    metric: Optional[str] = None
    goal: Optional[str] = None
    repeat: Optional[bool] = None

    def trial(self, name: str) -> Trial:
        return next(t for t in self.trials if t.name == name)

    def count(self, *statuses: RunStatus) -> int:
        return sum(t.status in statuses for t in self.trials)

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["overrides"], out["workers"] = list(self.overrides), dict(self.workers)
        out["trials"] = [t.to_json() for t in self.trials]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SweepState:
        trials = [Trial.from_json(t) for t in data.pop("trials", [])]
        check_types(cls, data, "the sweep")
        return cls(trials=trials, **data)


def new_group(name: str) -> str:
    """A W&B group for a new sweep folder: ``<sweep name>-<6 hex digits>``."""
    return f"{name}-{uuid.uuid4().hex[:6]}"


def undrawn_group(name: str) -> str:
    return f"{name}-{UNDRAWN}"


def save_state(out_dir: Path, state: SweepState) -> None:
    io.atomic_write_json(SweepFiles(out_dir).state, state.to_json(), indent=1, sort_keys=False)


def load_state(out_dir: Path) -> Optional[SweepState]:
    """The saved state of ``out_dir``, or ``None`` if no sweep ran there yet."""
    path = SweepFiles(out_dir).state
    if not path.exists():
        return None
    try:
        data = io.read_json(path)
        if not isinstance(data, dict):
            raise TypeError(f"it holds {type(data).__name__}, not a JSON object")
        if data.get("version") != VERSION:
            raise SweepError(f"{path} was written by another version of ablate (version {data.get('version')})")
        trials = data.get("trials", [])
        if not isinstance(trials, list) or not all(
            isinstance(t, dict) and isinstance(t.get("point"), dict) for t in trials
        ):
            raise TypeError("its trials are not a list of points")
        state = SweepState.from_json(data)
        bad = next((t.name for t in state.trials if not is_folder_name(t.name)), None)
        if bad is not None:
            raise ValueError(f"trial name {bad!r:.60} is not one folder name (ablate makes no other)")
        jobs = [t.job_id for t in state.trials if t.job_id is not None] + list(state.workers)
        bad = next((job for job in jobs if not re.fullmatch(r"\d+([_+]\d+)?", str(job))), None)
        if bad is not None:  # it goes into squeue's and scancel's argv: "--user=you" would cancel all your jobs
            raise ValueError(f"SLURM job id {bad!r:.60} is not a job id (digits, as sbatch gives)")
        return state
    except SweepError:
        raise
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:  # RecordError, JSONDecodeError, ...
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise SweepError(f"{path} is not a sweep state file ({reason}); move it away or use another --out") from None


class SweepLock:
    """An exclusive lock on ``DIR/.lock``: one launcher per sweep folder."""

    def __init__(self, out_dir: Path):
        self.path = SweepFiles(out_dir).lock
        self._lock = io.HolderLock(self.path, holder=str(os.getpid()))

    def __enter__(self) -> SweepLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:  # a file, a folder under one, a read-only or missing place
            why = f"{err.strerror or err}: {err.filename}" if err.filename else str(err)
            raise SweepError(
                f"cannot use {self.path.parent} as the sweep folder ({why}); choose another --out"
            ) from None
        try:
            self._lock.acquire()
        except io.LockHeld as held:
            raise SweepError(
                f"another launcher (pid {held.holder}) is running the sweep in {self.path.parent}; "
                f"wait for it or stop it first"
            ) from None
        except OSError as err:  # a link (a received folder's), no permission
            raise SweepError(
                f"cannot lock {self.path}: {err.strerror or err}; remove it or use another --out"
            ) from None
        return self

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()


def state_lock(out_dir: Path) -> io.HolderLock:
    """``with state_lock(DIR):`` one read-modify-write of ``DIR/sweep.json`` at a time, across machines (waits)."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    return io.HolderLock(Path(out_dir) / STATE_LOCK, wait=True)


def is_locked(out_dir: Path) -> bool:
    """Whether a launcher currently holds ``out_dir``."""
    return bool(io.is_held(SweepFiles(out_dir).lock))


# ---- The best trial, and a repeat seed's configurations ----


def best_trial(state: SweepState, goal: str) -> Optional[Trial]:
    """The finished (or stopped) trial with the best metric."""
    ended = (RunStatus.FINISHED, RunStatus.STOPPED)
    scored = [(t.metric, t) for t in state.trials if t.status in ended and t.metric is not None]
    return (max if goal == "maximize" else min)(scored, key=lambda s: s[0])[1] if scored else None


def configuration(point: Point) -> Point:
    """A point without its seed: what the search proposed, shared by its repeats."""
    return {k: v for k, v in point.items() if k != SEED}


def configuration_key(point: Point) -> str:
    """A stable text naming the configuration of ``point``."""
    return json.dumps(configuration(point), sort_keys=True, default=str)


def replicates(trials: Sequence[Trial]) -> dict[str, list[Trial]]:
    """Trials grouped by configuration (:func:`configuration_key`), in plan order."""
    groups: dict[str, list[Trial]] = {}
    for t in trials:
        groups.setdefault(configuration_key(t.point), []).append(t)
    return groups


def replicate_status(trials: Sequence[Trial]) -> RunStatus:
    """One status for a configuration's seeds: running until all are done, then finished, stopped or failed."""
    if any(not t.status.done for t in trials):
        return RunStatus.RUNNING
    ended = (s for s in (RunStatus.FINISHED, RunStatus.STOPPED) if any(t.status == s for t in trials))
    return next(ended, RunStatus.FAILED)


def replicate_metric(trials: Sequence[Trial]) -> Optional[float]:
    """The mean metric over a configuration's finished seeds (over its stopped ones when none finished)."""
    for status in (RunStatus.FINISHED, RunStatus.STOPPED):
        ended = [t.metric for t in trials if t.status == status and t.metric is not None and math.isfinite(t.metric)]
        if ended:
            return sum(ended) / len(ended)
    return None


def best_configuration(trials: Sequence[Trial], goal: str) -> Optional[tuple[float, list[Trial]]]:
    """The configuration whose seeds are all done with the best mean metric: ``(mean, its trials)``."""
    groups = replicates(trials).values()
    done = [
        (m, seeds) for seeds in groups if replicate_status(seeds).done and (m := replicate_metric(seeds)) is not None
    ]
    return (max if goal == "maximize" else min)(done, key=lambda pair: pair[0], default=None)


# ---- How an attempt ended ----


def clock(seconds: Optional[float]) -> str:
    """``3725`` -> ``1:02:05``; ``None`` -> ``?``."""
    if seconds is None:
        return "?"
    h, rest = divmod(round(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def score(value: Optional[float]) -> str:
    """A trial's metric as ``ablate table`` prints a score (two decimals, its columns' default): ``6.025e-07``
    -> ``0.00``, never scientific notation beside a table that says 0.00; ``None`` -> ``""``."""
    return "" if value is None else f"{value:.2f}"


STYLES = {
    RunStatus.FINISHED: "green",
    RunStatus.FAILED: "red",
    RunStatus.RUNNING: "cyan",
    RunStatus.INTERRUPTED: "yellow",
    RunStatus.STOPPED: "yellow",
}  # a status's colour (pending has none)


def ended_line(trial: Trial, metric: Optional[str], where: Optional[str], elapsed: float) -> str:
    """How an attempt ended, as a launcher prints it: ``finished seed=1 (job 7, 1:05) val/bleu=20.00``."""
    shown = f" {metric}={score(trial.metric)}" if trial.metric is not None and metric else ""
    detail = f": {trial.error}" if trial.status == RunStatus.FAILED else shown
    return f"{trial.status:<8} {trial.name} ({f'{where}, ' if where else ''}{clock(elapsed)}){detail}"


def read_summary(run_dir: Path, since: Optional[float] = None) -> Optional[RunSummary]:
    """The trainer's ``summary.json``, or ``None`` if absent, unreadable or older than ``since`` (an earlier attempt's)."""
    path = RunFiles(run_dir).summary
    try:
        if since is not None and path.stat().st_mtime < since:
            return None
    except OSError:
        return None
    return RunSummary.peek(path)


def log_tail(log_path: Path, start: int = 0, lines: int = 40) -> list[str]:
    """The last non-empty lines of a trial's log, from byte ``start`` (this attempt's output) on."""
    try:
        with open(log_path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(start, f.tell() - 16384))
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    return [line.rstrip() for line in text.splitlines() if line.strip()][-lines:]


def _error_line(tail: list[str]) -> Optional[str]:
    """The last line of a log that names an exception (``RuntimeError: ...``)."""
    for line in reversed(tail):
        head = line.split(":", 1)[0].strip()
        if head.endswith(("Error", "Exception", "Interrupt")) or head == "Killed":
            return line.strip()
    return None


def exit_reason(returncode: Optional[int]) -> str:
    """How a trainer process ended, in words: ``killed by SIGKILL (out of memory?)``, ``exit code 1``."""
    if returncode is None:
        return "the process disappeared"
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode).name
        except ValueError:  # a number no signal of this platform has
            sig = str(-returncode)
        return f"killed by {sig}" + (" (out of memory?)" if -returncode == signal.SIGKILL else "")
    return f"exit code {returncode}"


@dataclass(frozen=True)
class Outcome:
    """How a trial process ended: finished, interrupted or failed, with one line why, and the sweep's ``metric``."""

    status: RunStatus
    error: Optional[str] = None
    metric: Optional[float] = None
    summary: Optional[RunSummary] = None
    results = Trial.results


def outcome(
    run_dir: Path, returncode: Optional[int], metric: Optional[str], since: Optional[float] = None, log_start: int = 0
) -> Outcome:
    """How a trial process ended: ``finished`` (exit 0, ``summary.json`` says so, a finite metric), ``interrupted``
    (checkpointed on a signal), else ``failed`` with one line: the trainer's error, the last error line of its
    log, how the process died, or its last log line. ``since`` and ``log_start`` hide earlier attempts
    (but a finished record the trainer found and left, exiting 0)."""
    summary = read_summary(run_dir, since)
    if summary is None and returncode == 0 and (earlier := read_summary(run_dir)) is not None:
        summary = earlier if earlier.status == RunStatus.FINISHED else None  # the trainer found it finished, left it
    value = summary.get(metric) if summary is not None and metric else None
    value = float(value) if is_number(value) else None
    status, error = (summary.status, summary.error) if summary is not None else (None, None)
    if status == RunStatus.FINISHED and returncode == 0:
        if metric and value is None:  # a misspelled metric.name: each trial trained, then failed here
            close = closest(metric, [k for k, v in (summary.to_json() if summary else {}).items() if is_number(v)])
            fix = (
                f"; did you mean {close!r}?): fix metric.name in the sweep file and rerun with --retry-failed, which "
                "reads the trained runs without training them again"
            )
            return _failed(f"{SUMMARY_FILE} has no '{metric}' (the sweep's metric{fix if close else ')'}", summary)
        if value is not None and not math.isfinite(value):
            return _failed(f"{metric} is {value} (diverged?)", summary)
        return Outcome(RunStatus.FINISHED, None, value, summary)
    if status == RunStatus.INTERRUPTED:
        return Outcome(RunStatus.INTERRUPTED, error, None, summary)
    tail = log_tail(RunFiles(run_dir).log, log_start)
    reason = (error if status in (RunStatus.FAILED, RunStatus.TIMEOUT) else None) or _error_line(tail)
    if not reason and returncode is not None and returncode < 0:
        reason = exit_reason(returncode)
    if not reason:
        last = f"{tail[-1].strip()} " if tail else ""
        reason = f"{last}[{exit_reason(returncode)}]"
    return _failed(reason, summary)


def _failed(reason: str, summary: Optional[RunSummary]) -> Outcome:
    line = " ".join(str(reason).split())
    return Outcome(RunStatus.FAILED, line if len(line) <= 300 else line[:297] + "...", None, summary)


def record_timeout(run_dir: Path, reason: str) -> None:
    """Mark the trial's ``summary.json`` timed out with ``reason`` (what the trainer wrote otherwise kept)."""
    summary = RunSummary.peek(RunFiles(run_dir).summary) or RunSummary()
    summary.status, summary.error = RunStatus.TIMEOUT, reason
    summary.write(run_dir)


def reported_history(summary: Optional[RunSummary], metric: str) -> Optional[list[float]]:
    """The metric at every validation so far, when the trainer keeps a ``history`` list."""
    rows = summary.history if summary is not None else None
    if not isinstance(rows, list):
        return None
    values = [row.get(metric) for row in rows if isinstance(row, dict)]
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def live_metric(run_dir: Path, metric: Optional[str]) -> Optional[tuple[int, float]]:
    """``(step, value)`` of the metric a running trainer last wrote, for early termination."""
    summary = read_summary(run_dir)
    if summary is None or not metric or summary.status != RunStatus.RUNNING:
        return None
    value, step = summary.get(metric), summary.get("step")
    if isinstance(value, (int, float)) and isinstance(step, int) and math.isfinite(value):
        return step, float(value)
    return None
