"""Paired tests over source sentences with seeds kept together, Holm's correction, named comparisons."""

from __future__ import annotations

import random

import numpy as np
import pytest
import sacrebleu

from ablate.report.aggregate import aggregate
from ablate.report.records import ReportError, Trial, collect
from ablate.report.significance import (
    against_base,
    bleu_from_stats,
    compare,
    holm,
    pair_seeds,
    seed_bootstrap,
    sentence_stats,
)

from report_fixtures import SPLITS

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


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_identical_systems_are_not_significant(test):
    refs = _refs()
    a = _stats(refs, 0.3, (1, 2))
    p, bleu_a, bleu_b = seed_bootstrap(a, a.copy(), test=test, n_samples=200)
    assert bleu_a == bleu_b and p == 1.0


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_a_clearly_better_system_is_significant(test):
    refs = _refs()
    p, bleu_a, bleu_b = seed_bootstrap(_stats(refs, 0.5, (1, 2)), _stats(refs, 0.1, (3, 4)), test=test, n_samples=200)
    assert bleu_b > bleu_a + 20 and p < 0.01


def test_the_score_is_the_mean_over_seeds_of_corpus_bleu():
    refs = _refs()
    seeds = [_noisy(refs, r, s) for r, s in ((0.2, 1), (0.4, 2), (0.3, 3))]
    stats = np.stack([sentence_stats(h, refs) for h in seeds])
    _, bleu_a, _ = seed_bootstrap(stats, stats[:1], n_samples=10)
    assert bleu_a == pytest.approx(np.mean([sacrebleu.corpus_bleu(h, [refs]).score for h in seeds]))


def test_misaligned_inputs_are_a_one_line_error():
    with pytest.raises(ReportError, match="differ in length"):
        sentence_stats(["a"], ["a", "b"])
    with pytest.raises(ReportError, match="different sentences"):
        seed_bootstrap(np.ones((1, 3, 10)), np.ones((1, 4, 10)))
    with pytest.raises(ReportError, match="unknown significance test"):
        seed_bootstrap(np.ones((1, 3, 10)), np.ones((1, 3, 10)), test="t")


def test_holm_bonferroni():
    # Holm (1979): sorted p (0.01, 0.02, 0.03, 0.5) x (4, 3, 2, 1), made monotone, capped at 1
    assert holm([0.03, 0.01, 0.5, 0.02]) == pytest.approx([0.06, 0.04, 0.5, 0.06])
    assert holm([0.9, 0.8]) == [1.0, 1.0]
    assert holm([0.01, 0.04]) == pytest.approx([0.02, 0.04])
    assert holm([]) == []


def _trial(seed: int) -> Trial:
    return Trial(f"t{seed}", "finished", config={"seed": seed})


def test_seeds_pair_by_value_else_by_rank():
    base = [_trial(1), _trial(2), _trial(3)]
    assert [(a.seed, b.seed) for a, b in pair_seeds(base, [_trial(3), _trial(1)])] == [(1, 1), (3, 3)]
    assert [(a.seed, b.seed) for a, b in pair_seeds(base, [_trial(9), _trial(7)])] == [(1, 7), (2, 9)]


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
