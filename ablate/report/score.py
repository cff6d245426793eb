"""``ablate score``: add a metric to finished runs from their saved texts, without retraining.

A run folder keeps its hypotheses, references and sources (``hyps/``, ``refs/``, ``sources/``,
plain or gzip'd as ``ablate export`` ships them), so any registered metric (chrF++, TER, a
plugin's COMET) can be scored long after training: :func:`score_runs` writes ``test_<split>/<name>``,
``test/<name>``, ``val/<name>`` and ``<name>_signature`` into each run's ``summary.json``
atomically. What a summary already records is kept, so a second run of the same command changes
nothing. A run still training (its lock held) or not finished is left alone and said so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ablate.metrics.registry import signature_key
from ablate.record import SUMMARY_FILE, RecordError, RunFiles, RunStatus, RunSummary
from ablate.report.metric_values import scored, scorer_for
from ablate.report.records import ReportError, Trial
from ablate.report.saved_texts import TextError, read_texts

TEXTS = ("hyps", "refs", "sources")


@dataclass(frozen=True)
class Scored:
    """What :func:`score_runs` did to one run: the values it added, or why it left the run alone."""

    run: str
    added: dict[str, float] = field(default_factory=dict)
    skipped: str = ""

    def __str__(self) -> str:
        if self.skipped:
            return f"{self.run}: left alone ({self.skipped})"
        if not self.added:
            return f"{self.run}: already scored"
        return f"{self.run}: " + ", ".join(f"{k} {v:.2f}" for k, v in self.added.items())


def run_folders(path: Path) -> list[Path]:
    """``path`` itself when it is a run folder (it holds ``summary.json``), else its subfolders that are.

    Raises:
        ReportError: ``path`` is neither.
    """
    if (path / SUMMARY_FILE).is_file():
        return [path]
    runs = sorted(p for p in path.iterdir() if (p / SUMMARY_FILE).is_file()) if path.is_dir() else []
    if not runs:
        raise ReportError(
            f"{path} is not a run or sweep folder (no {SUMMARY_FILE} in it or its subfolders); "
            "pass a run folder (ablate train --run-dir) or a sweep or results folder"
        )
    return runs


def score_run(run_dir: Path, metric: str) -> Scored:
    """Add ``metric`` to one run's summary (see the module); the summary is rewritten only when a value is new."""
    from ablate.training.run_folder import is_held

    name = run_dir.name
    try:
        record = RunSummary.read(RunFiles(run_dir).summary)  # type-checked: unreadable or ill-typed says why
    except RecordError as err:
        return Scored(name, skipped=str(err))
    summary = record.to_json()
    if summary.get("status") != RunStatus.FINISHED or is_held(run_dir):
        return Scored(name, skipped="still training" if is_held(run_dir) else f"status {summary.get('status')}")
    try:
        texts = {kind: read_texts(run_dir / kind) for kind in TEXTS}
    except TextError as err:
        return Scored(name, skipped=str(err))
    if not texts["hyps"]:
        return Scored(name, skipped="no saved hypotheses (hyps/)")
    scorer = scorer_for(metric, [Trial(name, RunStatus.FINISHED, signature=summary.get("bleu_signature"))])
    added: dict[str, float] = scored(scorer, texts, summary)
    if not added:
        return Scored(name)
    signature = {signature_key(metric): scorer.signature()} if signature_key(metric) not in summary else {}
    record.update({**added, **signature})
    record.write(RunFiles(run_dir).summary)
    return Scored(name, added)


def score_runs(path: Path, metric: str) -> list[Scored]:
    """Add ``metric`` to the run at ``path``, or to every run of the sweep or results folder ``path``.

    Raises:
        MetricError: ``metric`` is not registered.
        ReportError: ``path`` holds no run.
    """
    scorer_for(metric, [])  # an unknown metric fails before any run is read
    return [score_run(run, metric) for run in run_folders(Path(path))]
