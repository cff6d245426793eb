"""Δ against the base per training step: seed pairing, interpolation, t intervals, sign changes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ablate.report.stats import Row, Sweep, delta_curves, late_sign_changes, paired_deltas, sign_changes, t_interval
from ablate.report.trials import Trial


def trial(name: str, seed: int, points: dict[float, float], metric: str = "val/bleu") -> Trial:
    """A finished trial whose validations are ``{step: value}`` of ``metric``."""
    history = tuple({"step": s, metric: v} for s, v in points.items())
    return Trial(name, "finished", config={"seed": seed}, history=history)


def row(name: str, *trials: Trial) -> Row:
    return Row(name, name.split("-")[0], {}, (), tuple(trials), {}, name == "base")


def sweep(*rows: Row) -> Sweep:
    return Sweep("hand-made", [], list(rows), [], True)


BASE = row(
    "base",
    trial("base-s1", 1, {100: 10.0, 200: 12.0, 300: 14.0}),
    trial("base-s2", 2, {100: 11.0, 200: 13.0, 300: 15.0}),
    trial("base-s3", 3, {100: 9.0, 200: 12.5, 300: 14.5}),
)


def test_paired_deltas_are_row_minus_base_of_the_same_seed():
    other = row(
        "A-x",
        trial("a-s2", 2, {100: 12.0, 200: 13.5, 300: 14.0}),  # listed first: pairing is by seed value
        trial("a-s1", 1, {100: 10.5, 200: 11.0, 300: 15.0}),
    )
    steps, deltas, seeds = paired_deltas(BASE.trials, other.trials, "val/bleu")
    assert seeds == ("1", "2")
    np.testing.assert_array_equal(steps, [100, 200, 300])
    np.testing.assert_allclose(deltas, [[0.5, -1.0, 1.0], [1.0, 0.5, -1.0]])
    curve = delta_curves(sweep(BASE, other)).curve("A-x")
    np.testing.assert_allclose(curve.mean, [0.75, -0.25, 0.0])
    np.testing.assert_array_equal(curve.pairs, [2, 2, 2])


def test_the_interval_is_scipys_t_interval_of_the_paired_deltas():
    other = row(
        "A-x",
        trial("a-s1", 1, {100: 10.4, 200: 13.0, 300: 15.5}),
        trial("a-s2", 2, {100: 12.5, 200: 13.2, 300: 15.1}),
        trial("a-s3", 3, {100: 9.1, 200: 14.0, 300: 14.0}),
    )
    curve = delta_curves(sweep(BASE, other)).curve("A-x")
    deltas = np.array([[0.4, 1.0, 1.5], [1.5, 0.2, 0.1], [0.1, 1.5, -0.5]])
    for j in range(3):
        low, high = stats.t.interval(0.95, 2, loc=deltas[:, j].mean(), scale=stats.sem(deltas[:, j]))
        assert curve.low[j] == pytest.approx(low) and curve.high[j] == pytest.approx(high)
    assert curve.mean == pytest.approx(deltas.mean(axis=0))


def test_one_pair_has_a_mean_but_no_interval():
    mean, low, high, n = t_interval(np.array([[1.0, 2.0], [np.nan, 3.0]]))
    assert list(mean) == [1.0, 2.5] and list(n) == [1, 2]
    assert math.isnan(low[0]) and math.isnan(high[0])
    assert (low[1], high[1]) == pytest.approx(stats.t.interval(0.95, 1, loc=2.5, scale=stats.sem([2.0, 3.0])))


def test_unequal_step_grids_are_interpolated_within_each_trials_own_range():
    base = row("base", trial("b1", 1, {0: 0.0, 100: 10.0, 200: 20.0}), trial("b2", 2, {0: 0.0, 200: 40.0}))
    other = row(
        "A-x",
        trial("a1", 1, {0: 1.0, 50: 6.0, 150: 17.0, 200: 21.0}),
        trial("a2", 2, {0: 0.0, 100: 22.0}),  # stopped at 100: no Δ of seed 2 after it
    )
    curve = delta_curves(sweep(base, other)).curve("A-x")
    np.testing.assert_array_equal(curve.steps, [0, 50, 100, 150, 200])
    # seed 1: row interpolated at 100 (6 + 50/100 * 11 = 11.5), base at 50 and 150 (5, 15)
    seed1 = np.array([1.0, 1.0, 1.5, 2.0, 1.0])
    seed2 = np.array([0.0, 1.0, 2.0, np.nan, np.nan])  # base seed 2 is a line from 0 to 40; row 0 to 22
    np.testing.assert_array_equal(curve.pairs, [2, 2, 2, 1, 1])
    np.testing.assert_allclose(curve.mean, np.nanmean([seed1, seed2], axis=0))
    assert math.isnan(curve.low[3]) and not math.isnan(curve.low[2])


def test_a_sign_change_is_found_at_the_step_where_the_mean_crosses_zero():
    assert sign_changes([100, 200, 300, 400], [-1.0, -0.5, 0.5, 1.0]) == [300.0]
    assert sign_changes([100, 200, 300], [-1.0, 0.0, -1.0]) == []  # touching zero is no change
    assert sign_changes([100, 200, 300], [-1.0, 0.0, 2.0]) == [300.0]
    assert sign_changes([1, 2, 3, 4], [1.0, -1.0, -2.0, 3.0]) == [2.0, 4.0]


def test_late_sign_changes_name_only_changes_in_the_last_half_of_training():
    steps = [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]
    base = row("base", *(trial(f"b{s}", s, {x: 20.0 for x in steps}) for s in (1, 2)))
    early = row("A-early", *(trial(f"e{s}", s, {x: 20.0 + (-1 if x < 200 else 1) for x in steps}) for s in (1, 2)))
    late = row("B-late", *(trial(f"l{s}", s, {x: 20.0 + (1 if x < 800 else -1) for x in steps}) for s in (1, 2)))
    never = row("C-never", *(trial(f"n{s}", s, {x: 21.0 for x in steps}) for s in (1, 2)))
    table = sweep(base, early, late, never)
    curves = delta_curves(table)
    assert curves.curve("A-early").sign_changes == (200.0,)
    assert curves.curve("B-late").sign_changes == (800.0,)
    assert late_sign_changes(table) == [("B-late", (800.0,))]


def test_a_row_whose_delta_flips_several_times_is_named_once_with_every_step():
    """results/defaults-cpu's footnote named schedule-inverse_sqrt four times, once per late sign change
    ("schedule-inverse_sqrt (step 200); schedule-inverse_sqrt (step 240); ..."): now once, with its steps."""
    from pathlib import Path

    from ablate.report import table

    steps = [100, 200, 300, 400]
    base = row("base", trial("b1", 1, {x: 20.0 for x in steps}))
    flip = row("A-flip", trial("f1", 1, dict(zip(steps, [19.0, 19.0, 21.0, 19.0]))))
    assert late_sign_changes(sweep(base, flip)) == [("A-flip", (300.0, 400.0))]
    shipped = Path(__file__).resolve().parents[2] / "results" / "defaults-cpu"
    (note,) = [n for n in table(shipped, significance=False).table.footnotes if n.startswith("Budget-dependent")]
    assert note.endswith("for schedule-inverse_sqrt (steps 200, 240, 280, 320).")


def test_a_row_without_the_bases_seeds_is_skipped_with_the_reason():
    strangers = row("A-other", trial("o7", 7, {100: 1.0, 200: 2.0}), trial("o8", 8, {100: 1.0, 200: 2.0}))
    silent = row("B-silent", trial("s1", 1, {}))
    curves = delta_curves(sweep(BASE, strangers, silent))
    assert curves.curves == ()
    reasons = {s.row: s.reason for s in curves.skipped}
    assert "no seed shared with the base" in reasons["A-other"] and "7, 8" in reasons["A-other"]
    assert "no validation history" in reasons["B-silent"]


def test_only_shared_seeds_are_paired_and_each_metric_is_its_own():
    other = row(
        "A-x",
        trial("a1", 1, {100: 11.0, 200: 13.0}),
        trial("a9", 9, {100: 50.0, 200: 50.0}),  # the base has no seed 9
    )
    curve = delta_curves(sweep(BASE, other)).curve("A-x")
    assert curve.seeds == ("1",) and list(curve.pairs) == [1, 1]
    np.testing.assert_allclose(curve.mean, [1.0, 1.0])
    assert delta_curves(sweep(BASE, other), "val/ppl").curves == ()
