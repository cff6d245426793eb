"""``ablate calibrate``: how often the table's own test (:meth:`ablate.report.stats.SplitScores.compare`,
Holm over the table by :func:`ablate.report.stats.compare_scores`) calls one configuration "different"
from itself, and how often it finds a known shift (docs/reports.md, "Calibration"), on one row's many seeds:
relabelled tables (:func:`table_rates`), k-vs-k seed splits (:func:`seed_splits`) and relabelled seed pairs
(:func:`relabelled_pairs`). Relabellings share seeds, so a rate's uncertainty is the simulated band, not a
binomial interval.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Optional, Sequence

import numpy as np
from scipy import stats as st

from ablate.report.stats import (
    MAX_SEEDS,
    BorrowedNoise,
    SplitScores,
    Sweep,
    compare_scores,
    design_df,
    detectable,
    holm,
    planned_pairs,
    power as predicted_power,
    seeds_needed,
    split_scores,
    standard_error,
    strictest,
    use_paired,
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
        relabellings: tables tested (random ones, or every one: :func:`relabellings_of`).
        paired, df: the fit the table's test used (row + seed, or within-row) and its df.
        per_comparison: fraction of comparisons (each row against the first) with p < alpha, uncorrected;
            family_wise: fraction of tables with any †; student: ``per_comparison`` of Student t with the same fit.
        exact_per_comparison, exact_family_wise: (5%, 95%) band of each for an exactly sized test.
        power: ``(Δ, fraction of tables whose shifted row is marked †, the same for Welch's t)``.
        comparisons: the comparisons Holm runs over in each table; label: the table this design stands for
            ("" for :data:`DESIGNS`).
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
    comparisons: int = 0
    label: str = ""


@dataclass(frozen=True)
class TableDesign:
    """The shape of a table to relabel: ``rows`` rows of ``seeds`` seeds each, seed values 1..k in every row
    (``shared``) or distinct, and its comparisons ``plan`` as (reference row, row) indices in the order the
    table tests them (row 0 the base). ``label`` names the table it stands for; ``stands_for`` is the larger
    design of that table where this one is a smaller stand-in (:meth:`fitting`)."""

    rows: int
    seeds: int
    shared: bool
    plan: tuple[tuple[int, int], ...]
    label: str = ""
    stands_for: str = ""
    borrowed_df: int = 0
    """df another source's seeds add to the within-row σ (``--sigma-from``)."""

    @classmethod
    def grid(cls, rows: int, seeds: int, shared: bool, label: str = "") -> TableDesign:
        """Each row against the first, as ``ablate table`` compares a sweep without named comparisons."""
        return cls(rows, seeds, shared, tuple((0, i) for i in range(1, rows)), label)

    @classmethod
    def of_sweep(cls, sweep: Sweep, label: str, planning: bool = False) -> TableDesign:
        """The design of ``sweep``'s table: its rows, seeds per row (its finished trials), whether every row
        has the same seed values, and its planned comparisons (:func:`ablate.report.stats.planned_pairs`), on
        one test split (a table of several splits runs Holm over the comparisons of each). ``planning``: for
        ``ablate power``, whose lent σ tests rows of one seed too; relabelling (calibrate) needs two.

        Raises:
            ReportError: rows with different numbers of seeds, or rows sharing some seed values but not all.
        """
        names = [r.name for r in sweep.rows]
        seeds = [sorted(map(str, r.seeds)) for r in sweep.rows]
        counts = sorted({len(s) for s in seeds})
        doing, least = ("planning a table", 1) if planning else ("calibrating a table", 2)
        if len(counts) != 1 or counts[0] < least:
            raise ReportError(
                f"{label}: {doing} needs every row to have the same number (>= {least}) of seeds; its rows "
                f"have {', '.join(map(str, counts))}"
            )
        shared = all(s == seeds[0] for s in seeds)
        if not shared and sum(map(len, seeds)) != len({x for s in seeds for x in s}):
            raise ReportError(
                f"{label}: its rows share some seed values but not all, a design "
                + ("ablate power cannot plan" if planning else "calibrate cannot relabel")
            )
        plan = tuple((names.index(a), names.index(b)) for a, b in planned_pairs(sweep))
        if not plan:
            what = (
                f"one row: {counts[0]} seeds of one configuration, what --sigma-from lends, not a table"
                if len(names) == 1
                else f"{len(names)} rows that the sweep's comparisons pair none of"
            )
            raise ReportError(
                f"{label}: the table has no comparisons to {'plan' if planning else 'calibrate'} ({what})"
            )
        return cls(len(names), counts[0], shared, plan, label)

    name = property(lambda self: f"{self.rows}x{self.seeds}")

    def fit(self) -> tuple[bool, int]:
        """``(paired, df)`` of the seed σ the table's comparisons use (:func:`~ablate.report.stats.fit_seed_noise`
        on this design, which alone decides: :func:`~ablate.report.stats.design_df`)."""
        k = self.seeds - 1
        paired = self.shared and use_paired((self.rows - 1) * k, self.rows * k + self.borrowed_df)
        return paired, design_df(self.rows, self.seeds, self.shared, self.borrowed_df)

    def fitting(self, available: int) -> tuple[Optional[TableDesign], str]:
        """This design where ``available`` seeds hold its rows x seeds, else the most rows with the same seeds
        per row, seed sharing and fit (row + seed or within-row) that fit, with its comparisons among those
        rows (``stands_for`` set), or None; beside it the one-line note for the report ("" where it fits)."""
        if self.rows * self.seeds <= available:
            return self, ""
        need = f"{self.label or self.name}: {self.name} needs {self.rows * self.seeds} seeds; {available} are available"
        rows = available // self.seeds
        plan = tuple((a, b) for a, b in self.plan if a < rows and b < rows)
        smaller = replace(self, rows=rows, plan=plan, stands_for=self.name)
        if rows < 2 or not plan or smaller.fit()[0] != self.fit()[0]:
            return None, need + ", and no smaller design with the same seeds per row and fit fits them"
        paired, df = smaller.fit()
        return smaller, (
            f"{need}: calibrated {smaller.name} ({_fit_name(paired)}, {df} df, {len(plan)} comparisons) as a "
            f"stand-in with the same seeds per row and fit"
        )


def parse_design(text: str) -> list[TableDesign]:
    """``RxK`` (rows x seeds per row, each row against the first; shared and distinct seed values) or
    ``RxK:shared`` / ``RxK:distinct``, as ``ablate calibrate --design`` takes it.

    Raises:
        ReportError: anything else, naming the form.
    """
    shape, _, seeds = text.partition(":")
    rows, _, k = shape.lower().partition("x")
    if not (rows.isdigit() and k.isdigit()) or int(rows) < 2 or int(k) < 2 or seeds not in ("", "shared", "distinct"):
        raise ReportError(f"--design '{text}': expected RxK[:shared|distinct] with R, K >= 2, e.g. 6x3:shared")
    sharing = (True, False) if not seeds else (seeds == "shared",)
    return [TableDesign.grid(int(rows), int(k), shared, f"--design {text}") for shared in sharing]


def _fit_name(paired: bool) -> str:
    return "row + seed" if paired else "within-row"


@dataclass(frozen=True)
class Calibration:
    """Every check on one source and split (``notes``: one line per requested design its seeds cannot hold)."""

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
    notes: list[str] = field(default_factory=list)
    borrowed: Optional[BorrowedNoise] = None


def relabelled(
    scores: SplitScores, row: str, picks: np.ndarray, shared: bool, shifts: Sequence[float] = ()
) -> SplitScores:
    """A table of ``row``'s trials: row ``r<i>`` holds trials ``picks[i]`` ((rows, k) indices), with seed
    values 1..k in every row (``shared``) or distinct ones, ``shifts[i]`` added to its scores (``scores``'
    borrowed seeds pooled into its σ, as ``ablate table --sigma-from`` pools them)."""
    rows, k = picks.shape
    shift = [*shifts, *[0.0] * (rows - len(shifts))]
    bleu, boot = (
        {f"r{i}": [v[row][j] + shift[i] for j in picks[i]] for i in range(rows)} for v in (scores.bleu, scores.boot)
    )
    seeds = {f"r{i}": [str(s + 1 if shared else i * k + s + 1) for s in range(k)] for i in range(rows)}
    return SplitScores.of_values(scores.split, bleu, boot, seeds, scores.borrowed)


def design_rates(
    scores: SplitScores, row: str, designs: Sequence[tuple[int, int]] = DESIGNS, relabellings: int = RELABELLINGS,
    alpha: float = 0.05, shifts: Sequence[float] = SHIFTS, simulations: int = SIMULATIONS,
) -> list[DesignRate]:  # fmt: skip
    """Relabelled tables of every design that ``row``'s seeds allow, with shared and distinct seed values."""
    n, rng = len(scores.bleu[row]), np.random.default_rng(RNG_SEED)
    return [
        table_rates(scores, row, TableDesign.grid(rows, k, shared), relabellings, alpha, shifts, simulations, rng)
        for (rows, k), shared in itertools.product(designs, (True, False))
        if rows * k <= n and k >= 2
    ]


def relabellings_of(design: TableDesign, n: int, relabellings: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The (rows, k) trial indices of every relabelled table of ``design`` out of ``n`` seeds: each possible
    ordered two-row table where there are at most :data:`ENUMERATE` (2x2 of 16: 10,920), else ``relabellings``
    random ones from ``rng``."""
    k = design.seeds
    if design.rows == 2 and math.comb(n, k) * math.comb(n - k, k) <= ENUMERATE:
        firsts = itertools.combinations(range(n), k)
        return [np.array([a, b]) for a in firsts for b in itertools.combinations(sorted(set(range(n)) - set(a)), k)]
    return [rng.permutation(n)[: design.rows * k].reshape(design.rows, k) for _ in range(relabellings)]


def table_rates(
    scores: SplitScores, row: str, design: TableDesign, relabellings: int = RELABELLINGS, alpha: float = 0.05,
    shifts: Sequence[float] = SHIFTS, simulations: int = SIMULATIONS, rng: Optional[np.random.Generator] = None,
) -> DesignRate:  # fmt: skip
    """Relabelled tables of ``design`` from ``row``'s seeds (:func:`relabellings_of`; ``rng`` default: seeded
    with :data:`RNG_SEED`), tested with ``design.plan`` by :func:`compare_scores` as ``ablate table`` tests a
    table: the fraction of comparisons with p < ``alpha`` (uncorrected) and of tables with any † (Holm over the
    plan), Student t on the same tables and the exact test's bands, and the power of the first comparison's †
    with a known Δ added to its row (beside Welch's t with Holm over the same plan)."""
    rng = rng if rng is not None else np.random.default_rng(RNG_SEED)
    x = np.array(scores.bleu[row])
    n, plan, target = len(x), list(design.plan), design.plan[0][1]
    names = [(f"r{a}", f"r{b}") for a, b in plan]
    ref, other = (list(ix) for ix in zip(*plan))  # the plan's (reference, row) indices
    calls, marked_tables = [], 0
    hits = np.zeros((len(shifts), 2))
    fit = (False, 0)
    draws = relabellings_of(design, n, relabellings, rng)
    for picks in draws:
        found = compare_scores([relabelled(scores, row, picks, design.shared)], names)
        calls += [c.p_value < alpha for c in found]
        marked_tables += any(c.significant(alpha) for c in found)
        fit = (found[0].paired, found[0].sigma_df)
        for i, delta in enumerate(shifts):
            shifted = compare_scores([relabelled(scores, row, picks, design.shared, [0.0] * target + [delta])], names)
            hits[i, 0] += shifted[0].significant(alpha)
            values = x[picks]
            values[target] += delta
            welch = st.ttest_ind(values[other], values[ref], axis=1, equal_var=False).pvalue  # Satterthwaite df
            hits[i, 1] += holm([float(p) for p in welch])[0] < alpha
    count = len(draws)
    student = float(np.mean(_student_p(np.stack([x[picks] for picks in draws]), fit[0], plan, scores.borrowed) < alpha))
    exact = _exact_band(n, design.rows, design.seeds, fit[0], count, alpha, simulations, rng, plan=plan,
                        borrowed_df=_borrowed_df(scores))[:2]  # fmt: skip
    power = tuple((float(d), float(h[0] / count), float(h[1] / count)) for d, h in zip(shifts, hits))
    label = f"stand-in for {design.label}'s {design.stands_for}" if design.stands_for else design.label
    return DesignRate(design.rows, design.seeds, design.shared, count, fit[0], fit[1], float(np.mean(calls)),
                      marked_tables / count, student, exact[0], exact[1], power, len(plan), label)  # fmt: skip


def _borrowed_df(scores: SplitScores) -> int:
    return scores.borrowed.df if scores.borrowed else 0


def _student_p(
    tables: np.ndarray, paired: bool, plan: Sequence[tuple[int, int]], borrowed: Optional[BorrowedNoise] = None
) -> np.ndarray:
    """(R, comparisons) Student t p-values of ``plan``'s (reference, row) index pairs of each of ``tables``
    (R, rows, k), σ from the row + seed residuals if ``paired`` (df (rows-1)(k-1)) else within rows (df
    rows(k-1), plus ``borrowed``'s sum of squares and df, or an (R,) array of sums of squares at its df)."""
    _, rows, k = tables.shape
    a, b = (list(ix) for ix in zip(*plan))
    means = tables.mean(2)  # (R, rows)
    if paired:
        resid = tables - means[:, :, None] - tables.mean(1, keepdims=True) + means.mean(1)[:, None, None]
        df = (rows - 1) * (k - 1)
    else:
        resid = tables - means[:, :, None]
        df = rows * (k - 1)
    ss = (resid**2).sum((1, 2))  # (R,)
    if borrowed is not None and not paired:
        ss, df = ss + borrowed.ss, df + borrowed.df
    sigma2 = ss / df
    t = (means[:, b] - means[:, a]) / np.sqrt(sigma2 * 2 / k)[:, None]  # (R, comparisons)
    return 2 * st.t.sf(np.abs(t), df)


def _exact_band(
    n: int, rows: int, k: int, paired: bool, relabellings: int, alpha: float, simulations: int,
    rng: np.random.Generator, shift: float = 0.0, plan: Optional[Sequence[tuple[int, int]]] = None,
    borrowed_df: int = 0,
) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:  # fmt: skip
    """5-95% bands of the per-comparison and family-wise (Holm: any p below alpha / comparisons) rates of
    :func:`_student_p` (over ``plan``, default each row against row 0) on ``relabellings`` random (rows, k)
    tables of ``n`` normal seeds, and of the first comparison's power for a true ``shift`` (in units of the
    seeds' σ) added to its row; ``borrowed_df``: one other set of as many normal seeds plus one, drawn per
    simulation and pooled into every table's σ, as one ``--sigma-from`` source is."""
    plan = list(plan) if plan else [(0, i) for i in range(1, rows)]
    per, family, power = np.empty(simulations), np.empty(simulations), np.empty(simulations)
    for i in range(simulations):
        x = rng.normal(0.0, 1.0, n)
        order = np.argsort(rng.random((relabellings, n)), axis=1)[:, : rows * k]
        tables = x[order].reshape(relabellings, rows, k)
        other = BorrowedNoise("", borrowed_df + 1, float(rng.chisquare(borrowed_df))) if borrowed_df else None
        p = _student_p(tables, paired, plan, other)
        per[i] = float(np.mean(p < alpha))
        family[i] = float(np.mean(p.min(1) < alpha / len(plan)))
        tables[:, plan[0][1]] += shift
        power[i] = float(np.mean(_student_p(tables, paired, plan, other)[:, 0] < alpha))
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
    rng, extra = np.random.default_rng(RNG_SEED), _borrowed_df(scores)
    # the row's per-trial seed σ, its seeds pooled with the borrowed ones (the σ a split's test estimates)
    ss = float(np.sum((x - x.mean()) ** 2)) + (scores.borrowed.ss if scores.borrowed else 0.0)
    sigma = math.sqrt(ss / (len(x) - 1 + extra))
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
            seed_hit, sentence_hit, estimated, v0 = _two_rows(scores, row, a, b, alpha)
            hits[d] = seed_hit, sentence_hit, *_two_rows(scores, row, a, b, alpha, shift)[:2]
            sigmas.append(estimated)
            fixed.append(v0)
        rate, sentence_rate, power, sentence_power = hits.mean(axis=0)
        v0 = float(np.mean(fixed))
        predicted = predicted_power(shift, sigma, 2 * k - 2 + extra, k, k, v0, alpha)
        expected, _, predicted_band = _exact_band(
            len(x), 2, k, False, draws, alpha, simulations, rng, shift / sigma, borrowed_df=extra
        )
        out.append(SplitRate(k, draws, rate, sentence_rate, power, sentence_power, predicted, predicted_band, expected,
                             float(np.mean(sigmas)), float(np.std(deltas)),
                             standard_error(sigma, k, k, v0)))  # fmt: skip
    return out


def relabelled_pairs(scores: SplitScores, alpha: float = 0.05) -> tuple[int, int, int]:
    """Every pair of seeds of every replicated row as two one-seed rows of the same table, uncorrected at
    ``alpha``: ``(pairs, marked by the seed-aware test, marked by the sentence-only test)``."""
    pairs = marked = marked_sentence = 0
    for row, seeds in scores.seeds.items():
        for i, j in itertools.combinations(range(len(seeds)), 2):
            relabelled, names = scores.relabel(row, i, j), (f"{row}@{seeds[i]}", f"{row}@{seeds[j]}")
            seed_aware, sentence = (relabelled.compare(*names, test) for test in ("seeds", "bs"))
            pairs += 1
            marked += bool(seed_aware and seed_aware.tested and seed_aware.p_value < alpha)
            marked_sentence += bool(sentence and sentence.p_value < alpha)
    return pairs, marked, marked_sentence


def calibrate(
    sweep: Sweep, split: Optional[str] = None, alpha: float = 0.05, ks: Sequence[int] = KS, draws: int = DRAWS,
    shift: float = SHIFT, simulations: int = SIMULATIONS, samples: int = 0, relabellings: int = RELABELLINGS,
    designs: Sequence[tuple[int, int]] = DESIGNS, shifts: Sequence[float] = SHIFTS, like: Sequence[TableDesign] = (),
    like_only: bool = False, borrowed: Optional[dict[str, BorrowedNoise]] = None,
) -> Calibration:  # fmt: skip
    """Every check on ``sweep``'s ``split`` (default: its first test split with hypotheses); ``like``: further
    designs (other tables' own, :meth:`TableDesign.of_sweep`) relabelled after :data:`DESIGNS`, each the
    largest stand-in its seeds hold where they do not hold it (:meth:`TableDesign.fitting`, noted);
    ``like_only``: those alone (no ``designs``, k-vs-k splits or relabelled pairs); ``borrowed``: split ->
    another source's seeds pooled into every relabelled table's σ (``--sigma-from``,
    :func:`ablate.report.stats.borrow_noise`)."""
    all_scores = split_scores(sweep, samples, "bs", borrowed=borrowed)
    if not all_scores:
        raise ReportError("calibration needs saved test hypotheses (hyps/<split>.txt), and this sweep has none")
    if split is not None and split not in all_scores:
        raise ReportError(f"no hypotheses for split '{split}' (choose from: {', '.join(all_scores)})")
    scores = all_scores[split or next(iter(all_scores))]
    widest = max(scores.seeds, key=lambda r: len(scores.seeds[r]))
    n = len(scores.seeds[widest])
    if like_only:
        ks, designs = (), ()
    splits = seed_splits(scores, widest, ks, draws, alpha, shift, simulations) if n >= 4 else []
    tables = design_rates(scores, widest, designs, relabellings, alpha, shifts, simulations) if n >= 4 else []
    notes = [] if like_only else _left_out(widest, n, ks)
    for design in like:
        fitted, note = replace(design, borrowed_df=_borrowed_df(scores)).fitting(n)
        notes += [note] if note else []
        if fitted is not None:
            tables.append(table_rates(scores, widest, fitted, relabellings, alpha, shifts, simulations))
    pairs, marked, marked_sentence = relabelled_pairs(scores, alpha) if not like_only else (0, 0, 0)
    return Calibration(scores.split, alpha, shift, widest if splits or tables else None, n, splits, tables, pairs,
                       marked, marked_sentence, notes, scores.borrowed)  # fmt: skip


def _left_out(row: str, n: int, ks: Sequence[int]) -> list[str]:
    """One line for what ``row``'s ``n`` seeds cannot hold: every relabelled table and split (under 4), or the
    k-vs-k splits that take more than ``n`` seeds."""
    if n < 4:
        return [
            f"No relabelled tables or k-vs-k splits: they take a row of at least 4 seeds, and row `{row}` has {n}; "
            "only the relabelled seed pairs below."
        ]
    big = ", ".join(str(k) for k in ks if 2 * k > n)
    return [f"k-vs-k splits at k = {big} left out: a split takes 2k seeds, and row `{row}` has {n}."] if big else []


def _pct(band: tuple[float, float]) -> str:
    return f"{band[0]:.1%}-{band[1]:.1%}"


def _design_lines(cal: Calibration) -> list[str]:
    """The relabelled tables' paragraph and table, one row per design."""
    shifts = " / ".join(f"{d:+g}" for d, _, _ in cal.designs[0].power)
    lines = [
        f"Relabelled tables: rows x seeds of row `{cal.row}`'s {cal.seeds} seeds (one configuration: every call "
        "is a false positive), tested as `ablate table` tests a table (each row against the first, Holm over the "
        "table for †), with the seed values shared across rows or distinct (random tables; a two-row design "
        f"with at most {ENUMERATE:,} possible tables is tested on every one of them, so its rates are exact for "
        "these seeds); the exact test's band is the 5-95% "
        "range of the same rates for Student t with the same fit on simulated normal seeds (as many seeds, "
        f"design and relabellings). Power: a known Δ added to one row's scores, that row's † (seed-aware) "
        "beside Welch's t on the per-seed corpus BLEU of the same rows (Holm over the same comparisons).",
        "",
    ]
    if any(d.label for d in cal.designs):
        lines += [
            "A design named after a table is that table's own (`--like`): its rows, seeds per row, shared or "
            "distinct seed values and its comparisons (Holm over them; power: the first comparison's row shifted); "
            "a stand-in has the same seeds per row and fit with fewer rows, where the seeds do not hold the table.",
            "",
        ]
    lines += [
        "| design | seed values | fit (df) | tables | false positives per comparison | Student t, same tables "
        f"| exact test | family-wise (any †) | exact test | power of † at {shifts} | Welch t at {shifts} |",
        "| :-- | :-- | :-- | --: | --: | --: | :-: | --: | :-: | :-: | :-: |",
    ]
    for d in cal.designs:
        fit = _fit_name(d.paired)
        ours = " / ".join(f"{p:.0%}" for _, p, _ in d.power)
        welch = " / ".join(f"{w:.0%}" for _, _, w in d.power)
        name = f"{d.rows}x{d.seeds}" + (f": {d.label} ({d.comparisons} comparisons)" if d.label else "")
        lines.append(
            f"| {name} | {'shared' if d.shared else 'distinct'} | {fit} ({d.df}) | {d.relabellings} | "
            f"{d.per_comparison:.1%} | {d.student:.1%} | {_pct(d.exact_per_comparison)} | {d.family_wise:.1%} | "
            f"{_pct(d.exact_family_wise)} | {ours} | {welch} |"
        )
    return lines + [""]


def to_markdown(cal: Calibration) -> str:
    """The calibration as Markdown: the relabelled tables, the k-vs-k splits, then the relabelled pairs."""
    lines = [f"**Calibration of the significance test** (split {cal.split}, alpha = {cal.alpha:g})", ""]
    if cal.borrowed is not None:
        b = cal.borrowed
        lines += [
            f"Every table's seed σ is pooled with the {b.trials} seeds of {b.source} (`--sigma-from`: +{b.df} df "
            f"to the within-row fit, its σ {b.sigma:.2f} alone), as `ablate table --sigma-from` pools them; the "
            f"exact test's bands draw one such set of {b.trials} normal seeds per simulation.",
            "",
        ]
    if cal.notes:
        lines += [*cal.notes, ""]
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


EFFECTS = (1.0, 2.0, 3.0)  # BLEU: the true Δs whose seeds per row a plan states


def plan_lines(sweep: Sweep, label: str, lent: BorrowedNoise, alpha: float = 0.05, effects=EFFECTS) -> list[str]:
    """What the table of a sweep not yet run can find (``ablate sweep run --dry-run --sigma-from``): its design
    (:meth:`TableDesign.of_sweep` of the planned trials, as finished), and with ``lent``'s σ taken as the true
    per-trial σ (test-set part v0 taken as 0: 0.001-0.023 BLEU² on the shipped tables) the minimum detectable
    effect and seeds per row for ``effects``, with the table's own σ fit and with ``lent``'s seeds pooled in
    (``ablate table --sigma-from``), at Holm's strictest level."""
    design = TableDesign.of_sweep(sweep, label, planning=True)
    rows, k, m = design.rows, design.seeds, len(design.plan)
    strict, sigma, sharing = alpha / m, lent.sigma, "shared" if design.shared else "distinct"
    lines = [
        f"Power of this sweep's table, planned with σ {sigma:.2f} BLEU per trial from {lent.trials} seeds of "
        f"{lent.source} (taken as the true σ; test-set part taken as 0):",
        f"  {rows} row{'s' * (rows != 1)} x {k} seed{'s' * (k != 1)} ({sharing} seed values), {m} comparison"
        + (f"s, Holm at alpha {alpha:g}: each at alpha/{m}" if m > 1 else f" at alpha {alpha:g}"),
    ]
    for fitted, words in (
        (design, "with the table's own σ"),
        (replace(design, borrowed_df=lent.df), f"with --sigma-from {lent.source}"),
    ):
        paired, df = fitted.fit()
        mde = detectable(sigma, df, k, 0.0, strict) if df > 0 else math.inf
        found = f"{mde:.2f} BLEU" if math.isfinite(mde) else "none (no seed df)"
        lines.append(f"  minimum detectable effect (80% power) {words}: {found} ({_fit_name(paired)} fit, {df} df)")
    needs = []
    for delta in effects:
        own, pooled = (
            seeds_needed(delta, sigma, 0.0, strict, rows, design.shared, borrowed_df=b) for b in (0, lent.df)
        )
        needs.append(f"Δ {delta:g}: {_count(own)} own, {_count(pooled)} with --sigma-from")
    lines.append(f"  seeds per row for 80% power at {strictest(alpha, m)}: " + "; ".join(needs))
    return lines


def _count(n: Optional[int]) -> str:
    return "none" if n is None else f"more than {MAX_SEEDS:,}" if n > MAX_SEEDS else f"{n:,}"
