"""What a trial's ``summary.json`` (or a W&B run's summary) must hold for a table to believe it.

The checks live with the record they check, in :mod:`ablate.record` (its readers run them); this
module keeps the report's names for them. A record that breaks them is not a table row but one
line under the table, ``<field> is <problem>``, never a traceback further down.
"""

from __future__ import annotations

from ablate.record import (
    BOUNDED,
    LIMIT,
    MAPPING_FIELDS,
    NUMERIC,
    SUMMARY_STATUSES,
    TEXT_FIELDS,
    history_problem,
    is_metric_key,
    is_number,
    metric_problem,
    planned_trials,
    summary_problem,
)

STATUSES = SUMMARY_STATUSES
"""The statuses a run record may have."""

__all__ = [
    "BOUNDED",
    "LIMIT",
    "MAPPING_FIELDS",
    "NUMERIC",
    "STATUSES",
    "TEXT_FIELDS",
    "history_problem",
    "is_metric_key",
    "is_number",
    "metric_problem",
    "planned_trials",
    "summary_problem",
]
