"""Trial names, and reading how a trial ended from its summary.json and log."""

from __future__ import annotations

import json
import os
import signal
import time

from ablate.record import LOG_FILE as LOG
from ablate.sweep.launcher import stats
from ablate.sweep.spec import labels, trial_name
from ablate.sweep.state import SweepState, Trial, best_trial, clock, outcome

from tests.helpers.sweep import small_spec


def test_names_use_short_keys_unless_two_would_clash():
    spec = small_spec(
        {
            "model.attention.score": {"values": ["dot", "additive"]},
            "model.heads": {"values": [2]},  # a single value does not vary
            "train.lr": {"values": [0.001, 0.0005]},
            "model.d_k": {"values": [16]},
            "seed": {"values": [1, 2]},
        }
    )
    point = {"model.attention.score": "additive", "model.heads": 2, "train.lr": 0.0005, "seed": 2}
    assert trial_name(spec, point, set()) == "score=additive-lr=0.0005-seed=2"
    clash = small_spec({"model.layers": {"values": [1, 2]}, "model.rnn.layers": {"values": [1, 2]}})
    assert labels(clash, {"model.layers": 1, "model.rnn.layers": 2}) == ["model.layers=1", "model.rnn.layers=2"]


def test_names_are_unique_and_file_system_safe():
    spec = small_spec({"data.source": {"values": ["hf:a/b", "hf:a b"]}})
    first = trial_name(spec, {"data.source": "hf:a/b"}, set())
    assert first == "source=hf_a_b"
    assert trial_name(spec, {"data.source": "hf:a b"}, {first}) == "source=hf_a_b-2"


def write(run_dir, summary=None, log=""):
    run_dir.mkdir(parents=True, exist_ok=True)
    if summary is not None:
        (run_dir / "summary.json").write_text(json.dumps(summary))
    (run_dir / LOG).write_text(log)


def test_a_finished_trial_reports_its_metric_and_results(tmp_path):
    write(
        tmp_path,
        {"status": "finished", "val/bleu": 30.5, "test/bleu": 29.0, "test_2017/bleu": 27.0, "params": 10, "config": {}},
    )
    result = outcome(tmp_path, 0, "val/bleu")
    assert result.status == "finished" and result.metric == 30.5
    assert result.results == {"test/bleu": 29.0, "test_2017/bleu": 27.0, "params": 10, "val/bleu": 30.5}


def test_failure_reasons_come_from_summary_then_log_then_exit(tmp_path):
    write(tmp_path / "a", {"status": "failed", "error": "loss is NaN at step 7"}, "noise\n")
    assert outcome(tmp_path / "a", 1, "val/bleu").error == "loss is NaN at step 7"
    write(tmp_path / "b", None, "Traceback (most recent call last):\n  File x\nValueError: bad shape\nbye\n")
    assert outcome(tmp_path / "b", 1, "val/bleu").error == "ValueError: bad shape"
    write(tmp_path / "c", None, "step 3\n")
    assert outcome(tmp_path / "c", -signal.SIGKILL, "val/bleu").error == "killed by SIGKILL (out of memory?)"
    assert outcome(tmp_path / "c", 3, "val/bleu").error == "step 3 [exit code 3]"
    write(tmp_path / "d", {"status": "finished", "val/bleu": float("nan")})
    assert outcome(tmp_path / "d", 0, "val/bleu").error == "val/bleu is nan (diverged?)"
    write(tmp_path / "e", {"status": "finished"})
    assert "has no 'val/bleu'" in outcome(tmp_path / "e", 0, "val/bleu").error
    write(tmp_path / "f", {"status": "interrupted"})
    assert outcome(tmp_path / "f", 130, "val/bleu").status == "interrupted"
    long = "RuntimeError: " + "x " * 400
    write(tmp_path / "g", None, long)
    assert len(outcome(tmp_path / "g", 1, None).error) == 300


def test_what_an_earlier_attempt_left_behind_is_ignored(tmp_path):
    write(tmp_path, {"status": "interrupted"}, "RuntimeError: old crash\n")
    old = time.time() - 100
    os.utime(tmp_path / "summary.json", (old, old))
    start = (tmp_path / LOG).stat().st_size
    with open(tmp_path / LOG, "a") as f:
        f.write("Segmentation fault\n")
    result = outcome(tmp_path, -signal.SIGSEGV, "val/bleu", since=time.time() - 1, log_start=start)
    assert result.status == "failed" and result.error == "killed by SIGSEGV"


def test_a_run_finished_before_the_attempt_that_found_it_so_is_finished(tmp_path):
    # a trial recorded interrupted (or pending) whose run had finished (sweep.json saved before the trainer's last
    # write, an older copy of it) was started again; `ablate train` said "run already finished" and exited 0 without
    # writing, and the sweep recorded it failed: "test BLEU 0.00 | ... summary.json [exit code 0]"
    write(tmp_path, {"status": "finished", "val/bleu": 30.5, "config": {}}, "run already finished\n")
    old = time.time() - 100
    os.utime(tmp_path / "summary.json", (old, old))
    result = outcome(tmp_path, 0, "val/bleu", since=time.time() - 1)
    assert result.status == "finished" and result.metric == 30.5
    write(tmp_path / "b", {"status": "interrupted"}, "")
    os.utime(tmp_path / "b" / "summary.json", (old, old))
    assert outcome(tmp_path / "b", 0, "val/bleu", since=time.time() - 1).status == "failed"  # not an earlier one's


def test_progress_counts_eta_and_best():
    trials = [
        Trial("a", {}, "finished", metric=10.0),
        Trial("b", {}, "finished", metric=20.0),
        Trial("c", {}, "failed"),
        Trial("d", {}, "running"),
        Trial("e", {}, "pending"),
        Trial("f", {}, "pending"),
    ]
    state = SweepState("s", "x", "sig", trials=trials)
    snap = stats(state, "maximize", total=6, elapsed_s=100, slots=2, durations=[30.0, 50.0])
    assert (snap.done, snap.running, snap.failed) == (3, 1, 1)
    assert snap.eta_s == 40.0 * 3 / 2 and snap.best.name == "b"
    assert best_trial(state, "minimize").name == "a"
    assert clock(3725) == "1:02:05" and clock(65) == "1:05" and clock(None) == "?"


def test_the_trainers_validation_history_feeds_early_termination():
    from ablate.record import RunSummary
    from ablate.sweep.state import reported_history

    summary = RunSummary.from_json(
        {
            "history": [
                {"step": 2, "val/bleu": 1.0},
                {"step": 4, "val/ppl": 9.0},
                {"step": 6, "val/bleu": 3.5},
                {"step": 8, "val/bleu": float("nan")},
            ]
        },
        strict=False,
    )
    assert reported_history(summary, "val/bleu") == [1.0, 3.5]
    assert reported_history(RunSummary(), "val/bleu") is None and reported_history(None, "val/bleu") is None


def test_a_misspelled_sweep_metric_says_which_it_meant_and_how_to_keep_the_trained_runs(tmp_path):
    """``metric: {name: val/bleux}`` passes every check (a plugin may record any key), so each trial trained and
    then failed with "summary.json has no 'val/bleux'": nothing said which key was meant, nor that the runs are kept
    (fixed and rerun with --retry-failed, each trainer finds its run finished: measured, no step retrained)."""
    write(tmp_path, {"status": "finished", "val/bleu": 30.5, "val/ppl": 9.1, "test/bleu": 29.0, "config": {}})
    error = outcome(tmp_path, 0, "val/bleux").error
    assert error == (
        "summary.json has no 'val/bleux' (the sweep's metric; did you mean 'val/bleu'?): fix metric.name in the "
        "sweep file and rerun with --retry-failed, which reads the trained runs without training them again"
    )
