"""Record readers check types: a crafted or damaged record is one line under the table, never a
traceback or a number the table believes."""

from __future__ import annotations

import gzip
import json

import pytest

from ablate.record import metric_problem, summary_problem
from ablate.report import table as report_table
from ablate.report.trials import INVALID, collect, planned_trials

from tests.helpers.records import write_trial

GOOD = {"status": "finished", "test/bleu": 20.0, "val/bleu": 21.0, "config": {"seed": 1, "model": {"heads": 4}}}


@pytest.mark.parametrize(
    "change, field",
    [
        ({"history": [1, 2, 3]}, "history[0] is 1, not a record"),
        ({"history": [{"step": 100, "val/bleu": 1.0}, {"step": "200", "val/bleu": 2.0}]}, "history[1].step is '200'"),
        ({"history": [{"step": 1, "val/bleu": 1e308}]}, "history[0].val/bleu is 1e+308, outside [0, 100]"),
        ({"history": "abc"}, "history is a str, not a list"),
        ({"config": "abc"}, "config is a str, not a mapping"),
        ({"sweep": {"name": "s", "params": "abc"}}, "sweep.params is a str, not a mapping"),
        ({"sweep": "abc"}, "sweep is a str, not a mapping"),
        ({"val/bleu": "x"}, "val/bleu is 'x', not a number"),
        ({"test/bleu": float("inf")}, "test/bleu is inf, not a finite number"),
        ({"test/bleu": float("nan")}, "test/bleu is nan, not a finite number"),
        ({"test/bleu": 1e308}, "test/bleu is 1e+308, outside [0, 100]"),
        ({"params": 1e308}, "params is 1e+308, outside"),
        ({"test/bleu": None}, "test/bleu is null"),  # how NaN is written (strict JSON)
        ({"status": 3}, "status is 3, not one of"),
        ({"error": ["x"]}, "error is a list, not text"),
        ({"variant": 5}, "variant is a int, not a name"),
    ],
)
def test_a_bad_field_is_one_line_naming_it_and_the_table_still_renders(tmp_path, change, field):
    assert field in summary_problem({**GOOD, **change})
    write_trial(tmp_path, "good", GOOD)
    write_trial(tmp_path, "bad", {**GOOD, "config": {"seed": 2, "model": {"heads": 4}}, **change})
    trials = {t.name: t for t in collect(str(tmp_path))}
    assert trials["bad"].status == INVALID and field in trials["bad"].error and "\n" not in trials["bad"].error
    md = report_table(str(tmp_path), significance=False).render("md")
    assert f"- bad: invalid - summary.json: {field}" in md  # listed under the table, with the reason
    assert "| 20.00 | 1 |" in md  # the good trial alone makes the row (one row: no best to mark)


def test_sound_records_have_no_problem():
    assert summary_problem(GOOD) is None
    assert summary_problem({**GOOD, "val/bleu": {"max": 3.0}, "history": [{"step": 1, "val/ppl": None}]}) is None
    assert summary_problem({"status": "failed", "test/bleu": None, "error": "boom"}) is None
    assert metric_problem("val/ppl", 0.5) == "val/ppl is 0.5, outside [1, inf]"
    assert summary_problem([1]) == "summary.json is a list, not a JSON object"


def test_bad_utf8_in_hypotheses_is_named_as_such_not_as_an_unreadable_summary(tmp_path):
    run = write_trial(tmp_path, "t", GOOD, hyps={"test": ["a"]}, refs={"test": ["a"]})
    (run / "hyps" / "test.txt").write_bytes(b"caf\xe9\n")
    (trial,) = collect(str(tmp_path))
    assert trial.status == INVALID and trial.error == "hyps/test.txt is not UTF-8 text (byte 3)"


def test_a_stray_txt_beside_the_gz_that_differs_is_refused_and_one_that_agrees_is_fine(tmp_path):
    run = write_trial(tmp_path, "t", GOOD, hyps={"test": ["a b c"]}, refs={"test": ["a b c"]})
    (run / "hyps" / "test.txt.gz").write_bytes(gzip.compress(b"a b c\n"))
    (trial,) = collect(str(tmp_path))
    assert trial.finished and trial.hyps == {"test": ["a b c"]}
    (run / "hyps" / "test.txt").write_text("x y z\n")
    (trial,) = collect(str(tmp_path))
    assert trial.status == INVALID and "hyps/test.txt and hyps/test.txt.gz both exist and differ" in trial.error


def test_planned_trials_of_sweep_json():
    state = {"trials": [{"name": "a", "status": "pending", "point": {"seed": 1}}]}
    assert planned_trials(state) == ([{"name": "a", "status": "pending", "error": None, "point": {"seed": 1}}], None)
    assert planned_trials({"name": "old"}) == ([], None)  # no trials: nothing planned
    assert planned_trials({"trials": "abc"}) == ([], "trials is a str, not a list")
    assert planned_trials({"trials": [{"name": "a", "point": "abc"}]}) == (
        [],
        "trials[0].point is a str, not a mapping",
    )


def test_a_malformed_sweep_json_is_listed_not_a_traceback(tmp_path):
    write_trial(tmp_path, "good", GOOD)
    (tmp_path / "sweep.json").write_text(json.dumps({"trials": [{"name": "x", "point": "abc"}]}))
    md = report_table(str(tmp_path), significance=False).render("md")
    assert "- sweep.json: invalid - sweep.json: trials[0].point is a str, not a mapping" in md


def test_plots_skip_a_trial_whose_history_or_metrics_are_bad(tmp_path):
    """Case 20: ``val/bleu: "x"`` in a history and a 1e308 dev BLEU crashed ``ablate plot``."""
    from ablate.report import make_plots

    sweep = tmp_path / "sweep"  # the figures go beside it: an output inside the sweep is refused
    history = [{"step": 10, "val/bleu": 1.0}, {"step": 20, "val/bleu": 2.0}]
    for seed in (1, 2):
        write_trial(sweep, f"base-{seed}", {**GOOD, "variant": "base", "history": history, "config": {"seed": seed}})
    write_trial(sweep, "x-1", {**GOOD, "variant": "x", "history": [{"step": 10, "val/bleu": "x"}]})
    write_trial(sweep, "y-1", {**GOOD, "variant": "y", "val/bleu": 1e308, "history": history})
    written = make_plots(str(sweep), tmp_path / "plots", significance=False)
    assert written and all(p.stat().st_size > 0 for p in written)
    assert {t.name for t in collect(str(sweep)) if t.status == INVALID} == {"x-1", "y-1"}
