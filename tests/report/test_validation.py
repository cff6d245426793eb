"""The validation pass of a table: a cell and its † use the same trials, seeds
are distinct, a row is one config, every planned trial is accounted for, and nothing is dropped
without a word."""

from __future__ import annotations

import json

import pytest
import sacrebleu

from ablate.report import table as report_table
from ablate.report.layout import build_table
from ablate.report.render import render, render_per_seed
from ablate.report.stats import aggregate, compare
from ablate.report.trials import EXCLUDED, ReportError, Trial

from tests.helpers.records import write_trial

REFS = [f"the cat number {i} sat on the mat ." for i in range(12)]
GOOD = [r if i % 3 else r.replace("cat", "dog") for i, r in enumerate(REFS)]
BAD = [r.replace("sat on", "ran by") for r in REFS]


def _bleu(hyps):
    return sacrebleu.corpus_bleu(hyps, [REFS]).score


def _trial(name, variant, seed, hyps=None, refs=None, bleu=None, **config):
    hyps = GOOD if hyps is None else hyps
    bleu = _bleu(hyps) if bleu is None else bleu
    return Trial(
        name,
        "finished",
        config={"model.heads": 4, **config, "seed": seed},
        metrics={"test/bleu": bleu},
        variant=variant,
        hyps={"test": hyps},
        refs={"test": REFS if refs is None else refs},
    )


def _rows(sweep):
    return {r.name: [t.name for t in r.trials] for r in sweep.rows}


def _left_out(sweep):
    return {t.name: (t.status, t.error) for t in sweep.unfinished}


def test_a_seed_the_test_cannot_use_is_not_in_the_cell_either():
    """Case 5: hyps with fewer lines than refs were skipped by the † test but averaged into the cell."""
    trials = [
        _trial("base-1", "base", 1),
        _trial("base-2", "base", 2),
        _trial("x-1", "x", 1, hyps=BAD),
        _trial("x-2", "x", 2, hyps=BAD[:-1], bleu=90.0),
    ]
    sweep = aggregate(trials)
    assert _rows(sweep) == {"base": ["base-1", "base-2"], "x": ["x-1"]}
    assert _left_out(sweep) == {"x-2": (EXCLUDED, "hyps/test has 11 lines, refs/test 12")}
    x = next(r for r in sweep.rows if r.name == "x")
    assert x.stats["test/bleu"].n == 1 and x.stats["test/bleu"].mean == pytest.approx(_bleu(BAD))
    (comp,) = compare(sweep, n_samples=50)
    assert comp.seeds == (2, 1)  # the test used exactly the cell's trials
    md = render(build_table(sweep, [comp]), "md")
    assert "- x-2 (variant x, seed 2): excluded - hyps/test has 11 lines, refs/test 12" in md
    assert "Trials: 3 of 4 in the table; not in it: 1 excluded" in md


def test_missing_hypotheses_or_other_references_exclude_the_trial():
    trials = [
        _trial("base-1", "base", 1),
        _trial("base-2", "base", 2),
        _trial("base-3", "base", 3, refs=[r + " !" for r in REFS]),
        Trial("base-4", "finished", config={"model.heads": 4, "seed": 4}, metrics={"test/bleu": 5.0}, variant="base"),
    ]
    left = _left_out(aggregate(trials))
    assert left["base-3"] == (EXCLUDED, "refs/test differ from the other trials' references")
    assert "no hyps/test while other trials have them" in left["base-4"][1]


def test_one_seed_trained_twice_is_not_a_replicate():
    """Case 7: a variant that sets seed, crossed with seed: [1, 2], trains seed 5 twice (± 0.00 and a †)."""
    trials = [_trial("base-1", "base", 1), _trial("base-2", "base", 2)]
    trials += [_trial("x-seed=1", "x", 5, hyps=BAD), _trial("x-seed=2", "x", 5, hyps=BAD)]
    sweep = aggregate(trials)
    assert _rows(sweep)["x"] == ["x-seed=1"]
    status, reason = _left_out(sweep)["x-seed=2"]
    assert status == EXCLUDED and reason.startswith("seed 5 again in row x (as x-seed=1)")
    x = next(r for r in sweep.rows if r.name == "x")
    assert x.stats["test/bleu"].n == 1 and x.stats["test/bleu"].std is None  # no fake ± 0.00


def test_trials_that_record_no_seed_are_never_dropped_unsaid():
    """Two trials of a row whose configs record no seed (runs logged elsewhere): one was silently lost (neither in
    the row nor listed as left out); the first by name is kept and the other is listed, excluded, saying why."""
    trials = [_trial("base-1", "base", 1), _trial("base-2", "base", 2)]
    trials += [_trial(name, "x", None, hyps=BAD) for name in ("x-b", "x-a")]
    for t in trials[2:]:
        del t.config["seed"]
    sweep = aggregate(trials)
    assert _rows(sweep)["x"] == ["x-a"]
    status, reason = _left_out(sweep)["x-b"]
    assert status == EXCLUDED and reason.startswith("no seed recorded, as x-a, in row x")


def test_a_row_of_two_configs_is_refused():
    """Case 8: a variant whose tracking.variant names another row merged two configs into one row."""
    trials = [_trial("base-1", "base", 1), _trial("base-2", "base", 2, **{"model.heads": 8})]
    with pytest.raises(
        ReportError, match=r"row base mixes two configs: base-1 has model.heads=4, base-2 model.heads=8"
    ):
        aggregate(trials)


def test_a_summary_that_disagrees_with_its_hypotheses_is_named():
    """Case 9: the cell (summary.json) said 15.98 while the † read hypotheses scoring 8.30."""
    trials = [_trial("base-1", "base", 1), _trial("base-2", "base", 2), _trial("x-1", "x", 1, hyps=BAD, bleu=15.98)]
    sweep = aggregate(trials)
    assert sweep.disagreements == [f"x-1: test/bleu 15.98 in its summary, {_bleu(BAD):.2f} from hyps/test"]
    md = render(build_table(sweep), "md")
    assert "Summary and hypotheses disagree for 1 trial scores" in md and "x-1: test/bleu 15.98" in md
    assert aggregate(trials[:2]).disagreements == []


def test_a_nan_or_infinite_metric_leaves_the_trial_out():
    """Cases 9 and 12: Infinity was the bold best 'inf ± nan'; a NaN seed made a one-seed mean with n = 2."""
    trials = [_trial("base-1", "base", 1), _trial("base-2", "base", 2), _trial("x-1", "x", 1), _trial("x-2", "x", 2)]
    trials[3] = Trial(**{**trials[3].__dict__, "metrics": {"test/bleu": float("nan")}})
    trials[1] = Trial(**{**trials[1].__dict__, "metrics": {"test/bleu": float("inf")}})
    sweep = aggregate(trials)
    assert _rows(sweep) == {"base": ["base-1"], "x": ["x-1"]}
    assert _left_out(sweep) == {
        "base-2": (EXCLUDED, "test/bleu is inf, not a finite number"),
        "x-2": (EXCLUDED, "test/bleu is nan, not a finite number"),
    }
    table = build_table(sweep)
    assert [r.n for r in table.rows] == [1, 1] and "inf" not in render(table, "md").split("Cells:")[0]


def _with_comparisons(values, seeds=(1, 2)):
    trials = [_trial(f"{v}-{s}", v, s, hyps=GOOD if v == "base" else BAD) for v in ("base", "x") for s in seeds]
    trials.append(Trial("y-1", "failed", "boom", config={"seed": 1}, variant="y"))
    plan = [{"between": "variant", "values": values}]
    return aggregate([Trial(**{**t.__dict__, "comparisons": plan}) for t in trials])


def test_comparisons_naming_an_unknown_row_are_refused_and_unfinished_ones_said():
    """Case 10: an unknown name was accepted, and the table then claimed no hypotheses were saved."""
    with pytest.raises(ReportError, match="the sweep's comparisons name 'typo', which is no row of this table"):
        compare(_with_comparisons(["base", "typo"]))
    sweep = _with_comparisons(["base", "y"])
    assert compare(sweep) == []
    md = render(build_table(sweep, []), "md")
    assert "No saved hypotheses" not in md and "though the trials saved hypotheses" in md
    assert "Not compared (named by the sweep's comparisons): y (no finished trial)." in md


def test_a_one_seed_table_still_says_which_named_comparisons_it_could_not_make():
    """With one seed per row no comparison is tested; the note naming the unfinished row was dropped then."""
    sweep = _with_comparisons(["base", "x", "y"], seeds=(1,))
    comparisons = compare(sweep)
    assert comparisons and not any(c.tested for c in comparisons)
    md = render(build_table(sweep, comparisons), "md")
    assert "every row has one seed" in md
    assert "Not compared (named by the sweep's comparisons): y (no finished trial)." in md


def test_markdown_cells_hold_newlines_and_pipes():
    """Case 11: a variant name with a newline and | split the Markdown table."""
    name = "a|b\nc"
    trials = [_trial("base-1", "base", 1), _trial("w-1", name, 1, hyps=BAD)]
    md = render(build_table(aggregate(trials)), "md")
    rows = [line for line in md.splitlines() if line.startswith("|")]
    assert len(rows) == 4 and len({line.count(" | ") for line in rows}) == 1
    assert "| a\\|b c |" in md


def test_every_markdown_writer_escapes_a_cell_as_the_table_does():
    """The per-seed table escaped only ``|``: a name with a backslash before it (``a\\|b``) lost its backslash
    there (GFM reads ``a\\\\|b`` as ``a|b``) while the table kept it; both now go through one helper."""
    name = "a\\|b"
    sweep = aggregate([_trial("base-1", "base", 1), _trial("w-1", name, 1, hyps=BAD)])
    cell = "| a\\\\\\|b |"
    assert cell in render(build_table(sweep), "md") and cell in render_per_seed(sweep, "md")


def test_a_running_sweeps_table_lists_its_planned_trials(tmp_path):
    """Case 6: a running sweep's table hid the trials sweep.json plans but that have no summary yet."""
    summary = {"status": "finished", "test/bleu": 20.0, "variant": "base"}
    write_trial(tmp_path, "base-seed=1", {**summary, "config": {"seed": 1}})
    write_trial(tmp_path, "base-seed=2", {**summary, "config": {"seed": 2}})
    (tmp_path / "base-seed=3").mkdir()  # started: no summary yet
    planned = [
        {"name": f"base-seed={s}", "point": {"variant": "base", "seed": s}, "status": st}
        for s, st in ((1, "finished"), (2, "finished"), (3, "running"), (4, "pending"))
    ]
    (tmp_path / "sweep.json").write_text(json.dumps({"name": "s", "trials": planned}))
    md = report_table(str(tmp_path), significance=False).render("md")
    assert "Trials: 2 of 4 in the table; not in it: 1 pending, 1 running" in md
    assert "- base-seed=3 (variant base, seed 3): running - still running" in md
    assert "- base-seed=4 (variant base, seed 4): pending - not started" in md
