"""The registry of metrics: ``METRIC_SCORERS``, name -> a zero-argument factory of a :class:`MetricScorer`.

Ours are sacreBLEU's BLEU, chrF, chrF++ and TER; a plugin adds one with :func:`register_metric` or
``@ablate.register("metric", name)`` (the same registry; a name already taken is refused). A run's summary keeps metric ``NAME`` of test split ``S`` as
``test_S/NAME`` (the first test split also as ``test/NAME``, the validation as ``val/NAME``) and its
signature as ``NAME_signature`` (:func:`metric_key`).
"""

from __future__ import annotations

from typing import Callable

from ablate.errors import AblateError, did_you_mean
from ablate.metrics.bleu import Bleu
from ablate.metrics.chrf import Chrf, ChrfPlusPlus
from ablate.metrics.scorer import MetricScorer
from ablate.metrics.ter import Ter
from ablate.registry import register, table


class MetricError(AblateError):
    """An unknown metric name, or a plugin that clashes with a registered one."""


METRIC_SCORERS: dict[str, Callable[[], MetricScorer]] = table("metric")
"""Name -> scorer factory, filled by ``ablate.register("metric", name)`` (:func:`register_metric`)."""
for _name, _factory in (("bleu", Bleu), ("chrf", Chrf), ("chrf++", ChrfPlusPlus), ("ter", Ter)):
    register("metric", _name)(_factory)
TEST_METRICS = ("bleu", "chrf", "chrf++", "ter")
"""What every training scores on every test split."""


def register_metric(name: str, factory: Callable[[], MetricScorer]) -> None:
    """Add a metric under ``name`` (``factory()`` builds its scorer; a class will do).

    Raises:
        MetricError: ``name`` is taken, or is not a plain lower-case name.
    """
    if not name or name != name.strip().lower() or "/" in name or " " in name:
        raise MetricError(f"metric name '{name}' must be lower-case without '/' or spaces, e.g. 'comet'")
    if name in METRIC_SCORERS:
        raise MetricError(f"metric '{name}' is already registered; register the plugin under another name")
    register("metric", name)(factory)


def get_scorer(name: str) -> MetricScorer:
    """The scorer of metric ``name``.

    Raises:
        MetricError: no metric of that name, with the choices and the nearest one.
    """
    if name not in METRIC_SCORERS:
        raise MetricError(
            f"unknown metric '{name}' (choose from: {', '.join(METRIC_SCORERS)}){did_you_mean(name, METRIC_SCORERS)}"
        )
    scorer = METRIC_SCORERS[name]()
    if scorer.name != name:
        raise MetricError(f"the metric registered as '{name}' calls itself '{scorer.name}'; register it as that")
    return scorer


def metric_key(name: str, split: str | None = None, prefix: str = "test") -> str:
    """The summary key of metric ``name``: ``test_<split>/<name>``, or ``<prefix>/<name>`` without a split."""
    return f"{prefix}_{split}/{name}" if split else f"{prefix}/{name}"


def signature_key(name: str) -> str:
    """The summary key of metric ``name``'s signature (``bleu_signature``, ``ter_signature``)."""
    return f"{name}_signature"
