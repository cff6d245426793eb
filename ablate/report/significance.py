"""Significance of a table's differences, over training seeds and test sentences, Holm-corrected.

**The statistic.** A row (a configuration) trained with K seeds has K hypothesis files for the
same source sentences. Its score is the mean over its seeds of corpus BLEU, and a comparison's
statistic is the difference of two rows' scores: ``Δ = mean_s BLEU(B_s) - mean_s BLEU(A_s)``.
Any metric of :mod:`ablate.metrics` takes BLEU's place (``ablate table --metric``): the resamples
are of its per-sentence statistics, whose sum gives its corpus score (chrF's n-gram counts, TER's
edits, a per-sentence metric's scores); the test is two-sided, so an error rate (TER) is tested alike.

**The tests** (``--test``):

* ``seeds`` (default), seed-aware: ``Δ`` is uncertain for two reasons, the training seeds each
  row happened to get and the test sentences the corpus happened to hold. Its variance is the sum
  of a seed part, ``σ² (1/K_a + 1/K_b)`` with the per-trial seed σ pooled over the whole table
  (:mod:`ablate.report.seeds`: a row + seed fit for rows trained with the same seeds, Clark et al.
  2011's replicates), and a sentence part, the variance of ``Δ`` under paired bootstrap
  resampling of sentences (Koehn 2004; the same sentence ids for every seed of both rows). The
  p-value is Student's t at the seed σ's degrees of freedom (the conservative choice; the
  plug-in Welch-Satterthwaite df is too liberal with few seeds, see :mod:`ablate.report.seeds`). Where no seed variance
  can be estimated (one seed in every row) nothing is tested and the table says why.
* ``bs``: paired bootstrap resampling of sentences alone; ``ar``: paired approximate
  randomisation (Riezler & Maxwell 2005). Both measure **test-set variance only**: two seeds of
  one configuration differ by more than that (``results/calibration-cpu``), so these call a
  same-configuration pair "different" far more often than alpha.

**Multiple comparisons.** :func:`holm` adjusts all of a table's p-values together (Holm 1979),
which controls the family-wise error rate at alpha over the whole table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Optional, Sequence

import numpy as np

import ablate.report.seeds as seedvar
from ablate.report.aggregate import Sweep, value_order
from ablate.report.metric_values import DEFAULT_METRIC, bleu_tokenizer, scorer_for, statistics  # noqa: F401 - re-exported
from ablate.report.records import ReportError, Trial
from ablate.report.resampling import Resamples, Score, approximate_randomization, bleu_from_stats, bootstrap_p

TESTS = {
    "seeds": "seed-aware t-test (table-pooled training-seed variance + paired bootstrap over test sentences)",
    "bs": "paired bootstrap resampling over test sentences (test-set variance only)",
    "ar": "paired approximate randomization over test sentences (test-set variance only)",
}
DEFAULT_TEST = "seeds"
DEFAULT_SAMPLES = {"seeds": 2000, "bs": 2000, "ar": 10000}
LEVEL = 0.95  # confidence level of every interval a table shows


@dataclass(frozen=True)
class Comparison:
    """Row ``row`` against row ``reference`` on one test split.

    Attributes:
        reference, row: row names (``reference`` is the base for comparisons against the base).
        split: the test split.
        p_value: two-sided p-value of the score difference, uncorrected (nan: not tested, see ``note``).
        base_bleu, bleu: mean over seeds of the corpus score (BLEU, or ``metric``) of ``reference`` and ``row``.
        seeds: seeds used on each side.
        p_adjusted: Holm-Bonferroni adjusted p-value over all tested comparisons of the table.
        test: the test's key in :data:`TESTS`.
        se: standard error of Δ (seed + sentence parts for ``seeds``, sentence part alone otherwise).
        ci: the 95% confidence interval of Δ, uncorrected.
        sentence_var: variance of Δ over resampled test sentences.
        sentence_fixed: its k-independent part (:func:`ablate.report.seeds.sentence_split`), the
            part the seed-aware test adds to the seed σ's (the rest is inside σ already).
        sigma, sigma_df, paired: the table's per-trial seed σ used, its degrees of freedom, and
            whether it was the seed-paired estimate (None where not estimable).
        per_seed: ``(seed, Δ)`` for every seed value both rows trained with.
        note: why the comparison was not tested, if it was not.
        metric: the metric compared (a key of :data:`ablate.metrics.METRIC_SCORERS`).
    """

    reference: str
    row: str
    split: str
    p_value: float
    base_bleu: float
    bleu: float
    seeds: tuple[int, int]
    p_adjusted: float = math.nan
    test: str = DEFAULT_TEST
    se: float = math.nan
    ci: tuple[float, float] = (math.nan, math.nan)
    sentence_var: float = math.nan
    sentence_fixed: float = math.nan
    sigma: Optional[float] = None
    sigma_df: int = 0
    paired: bool = False
    per_seed: tuple[tuple[str, float], ...] = ()
    note: str = ""
    metric: str = DEFAULT_METRIC

    @property
    def delta(self) -> float:
        return self.bleu - self.base_bleu

    @property
    def tested(self) -> bool:
        return not math.isnan(self.p_value)

    @property
    def sign_flip(self) -> bool:
        """Per-seed Δs disagree in sign (some seeds say better, some worse)."""
        signs = {d > 0 for _, d in self.per_seed if d != 0}
        return len(signs) > 1

    def significant(self, alpha: float) -> bool:
        return self.tested and self.p_adjusted < alpha


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (Holm 1979): step-down, monotone, capped at 1."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    m, running, out = len(p_values), 0.0, [1.0] * len(p_values)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


# --------------------------------------------------------------------------------------
# One split: every usable trial's statistics, resampled once
# --------------------------------------------------------------------------------------


class SplitScores:
    """Per-sentence statistics, corpus BLEU and bootstrap BLEU of every trial on one split.

    Built once per table and split (:meth:`of_sweep`), so each comparison costs a few vector
    operations; :meth:`compare` tests two of its rows.

    Args:
        split: the split's name.
        rows: row name -> ``[(seed, (n, k) statistics)]``, the same n sentences everywhere.
        samples: bootstrap resamples of sentences.
        score: the metric's corpus score of summed statistics (BLEU's by default).
        metric: the metric's name.
    """

    def __init__(
        self,
        split: str,
        rows: dict[str, list[tuple[Any, np.ndarray]]],
        samples: int,
        score: Score = bleu_from_stats,
        metric: str = DEFAULT_METRIC,
    ):
        self.split, self.rows = split, {r: list(ts) for r, ts in rows.items() if ts}
        self.score, self.metric = score, metric
        sizes = {s.shape[0] for ts in self.rows.values() for _, s in ts}
        if len(sizes) > 1:
            raise ReportError(f"{split}: hypotheses cover different numbers of sentences ({sorted(sizes)})")
        resamples = Resamples(sizes.pop(), samples) if sizes else None
        self.bleu = {r: [float(score(s.sum(0))) for _, s in ts] for r, ts in self.rows.items()}
        self.boot = {r: [resamples.bleu(s, score) for _, s in ts] for r, ts in self.rows.items()} if resamples else {}
        self.seeds = {r: [str(seed) for seed, _ in ts] for r, ts in self.rows.items()}
        self._fit()

    def _fit(self) -> None:
        """The table's seed σ and the per-seed part of its trials' bootstrap variance."""
        self.noise = seedvar.fit({r: dict(zip(self.seeds[r], self.bleu[r])) for r in self.bleu})
        self.per_seed_var = seedvar.per_seed_sentence_var(self.boot)

    @classmethod
    def of_values(
        cls, split: str, bleu: dict[str, list[float]], boot: dict[str, list[np.ndarray]], seeds: dict[str, list[str]]
    ) -> SplitScores:
        """A table from per-trial scores alone (row -> per-seed corpus BLEU, (B,) bootstrap BLEU and
        seed values), e.g. a relabelled grouping of one configuration's seeds for calibration;
        ``ar`` (which needs the sentence statistics) is not available on it."""
        out = object.__new__(SplitScores)
        out.split, out.score, out.metric, out.rows = split, bleu_from_stats, DEFAULT_METRIC, {}
        out.bleu, out.boot, out.seeds = dict(bleu), dict(boot), {r: [str(x) for x in v] for r, v in seeds.items()}
        out._fit()
        return out

    @classmethod
    def of_sweep(cls, sweep: Sweep, split: str, samples: int, metric: str = DEFAULT_METRIC) -> SplitScores:
        """Every usable trial of ``sweep``: as many hypotheses as references, and the split's
        references (the first usable trial's), scored with ``metric``."""
        scorer, refs = scorer_for(metric, sweep.base.trials), None
        rows: dict[str, list[tuple[Any, np.ndarray]]] = {}
        for row in sweep.rows:
            for t in _usable(row.trials, split):
                refs = refs if refs is not None else t.refs[split]
                if t.refs[split] == refs:
                    sources = t.sources.get(split)
                    sources = sources if sources and len(sources) == len(refs) else None
                    rows.setdefault(row.name, []).append((t.seed, statistics(scorer, t.hyps[split], refs, sources)))
        return cls(split, rows, samples, scorer.from_statistics, metric)

    def relabel(self, row: str, i: int, j: int) -> SplitScores:
        """A copy in which ``row``'s i-th and j-th seeds are two one-seed rows, ``row@<seed>``
        (its other seeds left out), for calibration: the two are one configuration."""
        out = object.__new__(SplitScores)
        out.split, out.score, out.metric = self.split, self.score, self.metric
        keep = {r: list(range(len(ts))) for r, ts in self.rows.items() if r != row}
        keep.update({f"{row}@{self.seeds[row][i]}": [i], f"{row}@{self.seeds[row][j]}": [j]})
        source = {r: (r if r in self.rows else row) for r in keep}
        out.rows = {r: [self.rows[source[r]][x] for x in keep[r]] for r in keep}
        out.bleu = {r: [self.bleu[source[r]][x] for x in keep[r]] for r in keep}
        out.boot = {r: [self.boot[source[r]][x] for x in keep[r]] for r in keep}
        out.seeds = {r: [self.seeds[source[r]][x] for x in keep[r]] for r in keep}
        out._fit()
        return out

    def compare(self, reference: str, row: str, test: str = DEFAULT_TEST, trials: int = 0) -> Optional[Comparison]:
        """``row`` against ``reference`` (uncorrected); None when either has no usable trial.

        Args:
            trials: random swaps for ``ar`` (0: the default).
        """
        if reference not in self.bleu or row not in self.bleu:
            return None
        xa, xb = self.bleu[reference], self.bleu[row]
        deltas = np.mean(self.boot[row], axis=0) - np.mean(self.boot[reference], axis=0)
        observed = float(np.mean(xb) - np.mean(xa))
        sigma, df, paired = self.noise.for_rows(self.seeds[reference], self.seeds[row])
        v = float(np.var(deltas, ddof=1))
        base = Comparison(
            reference, row, self.split, math.nan, float(np.mean(xa)), float(np.mean(xb)), (len(xa), len(xb)),
            test=test, sentence_var=v, sentence_fixed=seedvar.sentence_split(v, self.per_seed_var, len(xa), len(xb)),
            sigma=sigma, sigma_df=df, paired=paired, per_seed=self._per_seed(reference, row), metric=self.metric,
        )  # fmt: skip
        if test == "seeds":
            if sigma is None:
                return replace(base, note="no seed variance: every row of the table has one seed")
            result = seedvar.seed_test(xa, xb, base.sentence_fixed, sigma, df, paired)
            return replace(base, p_value=result.p_value, se=result.se, ci=result.interval(LEVEL))
        se = math.sqrt(base.sentence_var)
        half = seedvar.normal_quantile(0.5 + LEVEL / 2) * se
        if test == "bs":
            p = bootstrap_p(deltas, observed)
        else:
            a, b = self._paired_stats(reference, row)
            p = approximate_randomization(a, b, trials or DEFAULT_SAMPLES["ar"], score=self.score)
        return replace(base, p_value=p, se=se, ci=(observed - half, observed + half))

    def _per_seed(self, reference: str, row: str) -> tuple[tuple[str, float], ...]:
        """``(seed, Δ)`` for the seed values both rows trained with, in seed order."""
        base = dict(zip(self.seeds[reference], self.bleu[reference]))
        shared = [(s, x - base[s]) for s, x in zip(self.seeds[row], self.bleu[row]) if s in base]
        return tuple(sorted(shared, key=lambda p: value_order(_number(p[0]))))

    def _paired_stats(self, reference: str, row: str) -> tuple[np.ndarray, np.ndarray]:
        """(K, n, 10) statistics of both rows, paired by seed value where shared, else by rank."""
        a, b = dict(zip(self.seeds[reference], self.rows[reference])), dict(zip(self.seeds[row], self.rows[row]))
        shared = [s for s in a if s in b]
        if shared:
            pairs = [(a[s][1], b[s][1]) for s in shared]
        else:
            pairs = [(x[1], y[1]) for x, y in zip(self.rows[reference], self.rows[row])]
        return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])


def _number(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


# --------------------------------------------------------------------------------------
# Rows of a sweep
# --------------------------------------------------------------------------------------


def _usable(trials: Sequence[Trial], split: str) -> list[Trial]:
    ok = [t for t in trials if split in t.hyps and split in t.refs and len(t.hyps[split]) == len(t.refs[split])]
    return sorted(ok, key=lambda t: (value_order(t.seed), t.name))


def check_test(test: str) -> None:
    if test not in TESTS:
        raise ReportError(f"unknown significance test '{test}' (choose from: {', '.join(TESTS)})")


def split_scores(
    sweep: Sweep, n_samples: int = 0, test: str = DEFAULT_TEST, metric: str = DEFAULT_METRIC
) -> dict[str, SplitScores]:
    """:class:`SplitScores` of every test split with saved hypotheses (``n_samples`` bootstrap
    resamples; for ``ar``, whose samples are swaps, the bootstrap's default), on ``metric``."""
    samples = (n_samples if test != "ar" else 0) or DEFAULT_SAMPLES["bs"]
    return {split: SplitScores.of_sweep(sweep, split, samples, metric) for split in test_splits(sweep)}


def compare(
    sweep: Sweep,
    test: str = DEFAULT_TEST,
    n_samples: int = 0,
    plan: Optional[Sequence[tuple[str, str]]] = None,
    metric: str = DEFAULT_METRIC,
) -> list[Comparison]:
    """The table's comparisons on every test split with saved hypotheses, Holm-adjusted together.

    Args:
        sweep: the aggregated rows.
        test: a key of :data:`TESTS`.
        n_samples: bootstrap resamples (``seeds``, ``bs``) or random swaps (``ar``); 0 for the default.
        plan: ``(reference row, row)`` name pairs to compare; default the sweep's named
            comparisons (:func:`ablate.report.plan.planned_pairs`), else every row against the base.
        metric: the metric compared (``bleu``, ``chrf``, ``ter``, a plugin's).
    """
    from ablate.report.plan import planned_pairs

    check_test(test)
    if plan is None:
        plan = planned_pairs(sweep)
    return compare_scores(split_scores(sweep, n_samples, test, metric).values(), plan, test, n_samples)


def compare_scores(
    splits: Iterable[SplitScores], plan: Sequence[tuple[str, str]], test: str = DEFAULT_TEST, n_samples: int = 0
) -> list[Comparison]:
    """The ``plan``'s comparisons on every one of ``splits``, Holm-adjusted together: what puts a
    † on a table's row (:func:`compare`), and what ``ablate calibrate`` runs on relabelled tables."""
    found = [
        c for scores in splits for ref, name in plan if (c := scores.compare(ref, name, test, n_samples)) is not None
    ]
    tested = [c for c in found if c.tested]
    adjusted = iter(holm([c.p_value for c in tested]))
    return [replace(c, p_adjusted=next(adjusted)) if c.tested else c for c in found]


def against_base(comparisons: Sequence[Comparison], sweep: Sweep) -> dict[tuple[str, str], Comparison]:
    """``{(row, split): Comparison}`` for the comparisons against the base row."""
    return {(c.row, c.split): c for c in comparisons if c.reference == sweep.base.name}


def test_splits(sweep: Sweep) -> list[str]:
    """Test splits with saved hypotheses (the validation split's are saved too, but not tested)."""
    from ablate.report.validation import tested_splits

    return tested_splits([t for r in sweep.rows for t in r.trials])


def describe(test: str, n_samples: int) -> dict[str, Any]:
    """Words for the footnote: the test's name and its number of samples."""
    return {"name": TESTS[test], "samples": n_samples or DEFAULT_SAMPLES[test]}


# --------------------------------------------------------------------------------------
# Robustness of a mark: the same comparison with a σ from its own two rows alone
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hinge:
    """A marked comparison re-run on its two rows alone (their own seeds give the σ).

    Attributes:
        comparison: as the table made it (σ pooled over every row of the table).
        alone: the same two rows tabled by themselves (None: they have no seed variance of their own).
        p_adjusted: the Holm-adjusted p the table would give it with ``alone``'s p in place of its own.
    """

    comparison: Comparison
    alone: Optional[Comparison]
    p_adjusted: float

    def holds(self, alpha: float) -> bool:
        return self.alone is not None and self.alone.tested and self.p_adjusted < alpha


def marks_alone(comparisons: Sequence[Comparison], alpha: float, alone: Any) -> list[Hinge]:
    """Every marked comparison (Holm p < ``alpha``) re-run by ``alone(comparison)``, which tables its
    two rows by themselves and compares them (:func:`compare_alone` for a sweep); the rest of the table's
    p-values stay in the Holm family, so a mark that does not hold here hinges on the σ the table pooled
    over its unrelated rows (their seeds, their df), not on what the two rows themselves show."""
    tested = [c for c in comparisons if c.tested]
    out = []
    for i, c in enumerate(tested):
        if not c.significant(alpha):
            continue
        own = alone(c)
        ps = [x.p_value for x in tested]
        ps[i] = own.p_value if own is not None and own.tested else 1.0
        out.append(Hinge(c, own, holm(ps)[i]))
    return out


def compare_alone(sweep: Sweep, comparison: Comparison, n_samples: int = 0) -> Optional[Comparison]:
    """``comparison`` re-run on a table of its two rows only (the same trials, test and samples)."""
    rows = [r for r in sweep.rows if r.name in (comparison.reference, comparison.row)]
    if len(rows) != 2:
        return None
    pair = replace(sweep, rows=sorted(rows, key=lambda r: r.name != comparison.reference), comparisons=None)
    scores = SplitScores.of_sweep(pair, comparison.split, n_samples or DEFAULT_SAMPLES["seeds"], comparison.metric)
    return scores.compare(comparison.reference, comparison.row, comparison.test)
