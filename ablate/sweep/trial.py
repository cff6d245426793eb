"""One trial: its name, its command-line overrides, and reading back how it ended.

A trial is named by what varies in the sweep (``heads=4-seed=2``, or a variant's name and the
seed: ``A-heads1-seed=2``); the name is its folder, its W&B run name and, split, its W&B tags.
What happened is read from the trainer's ``summary.json`` (written atomically by the trainer);
when the process died before writing one, the reason is the last line of its log.
"""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ablate.record import LOG_FILE, SUMMARY_FILE, RunFiles, RunStatus, RunSummary, headline
from ablate.sweep.spec import VARIANT, SweepSpec, resolve, safe_name, to_overrides, variant_name
from ablate.utils.plugins import absolute

LOG = LOG_FILE


def _short_keys(keys: list[str]) -> dict[str, str]:
    """``model.attention.score`` -> ``score`` unless two varying keys would share a short name."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (s if last.count(s) == 1 else k) for k, s in zip(keys, last)}


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ",".join(_show(v) for v in value)
    return str(value)


def labels(spec: SweepSpec, point: dict[str, Any]) -> list[str]:
    """What distinguishes this point: ``["A-heads1", "seed=2"]`` (the variant by its name)."""
    varying = spec.varying
    short = _short_keys([k for k in varying if k != VARIANT])
    parts = []
    for key in varying:
        if key not in point:
            continue
        if key == VARIANT:
            parts.append(variant_name(point[key]))
        else:
            parts.append(f"{short[key]}={_show(point[key])}")
    return parts


def trial_name(spec: SweepSpec, point: dict[str, Any], taken: set[str]) -> str:
    """A unique, file-system-safe name for ``point`` (``-2``, ``-3`` appended on a clash)."""
    base = safe_name("-".join(labels(spec, point)) or "trial")
    name, i = base, 2
    while name in taken:
        name, i = f"{base}-{i}", i + 1
    return name


def trial_overrides(spec: SweepSpec, point: dict[str, Any], name: str, group: Optional[str] = None) -> list[str]:
    """The trainer's ``key=value`` arguments for ``point``: W&B naming, then the parameters.

    Tracking comes first so that a ``tracking.*`` parameter in the sweep file wins. ``group`` is
    the W&B group (default: the sweep's name). The ``plugins`` files a sweep file names are relative
    to its folder; the trial gets them absolute.
    """
    tracking = {"tracking.group": group or spec.name, "tracking.name": name, "tracking.tags": labels(spec, point)}
    if VARIANT in point:
        tracking["tracking.variant"] = variant_name(point[VARIANT])
    values = resolve(point)
    if "plugins" in values and spec.path is not None:  # the sweep file's plugin files, wherever the trial starts
        values["plugins"] = absolute(values["plugins"], spec.path.resolve().parent)
    return to_overrides(tracking) + to_overrides(values)


# --------------------------------------------------------------------------------------
# How a trial ended
# --------------------------------------------------------------------------------------


def read_summary(run_dir: Path, since: Optional[float] = None) -> Optional[RunSummary]:
    """The trainer's ``summary.json``, or ``None`` if absent, unreadable or older than ``since``.

    ``since`` (a ``time.time()``) ignores the summary a previous attempt left behind.
    """
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


def _exit_reason(returncode: Optional[int]) -> str:
    if returncode is None:
        return "the process disappeared"
    if returncode < 0:
        sig = signal.Signals(-returncode).name if -returncode in signal.Signals._value2member_map_ else -returncode
        hint = " (out of memory?)" if -returncode == signal.SIGKILL else ""
        return f"killed by {sig}{hint}"
    return f"exit code {returncode}"


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


@dataclass(frozen=True)
class Outcome:
    """How a trial process ended.

    Attributes:
        status: finished, interrupted or failed.
        error: one line saying why it failed or was interrupted.
        metric: the sweep's metric (finished only).
        summary: the trainer's summary of this attempt, None where it wrote none.
    """

    status: RunStatus
    error: Optional[str] = None
    metric: Optional[float] = None
    summary: Optional[RunSummary] = None

    @property
    def results(self) -> dict[str, Any]:
        """The summary's headline numbers (:func:`ablate.record.headline`), as ``sweep.json`` keeps them."""
        return headline(self.summary) if self.summary is not None else {}


def outcome(
    run_dir: Path, returncode: Optional[int], metric: Optional[str], since: Optional[float] = None, log_start: int = 0
) -> Outcome:
    """How a trial process ended (:class:`Outcome`).

    ``finished`` needs exit code 0 and ``summary.json`` saying so with a finite metric;
    ``interrupted`` (the trainer saved a checkpoint and stopped on a signal) is resumed by a
    rerun; anything else is ``failed`` with a one-line reason: the trainer's ``error``, else the
    last error line of its log, else how the process died, else its last log line.
    ``since`` and ``log_start`` (time and log size at launch) hide what earlier attempts left.
    """
    summary = read_summary(run_dir, since)
    value = summary.get(metric) if summary is not None and metric else None
    value = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    status = summary.status if summary is not None else None
    error = summary.error if summary is not None else None
    if status == RunStatus.FINISHED and returncode == 0:
        if metric and value is None:
            return _failed(f"{SUMMARY_FILE} has no '{metric}' (the sweep's metric)", summary)
        if value is not None and not math.isfinite(value):
            return _failed(f"{metric} is {value} (diverged?)", summary)
        return Outcome(RunStatus.FINISHED, None, value, summary)
    if status == RunStatus.INTERRUPTED:
        return Outcome(RunStatus.INTERRUPTED, error, None, summary)
    tail = log_tail(RunFiles(run_dir).log, log_start)
    reason = (error if status in (RunStatus.FAILED, RunStatus.TIMEOUT) else None) or _error_line(tail)
    if not reason and returncode is not None and returncode < 0:
        reason = _exit_reason(returncode)
    if not reason:
        last = f"{tail[-1].strip()} " if tail else ""
        reason = f"{last}[{_exit_reason(returncode)}]"
    return _failed(reason, summary)


def _failed(reason: str, summary: Optional[RunSummary]) -> Outcome:
    return Outcome(RunStatus.FAILED, _one_line(reason), None, summary)


# --------------------------------------------------------------------------------------
# How long a trial may run
# --------------------------------------------------------------------------------------

ASSUMED_STEP_S = 2.0
"""Seconds per optimizer step assumed for the default time limit: the shipped CPU runs take 1.1-1.4 s a
step including validation and test decoding (``results/calibration-cpu``: 350 steps in 400-480 s); a GPU
is faster."""
TIME_FACTOR = 4.0
"""How many times the assumed budget a trial may take before the default limit stops it."""
ALLOWANCE_S = 1800.0
"""Seconds on top of the budget: start-up, building data caches, the test set's decoding."""


def time_limit(max_steps: int, max_time: Optional[float], flag: Optional[float] = None) -> Optional[float]:
    """Seconds a trial may run before the sweep stops it (``--trial-timeout``), ``None`` for no limit.

    ``flag`` (``--trial-timeout``) wins: ``0`` disables the limit. Without it the limit comes from the
    trial's budget: :data:`ALLOWANCE_S` plus :data:`TIME_FACTOR` times the budget, ``train.max_time``
    where set, else ``train.max_steps`` times :data:`ASSUMED_STEP_S` (1,500 steps: 13,800 s). A
    budget in epochs only has no default limit (its length depends on the data).
    """
    if flag is not None:
        return float(flag) if flag > 0 else None
    if max_time is not None and max_time > 0:
        return ALLOWANCE_S + TIME_FACTOR * float(max_time)
    if max_steps > 0:
        return ALLOWANCE_S + TIME_FACTOR * ASSUMED_STEP_S * max_steps
    return None


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
