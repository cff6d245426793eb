"""Significance of each row's test BLEU against the base row (sacreBLEU paired tests).

Koehn (2004), "Statistical Significance Tests for Machine Translation Evaluation": paired
bootstrap resampling (``bs``, the default) or approximate randomisation (``ar``, Riezler &
Maxwell 2005), both as implemented by ``sacrebleu.significance.PairedTest``.

Pooling over seeds. Seeds are paired by seed value (seed s of the row against seed s of the
base; if the two rows share no seed value, by rank of their sorted seeds), and the paired
systems' hypotheses are concatenated, seed after seed, against the references repeated once
per pair. The test therefore compares the two configurations' pooled, seed-averaged output
on the same sentences; each resample draws sentences from every seed pair. Its p-value
reflects test-set sampling variation; variation across seeds is reported separately by the
± std column. A zero BLEU difference (e.g. identical systems) gives p = 1.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Optional, Sequence

from ablate.report.aggregate import Row, Sweep, value_order
from ablate.report.records import ReportError, Trial

TESTS = {"bs": "paired bootstrap resampling", "ar": "paired approximate randomization"}


@dataclass(frozen=True)
class Comparison:
    """One row against the base on one test split.

    Attributes:
        p_value: two-sided p-value of the BLEU difference.
        base_bleu: corpus BLEU of the base's pooled hypotheses.
        bleu: corpus BLEU of the row's pooled hypotheses.
        pairs: seed pairs pooled.
    """

    p_value: float
    base_bleu: float
    bleu: float
    pairs: int


def paired_test(base: Sequence[str], system: Sequence[str], refs: Sequence[str], test: str = "bs",
                n_samples: int = 0, tokenize: Optional[str] = None) -> tuple[float, float, float]:
    """sacreBLEU's paired test of ``system`` against ``base`` on the same references.

    Args:
        base: baseline hypotheses, one per reference.
        system: compared hypotheses, aligned with ``base``.
        refs: references.
        test: ``bs`` (paired bootstrap resampling) or ``ar`` (approximate randomization).
        n_samples: resamples/trials; 0 keeps sacreBLEU's defaults (1000 for bs, 10000 for ar).
        tokenize: sacreBLEU tokenizer (default ``13a``).

    Returns:
        ``(p_value, base_bleu, system_bleu)``. The RNG is seeded (``SACREBLEU_SEED``, 12345).
    """
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    if test not in TESTS:
        raise ReportError(f"unknown significance test '{test}' (choose from: {', '.join(TESTS)})")
    if not (len(base) == len(system) == len(refs)) or not refs:
        raise ReportError(f"hypotheses and references differ in length ({len(base)}, {len(system)}, {len(refs)})")
    try:
        metric = BLEU(tokenize=tokenize) if tokenize else BLEU()
    except Exception:  # noqa: BLE001 - an unknown tokenizer name in an old signature
        metric = BLEU()
    paired = PairedTest([("base", list(base)), ("system", list(system))], {"BLEU": metric}, [list(refs)],
                        test_type=test, n_samples=n_samples)
    with _quiet_sacrebleu():
        _, scores = paired()
    base_result, sys_result = scores["BLEU"]
    base_bleu, bleu = float(base_result.score), float(sys_result.score)
    # sacreBLEU counts resampled differences strictly above the observed one, so a system
    # tested against itself gets p = 1/(n+1); a zero observed difference is never significant.
    p = 1.0 if bleu == base_bleu else float(sys_result.p_value)
    return p, base_bleu, bleu


@contextlib.contextmanager
def _quiet_sacrebleu():
    """Silence sacreBLEU's per-call warnings (e.g. about tokenized periods) during the test."""
    logger = logging.getLogger("sacrebleu")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def pair_seeds(base: Sequence[Trial], row: Sequence[Trial]) -> list[tuple[Trial, Trial]]:
    """Seed pairs: equal seed values if any are shared, else by rank of sorted seeds."""
    by_seed = {t.seed: t for t in base}
    shared = [(by_seed[t.seed], t) for t in row if t.seed in by_seed]
    if shared:
        return sorted(shared, key=lambda p: value_order(p[0].seed))
    order = lambda ts: sorted(ts, key=lambda t: (value_order(t.seed), t.name))  # noqa: E731
    return list(zip(order(base), order(row)))


def compare_row(base: Row, row: Row, split: str, test: str = "bs", n_samples: int = 0) -> Optional[Comparison]:
    """The pooled test of ``row`` against ``base`` on ``split``; None without usable hypotheses."""
    usable = lambda t: split in t.hyps and split in t.refs and len(t.hyps[split]) == len(t.refs[split])  # noqa: E731
    pairs = [(b, r) for b, r in pair_seeds([t for t in base.trials if usable(t)], [t for t in row.trials if usable(t)])
             if b.refs[split] == r.refs[split]]
    if not pairs:
        return None
    base_hyps = [h for b, _ in pairs for h in b.hyps[split]]
    row_hyps = [h for _, r in pairs for h in r.hyps[split]]
    refs = [ref for b, _ in pairs for ref in b.refs[split]]
    p, base_bleu, bleu = paired_test(base_hyps, row_hyps, refs, test, n_samples, _tokenizer(base.trials))
    return Comparison(p, base_bleu, bleu, len(pairs))


def compare(sweep: Sweep, test: str = "bs", n_samples: int = 0) -> dict[tuple[str, str], Comparison]:
    """Every non-base row against the base on every test split with saved hypotheses.

    Returns:
        ``{(row name, split): Comparison}``; pairs without hypotheses are absent.
    """
    splits = sorted({s for r in sweep.rows for t in r.trials for s in t.hyps})
    out = {}
    for row in sweep.rows[1:]:
        for split in splits:
            result = compare_row(sweep.base, row, split, test, n_samples)
            if result is not None:
                out[(row.name, split)] = result
    return out


def _tokenizer(trials: Sequence[Trial]) -> Optional[str]:
    """The ``tok:`` field of the runs' sacreBLEU signature, so the test scores BLEU as they did."""
    for t in trials:
        for part in (t.signature or "").split("|"):
            if part.startswith("tok:"):
                return part[len("tok:"):]
    return None
