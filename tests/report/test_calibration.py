"""Calibration of the significance tests on synthetic hypotheses with known properties.

Each synthetic system translates n reference sentences by replacing every word, with some
probability, by a wrong one. That probability is the sum of the sentence's difficulty (shared by
all systems), a per-sentence strength of the *configuration* (shared by all its seeds), a
**whole-run seed shift** (one number per trained seed, the same on every sentence: a better or
worse run) and per-sentence seed noise. The shift's size is fitted to this product's real runs:
there, a trial's seed σ of corpus BLEU is ~3x the sentence bootstrap's standard error of a Δ
(results/calibration-cpu, results/table3-cpu; ../shared/reference/STATISTICS.md), and
:func:`test_the_noise_model_matches_real_runs` checks the synthetic ratio is in that range.

* **same config, other seeds**: a true null. The seed-aware test (the default) may call it
  different in at most ~5% of repeats; the sentence-only bootstrap, blind to seed shifts, calls
  it different far more often (the failure the real runs showed);
* **equally good configs** (each better on other sentences): a true null for both;
* **a clearly better config** must be called different.

Deterministic (fixed seeds), a few seconds.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import ablate.report.calibration as calibration
from ablate.report import load
from ablate.report.stats import (
    BorrowedNoise,
    Row,
    SplitScores,
    Sweep,
    borrow_noise,
    compare_scores,
    design_df,
    sentence_stats,
    split_scores,
)
from ablate.report.trials import ReportError

N_SENTENCES, SEEDS, SAMPLES = 60, 3, 400
REPEATS = {"same": 100, "equal": 100, "better": 30}
SEED_SHIFT = 0.03  # sd of a whole run's error rate; fitted: seed σ / sentence SE ~ 3 as in real runs
VOCAB = np.array([f"w{i}" for i in range(400)])


def _references(rng: np.random.Generator) -> list[list[str]]:
    return [list(rng.choice(VOCAB, size=rng.integers(8, 20))) for _ in range(N_SENTENCES)]


def _system(refs: list[list[str]], rates: np.ndarray, rng: np.random.Generator) -> list[str]:
    """Hypotheses: each reference word kept, or replaced by a random word with the sentence's rate."""
    out = []
    for words, rate in zip(refs, np.clip(rates, 0.0, 0.95)):
        wrong = rng.random(len(words)) < rate
        sentence = np.array(words)
        sentence[wrong] = rng.choice(VOCAB, size=int(wrong.sum()))  # the words one choice() each would draw
        out.append(" ".join(sentence))
    return out


def _row(refs, strength, rng, seeds, noise: float = 0.08) -> list[tuple[int, np.ndarray]]:
    """One configuration's trained seeds: ``(seed, (n, 10) statistics)``."""
    texts = [" ".join(r) for r in refs]
    out = []
    for seed in seeds:
        run = strength + rng.normal(0, SEED_SHIFT) + rng.normal(0, noise, N_SENTENCES)
        out.append((seed, sentence_stats(_system(refs, run, rng), texts, "none")))
    return out


def _repeat(scenario: str, rng: np.random.Generator) -> SplitScores:
    refs = _references(rng)
    difficulty = rng.uniform(0.1, 0.5, N_SENTENCES)
    strength_a = difficulty + rng.normal(0, 0.15, N_SENTENCES)
    if scenario == "same":
        strength_b = strength_a  # one config, other seeds
    elif scenario == "equal":
        strength_b = difficulty + rng.normal(0, 0.15, N_SENTENCES)  # as good, on other sentences
    else:
        strength_b = strength_a - 0.2  # clearly fewer errors
    a = _row(refs, strength_a, rng, range(1, SEEDS + 1))
    b = _row(refs, strength_b, rng, range(SEEDS + 1, 2 * SEEDS + 1))
    return SplitScores("test", {"a": a, "b": b}, SAMPLES)


@pytest.fixture(scope="module")
def rates() -> dict[str, dict[str, float]]:
    """Fraction of repeats called significant at p < 0.05 per test, and the noise ratio."""
    out = {}
    for scenario in ("same", "equal", "better"):
        rng = np.random.default_rng({"same": 1, "equal": 2, "better": 3}[scenario])
        hits, ratios = {"seeds": 0, "bs": 0}, []
        for _ in range(REPEATS[scenario]):
            scores = _repeat(scenario, rng)
            for test in hits:
                hits[test] += scores.compare("a", "b", test).p_value < 0.05
            c = scores.compare("a", "b", "seeds")
            ratios.append(c.sigma / np.sqrt(c.sentence_var))
        out[scenario] = {t: h / REPEATS[scenario] for t, h in hits.items()} | {"ratio": float(np.median(ratios))}
    return out


@pytest.mark.slow
def test_the_noise_model_matches_real_runs(rates):
    # real runs: per-trial seed σ 0.55-0.7 BLEU vs a Δ's sentence SE 0.17-0.26, a ratio of ~2-4
    assert 2.0 <= rates["same"]["ratio"] <= 5.0


def test_same_config_other_seeds_is_rarely_significant_and_the_sentence_test_fails(rates):
    # an exactly sized test: 5% at p < 0.05, binomial sd over 100 repeats 2.2%, so <= 5% + 2.3 sd
    # (300 other repeats of this scenario: 4.0%); the seed-aware test counts the sentence variance once
    # (counting it twice made it conservative)
    assert rates["same"]["seeds"] <= 0.10
    assert rates["same"]["bs"] >= 0.3  # blind to whole-run seed shifts


def test_equally_good_configs_are_rarely_significant(rates):
    assert rates["equal"]["seeds"] <= 0.08


def test_a_clearly_better_config_is_significant(rates):
    assert rates["better"]["seeds"] >= 0.9


# --------------------------------------------------------------------------------------
# The table's own test on relabelled tables of real runs
# --------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
CALIBRATION, MISSION = ROOT / "results" / "calibration-cpu", ROOT / "results" / "mission-cpu"
SECOND_HALF = ROOT / "results" / "calibration-cpu-17-32"  # seeds 17-32 of the same configuration


def _shipped(folder: Path) -> Path:
    if not (folder / "manifest.json").is_file():
        pytest.skip(f"{folder.name} is not in this checkout")
    return folder


@pytest.fixture(scope="module")
def calibration_scores() -> SplitScores:
    """results/calibration-cpu's 16 seeds of one configuration (500 bootstrap resamples: quicker)."""
    return next(iter(split_scores(load(str(_shipped(CALIBRATION))), 500, "bs").values()))


def test_relabelled_tables_need_a_row_with_seeds_to_spare():
    x = np.linspace(0.0, 1.0, 6)
    scores = SplitScores.of_values("t", {"a": list(x)}, {"a": [np.full(50, v) for v in x]}, {"a": list(range(6))})
    rates = calibration.design_rates(scores, "a", ((2, 3), (4, 4)), relabellings=5, simulations=5)
    assert [(d.rows, d.seeds, d.shared) for d in rates] == [(2, 3, True), (2, 3, False)]  # 4x4 needs 16
    assert [d.relabellings for d in rates] == [20, 20]  # a two-row design this small: every one of its 20 tables


def _table(rows: int, seeds: int, shared: bool, comparisons=None) -> Sweep:
    """A table of ``rows`` x ``seeds`` finished trials (only their seed values), seed values shared or distinct."""
    trials = lambda i: tuple(SimpleNamespace(seed=s if shared else i * seeds + s) for s in range(1, seeds + 1))  # noqa: E731
    found = [Row(f"v{i}", "A", {}, (), trials(i), is_base=i == 0) for i in range(rows)]  # type: ignore[arg-type]
    return Sweep("synthetic", [], found, [], True, comparisons)


def _one_configuration(n: int) -> SplitScores:
    rng = np.random.default_rng(7)
    x = list(15 + rng.normal(0, 0.8, n))
    return SplitScores.of_values("t", {"a": x}, {"a": [v + rng.normal(0, 0.2, 50) for v in x]}, {"a": list(range(n))})


def test_the_design_of_a_table_is_its_rows_seeds_fit_and_comparisons():
    # mission-cpu's shape: 10 rows of 3 shared seeds, the row + seed fit at 18 df; so 3 rows of 3 (4 df), where
    # two rows of 3 stay within-row (the paired fit's 2 df cost more than the seed effect it removes)
    mission = calibration.TableDesign.of_sweep(_table(10, 3, True), "mission")
    assert (mission.rows, mission.seeds, mission.shared, len(mission.plan)) == (10, 3, True, 9)
    assert mission.fit() == (True, 18) == (True, design_df(10, 3, True))
    assert calibration.TableDesign.of_sweep(_table(3, 3, True), "t").fit() == (True, 4)
    assert calibration.TableDesign.of_sweep(_table(2, 3, True), "t").fit() == (False, 4)
    assert calibration.TableDesign.of_sweep(_table(4, 2, False), "t").fit() == (False, 4)
    named = _table(4, 3, True, [("variant", ["v0", "v1", "v2"]), ("variant", ["v1", "v3"])])
    assert calibration.TableDesign.of_sweep(named, "t").plan == ((0, 1), (0, 2), (1, 3))


def test_a_tables_design_reports_the_rates_of_its_own_test_on_the_same_relabelled_tables():
    scores = _one_configuration(16)
    named = _table(4, 3, True, [("variant", ["v0", "v1", "v2"]), ("variant", ["v1", "v3"])])
    design = calibration.TableDesign.of_sweep(named, "named")
    rate = calibration.table_rates(scores, "a", design, relabellings=40, shifts=(2.0,), simulations=3)
    assert (rate.rows, rate.seeds, rate.shared, rate.comparisons, rate.label) == (4, 3, True, 3, "named")
    assert (rate.paired, rate.df) == design.fit() == (True, 6)
    # the same tables, tested directly as `ablate table` tests one: the plan's comparisons, Holm over them
    picks = calibration.relabellings_of(design, 16, 40, np.random.default_rng(calibration.RNG_SEED))
    plan = [("r0", "r1"), ("r0", "r2"), ("r1", "r3")]
    found = [compare_scores([calibration.relabelled(scores, "a", p, True)], plan) for p in picks]
    assert rate.per_comparison == np.mean([c.p_value < 0.05 for f in found for c in f]) > 0
    assert rate.family_wise == np.mean([any(c.significant(0.05) for c in f) for f in found])


def test_a_design_its_seeds_cannot_hold_is_one_line_and_a_stand_in_with_the_same_fit():
    mission = calibration.TableDesign.of_sweep(_table(10, 3, True), "mission-cpu")
    smaller, note = mission.fitting(16)
    assert note == (
        "mission-cpu: 10x3 needs 30 seeds; 16 are available: calibrated 5x3 (row + seed, 8 df, 4 comparisons) "
        "as a stand-in with the same seeds per row and fit"
    )
    assert smaller is not None and (smaller.rows, smaller.stands_for, smaller.fit()) == (5, "10x3", (True, 8))
    # 2x2 of 5 seeds would be within-row (its 1-df paired fit costs more than it gives), so 19x2 has no stand-in there
    none, note = calibration.TableDesign.of_sweep(_table(19, 2, True), "table3-cpu").fitting(5)
    assert none is None and "\n" not in note
    assert note.startswith("table3-cpu: 19x2 needs 38 seeds; 5 are available, and no smaller design")
    assert mission.fitting(30) == (mission, "")


def test_calibrate_like_a_shipped_table_names_it_and_says_when_the_seeds_fall_short():
    # `ablate calibrate results/calibration-cpu --like results/mission-cpu`: 16 seeds for a 10x3 table
    like = calibration.TableDesign.of_sweep(load(str(_shipped(MISSION))), "mission-cpu")
    cal = calibration.calibrate(load(str(_shipped(CALIBRATION))), ks=(), designs=(), samples=200, relabellings=5,
                                simulations=2, like=[like])  # fmt: skip
    text = calibration.to_markdown(cal)
    assert "mission-cpu: 10x3 needs 30 seeds; 16 are available: calibrated 5x3 (row + seed, 8 df" in text
    assert "| 5x3: stand-in for mission-cpu's 10x3 (" in text
    assert [(d.rows, d.seeds, d.shared) for d in calibration.parse_design("6x3")] == [(6, 3, True), (6, 3, False)]
    with pytest.raises(ReportError, match="RxK"):
        calibration.parse_design("6x3:paired")


@pytest.mark.slow
def test_the_table_test_on_relabelled_real_tables_is_as_sized_as_student_t(calibration_scores, monkeypatch):
    # 5 designs x shared/distinct seed values, each row of a relabelled table against the first through
    # SplitScores.compare + Holm (what puts a † in a table); 2,000 relabellings each in the shipped
    # calibration.md (test_the_shipped_calibration_is_in_band), 30 here. Every design is pinned, not only
    # the two-row unpaired fit: 2x2 / 2x3 tables with shared seeds must not take a 1- / 2-df paired fit.
    # 30 random tables of 2x2 too, not all 10,920 (98% of this file's time); the shipped calibration.md's
    # 2x2 rows are over all of them, and test_relabelled_tables_need_a_row_with_seeds_to_spare enumerates.
    monkeypatch.setattr(calibration, "ENUMERATE", 0)
    rates = calibration.design_rates(calibration_scores, "base", relabellings=30, simulations=40)
    assert len(rates) == 10 and {d.relabellings for d in rates} == {30}
    for d in rates:
        # no more liberal than Student t on the same tables' per-trial scores (the test adds the
        # k-independent sentence part, >= 0, and floors σ² at the per-seed sentence variance); with
        # 4+ df the floor hardly binds and the two agree
        assert d.per_comparison <= d.student + 0.005, d
        assert d.df < 4 or d.student - 0.03 <= d.per_comparison, d
        assert d.family_wise <= d.per_comparison * (d.rows - 1) + 1e-9, d  # Holm: any † needs a p < alpha
    two_by_three = next(d for d in rates if (d.rows, d.seeds, d.shared) == (2, 3, True))
    assert not two_by_three.paired and two_by_three.df == 4  # the 4-df within-row fit, not the 2-df paired one
    assert two_by_three.power[1][0] == 2.0 and two_by_three.power[1][1] >= two_by_three.power[1][2]  # vs Welch


@pytest.mark.slow
def test_predicted_power_follows_the_split_power_of_real_seeds(calibration_scores):
    # SE²(k) = 2σ²/k + v0 (the per-seed part of the sentence variance inside σ, counted once) is the
    # spread of Δ over k-vs-k splits, and the noncentral t's power for +1 BLEU follows the measured one
    splits = calibration.seed_splits(calibration_scores, "base", (2, 4, 6, 8), draws=150, simulations=20)
    for s in splits:
        assert s.se == pytest.approx(s.se_model, rel=0.08), s
        # 150 draws here are noisy (the shipped 2,000-draw figures: test_the_shipped_calibration_is_in_band)
        assert abs(s.power - s.predicted) <= 0.15, s


@pytest.mark.slow
def test_a_two_row_three_seed_table_whose_every_seed_loses_over_2_bleu_is_marked():
    # results/mission-cpu's base and score-additive alone, as a sweep of these two rows would table them
    scores = next(iter(split_scores(load(str(_shipped(MISSION))), 1000, "seeds").values()))
    two = SplitScores(scores.split, {r: scores.rows[r] for r in ("base", "score-additive")}, 1000)
    (c,) = compare_scores([two], [("base", "score-additive")])
    assert len(c.per_seed) == 3 and all(d < -2 for _, d in c.per_seed)
    assert (c.paired, c.sigma_df) == (False, 4) and c.significant(0.05)


def _design_rows(text: str) -> dict[tuple[str, str], list[str]]:
    rows = [line.split("|")[1:-1] for line in text.splitlines() if re.match(r"\| \d+x\d+ \|", line)]
    return {(r[0].strip(), r[1].strip()): [c.strip() for c in r] for r in rows}


def _split_rows(text: str) -> dict[int, list[str]]:
    rows = (line.split("|")[1:-1] for line in text.splitlines())
    return {int(r[0]): [c.strip() for c in r] for r in rows if r and r[0].strip().isdigit()}


def test_the_shipped_calibration_is_in_band():
    # results/calibration-cpu/calibration.md: `ablate calibrate results/calibration-cpu --draws 2000
    # --relabellings 5000` (README). Every design within 2.5-6.5% per comparison (2x2 over all 10,920
    # tables); none more liberal than Student t on the same tables (the 16 seeds' own excess at 2x2);
    # 2 rows x 3 shared seeds find +2 BLEU at least as often as Welch's t, in >= 60% of tables.
    text = (_shipped(CALIBRATION) / "calibration.md").read_text()
    designs = _design_rows(text)
    assert {d for d, _ in designs} == {"2x2", "2x3", "4x4", "5x3", "8x2"} and len(designs) == 10
    pct = lambda cell: float(cell.rstrip("%")) / 100  # noqa: E731
    for (design, _), cells in designs.items():
        assert int(cells[3]) >= 2000
        rows, seeds = map(int, design.split("x"))
        ours, student = pct(cells[4]), pct(cells[5])
        assert ours <= student + 0.005
        assert 0.025 <= ours <= 0.065  # every design, two rows of two seeds included (σ floored)
        if seeds >= 3 or rows > 2:
            assert student - 0.01 <= ours
    ours, welch = (designs[("2x3", "shared")][i].split(" / ")[1] for i in (9, 10))
    assert pct(ours) >= max(pct(welch), 0.6)
    splits = _split_rows(text)
    for k in (2, 4, 6, 8):  # measured power for +1 BLEU within the range as many normal seeds would give
        measured, predicted = pct(splits[k][5]), pct(splits[k][6])
        low, high = (pct(x) for x in splits[k][7].split("-"))
        assert low <= measured <= high and low <= predicted <= high
        if k != 4:  # k = 4 is 8 points below the prediction on these 16 seeds (see README), inside that range
            assert abs(measured - predicted) <= 0.05


def test_the_32_seed_calibration_is_in_band_and_its_power_is_predicted_within_5_points():
    # results/calibration-cpu-17-32/calibration-32-seeds.md: `ablate calibrate results/calibration-cpu
    # results/calibration-cpu-17-32 --draws 2000 --relabellings 5000`, both folders' seeds as one row.
    # Every design within 2.5-6.5% per comparison, no more liberal than Student t; 2x3 shared at +2 at
    # least Welch's; the variance model's power for +1 BLEU within 5 points of the measured at every k.
    text = (_shipped(SECOND_HALF) / "calibration-32-seeds.md").read_text()
    assert "row `base`'s 32 seeds" in text
    pct = lambda cell: float(cell.rstrip("%")) / 100  # noqa: E731
    designs = _design_rows(text)
    assert len(designs) == 10
    for cells in designs.values():
        assert 0.025 <= pct(cells[4]) <= min(0.065, pct(cells[5]) + 0.005)
    ours, welch = (designs[("2x3", "shared")][i].split(" / ")[1] for i in (9, 10))
    assert pct(ours) >= pct(welch)
    splits = _split_rows(text)
    assert sorted(splits) == [2, 3, 4, 6, 8]
    for k, cells in splits.items():
        assert 0.025 <= pct(cells[2]) <= 0.065  # k-vs-k false positives
        assert abs(pct(cells[5]) - pct(cells[6])) <= 0.05, (k, cells[5], cells[6])


def test_the_shipped_tables_own_designs_are_in_the_exact_tests_band():
    # results/calibration-cpu-17-32/calibration-tables.md (README: `ablate calibrate ... --like
    # results/mission-cpu --like results/table3-cpu --like results/mission-budget-cpu --like
    # results/table3-budget-cpu --like-only --relabellings 5000`): each table's design, fit and df as its
    # footnote states, both false-positive rates inside the exactly sized test's 5-95% band (+0.3 points)
    text = (_shipped(SECOND_HALF) / "calibration-tables.md").read_text()
    assert "table3-cpu: 19x2 needs 38 seeds; 32 are available: calibrated 16x2" in text
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines() if re.match(r"\| \d+x\d+: ", line)]
    assert [(r[0].split(" (")[0], r[2]) for r in rows] == [
        ("10x3: mission-cpu", "row + seed (18)"),
        ("16x2: stand-in for table3-cpu's 19x2", "row + seed (15)"),
        ("3x3: mission-budget-cpu", "row + seed (4)"),
        ("4x3: table3-budget-cpu", "row + seed (6)"),
    ]
    pct = lambda cell: float(cell.rstrip("%")) / 100  # noqa: E731
    for r in rows:
        for rate, band in ((r[4], r[6]), (r[7], r[8])):
            lo, hi = map(pct, band.split("-"))
            assert lo - 0.003 <= pct(rate) <= hi + 0.003, (r[0], rate, band)


def test_two_folders_of_one_configuration_pool_into_one_row(tmp_path):
    # how `ablate calibrate A B` reads two sweeps of one configuration's seeds: as the row one folder
    # holding every trial would give (the seeds in order, each trial's scores its own)
    from ablate.report import load_pooled

    source = _shipped(CALIBRATION)
    halves = [tmp_path / "a", tmp_path / "b"]
    for trial in source.glob("seed=*"):
        half = halves[int(trial.name.split("=")[1]) > 8]
        shutil.copytree(trial, half / trial.name)
    whole, pooled = load(str(source)), load_pooled([str(h) for h in halves])
    assert [r.name for r in pooled.rows] == [r.name for r in whole.rows] == ["base"]
    seeds = lambda sweep: [t.seed for t in sweep.rows[0].trials]  # noqa: E731
    assert seeds(pooled) == seeds(whole) == list(range(1, 17))
    scores = lambda sweep: [t.summary.get("test_test_2016_flickr/bleu") for t in sweep.rows[0].trials]  # noqa: E731
    assert scores(pooled) == scores(whole)


def test_calibrating_a_borrowed_sigma_tests_each_table_as_the_table_command_does():
    """``ablate calibrate --sigma-from``: every relabelled table pools the other seeds, as ``ablate table`` would."""
    own = _one_configuration(16)
    other = BorrowedNoise("cal", 16, 15 * 0.8**2)
    scores = SplitScores.of_values("t", own.bleu, own.boot, own.seeds, other)
    design = replace(calibration.TableDesign.grid(3, 2, False), borrowed_df=other.df)
    assert design.fit() == (False, 3 + 15) and calibration.TableDesign.grid(3, 2, False).fit() == (False, 3)
    rate = calibration.table_rates(scores, "a", design, relabellings=40, shifts=(2.0,), simulations=3)
    assert (rate.paired, rate.df) == (False, 18)
    picks = calibration.relabellings_of(design, 16, 40, np.random.default_rng(calibration.RNG_SEED))
    found = [
        compare_scores([calibration.relabelled(scores, "a", p, False)], [("r0", "r1"), ("r0", "r2")]) for p in picks
    ]
    assert {c.sigma_df for f in found for c in f} == {18}
    assert rate.per_comparison == np.mean([c.p_value < 0.05 for f in found for c in f])
    # on the shipped seeds: 1-16 relabelled, 17-32 pooled in (`ablate calibrate ... --sigma-from`)
    first, second = str(_shipped(CALIBRATION)), str(_shipped(SECOND_HALF))
    sweep = load(first)
    cal = calibration.calibrate(sweep, ks=(), designs=(), samples=50, relabellings=5, simulations=2,
                                like=[calibration.TableDesign.grid(3, 2, False)], like_only=True,
                                borrowed=borrow_noise(sweep, second, [first]))  # fmt: skip
    assert (cal.designs[0].df, cal.borrowed.trials) == (18, 16)
    assert f"pooled with the 16 seeds of {second} (`--sigma-from`: +15 df" in calibration.to_markdown(cal)


def test_what_a_sources_seeds_cannot_hold_is_said_not_left_out_silently(variant_sweep, tmp_path):
    """`ablate calibrate --k 3` on rows of 4 seeds printed no k-vs-k table and no word why (a split takes 2k
    seeds), and a source of 3 seeds per row printed only the seed pairs."""
    from tests.helpers.records import make_mixed_seed_sweep

    four = calibration.calibrate(
        load(str(make_mixed_seed_sweep(tmp_path / "mixed"))), ks=(2, 3), draws=2, designs=(), samples=100
    )
    assert [s.k for s in four.splits] == [2]
    assert "k-vs-k splits at k = 3 left out: a split takes 2k seeds, and row `base` has 4." in four.notes
    three = calibration.calibrate(load(str(variant_sweep)), draws=2, samples=100)
    assert not three.splits and not three.designs
    assert any(
        n.startswith("No relabelled tables or k-vs-k splits: they take a row of at least 4 seeds") for n in three.notes
    )
    assert three.notes[0] in calibration.to_markdown(three)
