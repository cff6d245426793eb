"""What a table may claim about its differences, in words: the footnotes on significance.

Every table that tested its rows says which test it used, how large a seed moves a run (the
per-trial seed σ and how it was estimated), how large an effect it could have found (the minimum
detectable effect at 80% power, :func:`ablate.report.significance.detectable`), and how many seeds a
row whose Δ was not significant would need. A table whose rows have one seed each claims nothing,
and says why.
"""

from __future__ import annotations

import statistics
from typing import Sequence

import ablate.report.significance as sig
from ablate.report.aggregate import Sweep
from ablate.report.plan import describe_plan, not_compared
from ablate.report.significance import Comparison, compare_alone, describe, marks_alone, test_splits

MARK = "†"
FLIP = "‡"  # per-seed Δs against the base disagree in sign
SEED_ONLY = "one seed"


def significance_notes(
    sweep: Sweep,
    comparisons: Sequence[Comparison],
    alpha: float,
    test: str,
    n_samples: int,
    has_test_column: bool,
    label: str = "BLEU",
) -> list[str]:
    """The significance footnotes of a table (empty when nothing was compared and nothing could be);
    ``label`` names the compared metric."""
    missing = not_compared(sweep)
    skipped = [f"Not compared (named by the sweep's comparisons): {'; '.join(missing)}."] if missing else []
    if not comparisons:
        if test_splits(sweep):
            return [
                "Significance was not tested: no comparison was made (`--no-significance`, or the planned "
                "comparisons pair no two rows of this table), though the trials saved hypotheses."
            ] + skipped
        return (["No saved hypotheses: significance was not tested."] if has_test_column else []) + skipped
    tested = [c for c in comparisons if c.tested]
    if not tested:
        return [
            f"No {MARK} is claimed: every row has one seed, so the training-seed variance cannot be estimated, "
            "and two runs of one configuration with other seeds differ by more than the test set's sampling "
            "error (results/calibration-cpu). Train >= 2 seeds per row; `--test bs` gives the sentence "
            "bootstrap alone, which measures test-set variance only."
        ]
    how = describe(test, n_samples)
    splits = sorted({c.split for c in tested})
    notes = [
        f"{MARK} significant at family-wise alpha = {alpha:g}: Holm-Bonferroni over all {len(tested)} comparisons "
        f"of this table ({describe_plan(sweep)}; test splits {', '.join(splits)}). Test: two-sided {how['name']}, "
        f"{how['samples']} bootstrap samples; a row's score is the mean over its seeds of corpus {label}."
        + (
            f" In the cells, {MARK} compares a row with the base; the named comparisons are listed below."
            if sweep.comparisons
            else ""
        )
    ]
    if test == "seeds":
        notes += _seed_notes(sweep, tested, alpha, label)
        notes += hinge_notes(sweep, comparisons, alpha, n_samples, label)
    else:
        notes.append(
            "This test measures test-set variance only: two seeds of one configuration differ by more than it "
            "allows for (results/calibration-cpu), so its marks are about these runs, not the configurations; "
            "the default `--test seeds` adds the training-seed variance."
        )
    notes += skipped
    if any(c.sign_flip for c in comparisons if c.reference == sweep.base.name):
        notes.append(f"{FLIP} the per-seed Δs against the base (same seed values) disagree in sign (`--per-seed`).")
    return notes


def _seed_notes(sweep: Sweep, tested: Sequence[Comparison], alpha: float, label: str = "BLEU") -> list[str]:
    split = tested[0].split
    here = [c for c in tested if c.split == split]
    first = here[0]
    how = "a row + seed fit" if first.paired else "the pooled within-row spread"
    trials = sum(len(r.trials) for r in sweep.rows)
    paired = "; rows trained with the same seed values are compared seed-paired" if first.paired else ""
    floor = (
        f", floored at the per-seed sentence variance the bootstrap puts inside it (the {first.sigma_df}-df "
        "estimate came out below it)"
        if first.sigma_floored
        else ""
    )
    notes = [
        f"Seed σ ({split}): {first.sigma:.2f} {label} per trial, from {how} over the table's {trials} trials "
        f"({first.sigma_df} df{paired}){floor}, added to the test-sentence bootstrap variance of each Δ; 95% CIs "
        f"of every Δ in `--format csv`, `--per-seed` and `ablate plot` (delta_ci.png)."
    ]
    k = int(statistics.median(min(c.seeds) for c in here))
    sentence = statistics.median(c.sentence_fixed for c in here)
    strict = alpha / len(tested)
    mde = sig.detectable(first.sigma, first.sigma_df, k, sentence, strict)
    loose = sig.detectable(first.sigma, first.sigma_df, k, sentence, alpha)
    notes.append(
        f"Minimum detectable effect at 80% power with {k} seeds per row: {mde:.2f} {label} at Holm's strictest "
        f"level (alpha/{len(tested)}), {loose:.2f} uncorrected; smaller Δs are within this table's noise."
    )
    unmarked = [c for c in here if not c.significant(alpha)]
    if unmarked:
        needs = []
        for c in unmarked:
            n = sig.seeds_needed(c.delta, first.sigma, c.sentence_fixed, strict)
            needs.append(f"{c.row} ({c.delta:+.2f}): " + (f"{n:,}" if n is not None else "none (test-set noise)"))
        notes.append(
            f"Seeds per row that a true Δ of the observed size would need (80% power, alpha/{len(tested)}): "
            + "; ".join(needs)
            + "."
        )
    return notes


def hinge_notes(
    sweep: Sweep, comparisons: Sequence[Comparison], alpha: float, n_samples: int, label: str = "BLEU"
) -> list[str]:
    """Which marks hinge on the table-pooled σ: each marked comparison re-run on its two rows alone
    (:func:`ablate.report.significance.marks_alone`), the rest of the Holm family unchanged."""
    hinges = marks_alone(comparisons, alpha, lambda c: compare_alone(sweep, c, n_samples))
    if not hinges:
        return []
    weak = [h for h in hinges if not h.holds(alpha)]
    if not weak:
        return [
            f"Every {MARK} holds on its own rows: with the seed σ from the two rows' own seeds alone (the rest of "
            f"the table left out of the fit), each is still significant after Holm."
        ]
    parts = []
    for h in weak:
        c, own = h.comparison, h.alone
        where = f"{c.row} vs {c.reference}" if c.reference != sweep.base.name else c.row
        if own is None or not own.tested:
            parts.append(f"{where} (Holm p {c.p_adjusted:.2g} here; its two rows have no seed variance of their own)")
        else:
            parts.append(
                f"{where} (Holm p {c.p_adjusted:.2g} here; alone p {own.p_value:.2g}, {h.p_adjusted:.2g} after Holm "
                f"over the table's {len([x for x in comparisons if x.tested])}, with σ {own.sigma:.2f} {label} from its "
                f"own two rows' seeds, {own.sigma_df} df)"
            )
    return [
        f"{MARK} that hinge{'s' if len(weak) == 1 else ''} on the σ pooled over the whole table (the two rows' own "
        f"seeds, without the unrelated rows, would not mark {'it' if len(weak) == 1 else 'them'}): "
        + "; ".join(parts)
        + f". {len(hinges) - len(weak)} of {len(hinges)} marks hold on their own rows."
    ]
