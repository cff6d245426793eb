"""Calibration of the significance test on synthetic hypotheses with known properties.

Each synthetic system translates n reference sentences by replacing every word, with some
probability, by a wrong one. That probability is the sum of the sentence's difficulty (shared by
all systems), a per-sentence strength of the *configuration* (shared by all its seeds) and
per-seed noise, so the truth is known:

* **same config, other seeds**: two rows with the same configuration and different seeds differ
  only by seed noise, so a test at p < 0.05 may call them different in at most ~5% of repeats;
* **equally good configs**: two configurations, each better on some sentences and worse on
  others, with the same expected quality: again a true null. Here pooling the seeds' outputs and
  resampling the K copies of a sentence independently (the old method, sacreBLEU's bootstrap on
  concatenated output) treats K copies of one sentence's advantage as K independent sentences
  and calls a difference far too often;
* **a clearly better config** must be called different.

Deterministic (fixed seeds), a few seconds.
"""

from __future__ import annotations

import numpy as np
import pytest

from ablate.report.significance import bleu_from_stats, seed_bootstrap, sentence_stats

N_SENTENCES, SEEDS, SAMPLES = 60, 3, 400
REPEATS = {"same": 100, "equal": 100, "better": 20}
VOCAB = np.array([f"w{i}" for i in range(400)])


def _references(rng: np.random.Generator) -> list[list[str]]:
    return [list(rng.choice(VOCAB, size=rng.integers(8, 20))) for _ in range(N_SENTENCES)]


def _system(refs: list[list[str]], rates: np.ndarray, rng: np.random.Generator) -> list[str]:
    """Hypotheses: each reference word kept, or replaced by a random word with the sentence's rate."""
    out = []
    for words, rate in zip(refs, np.clip(rates, 0.0, 0.95)):
        wrong = rng.random(len(words)) < rate
        out.append(" ".join(w if not bad else str(rng.choice(VOCAB)) for w, bad in zip(words, wrong)))
    return out


def _row(refs: list[list[str]], strength: np.ndarray, rng: np.random.Generator, noise: float = 0.08) -> np.ndarray:
    """Per-sentence BLEU statistics of one configuration's seeds, (SEEDS, n, 10)."""
    texts = [" ".join(r) for r in refs]
    return np.stack(
        [
            sentence_stats(_system(refs, strength + rng.normal(0, noise, N_SENTENCES), rng), texts, "none")
            for _ in range(SEEDS)
        ]
    )


def old_pooled_bootstrap(a: np.ndarray, b: np.ndarray, n_samples: int, seed: int = 12345) -> float:
    """The old test: seeds' outputs concatenated (K·n lines against repeated references) and the
    K·n lines resampled independently, BLEU of the pooled corpus; p-value as sacreBLEU's."""
    pa, pb = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    observed = float(bleu_from_stats(pb.sum(0)) - bleu_from_stats(pa.sum(0)))
    rng = np.random.default_rng(seed)
    w = rng.multinomial(len(pa), np.full(len(pa), 1.0 / len(pa)), size=n_samples).astype(float)
    d = bleu_from_stats(w @ pb) - bleu_from_stats(w @ pa)
    return (1 + int(np.sum(np.abs(d - d.mean()) >= abs(observed)))) / (n_samples + 1)


def _rejection_rates(scenario: str) -> tuple[float, float]:
    """Fraction of repeats called significant at p < 0.05: (new test, old test)."""
    rng = np.random.default_rng({"same": 1, "equal": 2, "better": 3}[scenario])
    new = old = 0
    for _ in range(REPEATS[scenario]):
        refs = _references(rng)
        difficulty = rng.uniform(0.1, 0.5, N_SENTENCES)
        strength_a = difficulty + rng.normal(0, 0.15, N_SENTENCES)
        if scenario == "same":
            strength_b = strength_a  # one config, other seeds
        elif scenario == "equal":
            strength_b = difficulty + rng.normal(0, 0.15, N_SENTENCES)  # as good, on other sentences
        else:
            strength_b = strength_a - 0.15  # clearly fewer errors
        a, b = _row(refs, strength_a, rng), _row(refs, strength_b, rng)
        new += seed_bootstrap(a, b, "bs", SAMPLES)[0] < 0.05
        old += old_pooled_bootstrap(a, b, SAMPLES) < 0.05
    return new / REPEATS[scenario], old / REPEATS[scenario]


@pytest.fixture(scope="module")
def rates() -> dict[str, tuple[float, float]]:
    return {scenario: _rejection_rates(scenario) for scenario in ("same", "equal", "better")}


def test_same_config_other_seeds_is_rarely_significant(rates):
    new, _ = rates["same"]
    assert new <= 0.08  # ~5% at p < 0.05 (binomial sd of the rate over 100 repeats: 2.2%)


def test_equally_good_configs_are_rarely_significant_and_the_old_pooled_test_fails(rates):
    new, old = rates["equal"]
    assert new <= 0.08
    assert old >= 0.15 and old > 2 * new  # anti-conservative: per-sentence effects counted K times


def test_a_clearly_better_config_is_significant(rates):
    new, _ = rates["better"]
    assert new >= 0.95
