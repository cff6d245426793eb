"""No trial hangs a sweep (a time limit per trial, a stall warning, bounded trial logs)."""

from __future__ import annotations

import json
import logging
import re

import pytest
from typer.testing import CliRunner

from ablate import cli
from ablate.sweep import launcher
from ablate.sweep.local import CUT_MARK, bound_log
from ablate.sweep.planner import time_limit

from tests.helpers.sweep import fake_command, options, quiet_progress, run_sweep, small_spec

SEEDS = {"seed": {"values": [1, 2]}}


class Warnings(logging.Handler):
    """The warnings the launcher logs (the ``ablate`` logger may not propagate to pytest's caplog)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture()
def warnings():
    handler = Warnings()
    logger = logging.getLogger("ablate.sweep.launcher")
    logger.addHandler(handler)
    yield handler.lines
    logger.removeHandler(handler)


def test_a_hung_trial_is_stopped_at_its_time_limit_recorded_timeout_and_the_sweep_goes_on(tmp_path, events, warnings):
    progress, buffer = quiet_progress()
    command = fake_command(events, {"seed=1": "hang"})
    opts = options(tmp_path / "out", command, trial_timeout_s=2.0, stall_s=0.5)
    result = run_sweep(small_spec(SEEDS), opts, progress)
    hung, other = result.state.trials
    assert (hung.name, hung.status, other.status) == ("seed=1", "failed", "finished")
    assert hung.error == "timeout: stopped after 0:02, its time limit (--trial-timeout)"
    summary = json.loads((tmp_path / "out" / "seed=1" / "summary.json").read_text())
    assert summary["status"] == "timeout" and summary["error"] == hung.error
    assert summary["step"] == 1  # what the trainer recorded before it hung is kept
    assert 2.0 <= hung.duration_s < 8.0, hung.duration_s  # stopped at once: SIGTERM, and it ends
    assert "stopping seed=1: it ran past its time limit of 0:02" in buffer.getvalue()
    log = tmp_path / "out" / "seed=1" / "trial.log"
    assert len(warnings) == 1, warnings  # once, however long it stays silent
    assert re.fullmatch(
        rf"trial seed=1 has written nothing for 0:0[01] \(still running; its log: {re.escape(str(log))}\)", warnings[0]
    )


def test_no_limit_with_zero_and_no_stall_warning_for_a_trial_that_writes(tmp_path, events, warnings):
    progress, _ = quiet_progress()
    opts = options(tmp_path / "out", fake_command(events, steps=6, step_s=0.3), trial_timeout_s=0.0, stall_s=1.0)
    result = run_sweep(small_spec({"seed": {"value": 1}}), opts, progress)
    assert [t.status for t in result.state.trials] == ["finished"]
    assert warnings == []  # 1.8 s of training, a record written every 0.3 s: never silent for 1 s


def test_the_default_time_limit_comes_from_the_budget():
    assert time_limit(1500, None) == 1800 + 4 * 2.0 * 1500  # 3 h 50 min for a run of about 35 min on a CPU
    assert time_limit(350, 600.0) == 1800 + 4 * 600.0  # max_time wins over steps
    assert time_limit(-1, None) is None  # a budget in epochs: no default
    assert time_limit(1500, None, 5) == 5.0 and time_limit(1500, None, 0) is None  # --trial-timeout wins; 0: none


def test_a_chatty_trial_keeps_its_log_bounded_with_head_and_tail(tmp_path, events):
    progress, _ = quiet_progress()
    command = fake_command(events, {"trial": "chatty"}, steps=8)  # 8 steps x 200 kB
    opts = options(tmp_path / "out", command, log_limit=100_000)
    result = run_sweep(small_spec({"seed": {"value": 1}}), opts, progress)
    assert [t.status for t in result.state.trials] == ["finished"]
    text = (tmp_path / "out" / "trial" / "trial.log").read_bytes()
    assert len(text) < 100_000 + 1000, len(text)
    assert text.count(CUT_MARK) == 1
    head, tail = text.split(CUT_MARK)
    assert head.startswith(b"\n=== ablate sweep: trial, attempt 1")  # the attempt's header is kept
    assert tail.endswith(b"x" * 1023 + b"\n") and len(tail) > 20_000


def test_bound_log_keeps_earlier_attempts_the_head_and_the_last_whole_lines(tmp_path):
    log = tmp_path / "trial.log"
    earlier = b"attempt 1 said this\n"
    log.write_bytes(earlier + b"".join(b"line %05d\n" % i for i in range(1000)))  # 11 bytes a line
    assert not bound_log(log, len(earlier), 20_000)
    assert bound_log(log, len(earlier), 4_000)
    head, tail = log.read_bytes().split(CUT_MARK)
    assert head.startswith(earlier + b"line 00000\n") and len(head) == len(earlier) + 2_000
    assert tail.endswith(b"line 00999\n") and tail.startswith(b"line ") and len(tail) <= 1_000
    with open(log, "ab") as f:  # the trial goes on writing; the next cut keeps one mark
        f.write(b"".join(b"more %05d\n" % i for i in range(300)))
    assert bound_log(log, len(earlier), 4_000)
    text = log.read_bytes()
    assert text.count(CUT_MARK) == 1 and text.endswith(b"more 00299\n") and len(text) <= len(earlier) + 4_000


@pytest.mark.slow
def test_the_command_line_stops_a_hung_trial_after_trial_timeout_5_and_warns_of_the_stall(
    tmp_path, monkeypatch, events
):
    """The issue's case through ``ablate sweep run``: a trial that hangs (its trainer silent for ever) is stopped at
    ``--trial-timeout 5``, named on stderr after ``--stall-warning 1``; the other trial finishes; exit status 1."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launcher, "trainer_command", lambda config=None: fake_command(events, {"seed=1": "hang"}))
    sweep = tmp_path / "hang.yaml"
    sweep.write_text("method: grid\nparameters:\n  seed: {values: [1, 2]}\n  model.d_model: {value: 32}\n")
    args = ["sweep", "run", str(sweep), "--devices", "cpu", "--trial-timeout", "5", "--stall-warning", "1"]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 1, result.output
    state = json.loads((tmp_path / "runs" / "hang" / "sweep.json").read_text())
    assert [(t["name"], t["status"]) for t in state["trials"]] == [("seed=1", "failed"), ("seed=2", "finished")]
    assert 5.0 <= state["trials"][0]["duration_s"] < 12.0
    summary = json.loads((tmp_path / "runs" / "hang" / "seed=1" / "summary.json").read_text())
    assert summary["status"] == "timeout" and "its time limit (--trial-timeout)" in summary["error"]
    stall = [line for line in result.stderr.splitlines() if "has written nothing" in line]
    assert (
        len(stall) == 1 and stall[0].startswith("warning: trial seed=1 ") and "runs/hang/seed=1/trial.log" in stall[0]
    )
