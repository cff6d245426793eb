"""``ablate calibrate``: how often the table's own test (:meth:`ablate.report.stats.SplitScores.compare`,
Holm over the table by :func:`ablate.report.stats.compare_scores`) calls one configuration "different"
from itself, and how often it finds a known shift (docs/reports.md, "Calibration"):

* **relabelled tables**: rows x seeds (:data:`DESIGNS`) of one row's many seeds, with seed values shared
  across rows (the row + seed fit where :func:`ablate.report.stats.use_paired` takes it) or distinct;
  every call is a false positive. Beside: Student t on the same tables, the 5-95% band of an exactly
  sized test on simulated normal seeds, and the power of the † at :data:`SHIFTS` beside Welch's t.
* **k-vs-k seed splits**: two-row tables, k = 2..8, the sentence-only bootstrap beside, and power at a
  known shift beside :func:`ablate.report.stats.power` with SE²(k) = 2σ²/k + v0.
* **relabelled seed pairs**: two seeds of one row as two one-seed rows of the table, uncorrected.

Relabellings share seeds, so a rate's uncertainty is the simulated band, not a binomial interval.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
from scipy import stats as st

from ablate.report.stats import (
    DEFAULT_SAMPLES,
    SplitScores,
    Sweep,
    compare_scores,
    holm,
    power as predicted_power,
    split_scores,
    standard_error,
)
from ablate.report.trials import ReportError

KS = (2, 3, 4, 6, 8)
DESIGNS = ((2, 2), (2, 3), (4, 4), (5, 3), (8, 2))  # (rows, seeds per row)
SHIFTS = (1.0, 2.0, 3.0)  # BLEU added to one row for the power of the relabelled tables
DRAWS = 400
RELABELLINGS = 400
ENUMERATE = 20_000  # two-row designs with at most this many tables are tested on every one of them
SHIFT = 1.0  # BLEU: the known effect whose power the k-vs-k splits report
SIMULATIONS = 200
RNG_SEED = 20261201


@dataclass(frozen=True)
class SplitRate:
    """k-vs-k splits of one row's seeds (two-row tables, distinct seed values), ``draws`` of them.

    Attributes:
        rate, sentence_rate: fraction the seed-aware / sentence-only test called significant (false positives).
        power, sentence_power: the same after adding ``shift`` BLEU to one side; predicted: the model's power.
        predicted_band, expected: (5%, 95%) of the power and of ``rate`` for as many normal seeds of this σ.
        sigma: the mean per-trial seed σ the splits estimated.
        se, se_model: the sd of Δ over the splits, and the model's SE(k) with the row's σ and the mean v0.
    """

    k: int
    draws: int
    rate: float
    sentence_rate: float
    power: float
    sentence_power: float
    predicted: float
    predicted_band: tuple[float, float]
    expected: tuple[float, float]
    sigma: float
    se: float
    se_model: float


@dataclass(frozen=True)
class DesignRate:
    """Relabelled tables of one design (rows x seeds per row; ``shared``: rows share seed values).

    Attributes:
        relabellings: tables tested (random ones, or every one: :func:`_all_splits`).
        paired, df: the fit the table's test used (row + seed, or within-row) and its df.
        per_comparison: fraction of comparisons (each row against the first) with p < alpha, uncorrected;
            family_wise: fraction of tables with any †; student: ``per_comparison`` of Student t with the same fit.
        exact_per_comparison, exact_family_wise: (5%, 95%) band of each for an exactly sized test.
        power: ``(Δ, fraction of tables whose shifted row is marked †, the same for Welch's t)``.
    """

    rows: int
    seeds: int
    shared: bool
    relabellings: int
    paired: bool
    df: int
    per_comparison: float
    family_wise: float
    student: float
    exact_per_comparison: tuple[float, float]
    exact_family_wise: tuple[float, float]
    power: tuple[tuple[float, float, float], ...]


@dataclass(frozen=True)
class Calibration:
    """Every check on one source and split."""

    split: str
    alpha: float
    shift: float
    row: Optional[str]
    seeds: int
    splits: list[SplitRate]
    designs: list[DesignRate]
    pairs: int
    pairs_marked: int
    pairs_marked_sentence: int
    pair_rows: list[str]


def relabelled(
    scores: SplitScores, row: str, picks: np.ndarray, shared: bool, shifts: Sequence[float] = ()
) -> SplitScores:
    """A table of ``row``'s trials: row ``r<i>`` holds trials ``picks[i]`` ((rows, k) indices), with seed
    values 1..k in every row (``shared``) or distinct ones, ``shifts[i]`` added to its scores."""
    rows, k = picks.shape
    shift = list(shifts) + [0.0] * (rows - len(shifts))
    names = [f"r{i}" for i in range(rows)]
    bleu = {n: [scores.bleu[row][j] + shift[i] for j in picks[i]] for i, n in enumerate(names)}
    boot = {n: [scores.boot[row][j] + shift[i] for j in picks[i]] for i, n in enumerate(names)}
    seeds = {n: [str(s + 1 if shared else i * k + s + 1) for s in range(k)] for i, n in enumerate(names)}
    return SplitScores.of_values(scores.split, bleu, boot, seeds)


def design_rates(
    scores: SplitScores, row: str, designs: Sequence[tuple[int, int]] = DESIGNS, relabellings: int = RELABELLINGS,
    alpha: float = 0.05, shifts: Sequence[float] = SHIFTS, simulations: int = SIMULATIONS,
) -> list[DesignRate]:  # fmt: skip
    """Relabelled tables of every design that ``row``'s seeds allow, with shared and distinct seed values."""
    x = np.array(scores.bleu[row])
    n, rng, out = len(x), np.random.default_rng(RNG_SEED), []
    for (rows, k), shared in itertools.product(designs, (True, False)):
        if rows * k > n or k < 2:
            continue
        plan = [("r0", f"r{i}") for i in range(1, rows)]
        calls, marked_tables, tables = [], 0, []
        hits = np.zeros((len(shifts), 2))
        fit = (False, 0)
        draws = _all_splits(n, k) if rows == 2 else None
        if draws is None:
            draws = [rng.permutation(n)[: rows * k].reshape(rows, k) for _ in range(relabellings)]
        for picks in draws:
            tables.append(x[picks])  # (rows, k)
            found = compare_scores([relabelled(scores, row, picks, shared)], plan)
            calls += [c.p_value < alpha for c in found]
            marked_tables += any(c.significant(alpha) for c in found)
            fit = (found[0].paired, found[0].sigma_df)
            for i, delta in enumerate(shifts):
                shifted = compare_scores([relabelled(scores, row, picks, shared, (0.0, delta))], plan)
                hits[i, 0] += shifted[0].significant(alpha)
                values = x[picks]
                values[1] += delta
                hits[i, 1] += holm(_welch_p(values))[0] < alpha
        count = len(draws)
        student = float(np.mean(_student_p(np.stack(tables), fit[0]) < alpha))
        exact = _exact_band(n, rows, k, fit[0], count, alpha, simulations, rng)[:2]
        power = tuple((float(d), float(h[0] / count), float(h[1] / count)) for d, h in zip(shifts, hits))
        out.append(DesignRate(rows, k, shared, count, fit[0], fit[1], float(np.mean(calls)),
                              marked_tables / count, student, exact[0], exact[1], power))  # fmt: skip
    return out


def _all_splits(n: int, k: int) -> Optional[list[np.ndarray]]:
    """Every ordered two-row table of k seeds each out of ``n`` ((2, k) index arrays; 2x2 of 16: 10,920),
    or None where there are more than :data:`ENUMERATE`."""
    if math.comb(n, k) * math.comb(n - k, k) > ENUMERATE:
        return None
    return [
        np.array([a, b])
        for a in itertools.combinations(range(n), k)
        for b in itertools.combinations([i for i in range(n) if i not in a], k)
    ]


def _welch_p(values: np.ndarray) -> list[float]:
    """Welch's t p-values of rows 1.. against row 0 of ``values`` (rows, k), Satterthwaite df."""
    return [float(p) for p in st.ttest_ind(values[1:], values[:1], axis=1, equal_var=False).pvalue]


def _student_p(tables: np.ndarray, paired: bool) -> np.ndarray:
    """(R, rows - 1) Student t p-values of rows 1.. against row 0 of each of ``tables`` (R, rows, k), σ from
    the row + seed residuals if ``paired`` (df (rows-1)(k-1)) else within rows (df rows(k-1))."""
    _, rows, k = tables.shape
    means = tables.mean(2)  # (R, rows)
    if paired:
        resid = tables - means[:, :, None] - tables.mean(1, keepdims=True) + means.mean(1)[:, None, None]
        df = (rows - 1) * (k - 1)
    else:
        resid = tables - means[:, :, None]
        df = rows * (k - 1)
    sigma2 = (resid**2).sum((1, 2)) / df  # (R,)
    t = (means[:, 1:] - means[:, :1]) / np.sqrt(sigma2 * 2 / k)[:, None]  # (R, rows - 1)
    return 2 * st.t.sf(np.abs(t), df)


def _exact_band(
    n: int, rows: int, k: int, paired: bool, relabellings: int, alpha: float, simulations: int,
    rng: np.random.Generator, shift: float = 0.0,
) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:  # fmt: skip
    """5-95% bands of the per-comparison and family-wise (Holm: any p below alpha / comparisons) rates of
    :func:`_student_p` on ``relabellings`` random (rows, k) tables of ``n`` normal seeds, and of the first
    comparison's power for a true ``shift`` (in units of the seeds' σ) added to row 1."""
    per, family, power = np.empty(simulations), np.empty(simulations), np.empty(simulations)
    for i in range(simulations):
        x = rng.normal(0.0, 1.0, n)
        order = np.argsort(rng.random((relabellings, n)), axis=1)[:, : rows * k]
        tables = x[order].reshape(relabellings, rows, k)
        p = _student_p(tables, paired)
        per[i] = float(np.mean(p < alpha))
        family[i] = float(np.mean(p.min(1) < alpha / (rows - 1)))
        tables[:, 1] += shift
        power[i] = float(np.mean(_student_p(tables, paired)[:, 0] < alpha))
    return _band(per), _band(family), _band(power)


def _band(rates: np.ndarray) -> tuple[float, float]:
    lo, hi = np.quantile(rates, [0.05, 0.95])
    return float(lo), float(hi)


def _two_rows(scores: SplitScores, row: str, a: np.ndarray, b: np.ndarray, alpha: float, shift: float = 0.0):
    """(seed-aware significant, sentence-only significant, σ, k-independent sentence part) of one k-vs-k split."""
    table = relabelled(scores, row, np.stack([a, b]), False, (0.0, shift))
    (seeds,) = compare_scores([table], [("r0", "r1")])
    (sentence,) = compare_scores([table], [("r0", "r1")], "bs")
    return seeds.p_value < alpha, sentence.p_value < alpha, seeds.sigma or 0.0, seeds.sentence_fixed


def seed_splits(
    scores: SplitScores, row: str, ks: Sequence[int] = KS, draws: int = DRAWS, alpha: float = 0.05,
    shift: float = SHIFT, simulations: int = SIMULATIONS,
) -> list[SplitRate]:  # fmt: skip
    """k-vs-k false-positive rate, power and predicted power for each k that ``row``'s seeds allow."""
    x = np.array(scores.bleu[row])
    sigma_all = float(np.std(x, ddof=1))
    rng = np.random.default_rng(RNG_SEED)
    out = []
    for k in ks:
        if 2 * k > len(x):
            continue
        hits = np.zeros((draws, 4), dtype=bool)
        sigmas, fixed, deltas = [], [], []
        for d in range(draws):
            order = rng.permutation(len(x))
            a, b = order[:k], order[k : 2 * k]
            deltas.append(float(x[b].mean() - x[a].mean()))
            seed_hit, sentence_hit, sigma, v0 = _two_rows(scores, row, a, b, alpha)
            power_hit, sentence_power_hit, _, _ = _two_rows(scores, row, a, b, alpha, shift)
            hits[d] = seed_hit, sentence_hit, power_hit, sentence_power_hit
            sigmas.append(sigma)
            fixed.append(v0)
        rate, sentence_rate, power, sentence_power = hits.mean(axis=0)
        v0 = float(np.mean(fixed))
        predicted = predicted_power(shift, sigma_all, 2 * k - 2, k, k, v0, alpha)
        expected, _, predicted_band = _exact_band(
            len(x), 2, k, False, draws, alpha, simulations, rng, shift / sigma_all
        )
        out.append(SplitRate(k, draws, rate, sentence_rate, power, sentence_power, predicted, predicted_band, expected,
                             float(np.mean(sigmas)), float(np.std(deltas)),
                             standard_error(sigma_all, k, k, v0)))  # fmt: skip
    return out


def relabelled_pairs(scores: SplitScores, alpha: float = 0.05) -> tuple[int, int, int, list[str]]:
    """Every pair of seeds of every replicated row as two one-seed rows of the same table, uncorrected at
    ``alpha``: ``(pairs, marked by the seed-aware test, marked by the sentence-only test, rows used)``."""
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
    shift: float = SHIFT, simulations: int = SIMULATIONS, samples: int = 0, relabellings: int = RELABELLINGS,
    designs: Sequence[tuple[int, int]] = DESIGNS, shifts: Sequence[float] = SHIFTS,
) -> Calibration:  # fmt: skip
    """Every check on ``sweep``'s ``split`` (default: its first test split with hypotheses)."""
    all_scores = split_scores(sweep, samples or DEFAULT_SAMPLES["bs"], "bs")
    if not all_scores:
        raise ReportError("calibration needs saved test hypotheses (hyps/<split>.txt), and this sweep has none")
    if split is not None and split not in all_scores:
        raise ReportError(f"no hypotheses for split '{split}' (choose from: {', '.join(all_scores)})")
    scores = all_scores[split or next(iter(all_scores))]
    widest = max(scores.seeds, key=lambda r: len(scores.seeds[r]))
    n = len(scores.seeds[widest])
    splits = seed_splits(scores, widest, ks, draws, alpha, shift, simulations) if n >= 4 else []
    tables = design_rates(scores, widest, designs, relabellings, alpha, shifts, simulations) if n >= 4 else []
    pairs, marked, marked_sentence, used = relabelled_pairs(scores, alpha)
    return Calibration(scores.split, alpha, shift, widest if splits or tables else None, n, splits, tables, pairs,
                       marked, marked_sentence, used)  # fmt: skip


def _pct(band: tuple[float, float]) -> str:
    return f"{band[0]:.1%}-{band[1]:.1%}"


def _design_lines(cal: Calibration) -> list[str]:
    """The relabelled tables' paragraph and table, one row per design."""
    lines: list[str] = []
    shifts = " / ".join(f"{d:+g}" for d, _, _ in cal.designs[0].power)
    lines += [
        f"Relabelled tables: rows x seeds of row `{cal.row}`'s {cal.seeds} seeds (one configuration: every call "
        "is a false positive), tested as `ablate table` tests a table (each row against the first, Holm over the "
        "table for †), with the seed values shared across rows or distinct (random tables; a two-row design "
        f"with at most {ENUMERATE:,} possible tables is tested on every one of them, so its rates are exact for "
        "these seeds); the exact test's band is the 5-95% "
        "range of the same rates for Student t with the same fit on simulated normal seeds (as many seeds, "
        f"design and relabellings). Power: a known Δ added to one row's scores, that row's † (seed-aware) "
        "beside Welch's t on the per-seed corpus BLEU of the same rows (Holm over the same comparisons).",
        "",
        "| design | seed values | fit (df) | tables | false positives per comparison | Student t, same tables "
        f"| exact test | family-wise (any †) | exact test | power of † at {shifts} | Welch t at {shifts} |",
        "| :-- | :-- | :-- | --: | --: | --: | :-: | --: | :-: | :-: | :-: |",
    ]
    for d in cal.designs:
        fit = "row + seed" if d.paired else "within-row"
        ours = " / ".join(f"{p:.0%}" for _, p, _ in d.power)
        welch = " / ".join(f"{w:.0%}" for _, _, w in d.power)
        lines.append(
            f"| {d.rows}x{d.seeds} | {'shared' if d.shared else 'distinct'} | {fit} ({d.df}) | {d.relabellings} | "
            f"{d.per_comparison:.1%} | {d.student:.1%} | {_pct(d.exact_per_comparison)} | {d.family_wise:.1%} | "
            f"{_pct(d.exact_family_wise)} | {ours} | {welch} |"
        )
    return lines + [""]


def to_markdown(cal: Calibration) -> str:
    """The calibration as Markdown: the relabelled tables, the k-vs-k splits, then the relabelled pairs."""
    lines = [f"**Calibration of the significance test** (split {cal.split}, alpha = {cal.alpha:g})", ""]
    if cal.designs:
        lines += _design_lines(cal)
    if cal.splits:
        lines += [
            f"k-vs-k splits (two-row tables of k distinct seeds each), and power for a known shift of {cal.shift:+g} "
            "BLEU added to one side, measured and as the footnotes' variance model predicts (Student t at 2k-2 df, "
            'SE²(k) = 2σ²/k + v0: σ the row\'s per-trial seed σ, v0 the k-independent sentence part); "normal seeds" '
            "is the 5-95% range of the measured power that as many normal seeds of this σ would give (Student t, no "
            "sentence part), i.e. how far a measured power may sit from the prediction when the model holds:",
            "",
            "| k | draws | seed-aware: false positives | exact test (5-95%) | sentence-only: false positives "
            f"| seed-aware: power at {cal.shift:+g} | predicted | normal seeds (5-95%) | sentence-only: power | seed σ "
            "| sd of Δ | SE(k) |",
            "| --: | --: | --: | :-: | --: | --: | --: | :-: | --: | --: | --: | --: |",
        ]
        for s in cal.splits:
            lines.append(
                f"| {s.k} | {s.draws} | {s.rate:.1%} | {_pct(s.expected)} | {s.sentence_rate:.1%} | {s.power:.1%} | "
                f"{s.predicted:.1%} | {_pct(s.predicted_band)} | {s.sentence_power:.1%} | {s.sigma:.2f} | {s.se:.3f} | "
                f"{s.se_model:.3f} |"
            )
        lines += [
            "",
            "Relabellings and splits share seeds, so a rate's uncertainty is not binomial over draws: each band is the "
            "5-95% spread of the rate over independent simulated sets of as many normal seeds, i.e. what an exactly "
            "sized test would show here.",
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
