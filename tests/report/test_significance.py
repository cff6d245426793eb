"""Seed-aware and sentence-level tests, Holm's correction, named comparisons."""

from __future__ import annotations

import gzip
import math
import random
import statistics

import numpy as np
import pytest
import sacrebleu
from scipy import stats as st

import ablate.report.stats as sig
from ablate.report.stats import SplitScores, against_base, aggregate, bleu_from_stats, compare, holm, sentence_stats
from ablate.report.trials import ReportError, collect

from tests.helpers.records import SPLITS, make_mixed_seed_sweep

VOCAB = [f"w{i}" for i in range(200)]


def _refs(n: int = 80) -> list[str]:
    rng = random.Random(0)
    return [" ".join(rng.choice(VOCAB) for _ in range(12)) + "." for _ in range(n)]


def _noisy(refs: list[str], rate: float, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(VOCAB) if rng.random() < rate else w for w in r.split()) for r in refs]


def _stats(refs: list[str], rate: float, seeds: tuple[int, ...]) -> np.ndarray:
    return np.stack([sentence_stats(_noisy(refs, rate, s), refs) for s in seeds])


@pytest.mark.parametrize("rate", [0.0, 0.2, 0.5, 0.9, 1.0])
def test_bleu_from_sufficient_statistics_equals_sacrebleu(rate):
    refs = _refs(40)
    hyps = _noisy(refs, rate, 3)
    hyps[0] = ""  # an empty hypothesis, as a barely trained model writes
    stats = sentence_stats(hyps, refs)
    assert stats.shape == (40, 10)
    assert float(bleu_from_stats(stats.sum(axis=0))) == pytest.approx(
        sacrebleu.corpus_bleu(hyps, [refs]).score, rel=1e-12, abs=1e-12
    )
    half = stats[:20].sum(axis=0)  # any subset, e.g. a bootstrap resample or a length bucket
    assert float(bleu_from_stats(half)) == pytest.approx(
        sacrebleu.corpus_bleu(hyps[:20], [refs[:20]]).score, rel=1e-12, abs=1e-12
    )


def _scores(rows: dict[str, list[tuple[int, np.ndarray]]], samples: int = 300) -> SplitScores:
    return SplitScores("test", rows, samples)


def _row(refs: list[str], rates: dict[int, float]) -> list[tuple[int, np.ndarray]]:
    """One configuration's seeds: seed -> its error rate (a whole-run quality)."""
    return [(seed, sentence_stats(_noisy(refs, rate, seed), refs)) for seed, rate in rates.items()]


@pytest.mark.parametrize("test", ["seeds", "bs", "ar"])
def test_identical_systems_are_not_significant(test):
    rows = _row(_refs(), {1: 0.3, 2: 0.35})
    c = _scores({"a": rows, "b": list(rows)}).compare("a", "b", test)
    assert c.bleu == c.base_bleu and c.p_value == 1.0


@pytest.mark.parametrize("test", ["seeds", "bs", "ar"])
def test_a_clearly_better_system_is_significant(test):
    refs = _refs()
    c = _scores({"a": _row(refs, {1: 0.5, 2: 0.52}), "b": _row(refs, {1: 0.1, 2: 0.12})}).compare("a", "b", test)
    # the seed-aware test of two rows of two paired seeds has one df of seed variance (Student t_1):
    # even a 57-BLEU Δ reaches only p ~0.02 there; the sentence-only tests see no seed noise at all
    assert c.bleu > c.base_bleu + 20 and c.p_value < (0.05 if test == "seeds" else 0.01)
    assert c.ci[0] > 0 and c.ci[0] < c.delta < c.ci[1]


def test_ar_tests_the_shown_delta_of_rows_with_unequal_seeds():
    # the row's seed 2 is far better; its seed 1 is the base's seed 1 word for word. The table shows the Δ of
    # the row means (+20 BLEU or so); ar paired seed values and dropped the rest, so it tested the seed-1
    # pair's Δ of 0 (p = 1). Now it permutes each sentence over all three trials: the test of the shown Δ.
    refs = _refs()
    same = _row(refs, {1: 0.5})
    scores = _scores({"a": same, "b": same + _row(refs, {2: 0.1})})
    c = scores.compare("a", "b", "ar", trials=2000)
    assert c.delta > 10 and c.p_value < 0.01  # before: p = 1.0


def test_the_ar_footnote_counts_its_shuffles_not_bootstrap_samples(variant_sweep):
    # `--test ar --samples 500` said "500 bootstrap samples": ar's samples are random reassignments, and its
    # intervals come from the bootstrap's default 2000 resamples, which the footnote did not name
    from ablate.report import table

    text = " ".join(table(variant_sweep, test="ar", samples=500).table.footnotes)
    assert "500 random reassignments (95% CIs: 2000 bootstrap samples)" in text
    assert "500 bootstrap samples" not in text


def test_the_score_is_the_mean_over_seeds_of_corpus_bleu():
    refs = _refs()
    rates = {1: 0.2, 2: 0.4, 3: 0.3}
    c = _scores({"a": _row(refs, rates), "b": _row(refs, {1: 0.2})}).compare("a", "b")
    expected = np.mean([sacrebleu.corpus_bleu(_noisy(refs, r, s), [refs]).score for s, r in rates.items()])
    assert c.base_bleu == pytest.approx(expected)


def test_misaligned_inputs_are_a_one_line_error():
    with pytest.raises(ReportError, match="differ in length"):
        sentence_stats(["a"], ["a", "b"])
    with pytest.raises(ReportError, match="different numbers of sentences"):
        _scores({"a": [(1, np.ones((3, 10)))], "b": [(1, np.ones((4, 10)))]})


def test_unknown_test_lists_the_choices(variant_sweep):
    with pytest.raises(ReportError, match="unknown significance test 't' .choose from: seeds, bs, ar"):
        compare(aggregate(collect(str(variant_sweep))), test="t")


@pytest.mark.parametrize("samples", [-1, 2.5, True])
def test_a_negative_or_fractional_number_of_resamples_is_one_line_everywhere(variant_sweep, tmp_path, samples):
    import ablate

    sweep = aggregate(collect(str(variant_sweep)))
    for call in (
        lambda: compare(sweep, n_samples=samples),
        lambda: ablate.table(variant_sweep, samples=samples),  # before: numpy's "negative dimensions"
        lambda: ablate.plot(variant_sweep, samples=samples),
    ):
        with pytest.raises(ReportError, match=f"samples={samples!r}: give a whole number of resamples, or 0"):
            call()


@pytest.mark.parametrize("test", ["seeds", "bs"])
def test_one_resample_is_refused_where_the_test_needs_a_variance(variant_sweep, test):
    # --samples 1: the variance of one bootstrap Δ is nan, so the seed test's p was nan and the table said "No † is
    # claimed: every row has one seed" of rows of 3 seeds; the bootstrap's SE and CI were nan
    import ablate

    sweep = aggregate(collect(str(variant_sweep)))
    for call in (
        lambda: compare(sweep, test=test, n_samples=1),
        lambda: ablate.table(variant_sweep, test=test, samples=1),
    ):
        with pytest.raises(
            ReportError, match="^samples=1: the variance of a Δ needs at least 2 resamples; give 2 or more"
        ):
            call()
    assert all(c.tested for c in compare(sweep, test="ar", n_samples=1))  # ar's samples are swaps


def test_a_whole_run_seed_shift_fools_the_sentence_test_but_not_the_seed_aware_one():
    """Two seeds of ONE configuration whose runs differ in quality throughout (a seed shift):
    the sentence bootstrap calls them different, the seed-aware test (σ from the table's
    replicated rows, which show the same seed spread) does not."""
    refs = _refs(200)
    spread = {1: 0.25, 2: 0.33}  # one config: seed 2 is a worse run everywhere
    rows = {
        "other": _row(refs, {1: 0.40, 2: 0.48}),
        "cfg@1": _row(refs, {1: spread[1]}),
        "cfg@2": _row(refs, {2: spread[2]}),
    }
    scores = _scores(rows, samples=500)
    assert scores.compare("cfg@1", "cfg@2", "bs").p_value < 0.01
    seed_aware = scores.compare("cfg@1", "cfg@2", "seeds")
    assert seed_aware.p_value > 0.05 and not seed_aware.paired


def test_no_seed_variance_no_test():
    refs = _refs()
    c = _scores({"a": _row(refs, {1: 0.5}), "b": _row(refs, {1: 0.1})}).compare("a", "b", "seeds")
    assert not c.tested and "every row of the table has one seed" in c.note
    assert not c.significant(0.05)


def test_seed_noise_fit_against_hand_computed_anova():
    # rows A, B x seeds 1, 2: the two-way residual of a 2 x 2 table is the interaction,
    # SS = (x11 - x12 - x21 + x22)^2 / 4 with 1 df; the one-way pooled variance is the mean of the rows'
    noise = sig.fit_seed_noise({"A": {1: 1.0, 2: 3.0}, "B": {1: 2.0, 2: 5.0}})
    assert noise.paired == pytest.approx(math.sqrt((1 - 3 - 2 + 5) ** 2 / 4)) and noise.paired_df == 1
    assert noise.unpaired == pytest.approx(math.sqrt((2.0 + 4.5) / 2)) and noise.unpaired_df == 2
    # same seed values, but the paired fit's 1 df carries less than the unpaired fit's 2: unpaired
    assert noise.for_rows([1, 2], [2, 1]) == (noise.unpaired, 2, False)
    assert noise.for_rows([1, 2], [3, 4])[2] is False
    rng = np.random.default_rng(3)
    five_by_three = sig.fit_seed_noise({f"r{i}": {s: float(rng.normal()) for s in (1, 2, 3)} for i in range(5)})
    assert (five_by_three.paired_df, five_by_three.unpaired_df) == (8, 10)
    assert five_by_three.for_rows([1, 2, 3], [3, 2, 1])[1:] == (8, True)  # 8 df of 10: pairing pays
    lone = sig.fit_seed_noise({"A": {1: 1.0}, "B": {2: 2.0}})
    assert (lone.paired, lone.unpaired) == (None, None)  # one seed per row, none shared: no σ


def test_seed_test_without_sentence_noise_is_students_t_test():
    a, b = [10.1, 11.3, 9.8], [11.9, 12.4, 11.0]
    noise = sig.fit_seed_noise({"a": dict(zip((1, 2, 3), a)), "b": dict(zip((4, 5, 6), b))})
    result = sig.seed_test(a, b, 0.0, noise.unpaired, noise.unpaired_df, False)
    reference = st.ttest_ind(b, a, equal_var=True)
    assert result.p_value == pytest.approx(reference.pvalue, rel=1e-9)
    assert result.df == pytest.approx(4)
    lo, hi = result.interval(0.95)
    assert (hi - lo) / 2 == pytest.approx(st.t.ppf(0.975, 4) * result.se)


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 3])
def test_seed_test_keeps_its_size_with_few_seeds_and_sentence_noise(k):
    # Simulated nulls with the noise measured on results/calibration-cpu (per-trial seed σ 0.7, sentence
    # variance of a k-vs-k Δ ~0.065): the false-positive rate at alpha 0.05 must not exceed alpha. The
    # plug-in Welch-Satterthwaite df (largest when σ happens to come out small) gave 7.6% at k = 2.
    rng = np.random.default_rng(7)
    sigma, sentence, n = 0.7, 0.065, 4000
    hits = 0
    for _ in range(n):
        a, b = rng.normal(0, sigma, k), rng.normal(math.sqrt(sentence) * rng.normal(), sigma, k)
        noise = sig.fit_seed_noise({"a": dict(enumerate(a)), "b": dict(enumerate(b, start=k))})
        hits += sig.seed_test(list(a), list(b), sentence, noise.unpaired, noise.unpaired_df, False).p_value < 0.05
    assert hits / n <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / n)


@pytest.mark.parametrize(
    "rows, seeds, paired",
    [
        (2, 2, False),
        (2, 3, False),
        (2, 4, False),
        (3, 2, False),
        (2, 5, True),
        (2, 8, True),
        (3, 3, True),
        (4, 2, True),
        (4, 3, True),
        (4, 4, True),
        (5, 3, True),
        (8, 2, True),
        (10, 3, True),
        (19, 2, True),
    ],
)
def test_the_paired_fit_is_used_where_its_df_carry_the_most_information(rows, seeds, paired):
    n = rows * seeds
    assert sig.use_paired(n - (rows + seeds - 1), n - rows) is paired


def test_a_seed_sigma_below_what_the_sentence_bootstrap_puts_inside_it_is_floored():
    # Two rows of two seeds whose per-trial BLEUs happen to agree within 0.01 while each trial's own
    # bootstrap says its seed x sentence interaction alone moves it by sd 0.5: σ̂ (2 df) is known to
    # be too small, and Δ 0.5 is one SE, not 70.
    rng = np.random.default_rng(3)
    shared = rng.normal(0, 0.05, 4000)
    bleu = {"a": [10.0, 10.01], "b": [10.5, 10.51]}
    boot = {r: [x + shared + rng.normal(0, 0.5, 4000) for x in v] for r, v in bleu.items()}
    scores = SplitScores.of_values("t", bleu, boot, {"a": ["1", "2"], "b": ["3", "4"]})
    c = scores.compare("a", "b")
    assert scores.noise.unpaired == pytest.approx(0.00707, rel=0.01)  # the 2-df estimate
    assert c.sigma == pytest.approx(0.5, rel=0.05) and c.sigma_df == 2 and c.sigma_floored
    assert 0.3 < c.p_value < 0.6
    assert sig.floored(0.7, 0.25) == 0.7 and sig.floored(None, 0.25) is None


def test_the_per_seed_part_of_the_bootstrap_variance_is_split_off_once():
    # trial bootstrap = config part (shared by the row's seeds, variance 0.01) + seed part (variance 0.12)
    rng = np.random.default_rng(0)
    shared = {r: rng.normal(0, 0.1, 20000) for r in "ab"}
    boots = {r: [shared[r] + rng.normal(0, math.sqrt(0.12), 20000) for _ in range(4)] for r in "ab"}
    s = sig.per_seed_sentence_var(boots)
    assert s == pytest.approx(0.12, rel=0.05)
    v = float(np.var(np.mean(boots["b"], 0) - np.mean(boots["a"], 0), ddof=1))  # 0.02 + 0.12 * (1/4 + 1/4)
    assert sig.sentence_split(v, s, 4, 4) == pytest.approx(0.02, abs=0.004)
    assert sig.per_seed_sentence_var({"a": [shared["a"]]}) == 0.0  # one seed: nothing to split


def test_predicted_power_matches_a_simulated_t_test():
    rng = np.random.default_rng(5)
    sigma, k, delta, n = 0.7, 3, 1.5, 4000
    a, b = rng.normal(0, sigma, (n, k)), rng.normal(delta, sigma, (n, k))
    simulated = float(np.mean(st.ttest_ind(b, a, axis=1).pvalue < 0.05))
    assert sig.power(delta, sigma, 2 * k - 2, k, k, 0.0, 0.05) == pytest.approx(simulated, abs=0.02)


def test_seeds_needed_counts_the_sentence_variance_once():
    # mission-cpu's heads-8 (Δ -0.75, σ 0.555 with 18 df, alpha 0.05/10): its Δ's bootstrap variance
    # v = 0.0286 is almost all per-seed part (s = 0.0395 per trial: 0.0263 of a 3-vs-3 Δ). The old
    # formula held all of v fixed as k grows and asked for 61 seeds; the k-independent part alone, ~18.
    sigma, v, s, alpha = 0.555, 0.0286, 0.0395, 0.005
    fixed = sig.sentence_split(v, s, 3, 3)
    assert 12 <= sig.seeds_needed(-0.75, sigma, fixed, alpha, 10, True) <= 22
    assert sig.seeds_needed(-0.75, sigma, v, alpha, 10, True) > 40  # the double-counting formula


def _two_row_power(k: int, delta: float, sigma: float, v0: float, alpha: float, draws: int = 4000) -> float:
    """How often seed_test finds ``delta`` between two rows of k normal seeds (distinct seed values, so
    the within-row σ at 2(k-1) df), the Δ carrying a k-independent test-set part of variance ``v0``;
    the σ floored at a per-seed sentence variance of 0.04 as compare() does."""
    rng = np.random.default_rng(k)
    a = rng.normal(0.0, sigma, (draws, k))
    b = rng.normal(delta, sigma, (draws, k)) + rng.normal(0.0, math.sqrt(v0), (draws, 1))
    within = np.sum((a - a.mean(1, keepdims=True)) ** 2, 1) + np.sum((b - b.mean(1, keepdims=True)) ** 2, 1)
    sigmas = np.sqrt(within / (2 * k - 2))  # (draws,): fit_seed_noise's within-row σ of each table
    noise = sig.fit_seed_noise({"a": dict(enumerate(a[0])), "b": {k + i: x for i, x in enumerate(b[0])}})
    assert noise.unpaired == pytest.approx(sigmas[0]) and noise.unpaired_df == 2 * k - 2
    found = [
        sig.seed_test(a[i], b[i], v0, sig.floored(float(sigmas[i]), 0.04), 2 * k - 2, False).p_value < alpha
        for i in range(draws)
    ]
    return float(np.mean(found))


def test_the_advised_seeds_give_the_table_test_80_percent_power_and_one_fewer_does_not():
    # The normal-quantile rule advised 4 seeds here; the table's test (t at 6 df) has 75% power with 4.
    delta, sigma, v0, alpha = 1.5, 0.65, 0.01, 0.05
    k = sig.seeds_needed(delta, sigma, v0, alpha, rows=2, shared=False)
    assert k == 5
    assert _two_row_power(k, delta, sigma, v0, alpha) >= 0.8
    assert _two_row_power(k - 1, delta, sigma, v0, alpha) < 0.8


def _nct_power(nc: float, df: float, alpha: float) -> float:
    crit = st.t.ppf(1 - alpha / 2, df)
    return float(st.nct.sf(crit, df, nc) + st.nct.cdf(-crit, df, nc))


def test_power_is_the_noncentral_t_of_scipy_stats_and_stays_finite_far_in_the_tail():
    checked = 0
    for df in (1, 2, 4, 6, 18, 200):
        for nc in (0.0, 0.5, 1.5, 2.8, 4.0, 6.0, 9.0):
            for alpha in (0.05, 0.005, 0.05 / 18):
                ours, ref = sig.power(nc, 1.0, df, 2, 2, 0.0, alpha), _nct_power(nc, df, alpha)
                if math.isnan(ref):  # scipy.stats' lower tail gives up; it is below min(alpha/2, Φ(-nc)) there
                    ref = float(st.nct.sf(st.t.ppf(1 - alpha / 2, df), df, nc))
                    assert ours == pytest.approx(ref, abs=min(alpha / 2, st.norm.sf(nc)))
                else:
                    assert ours == pytest.approx(ref, abs=1e-12)
                    checked += 1
    assert checked > 100
    assert sig.power(10.0, 1.0, 18, 2, 2, 0.0, 0.05) == pytest.approx(1.0, abs=1e-9)
    assert sig.power(60.0, 1.0, 1, 2, 2, 0.0, 0.05) == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("rows, shared", [(2, False), (2, True), (3, True), (10, True), (19, True), (4, False)])
def test_seeds_needed_is_the_smallest_k_with_80_percent_noncentral_t_power(rows, shared):
    sigma = 0.7
    for delta, v0, alpha in [(1.5, 0.0, 0.05), (2.4, 0.03, 0.05 / 18), (0.75, 0.0, 0.005), (3.0, 0.01, 0.005)]:
        k = sig.seeds_needed(delta, sigma, v0, alpha, rows, shared)
        assert k is not None
        powers = [
            _nct_power(delta / math.sqrt(2 * sigma**2 / n + v0), sig.design_df(rows, n, shared), alpha)
            for n in range(2, k + 1)
        ]
        assert powers[-1] >= 0.8 and all(p < 0.8 for p in powers[:-1])


def test_design_df_is_the_df_of_the_fit_and_pairs_as_the_table_would():
    # fit_seed_noise on a balanced table of 4 rows x 3 shared seeds: (R-1)(k-1) = 6 paired, R(k-1) = 8 within
    rng = np.random.default_rng(0)
    noise = sig.fit_seed_noise({r: {s: float(rng.normal()) for s in range(3)} for r in "abcd"})
    assert (noise.paired_df, noise.unpaired_df) == (6, 8)
    assert sig.design_df(4, 3, True) == (6 if sig.use_paired(6, 8) else 8)
    assert sig.design_df(2, 2, True) == 2  # 2 rows x 2 shared seeds: the 1-df paired fit is not taken
    assert sig.design_df(19, 2, True) == 18 and sig.design_df(19, 2, False) == 19  # table3-cpu's 18 df
    assert sig.design_df(10, 3, True) == 18  # mission-cpu's


def test_detectable_effect_has_80_percent_power_and_seeds_needed_agrees():
    sigma, sentence = 0.7, 0.04
    for df in (2, 6, 18, 10_000):
        for alpha in (0.05, 0.005):
            mde = sig.detectable(sigma, df, 3, sentence, alpha)
            assert _nct_power(mde / math.sqrt(2 * sigma**2 / 3 + sentence), df, alpha) == pytest.approx(0.8, abs=1e-6)
    # (t + t) · SE, the shortcut, had 76.6% power at 2 df, alpha 0.05
    se = math.sqrt(2 * sigma**2 / 2 + sentence)
    short = (st.t.ppf(0.975, 2) + st.t.ppf(0.8, 2)) * se
    assert _nct_power(short / se, 2, 0.05) == pytest.approx(0.766, abs=0.001)
    assert sig.detectable(sigma, 2, 2, sentence, 0.05) > short * 1.05
    for rows, k in [(2, 2), (2, 3), (10, 3), (19, 2), (5, 10)]:
        df = sig.design_df(rows, k, True)
        mde = sig.detectable(sigma, df, k, sentence, 0.05)
        assert sig.seeds_needed(mde * 1.0001, sigma, sentence, 0.05, rows, True) == k
    assert sig.seeds_needed(0.1, sigma, sentence, 0.05, 2, True) is None  # the test set alone hides 0.1 BLEU
    assert sig.seeds_needed(0.05, sigma, 0.0, 0.05, 10, True) == sig.MAX_SEEDS + 1  # 3,000+: "more than 1,000"
    assert sig.seeds_needed(0.05, sigma, 0.0, 0.05, 10, True, max_seeds=5000) == pytest.approx(3077, abs=30)


def test_without_seed_variance_the_mde_is_that_of_the_normal_test_the_table_runs():
    # every seed of every row scored alike (σ 0): seed_test compares Δ / SE with the normal (df inf), but the MDE
    # footnote took the noncentral t at the fit's 3 df (18.71 BLEU on such a 3x2 table, where the test has 80% power
    # at 10.62), and power() too
    sentence, alpha = 12.5, 0.025
    mde = sig.detectable(0.0, 3, 2, sentence, alpha)
    assert sig.seed_test([0.0, 0.0], [mde, mde], sentence, 0.0, 3, False).df == math.inf
    power = st.norm.sf(st.norm.ppf(1 - alpha / 2) - mde / math.sqrt(sentence))
    assert power == pytest.approx(0.8, abs=1e-4)
    assert sig.power(mde, 0.0, 3, 2, 2, sentence, alpha) == pytest.approx(0.8, abs=1e-4)


@pytest.mark.parametrize("alpha", [0.0, -0.1, 2.5])
def test_a_level_outside_0_to_1_is_refused_not_searched_forever(alpha):
    # ablate table --alpha 0 (the option allows 0), ablate power --alpha 0 and ablate.table(..., alpha=5) never
    # ended: the MDE's search for the noncentrality with 80% power doubled it forever (no power at any)
    import threading

    for call in (
        lambda: sig.detectable(0.7, 18, 3, 0.01, alpha),
        lambda: sig.seeds_needed(2.0, 0.7, 0.01, alpha, 10, True),
        lambda: sig.power(2.0, 0.7, 18, 3, 3, 0.01, alpha),
    ):
        raised: list[BaseException] = []
        worker = threading.Thread(target=lambda c=call, r=raised: r.append(pytest.raises(ReportError, c).value))
        worker.daemon = True
        worker.start()
        worker.join(20)
        assert not worker.is_alive() and raised, "still searching"
        assert str(raised[0]) == f"alpha={alpha:g}: a significance level is above 0 and at most 1"


def test_per_seed_deltas_pair_by_seed_and_flag_disagreement():
    refs = _refs()
    c = _scores({"a": _row(refs, {1: 0.3, 2: 0.3}), "b": _row(refs, {2: 0.1, 1: 0.5})}).compare("a", "b")
    assert [s for s, _ in c.per_seed] == ["1", "2"]
    assert c.per_seed[0][1] < 0 < c.per_seed[1][1] and c.sign_flip


def test_holm_bonferroni():
    # Holm (1979): sorted p (0.01, 0.02, 0.03, 0.5) x (4, 3, 2, 1), made monotone, capped at 1
    assert holm([0.03, 0.01, 0.5, 0.02]) == pytest.approx([0.06, 0.04, 0.5, 0.06])
    assert holm([0.9, 0.8]) == [1.0, 1.0]
    assert holm([0.01, 0.04]) == pytest.approx([0.02, 0.04])
    assert holm([]) == []


def test_sweep_comparisons_mark_what_differs(variant_sweep):
    sweep = aggregate(collect(str(variant_sweep)))
    found = compare(sweep, n_samples=300)
    comps = against_base(found, sweep)
    assert len(found) == 8 and {c.reference for c in found} == {"base"}
    assert {name for name, _ in comps} == {"A-heads1", "A-heads8", "B-dk16", "E-learned"}
    assert {split for _, split in comps} == set(SPLITS)
    raw = [c.p_value for c in found]
    assert [c.p_adjusted for c in found] == pytest.approx(holm(raw))
    for split in SPLITS:
        assert comps[("A-heads8", split)].p_value == 1.0  # identical hypotheses
        assert comps[("A-heads8", split)].seeds == (3, 3)
        assert comps[("E-learned", split)].significant(0.05)  # clearly better, after Holm
        assert comps[("E-learned", split)].bleu > comps[("E-learned", split)].base_bleu
        assert comps[("E-learned", split)].seeds == (3, 2)  # its seed 3 is still running
        assert comps[("A-heads1", split)].significant(0.05)  # clearly worse
        assert comps[("A-heads1", split)].bleu < comps[("A-heads1", split)].base_bleu


def test_a_named_pair_with_the_base_second_marks_the_rows_cell_against_the_base(variant_sweep):
    # comparisons {between: variant, values: [A-heads1, base]}: the pair was tested and significant, but A-heads1's
    # cells had no † and no Δ (only pairs with the base as reference reached the cells), though the footnote says
    # "In the cells, † compares a row with the base"
    from dataclasses import replace

    from ablate.report.layout import MARK, build_table

    sweep = replace(aggregate(collect(str(variant_sweep))), comparisons=[("variant", ["A-heads1", "base"])])
    found = compare(sweep, n_samples=300)
    assert [(c.reference, c.row) for c in found] == [("A-heads1", "base")] * 2
    comps = against_base(found, sweep)
    for direct in found:
        c = comps[("A-heads1", direct.split)]
        assert (c.reference, c.row, c.seeds) == ("base", "A-heads1", direct.seeds[::-1]) and c.significant(0.05)
        assert c.delta == pytest.approx(-direct.delta) and c.delta < 0 and c.p_adjusted == direct.p_adjusted
        assert c.ci == pytest.approx((-direct.ci[1], -direct.ci[0]))
        assert [d for _, d in c.per_seed] == pytest.approx([-d for _, d in direct.per_seed])
    row = next(r for r in build_table(sweep, found).rows if r.name == "A-heads1")
    assert sum(cell.mark == MARK for cell in row.cells) == 2


def test_resampling_many_trials_at_once_is_exact_and_done_once_per_trial():
    rng = np.random.default_rng(0)
    counts = [rng.integers(0, 30, size=(50, 10)).astype(np.float64) for _ in range(70)]  # two matrix products
    counts.append(rng.integers(0, 10**6, size=(50, 10)).astype(np.float64))  # sums past 2^24: in float64
    scores = rng.random((50, 2))  # not whole numbers: resampled one by one
    resamples = sig.Resamples(50, 200)
    many = resamples.bleu_many(counts + [scores])
    for stats, boot in zip(counts + [scores], many):
        assert np.array_equal(boot, bleu_from_stats(resamples.weights @ stats))  # bit for bit
    again = resamples.bleu_many(counts[:3])
    assert all(a is b for a, b in zip(again, many[:3]))  # the same trial's statistics are not resampled again
    assert np.array_equal(sig.Resamples.shared(50, 200).weights, resamples.weights)
    assert sig.Resamples.shared(50, 200) is sig.Resamples.shared(50, 200)


def test_resampling_more_trials_than_the_store_keeps_in_one_call():
    """More than 4,096 statistics arrays in one call: the in-process store is emptied as it fills,
    and every array still gets its own resampled scores (no KeyError)."""
    rng = np.random.default_rng(3)
    counts = [rng.integers(0, 30, size=(6, 10)).astype(np.float64) for _ in range(4200)]
    resamples = sig.Resamples(6, 20)
    for stats, boot in zip(counts, resamples.bleu_many(counts)):
        assert np.array_equal(boot, bleu_from_stats(resamples.weights @ stats))


def test_resampling_bleu_shaped_statistics_multiplies_fewer_columns_bit_for_bit():
    """BLEU's columns: the references' lengths shared by every trial, the n-gram totals the length
    minus n - 1 but on short lines: resampled from fewer columns, each equal to ``weights @ stats``."""
    rng = np.random.default_rng(1)
    n, ref_len = 300, rng.integers(0, 30, size=300).astype(np.float64)
    trials = []
    for _ in range(130):  # three products of 64
        length = rng.integers(4, 30, size=n)
        length[rng.random(n) < 0.03] = rng.integers(0, 4)  # a few lines of 0 to 3 words
        matches = np.minimum(length[:, None], rng.integers(0, 25, size=(n, 4)))
        totals = np.maximum(length[:, None] - np.arange(4), 0)
        trials.append(np.column_stack([length, ref_len, matches, totals]).astype(np.float64))
    trials.append(np.column_stack([ref_len + 10**6, ref_len, trials[0][:, 2:]]))  # sums past 2^24: in float64
    resamples = sig.Resamples(n, 200)
    columns, derived = sig._columns(trials[1], trials[0])
    assert columns == [0, 2, 3, 4, 5] and [d[:2] for d in derived] == [(1, -1), (6, 0), (7, 0), (8, 0), (9, 0)]
    summed = dict(sig._resample_counts(resamples.weights, trials, resamples._single))
    for stats in trials:
        assert np.array_equal(summed[id(stats)], resamples.weights @ stats)  # bit for bit
    for stats, boot in zip(trials, resamples.bleu_many(trials)):
        assert np.array_equal(boot, bleu_from_stats(resamples.weights @ stats))


def test_a_plugins_score_gets_one_trials_resamples_at_a_time():
    """Ours score 64 trials' (B, k) sums as one array; a plugin's ``from_statistics`` may expect (B, k)."""
    rng = np.random.default_rng(2)
    counts = [rng.integers(0, 30, size=(40, 2)).astype(np.float64) for _ in range(5)]

    def ratio(stats: np.ndarray) -> np.ndarray:
        assert stats.ndim == 2
        return stats[:, 0] / (stats[:, 1] + 1)

    resamples = sig.Resamples(40, 100)
    for stats, boot in zip(counts, resamples.bleu_many(counts, ratio)):
        assert np.array_equal(boot, ratio(resamples.weights @ stats))


def _fresh_process() -> None:
    """What a new process starts without: the in-process statistics, index and resampled scores."""
    from ablate import metrics as scorer_module

    scorer_module.flush_index()
    scorer_module._INDEXES.clear()
    scorer_module._CACHE.clear()
    sig.Resamples.shared.cache_clear()


def _backdated(folder, seconds: float) -> None:
    """Every saved text of ``folder`` given an mtime ``seconds`` ago (not "racily clean" for the index)."""
    import os
    import time

    for path in folder.glob("*/*/*.txt*"):
        os.utime(path, ns=(time.time_ns() - int(seconds * 1e9),) * 2)


def test_a_second_table_reads_no_saved_text_and_a_touched_one_is_read_again(variant_sweep, tmp_path, monkeypatch):
    """The index knows each saved text by its path, size and mtime: a second table (a fresh process)
    decodes no text file at all; a hypothesis file rewritten to the same size gets a new mtime and is
    read, hashed and scored again."""
    import shutil

    from ablate.metrics import scorers as bleu
    from ablate.report import table as report_table, trials

    sweep = tmp_path / "sweep"
    shutil.copytree(variant_sweep, sweep)
    _backdated(sweep, 60)
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    _fresh_process()
    read, real_read = [], trials._read_text
    monkeypatch.setattr(trials, "_read_text", lambda path: read.append(path) or real_read(path))
    scored, real = [], bleu.sentence_stats
    monkeypatch.setattr(bleu, "sentence_stats", lambda *a, **k: scored.append(len(a[0])) or real(*a, **k))
    first = report_table(str(sweep), samples=100).render("md")
    assert read and scored and (tmp_path / "cache" / "statistics-index.json").is_file()
    _fresh_process()
    read.clear()
    scored.clear()
    assert report_table(str(sweep), samples=100).render("md") == first
    assert read == [] and scored == []  # not one text decoded, not one sentence scored

    hyps = sorted(sweep.glob("*/hyps/*.txt*"))[0]
    lines = trials._read_text(hyps)
    changed = [lines[0][::-1], *lines[1:]] if lines[0] != lines[0][::-1] else [lines[1][::-1], lines[0], *lines[2:]]
    text = "".join(line + "\n" for line in changed).encode("utf-8")
    size = hyps.stat().st_size
    hyps.write_bytes(gzip.compress(text, mtime=0) if hyps.name.endswith(".gz") else text)
    assert hyps.stat().st_size == size  # only the mtime tells the index it changed
    _backdated(sweep, 30)  # every file touched anew; only one changed
    _fresh_process()
    read.clear()
    report_table(str(sweep), samples=100).render("md")
    assert len(scored) == 1 and sum(scored) == len(lines)  # the changed file alone scored again
    assert hyps in read


def test_a_second_table_of_the_same_trials_scores_no_sentence(variant_sweep, tmp_path, monkeypatch):
    """The first render scores each trial's hypotheses once and caches the statistics on disk; a second
    render (a fresh process: the in-process cache emptied) reads them back and scores nothing."""
    from ablate import metrics as scorer_module
    from ablate.metrics import scorers as bleu
    from ablate.report import table as report_table

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    scorer_module._CACHE.clear()
    scored, real = [], bleu.sentence_stats
    monkeypatch.setattr(bleu, "sentence_stats", lambda *a, **k: scored.append(len(a[0])) or real(*a, **k))
    first = report_table(str(variant_sweep), samples=100).render("md")
    trials = len(scored)
    assert trials >= len([p for p in variant_sweep.iterdir() if (p / "hyps").is_dir()])  # every trial's splits
    scorer_module._CACHE.clear()
    assert report_table(str(variant_sweep), samples=100).render("md") == first
    assert len(scored) == trials


def test_the_statistics_index_forgets_deleted_texts_and_cache_files(tmp_path):
    """Entries whose text file or statistics file is gone leave the index when it is next written."""
    import json

    from ablate.metrics import Index

    root, kept = tmp_path / "cache", tmp_path / "hyps.txt"
    (root / "statistics").mkdir(parents=True)
    kept.write_text("a\n")
    (root / "statistics" / "present.npy").write_bytes(b"")
    index = Index(root)
    index.files = {str(kept): [2, 1, "d1", 1], str(tmp_path / "deleted.txt"): [2, 1, "d2", 1]}
    index.keys = {"k1": "present", "k2": "absent"}
    index.dirty = True
    index.flush()
    data = json.loads((root / "statistics-index.json").read_text())
    assert list(data["files"]) == [str(kept)] and data["keys"] == {"k1": "present"}


def test_a_shared_cache_index_nested_deep_is_ignored_never_a_recursion_error(tmp_path):
    """A team's shared ``ABLATE_CACHE`` whose statistics index another process (or a full disk) left nested deeper
    than the parser follows: every ``ablate table`` ended in a RecursionError traceback."""
    from ablate.metrics import Index

    (tmp_path / "statistics-index.json").write_text("[" * 200_000 + "]" * 200_000)
    assert Index(tmp_path).files == {}  # read as no index: every text is read and hashed again


def test_the_mde_and_seeds_needed_use_the_sigma_each_comparison_is_tested_with(tmp_path):
    """Rows that share the base's seeds are tested with the row + seed fit's σ, a row with other seeds with
    the within-row σ: the footnotes state both, the MDE for each, and each row's seeds needed at its own σ
    (they used the first comparison's σ and df for every row)."""
    from ablate.report import table as report_table
    from ablate.report.layout import _seeds_text

    result = report_table(str(make_mixed_seed_sweep(tmp_path / "mixed")), samples=300)
    tested = {
        c.comparison.row: c.comparison
        for r in result.table.rows
        for c in r.cells
        if c.comparison is not None and c.comparison.tested and c.comparison.split == SPLITS[0]
    }
    far, near = tested["heads1"], tested["drop0.0"]
    assert (far.paired, far.sigma_df, near.paired, near.sigma_df) == (False, 21, True, 15)
    assert far.sigma != near.sigma
    md = result.render("md")
    sigma = next(line for line in md.splitlines() if line.startswith("Seed σ"))
    assert f"{near.sigma:.2f} BLEU per trial, from a row + seed fit" in sigma and "(15 df" in sigma
    assert f"{far.sigma:.2f} BLEU from the pooled within-row spread (21 df) for heads1" in sigma
    mde = next(line for line in md.splitlines() if line.startswith("Minimum detectable"))
    for group in ([c for c in tested.values() if c.paired], [far]):
        c, sentence = group[0], statistics.median(x.sentence_fixed for x in group)
        strict = sig.detectable(c.sigma, c.sigma_df, 4, sentence, 0.05 / 12)
        assert f"{strict:.2f} BLEU" in mde and f"σ {c.sigma:.2f}" in mde
    needs = next(line for line in md.splitlines() if line.startswith("Seeds per row that"))
    own = _seeds_text(far, far.sigma, 0.05 / 12, 7, False)
    assert f"heads1 ({far.delta:+.2f}): {own}" in needs


def test_a_table_without_any_variance_states_no_mde(tmp_path):
    """Every trial wrote the same hypotheses (a degenerate model: BLEU the same for every seed and row): the seed σ
    is 0 and no Δ moves over resampled sentences, so there is no noise to size an effect against. The footnotes said
    'Minimum detectable effect ... 0.00 BLEU ...; smaller Δs are within this table's noise' and blamed the row's
    unreachable Δ of 0 on 'test-set noise'."""
    from ablate.report import table as report_table

    from tests.helpers.records import _corrupt, references, trial_summary, write_trial

    refs = references()
    hyps = {s: _corrupt(r, 0.97, random.Random(0), [f"w{i}" for i in range(300)]) for s, r in refs.items()}
    for variant, overrides in (("base", {}), ("heads1", {"model.heads": 1})):
        for seed in (1, 2):
            name = f"{variant}-s{seed}"
            summary = trial_summary(name, variant, overrides, seed, 2.04, 1000, {"variant": variant}, sweep="flat")
            write_trial(tmp_path / "flat", name, summary, hyps, refs)
    md = report_table(str(tmp_path / "flat"), samples=200).render("md")
    mde = next(line for line in md.splitlines() if line.startswith("Minimum detectable"))
    assert "0.00 BLEU" not in mde and "within this table's noise" not in mde
    assert "no variance" in mde
    needs = next(line for line in md.splitlines() if line.startswith("Seeds per row that"))
    assert "test-set noise" not in needs and "heads1 (+0.00): none (a Δ of 0)" in needs


def test_a_table_of_one_comparison_states_its_level_plainly(two_by_two):
    """Two rows, one split (the smallest sweep a user runs): the footnotes read 'Holm-Bonferroni over all 1
    comparisons', '4.28 BLEU at Holm's strictest level (alpha/1), 4.28 uncorrected' and '80% power at alpha/1'."""
    from ablate.report import table as report_table

    md = report_table(str(two_by_two), samples=200).render("md")
    assert "all 1 comparisons" not in md and "alpha/1" not in md
    assert "significant at alpha = 0.05, no correction needed for the table's one comparison (each row against" in md
    mde = next(line for line in md.splitlines() if line.startswith("Minimum detectable"))
    assert "BLEU at alpha 0.05;" in mde and "uncorrected" not in mde
    needs = next(line for line in md.splitlines() if line.startswith("Seeds per row that"))
    assert "(80% power at alpha 0.05 with that many seeds" in needs


def _shared_seed_tables(rows: int, k: int, effect: float, shift: float, n: int, rng) -> list[list]:
    """``n`` tables of ``rows`` rows x ``k`` shared seeds, y = seed effect (variance ``effect``) + N(0, 1), ``shift``
    added to row 1, each row tested against the first as the table tests it (no test-set variance)."""
    names, out = [f"r{i}" for i in range(rows)], []
    for _ in range(n):
        seed = rng.normal(0, math.sqrt(effect), k)
        bleu = {r: list(seed + rng.normal(0, 1, k) + (shift if i == 1 else 0.0)) for i, r in enumerate(names)}
        boot = {r: [np.full(4, x) for x in v] for r, v in bleu.items()}
        scores = SplitScores.of_values("t", bleu, boot, {r: [str(s) for s in range(k)] for r in names})
        out.append(sig.compare_scores([scores], [("r0", r) for r in names[1:]]))
    return out


def test_shared_seeds_with_a_seed_effect_keep_the_size_and_gain_the_power_of_the_paired_fit():
    # The shipped tables' seed main effect (two-way ANOVA, tau^2 / sigma_e^2 = 0.50-2.67) sits in the within-row
    # variance of rows that share seeds: 4x3 (table3-budget-cpu's design) tested within-row held 2.5% at nominal
    # 5% and found Δ = 3 sigma_e sqrt(2/3) in 35% of tables; the row + seed fit (6 df) holds 4.9% and finds 46%.
    rng = np.random.default_rng(11)
    null = _shared_seed_tables(4, 3, 0.5, 0.0, 1200, rng)
    assert null[0][0].paired and null[0][0].sigma_df == 6
    assert 0.04 <= np.mean([c.p_value < 0.05 for cs in null for c in cs]) <= 0.06
    found = _shared_seed_tables(4, 3, 0.5, 3 * math.sqrt(2 / 3), 1200, rng)
    assert np.mean([cs[0].significant(0.05) for cs in found]) >= 0.42
