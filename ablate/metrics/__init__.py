"""Translation metrics that training and the report share: one :class:`MetricScorer` per metric.

``METRIC_SCORERS`` is the registry (``bleu``, ``chrf``, ``chrf++``, ``ter``; plugins add more with
:func:`register_metric`). A scorer gives a corpus score, per-sentence scores and per-sentence
sufficient statistics whose sum gives the corpus score back exactly (what the report resamples
for its significance test). Lightning-free and report-free: layer 3, beside ``data`` and ``model``.
"""

from __future__ import annotations

from ablate.metrics.registry import METRIC_SCORERS, MetricError, get_scorer, metric_key, register_metric
from ablate.metrics.scorer import MetricScorer, SentenceMetric

__all__ = [
    "METRIC_SCORERS",
    "MetricError",
    "MetricScorer",
    "SentenceMetric",
    "get_scorer",
    "metric_key",
    "register_metric",
]
