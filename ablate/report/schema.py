"""What a trial's ``summary.json`` (or a W&B run's summary) must hold for a table to believe it.

The one place that states the types of the run record as the report reads it: a record that
breaks them is not a table row but one line under the table, ``<field> is <problem>``, never a
traceback further down (a string where a number was expected, a history of bare numbers, a BLEU of
``Infinity``). :func:`summary_problem` checks a record; :func:`metric_problem` one number;
:func:`planned_trials` reads the trials a launcher's ``sweep.json`` plans.
"""

from __future__ import annotations

import math
from typing import Any, Optional

STATUSES = ("finished", "failed", "interrupted", "running")
"""The statuses a run record may have (``ablate.training.tracking.RunRecord``)."""
TEXT_FIELDS = ("error", "bleu_signature", "accelerator")
MAPPING_FIELDS = ("config", "resolved")
LIMIT = 1e15
"""No count or rate a run records comes near this; a larger value (``1e308``) is damage, and its mean overflows."""
BOUNDED = {
    "/bleu": (0.0, 100.0),
    "/chrf": (0.0, 100.0),
    "/chrf++": (0.0, 100.0),
    "/ter": (0.0, math.inf),
    "/ppl": (1.0, math.inf),
}
"""Ranges of the scores by key suffix; every other metric must be finite and within :data:`LIMIT`."""
NUMERIC = ("params", "step", "epoch", "wall_time_s", "cpu_time_s")
"""Summary keys without a ``/`` that are numbers when present."""


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def metric_problem(key: str, value: Any) -> Optional[str]:
    """Why ``value`` cannot be the metric ``key`` (not a number, not finite, out of range), or None."""
    if isinstance(value, dict):  # W&B's define_metric(summary="max") summaries: {"max": x}
        value = next((value[k] for k in ("max", "min", "best", "last", "mean") if k in value), None)
        if value is None:
            return None
    if not is_number(value):
        return f"{key} is {_shown(value)}, not a number"
    if not math.isfinite(value):
        return f"{key} is {value}, not a finite number"
    low, high = next((r for suffix, r in BOUNDED.items() if key.endswith(suffix)), (-LIMIT, LIMIT))
    if not low <= value <= high:
        return f"{key} is {value:g}, outside [{low:g}, {high:g}]"
    return None


def is_metric_key(key: str) -> bool:
    """Whether a summary key names a metric (``val/bleu``, ``train/tokens``, ``params``)."""
    return "/" in key or key in NUMERIC


def summary_problem(summary: Any) -> Optional[str]:
    """The first way ``summary`` breaks the run record's types, as ``<field> is <problem>``; None if sound."""
    if not isinstance(summary, dict):
        return f"summary.json is a {_kind(summary)}, not a JSON object"
    status = summary.get("status")
    if status is not None and status not in STATUSES:
        return f"status is {_shown(status)}, not one of {', '.join(STATUSES)}"
    for key in TEXT_FIELDS:
        if summary.get(key) is not None and not isinstance(summary[key], str):
            return f"{key} is a {_kind(summary[key])}, not text"
    for key in MAPPING_FIELDS:
        if summary.get(key) is not None and not isinstance(summary[key], dict):
            return f"{key} is a {_kind(summary[key])}, not a mapping"
    variant = summary.get("variant")
    if variant is not None and not isinstance(variant, (str, dict)):
        return f"variant is a {_kind(variant)}, not a name"
    sweep = summary.get("sweep")
    if sweep is not None:
        if not isinstance(sweep, dict):
            return f"sweep is a {_kind(sweep)}, not a mapping"
        if sweep.get("name") is not None and not isinstance(sweep["name"], str):
            return f"sweep.name is a {_kind(sweep['name'])}, not text"
        if sweep.get("params") is not None and not isinstance(sweep["params"], dict):
            return f"sweep.params is a {_kind(sweep['params'])}, not a mapping"
    for key, value in summary.items():
        if not is_metric_key(key):
            continue
        if value is None and status == "finished" and key.endswith("/bleu"):  # NaN is written as null
            return f"{key} is null (not a number when it was written: NaN?)"
        if value is not None and (problem := metric_problem(key, value)):
            return problem
    return history_problem(summary.get("history"))


def planned_trials(state: Any) -> tuple[list[dict[str, Any]], Optional[str]]:
    """The trials a launcher's ``sweep.json`` plans, each ``{name, status, error, point}``, and the first
    way its ``trials`` break that shape (then none are taken). A file without ``trials`` plans nothing."""
    if not isinstance(state, dict) or state.get("trials") is None:
        return [], None
    trials = state["trials"]
    if not isinstance(trials, list):
        return [], f"trials is a {_kind(trials)}, not a list"
    out = []
    for i, t in enumerate(trials):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not t["name"]:
            return [], f"trials[{i}] is not a record with a name"
        if not isinstance(t.get("point", {}), dict):
            return [], f"trials[{i}].point is a {_kind(t['point'])}, not a mapping"
        if not isinstance(t.get("status", "pending"), str):
            return [], f"trials[{i}].status is a {_kind(t['status'])}, not text"
        error = t.get("error")
        out.append(
            {
                "name": t["name"],
                "status": t.get("status", "pending"),
                "error": error if isinstance(error, str) else None,
                "point": t.get("point", {}),
            }
        )
    return out, None


def history_problem(history: Any) -> Optional[str]:
    """Why ``history`` is not a list of validation records ``{step: number >= 0, metric: number}``, or None."""
    if history is None:
        return None
    if not isinstance(history, list):
        return f"history is a {_kind(history)}, not a list of validation records"
    for i, entry in enumerate(history):
        if not isinstance(entry, dict):
            return f"history[{i}] is {_shown(entry)}, not a record {{step: ..., val/bleu: ...}}"
        step = entry.get("step")
        if step is not None and (not is_number(step) or not math.isfinite(step) or step < 0):
            return f"history[{i}].step is {_shown(step)}, not a step number"
        for key, value in entry.items():
            if key != "step" and value is not None and (problem := metric_problem(key, value)):
                return f"history[{i}].{problem}"
    return None
