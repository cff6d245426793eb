"""Paired significance against the base on constructed hypotheses."""

from __future__ import annotations

import random

import pytest

from ablate.report.aggregate import aggregate
from ablate.report.records import ReportError, Trial, collect
from ablate.report.significance import compare, pair_seeds, paired_test

from report_fixtures import SPLITS

VOCAB = [f"w{i}" for i in range(200)]


def _refs(n: int = 80) -> list[str]:
    rng = random.Random(0)
    return [" ".join(rng.choice(VOCAB) for _ in range(12)) + "." for _ in range(n)]


def _noisy(refs: list[str], rate: float, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(VOCAB) if rng.random() < rate else w for w in r.split()) for r in refs]


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_identical_systems_are_not_significant(test):
    refs = _refs()
    hyps = _noisy(refs, 0.3, 1)
    p, base, system = paired_test(hyps, list(hyps), refs, test=test, n_samples=200)
    assert base == system and p == 1.0


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_a_clearly_better_system_is_significant(test):
    refs = _refs()
    p, base, system = paired_test(_noisy(refs, 0.5, 1), _noisy(refs, 0.1, 2), refs, test=test, n_samples=200)
    assert system > base + 20 and p < 0.01


def test_misaligned_inputs_are_a_one_line_error():
    with pytest.raises(ReportError, match="differ in length"):
        paired_test(["a"], ["a", "b"], ["a"])
    with pytest.raises(ReportError, match="unknown significance test"):
        paired_test(["a"], ["a"], ["a"], test="t")


def _trial(seed: int) -> Trial:
    return Trial(f"t{seed}", "finished", config={"seed": seed})


def test_seeds_pair_by_value_else_by_rank():
    base = [_trial(1), _trial(2), _trial(3)]
    assert [(a.seed, b.seed) for a, b in pair_seeds(base, [_trial(3), _trial(1)])] == [(1, 1), (3, 3)]
    assert [(a.seed, b.seed) for a, b in pair_seeds(base, [_trial(9), _trial(7)])] == [(1, 7), (2, 9)]


def test_sweep_comparisons_mark_what_differs(variant_sweep):
    sweep = aggregate(collect(str(variant_sweep)))
    comps = compare(sweep, n_samples=300)
    assert {name for name, _ in comps} == {"A-heads1", "A-heads8", "B-dk16", "E-learned"}
    assert {split for _, split in comps} == set(SPLITS)
    for split in SPLITS:
        assert comps[("A-heads8", split)].p_value == 1.0            # identical hypotheses
        assert comps[("A-heads8", split)].pairs == 3
        assert comps[("E-learned", split)].p_value < 0.05           # clearly better
        assert comps[("E-learned", split)].bleu > comps[("E-learned", split)].base_bleu
        assert comps[("E-learned", split)].pairs == 2                # its seed 3 is still running
        assert comps[("A-heads1", split)].p_value < 0.05            # clearly worse
        assert comps[("A-heads1", split)].bleu < comps[("A-heads1", split)].base_bleu
