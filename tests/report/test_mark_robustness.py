"""Robustness of a †: a mark re-run on its two rows alone (their own seeds give the σ), the rest of
the table's Holm family unchanged (ablate.report.stats.marks_alone, footnotes.hinge_notes)."""

from __future__ import annotations

import numpy as np
import pytest

from ablate.report.stats import SplitScores, holm, marks_alone

ROWS = 8


def _table(x: list[float]) -> SplitScores:
    """A base and ``x`` of two seeds each, beside ROWS rows whose seeds agree to 0.02 BLEU: the pooled σ
    is small because of those rows, not because of the base and ``x``."""
    rng = np.random.default_rng(0)
    bleu = {"base": [10.0, 11.0], "x": x, **{f"r{i}": [20.0 + i, 20.02 + i] for i in range(ROWS)}}
    boot = {r: [v + rng.normal(0, 0.01, 500) for v in vs] for r, vs in bleu.items()}
    return SplitScores.of_values("test", bleu, boot, {r: ["1", "2"] for r in bleu})


def _compare_all(scores: SplitScores) -> list:
    from dataclasses import replace

    found = [scores.compare("base", r) for r in scores.bleu if r != "base"]
    adjusted = holm([c.p_value for c in found])
    return [replace(c, p_adjusted=p) for c, p in zip(found, adjusted)]


def _alone(scores: SplitScores):
    def run(c):
        pair = SplitScores.of_values(
            "test",
            {r: scores.bleu[r] for r in (c.reference, c.row)},
            {r: scores.boot[r] for r in (c.reference, c.row)},
            {r: scores.seeds[r] for r in (c.reference, c.row)},
        )
        return pair.compare(c.reference, c.row)

    return run


def test_a_mark_carried_by_the_unrelated_rows_sigma_is_named():
    """x: +2.0 over the base, but its seeds and the base's swing by 1 BLEU in opposite directions: the
    table's σ (pooled with 8 tight rows) marks it; x and the base alone (σ 0.71, 2 df) do not."""
    scores = _table([13.0, 12.0])
    comparisons = _compare_all(scores)
    x = next(c for c in comparisons if c.row == "x")
    assert x.delta == pytest.approx(2.0) and x.significant(0.05)
    hinges = {h.comparison.row: h for h in marks_alone(comparisons, 0.05, _alone(scores))}
    assert set(hinges) == {c.row for c in comparisons if c.significant(0.05)}
    assert not hinges["x"].holds(0.05)
    assert hinges["x"].alone.sigma == pytest.approx(np.sqrt(0.5), rel=1e-6) and hinges["x"].alone.sigma_df == 2
    assert hinges["x"].p_adjusted >= hinges["x"].alone.p_value > 0.05
    assert all(h.holds(0.05) for r, h in hinges.items() if r != "x")  # Δ of 10+ BLEU hold on any σ


def test_a_mark_its_own_rows_support_holds():
    scores = _table([16.0, 17.0])  # +6 over the base, the same seed swing
    comparisons = _compare_all(scores)
    hinge = next(h for h in marks_alone(comparisons, 0.05, _alone(scores)) if h.comparison.row == "x")
    assert hinge.holds(0.05) and hinge.alone.sigma_df == 2


@pytest.mark.slow
def test_the_footnote_names_the_marks_that_hinge_on_the_pooled_sigma(variant_sweep):
    from ablate.report import table as report_table

    table = report_table(str(variant_sweep), samples=200).table
    notes = [n for n in table.footnotes if "own rows" in n]
    assert len(notes) == 1
    assert notes[0].startswith("Every † holds on its own rows") or "hinge" in notes[0]


def test_a_re_run_from_the_tables_own_scores_is_the_re_run_from_its_trials(variant_sweep):
    """:func:`compare_alone` builds the two-row table from the table's statistics, scores and resamples
    (:meth:`SplitScores.pair`): the same comparison, field for field, as one rebuilt from the trials."""
    from dataclasses import replace

    from ablate.report.stats import compare, compare_alone, load

    sweep = load(str(variant_sweep))
    found = [c for c in compare(sweep, n_samples=200) if c.tested]
    assert found and all(c.scores is not None for c in found)
    for c in found:
        rows = sorted((r for r in sweep.rows if r.name in (c.reference, c.row)), key=lambda r: r.name != c.reference)
        assert c.scores is not None and c.scores.pair(rows, 200) is not None  # the table holds both rows whole
        reused = compare_alone(sweep, c, 200)
        rebuilt = compare_alone(sweep, replace(c, scores=None), 200)
        assert reused is not None and rebuilt is not None
        assert repr(reused) == repr(rebuilt)  # nan-safe, every field


def test_a_second_table_resamples_nothing(variant_sweep, tmp_path, monkeypatch):
    """The resampled scores of each trial's statistics are kept on disk (``$ABLATE_CACHE/bootstrap``):
    a second table (a fresh process) reads them back, bit for bit, and multiplies no weights."""
    import ablate.report.stats as sig
    from ablate import metrics as scorer_module
    from ablate.report import table as report_table

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path))
    scorer_module._CACHE.clear()
    sig.Resamples.shared.cache_clear()
    first = report_table(str(variant_sweep), samples=100).render("md")
    assert list((tmp_path / "bootstrap").iterdir())
    scorer_module._CACHE.clear()
    sig.Resamples.shared.cache_clear()
    products, real = [], sig._resample_counts
    monkeypatch.setattr(sig, "_resample_counts", lambda *a: products.append(len(a[1])) or real(*a))
    assert report_table(str(variant_sweep), samples=100).render("md") == first
    assert sum(products) == 0


def test_a_mark_hinging_on_two_test_splits_names_each_split(monkeypatch):
    # x hinges on the pooled σ on both test splits: the footnote named it twice alike, "x (Holm p ... here; ...);
    # x (Holm p ... here; ...)", so a reader could not tell which numbers were which split's
    from dataclasses import replace
    from types import SimpleNamespace

    import ablate.report.layout as layout

    scores = _table([13.0, 12.0])
    found = [replace(c, split=s) for s in ("split_a", "split_b") for c in _compare_all(scores)]
    comparisons = [replace(c, p_adjusted=p) for c, p in zip(found, holm([c.p_value for c in found]))]
    monkeypatch.setattr(layout, "compare_alone", lambda sweep, c, n: _alone(scores)(c))
    sweep = SimpleNamespace(base=SimpleNamespace(name="base"), rows=[None] * (ROWS + 2))
    (note,) = layout.hinge_notes(sweep, comparisons, 0.05, 0)
    assert "x on split_a (Holm p" in note and "x on split_b (Holm p" in note


def test_a_re_run_with_lent_seeds_says_they_are_in_its_sigma(monkeypatch):
    # with --sigma-from the re-run on two rows keeps the lent seeds in its σ (compare_alone), but the footnote
    # said "with σ 0.70 BLEU from its own two rows' seeds, 19 df" (results/mission-cpu --sigma-from
    # results/calibration-cpu: 4 df of its own, 15 lent), and of a table whose † holds with the lent seeds only
    # (2x2 of mission-cpu: Holm p 0.0005 lent, 0.055 own) "with the seed σ from the two rows' own seeds alone"
    from dataclasses import replace
    from types import SimpleNamespace

    import ablate.report.layout as layout
    from ablate.report.stats import BorrowedNoise

    sweep = SimpleNamespace(base=SimpleNamespace(name="base"), rows=[None] * (ROWS + 2))
    cases = {"hinge": ([13.5, 11.5], 3, 0.02), "holds": ([16.0, 17.0], 16, 7.5)}
    for words, (x, seeds, ss) in cases.items():
        lent = BorrowedNoise("results/calibration-cpu", seeds, ss)
        scores = _table(x)
        scores = SplitScores.of_values("test", scores.bleu, scores.boot, scores.seeds, lent)
        comparisons = [replace(c, scores=scores) for c in _compare_all(scores)]

        def alone(sweep, c, n, scores=scores):  # compare_alone: the two rows and the table's lent seeds
            parts = ({r: part[r] for r in (c.reference, c.row)} for part in (scores.bleu, scores.boot, scores.seeds))
            return SplitScores.of_values("test", *parts, borrowed=scores.borrowed).compare(c.reference, c.row)

        monkeypatch.setattr(layout, "compare_alone", alone)
        (note,) = layout.hinge_notes(sweep, comparisons, 0.05, 0)
        assert note.startswith("Every † holds" if words == "holds" else "† that hinges"), note
        assert "own seeds alone" not in note and "from its own two rows' seeds," not in note, note
        assert note.count(f"{seeds} seeds of results/calibration-cpu") == (1 if words == "holds" else 2), note


def test_a_two_row_table_states_no_re_run_on_its_own_rows(monkeypatch):
    # a table of two rows is its comparison's two rows: "Every † holds on its own rows ... (the rest of the
    # table left out of the fit)" re-ran the table itself and said so as if it were a check
    from types import SimpleNamespace

    import ablate.report.layout as layout

    scores = _table([16.0, 17.0])
    pair = SplitScores.of_values(
        "test", *({r: p[r] for r in ("base", "x")} for p in (scores.bleu, scores.boot, scores.seeds))
    )
    comparisons = _compare_all(pair)
    assert comparisons[0].significant(0.05)
    monkeypatch.setattr(layout, "compare_alone", lambda sweep, c, n: pair.compare(c.reference, c.row))
    sweep = SimpleNamespace(base=SimpleNamespace(name="base"), rows=[None, None])
    assert layout.hinge_notes(sweep, comparisons, 0.05, 0) == []
