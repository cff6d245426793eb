"""The table's metric for every trial: from its summary, else from its saved hypotheses.

``ablate table --metric chrf`` reads ``test_<split>/chrf`` where a run recorded it; a run shipped
before it recorded that metric (chrF++, TER, a plugin's) still has its hypotheses, references and
sources, and :func:`with_metric` scores them, so old results folders get a whole table without
retraining. :func:`statistics` keeps each trial's per-sentence statistics for the table's
significance test, so a text is scored once per table.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Optional, Sequence

from ablate.metrics import (
    MetricScorer,
    get_scorer,
    metric_key,
    statistics,  # noqa: F401 - re-exported
)
from ablate.metrics.scorers import Bleu
from ablate.record import TEST_BLEU
from ablate.report.records import ReportError, Trial
from ablate.report.validation import VALIDATION_SPLITS

DEFAULT_METRIC = "bleu"


def bleu_tokenizer(trials: Sequence[Trial]) -> Optional[str]:
    """The ``tok:`` field of the runs' sacreBLEU signature, so the test scores BLEU as they did."""
    for t in trials:
        for part in (t.signature or "").split("|"):
            if part.startswith("tok:"):
                return part[len("tok:") :]
    return None


def scorer_for(metric: str, trials: Sequence[Trial]) -> MetricScorer:
    """The scorer of ``metric`` (BLEU with the runs' tokenizer).

    Raises:
        MetricError: an unknown metric, naming the choices.
    """
    if metric == "bleu":
        return Bleu(bleu_tokenizer(trials))
    return get_scorer(metric)


def corpus_score(scorer: MetricScorer, hyps: Sequence[str], refs: Sequence[str], sources: Optional[Sequence[str]]):
    """The corpus score from the per-sentence statistics (sacreBLEU's corpus score, exactly)."""
    return float(scorer.from_statistics(statistics(scorer, hyps, refs, sources).sum(0)))


def signature_of(metric: str, trials: Sequence[Trial]) -> list[str]:
    """The signatures the runs recorded for ``metric``, else the scorer's (what scored their hypotheses)."""
    found = sorted({t.signatures[metric] for t in trials if metric in t.signatures})
    return found or [scorer_for(metric, trials).signature()]


def first_split(metrics: Mapping[str, Any]) -> Optional[str]:
    """The test split a summary's plain ``test/bleu`` belongs to (the first test split), if it can be told."""
    plain = metrics.get(TEST_BLEU.key)
    tests = [k[len("test_") : -len("/bleu")] for k in metrics if k.startswith("test_") and k.endswith("/bleu")]
    same = [s for s in tests if metrics[f"test_{s}/bleu"] == plain]
    return same[0] if len(same) == 1 else (tests[0] if len(tests) == 1 else None)


def split_key(metric: str, split: str) -> str:
    """The summary key of ``metric`` on a saved split: ``val/<metric>`` for the validation split."""
    return metric_key(metric, prefix="val") if split in VALIDATION_SPLITS else metric_key(metric, split)


def scored(
    scorer: MetricScorer,
    texts: Mapping[str, Mapping[str, Sequence[str]]],
    recorded: Mapping[str, Any],
) -> dict[str, float]:
    """``metric`` per saved split of a run that ``recorded`` lacks: ``test_<split>/<name>``, ``val/<name>``
    and ``test/<name>`` (the first test split's).

    Args:
        texts: ``{"hyps": {split: lines}, "refs": ..., "sources": ...}``, as the run saved them.
        recorded: the run's summary (or its metrics).
    """
    found: dict[str, float] = {}
    for split, hyps in texts.get("hyps", {}).items():
        refs = texts.get("refs", {}).get(split)
        key = split_key(scorer.name, split)
        if key in recorded or refs is None or len(refs) != len(hyps) or not refs:
            continue
        sources = texts.get("sources", {}).get(split)
        found[key] = corpus_score(scorer, hyps, refs, sources if sources and len(sources) == len(refs) else None)
    first, plain = first_split(recorded), metric_key(scorer.name)
    if first and plain not in recorded and metric_key(scorer.name, first) in found:
        found[plain] = found[metric_key(scorer.name, first)]
    return found


def with_metric(trials: Sequence[Trial], metric: str) -> list[Trial]:
    """Every trial, each finished one with ``test_<split>/<metric>``, ``test/<metric>`` and
    ``val/<metric>`` scored from its saved texts where its summary lacks them.

    Raises:
        MetricError: ``metric`` is not registered.
        ReportError: no trial records the metric or saved hypotheses to score it on.
    """
    scorer = scorer_for(metric, trials)
    if metric == DEFAULT_METRIC:
        return list(trials)
    out = []
    for t in trials:
        if not t.finished:
            out.append(t)
            continue
        found = scored(scorer, {"hyps": t.hyps, "refs": t.refs, "sources": t.sources}, t.metrics)
        out.append(replace(t, metrics={**t.metrics, **found}) if found else t)
    if not any(k.endswith("/" + metric) and k.startswith("test") for t in out if t.finished for k in t.metrics):
        raise ReportError(
            f"no finished trial records {metric} (test_<split>/{metric}) or saved hypotheses to score it on; "
            "choose another --metric, or rerun with texts saved"
        )
    return out
