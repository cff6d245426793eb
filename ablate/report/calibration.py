"""How often does the table's test call one configuration "different" from itself?

Two checks on real runs, both ``ablate calibrate SOURCE``:

* **k-vs-k seed splits** (a row with many seeds, e.g. ``sweeps/calibration-cpu.yaml``'s 16): draw
  random disjoint sets of k seeds, call them two rows, and test them. Every such split is a true
  null, so the fraction called significant at alpha is the test's false-positive rate at k seeds
  per row. The same draws with a known shift added to one side's per-trial scores give the power
  for an effect of that size. Splits share seeds, so the draws are not independent; the rate's
  uncertainty is judged by simulation instead of a binomial interval: many independent sets of
  as many seeds are drawn from the fitted noise model (normal per-trial seed shifts with the
  measured σ, the measured sentence variance), and the same procedure gives the spread a
  calibrated test's rate would have with this many seeds.
* **relabelled seed pairs** (any table with replicated rows, e.g. ``results/table3-cpu``): two
  seeds of one row become two one-seed rows in an otherwise unchanged table and are tested
  against each other, uncorrected (stricter than the table's Holm-corrected †).

Each check runs the seed-aware test (the table's default) and the sentence-only bootstrap side
by side.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
from scipy.stats import t as student_t

import ablate.report.seeds as seedvar
from ablate.report.aggregate import Sweep
from ablate.report.records import ReportError
from ablate.report.resampling import bootstrap_p
from ablate.report.significance import DEFAULT_SAMPLES, SplitScores, split_scores

KS = (2, 3, 4, 6, 8)
DRAWS = 400
SHIFT = 1.0  # BLEU: the known effect whose power is reported
SIMULATIONS = 200
RNG_SEED = 20261201


@dataclass(frozen=True)
class SplitRate:
    """k-vs-k splits of one row's seeds.

    Attributes:
        k: seeds per side; draws: random splits tested.
        rate: fraction the seed-aware test called significant (a false positive: same config).
        sentence_rate: the same for the sentence-only bootstrap.
        power, sentence_power: fraction significant after adding ``shift`` BLEU to one side.
        expected: (5%, 95%) quantiles of ``rate`` over simulated independent seed sets under a
            calibrated model (see the module docstring).
        sigma: the mean per-trial seed σ the splits estimated.
    """

    k: int
    draws: int
    rate: float
    sentence_rate: float
    power: float
    sentence_power: float
    expected: tuple[float, float]
    sigma: float


@dataclass(frozen=True)
class Calibration:
    """Both checks on one source and split."""

    split: str
    alpha: float
    shift: float
    row: Optional[str]
    seeds: int
    splits: list[SplitRate]
    pairs: int
    pairs_marked: int
    pairs_marked_sentence: int
    pair_rows: list[str]


def _test(xa, xb, ba, bb, alpha: float, shift: float = 0.0) -> tuple[bool, bool, float]:
    """(seed-aware significant, sentence-only significant, pooled σ) for one two-row split."""
    noise = seedvar.fit({"a": dict(enumerate(xa)), "b": dict(enumerate(xb, start=len(xa)))})
    sigma = noise.unpaired or 0.0
    deltas = np.mean(bb, axis=0) - np.mean(ba, axis=0)
    var = float(np.var(deltas, ddof=1))
    result = seedvar.seed_test(xa, [x + shift for x in xb], var, sigma, noise.unpaired_df, False)
    observed = float(np.mean(xb) - np.mean(xa)) + shift
    return result.p_value < alpha, bootstrap_p(deltas, observed) < alpha, sigma


def seed_splits(
    scores: SplitScores, row: str, ks: Sequence[int] = KS, draws: int = DRAWS, alpha: float = 0.05,
    shift: float = SHIFT, simulations: int = SIMULATIONS,
) -> list[SplitRate]:  # fmt: skip
    """k-vs-k false-positive rate and power for each k that ``row``'s seeds allow."""
    x, boot = np.array(scores.bleu[row]), np.array(scores.boot[row])
    rng = np.random.default_rng(RNG_SEED)
    out = []
    for k in ks:
        if 2 * k > len(x):
            continue
        hits = np.zeros((draws, 4), dtype=bool)
        sigmas, variances = [], []
        for d in range(draws):
            order = rng.permutation(len(x))
            a, b = order[:k], order[k : 2 * k]
            seed_hit, sentence_hit, sigma = _test(x[a], x[b], boot[a], boot[b], alpha)
            power_hit, sentence_power_hit, _ = _test(x[a], x[b], boot[a], boot[b], alpha, shift)
            hits[d] = seed_hit, sentence_hit, power_hit, sentence_power_hit
            sigmas.append(sigma)
            variances.append(float(np.var(boot[b].mean(0) - boot[a].mean(0), ddof=1)))
        rate, sentence_rate, power, sentence_power = hits.mean(axis=0)
        expected = _expected_spread(len(x), k, float(np.std(x, ddof=1)), float(np.mean(variances)), draws, alpha,
                                    simulations, rng)  # fmt: skip
        out.append(SplitRate(k, draws, rate, sentence_rate, power, sentence_power, expected, float(np.mean(sigmas))))
    return out


def _expected_spread(
    n: int, k: int, sigma: float, sentence_var: float, draws: int, alpha: float, simulations: int,
    rng: np.random.Generator,
) -> tuple[float, float]:  # fmt: skip
    """5% and 95% quantiles of the k-vs-k rate over ``simulations`` independent sets of n seeds
    drawn from a calibrated model: per-trial scores normal with ``sigma``, and Δ moved by the
    test set's own noise (normal, variance ``sentence_var``), tested as :func:`_test` does."""
    rates = np.empty(simulations)
    for i in range(simulations):
        x = rng.normal(0.0, sigma, n)
        order = np.argsort(rng.random((draws, n)), axis=1)
        a, b = x[order[:, :k]], x[order[:, k : 2 * k]]  # (draws, k)
        delta = b.mean(1) - a.mean(1) + rng.normal(0.0, math.sqrt(sentence_var), draws)
        pooled = (a.var(1, ddof=1) + b.var(1, ddof=1)) / 2
        seed_var = pooled * 2 / k
        var = seed_var + sentence_var
        p = 2 * student_t.sf(np.abs(delta) / np.sqrt(var), 2 * k - 2)
        rates[i] = float(np.mean(p < alpha))
    lo, hi = np.quantile(rates, [0.05, 0.95])
    return float(lo), float(hi)


def relabelled_pairs(scores: SplitScores, alpha: float = 0.05) -> tuple[int, int, int, list[str]]:
    """Every pair of seeds of every replicated row, as two one-seed rows of the same table.

    Returns:
        ``(pairs, marked by the seed-aware test, marked by the sentence-only test, rows used)``,
        each pair tested uncorrected at ``alpha``.
    """
    pairs = marked = marked_sentence = 0
    used = []
    for row, seeds in scores.seeds.items():
        if len(seeds) < 2:
            continue
        used.append(row)
        for i, j in itertools.combinations(range(len(seeds)), 2):
            relabelled = scores.relabel(row, i, j)
            seed_aware = relabelled.compare(f"{row}@{seeds[i]}", f"{row}@{seeds[j]}", "seeds")
            sentence = relabelled.compare(f"{row}@{seeds[i]}", f"{row}@{seeds[j]}", "bs")
            pairs += 1
            marked += bool(seed_aware and seed_aware.tested and seed_aware.p_value < alpha)
            marked_sentence += bool(sentence and sentence.p_value < alpha)
    return pairs, marked, marked_sentence, used


def calibrate(
    sweep: Sweep, split: Optional[str] = None, alpha: float = 0.05, ks: Sequence[int] = KS, draws: int = DRAWS,
    shift: float = SHIFT, simulations: int = SIMULATIONS, samples: int = 0,
) -> Calibration:  # fmt: skip
    """Both checks on ``sweep``'s ``split`` (default: its first test split with hypotheses)."""
    all_scores = split_scores(sweep, samples or DEFAULT_SAMPLES["bs"], "bs")
    if not all_scores:
        raise ReportError("calibration needs saved test hypotheses (hyps/<split>.txt), and this sweep has none")
    if split is not None and split not in all_scores:
        raise ReportError(f"no hypotheses for split '{split}' (choose from: {', '.join(all_scores)})")
    scores = all_scores[split or next(iter(all_scores))]
    widest = max(scores.seeds, key=lambda r: len(scores.seeds[r]))
    n = len(scores.seeds[widest])
    splits = seed_splits(scores, widest, ks, draws, alpha, shift, simulations) if n >= 4 else []
    pairs, marked, marked_sentence, used = relabelled_pairs(scores, alpha)
    return Calibration(scores.split, alpha, shift, widest if splits else None, n, splits, pairs, marked,
                       marked_sentence, used)  # fmt: skip


def to_markdown(cal: Calibration) -> str:
    """The calibration as Markdown: the k-vs-k table, then the relabelled pairs."""
    lines = [f"**Calibration of the significance test** (split {cal.split}, alpha = {cal.alpha:g})", ""]
    if cal.splits:
        lines += [
            f"k-vs-k splits of row `{cal.row}`'s {cal.seeds} seeds (one configuration: every call is a false "
            f"positive), and power for a known shift of {cal.shift:+g} BLEU added to one side:",
            "",
            "| k | draws | seed-aware: false positives | expected if calibrated (5-95%) | sentence-only: false positives "
            f"| seed-aware: power at {cal.shift:+g} | sentence-only: power | seed σ |",
            "| --: | --: | --: | :-: | --: | --: | --: | --: |",
        ]
        for s in cal.splits:
            lines.append(
                f"| {s.k} | {s.draws} | {s.rate:.1%} | {s.expected[0]:.1%}-{s.expected[1]:.1%} | "
                f"{s.sentence_rate:.1%} | {s.power:.1%} | {s.sentence_power:.1%} | {s.sigma:.2f} |"
            )
        lines += [
            "",
            "Splits share seeds, so a rate's uncertainty is not binomial over draws: the expected range is the "
            "5-95% spread of the rate over independent simulated sets of as many seeds (normal seed shifts of the "
            "measured σ, the measured sentence variance), i.e. what an exactly calibrated test would show here.",
            "",
        ]
    if cal.pairs:
        lines.append(
            f"Relabelled seed pairs (two seeds of one row as two one-seed rows of the same table, uncorrected "
            f"alpha = {cal.alpha:g}): seed-aware test {cal.pairs_marked} of {cal.pairs} "
            f"({cal.pairs_marked / cal.pairs:.1%}) called different; sentence-only bootstrap "
            f"{cal.pairs_marked_sentence} of {cal.pairs} ({cal.pairs_marked_sentence / cal.pairs:.1%})."
        )
    return "\n".join(lines).rstrip() + "\n"
