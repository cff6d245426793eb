"""One check of a table's trials before any cell is computed, so a cell and its † mean the same runs.

A table believes a trial only if

* its metrics are finite and in range (:func:`ablate.record.metric_problem`);
* on every tested split where any trial saved hypotheses, it saved them too, as many as its
  references, and its references are the table's (so the † test can use it: a seed the test could
  not use is not counted in the cell either);
* it is not a second run of a seed its row already has (one seed trained twice is not a replicate);
* its row's other trials share its config, seed and bookkeeping keys aside (else the table refuses:
  two configurations under one name would be averaged).

A trial that fails a check is kept as :data:`EXCLUDED` with the reason, and listed under the table.
:func:`cell_disagreements` then recomputes each trial's test BLEU from the hypotheses the test uses
and names every summary that disagrees with them.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace
from typing import Any, Optional, Sequence

from ablate.record import TEST_BLEU, metric_problem
from ablate.report.records import ReportError, Trial
from ablate.utils.commands import Progress

log = logging.getLogger(__name__)

EXCLUDED = "excluded"
VALIDATION_SPLITS = ("val", "valid", "dev", "validation")
TOLERANCE = 0.01
"""BLEU points by which a summary may differ from its hypotheses' BLEU (rounding), no more."""


def exclude(trial: Trial, reason: str) -> Trial:
    return replace(trial, status=EXCLUDED, error=reason)


def tested_splits(trials: Sequence[Trial]) -> list[str]:
    """Splits whose hypotheses the significance test compares: those with a ``test_<split>/bleu``
    metric where any trial reports one, else every split with hypotheses but the validation's."""
    have = {s for t in trials for s in t.hyps}
    known = {s for t in trials for m in t.metrics if (s := TEST_BLEU.split_of(m)) is not None}
    return sorted(have & known) if known else sorted(have - set(VALIDATION_SPLITS))


def check_trials(trials: Sequence[Trial]) -> list[Trial]:
    """Every trial, the finished ones that a table cannot use turned :data:`EXCLUDED` (see the module)."""
    out = [_metrics_checked(t) if t.finished else t for t in trials]
    for split in tested_splits([t for t in out if t.finished]):
        out = _texts_checked(out, split)
    return out


def _metrics_checked(trial: Trial) -> Trial:
    for key, value in trial.metrics.items():
        if problem := metric_problem(key, value):
            return exclude(trial, problem)
    return trial


def _texts_checked(trials: list[Trial], split: str) -> list[Trial]:
    """Finished trials without usable hypotheses on ``split`` excluded, when any trial has them."""
    out = []
    for t in trials:
        if t.finished and (problem := _text_problem(t, split)):
            t = exclude(t, problem)
        out.append(t)
    usable = [t for t in out if t.finished]
    if not usable:
        return out
    common = Counter(tuple(t.refs[split]) for t in usable).most_common(1)[0][0]
    return [
        exclude(t, f"refs/{split} differ from the other trials' references")
        if t.finished and tuple(t.refs[split]) != common
        else t
        for t in out
    ]


def _text_problem(trial: Trial, split: str) -> Optional[str]:
    if split not in trial.hyps:
        return f"no hyps/{split} while other trials have them, so the significance test cannot use it"
    if split not in trial.refs:
        return f"no refs/{split} beside its hypotheses"
    n, m = len(trial.hyps[split]), len(trial.refs[split])
    return f"hyps/{split} has {n} lines, refs/{split} {m}" if n != m else None


def distinct_seeds(row: str, trials: Sequence[Trial]) -> tuple[list[Trial], list[Trial]]:
    """A row's trials with each seed once (the first by name), and the repeats, excluded."""
    kept: dict[Any, Trial] = {}
    repeats = []
    for t in sorted(trials, key=lambda t: t.name):
        if t.seed is not None and t.seed in kept:
            repeats.append(
                exclude(
                    t, f"seed {t.seed} again in row {row} (as {kept[t.seed].name}): one seed twice is not a replicate"
                )
            )
        else:
            kept[t.seed] = t
    return list(kept.values()), repeats


def check_one_config(row: str, trials: Sequence[Trial]) -> None:
    """Every trial of ``row`` has one config but for the seed (keys only one records are not compared).

    Raises:
        ReportError: two trials differ, naming them and the first key (e.g. a variant that sets
            ``tracking.variant`` to another row's name).
    """
    first = trials[0]
    for t in trials[1:]:
        for key in sorted(set(first.config) & set(t.config) - {"seed"}):
            if first.config[key] != t.config[key]:
                raise ReportError(
                    f"row {row} mixes two configs: {first.name} has {key}={first.config[key]!r}, {t.name} "
                    f"{key}={t.config[key]!r}; a row's trials must differ only in the seed (do two variants share a name?)"
                )


def cell_disagreements(rows: Sequence[tuple[str, Sequence[Trial]]]) -> list[str]:
    """``trial: test_<split>/bleu x in its summary, y from its hypotheses`` for each trial whose
    summary's test BLEU is not the corpus BLEU of the hypotheses the test reads (sacreBLEU, the
    run's tokenizer)."""
    trials = [t for _, ts in rows for t in ts]
    splits = tested_splits(trials)
    found = []
    progress = Progress("scoring saved hypotheses, trial", len(trials), log)
    for t in trials:
        progress.step()
        for split in splits:
            key = (
                TEST_BLEU.split_key(split)
                if TEST_BLEU.split_key(split) in t.metrics
                else TEST_BLEU.key
                if len(splits) == 1
                else None
            )
            if key not in t.metrics or split not in t.hyps:
                continue
            again = corpus_bleu(t.hyps[split], t.refs[split], t.signature)
            if abs(again - t.metrics[key]) > TOLERANCE:
                found.append(f"{t.name}: {key} {t.metrics[key]:.2f} in its summary, {again:.2f} from hyps/{split}")
    return found


def corpus_bleu(hyps: list[str], refs: list[str], signature: Optional[str]) -> float:
    """sacreBLEU corpus BLEU as the run scored it (the tokenizer its signature names), from the
    per-sentence statistics the table's cells and test read too (computed once)."""
    from ablate.metrics import statistics
    from ablate.metrics.scorers import Bleu

    tok = next((p[len("tok:") :] for p in (signature or "").split("|") if p.startswith("tok:")), None)
    scorer = Bleu(tok)
    return float(scorer.from_statistics(statistics(scorer, hyps, refs).sum(0)))
