"""The run record module: statuses, file names, the versioned summary and the metrics registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ablate import record
from ablate.errors import AblateError
from ablate.record import (
    SUMMARY_VERSION,
    RecordError,
    RunFiles,
    RunStatus,
    RunSummary,
    SweepFiles,
    UnreadableRecord,
)

RESULTS = Path(__file__).resolve().parents[2] / "results"
SHIPPED = sorted(RESULTS.glob("*/*/summary.json"))


def test_statuses_are_their_json_strings():
    assert json.dumps({"s": RunStatus.FINISHED}) == '{"s": "finished"}'
    assert f"{RunStatus.FAILED:<8}|" == "failed  |" and str(RunStatus.RUNNING) == "running"
    assert {"finished": 1}[RunStatus.FINISHED] == 1 and RunStatus("stopped") is RunStatus.STOPPED
    assert [s for s in RunStatus if s.done] == [RunStatus.FINISHED, RunStatus.FAILED, RunStatus.STOPPED]
    assert [s for s in RunStatus if s.scored] == [RunStatus.FINISHED, RunStatus.STOPPED]
    assert RunStatus.PENDING.resumable and RunStatus.INTERRUPTED.resumable and not RunStatus.RUNNING.resumable


def test_an_unknown_status_is_one_line_with_did_you_mean():
    with pytest.raises(RecordError) as err:
        RunStatus.parse("finshed", "trial a")
    assert str(err.value) == (
        "trial a: unknown status 'finshed' (one of pending, running, finished, failed, interrupted, stopped, timeout)"
        "; did you mean 'finished'?"
    )
    assert isinstance(err.value, AblateError)
    assert RunStatus.of("failed") is RunStatus.FAILED and RunStatus.of("exploded") == "exploded"


def test_run_and_sweep_files_are_built_from_their_folder(tmp_path):
    files = RunFiles(tmp_path / "run")
    assert files.summary == tmp_path / "run" / "summary.json"
    assert files.config.name == "config.yaml" and files.tokenizer.name == "tokenizer"
    assert files.environment.name == "environment.txt"
    assert files.best == tmp_path / "run" / "checkpoints" / "best.ckpt"
    assert (files.last.name, files.last_prev.name, files.lock.name) == ("last.ckpt", "last.prev.ckpt", ".lock")
    assert files.hyps("test") == tmp_path / "run" / "hyps" / "test.txt"
    assert files.refs("dev").parent.name == "refs" and files.sources("dev").parent.name == "sources"
    with pytest.raises(ValueError, match="no text kind 'hyp'"):
        files.texts("hyp")
    sweep = SweepFiles(str(tmp_path))
    assert sweep.state == tmp_path / "sweep.json" and sweep.lock == tmp_path / ".lock"
    assert sweep.trial("a").summary == tmp_path / "a" / "summary.json"


def test_a_summary_round_trips_through_disk_with_a_version(tmp_path):
    data = {
        "status": "finished",
        "error": None,
        "config": {"model": {"heads": 4}},
        "val/bleu": 30.5,
        "test_2016_flickr/bleu": 29.0,
        "train/loss": None,
        "params": 1000,
        "step": 50,
        "history": [{"step": 50, "val/bleu": 30.5}],
        "machine": {"cpu": "x", "cores": 2},
        "variant": None,
        "future_field": [1, 2],
    }
    summary = RunSummary.from_json(data)
    assert summary.status is RunStatus.FINISHED and summary.params == 1000 and summary.step == 50
    assert summary.metrics == {"val/bleu": 30.5, "test_2016_flickr/bleu": 29.0, "train/loss": None}
    assert summary.extra == {"machine": {"cpu": "x", "cores": 2}, "variant": None, "future_field": [1, 2]}
    assert summary.version == 0  # unversioned: from before versions
    summary.write(tmp_path)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk == {**data, "version": SUMMARY_VERSION}
    again = RunSummary.read(tmp_path)
    assert again.to_json() == on_disk and again.version == SUMMARY_VERSION
    assert (
        again.number("val/bleu") == 30.5 and again.number("train/loss") is None and again.get("machine")["cores"] == 2
    )


def test_update_sets_fields_by_their_json_keys():
    summary = RunSummary(status=RunStatus.RUNNING)
    summary.update({"val/bleu": 12.0, "step": 3, "data": {"pairs": 5}})
    summary.update({"step": 4})
    assert summary.metrics == {"val/bleu": 12.0} and summary.step == 4 and summary.extra == {"data": {"pairs": 5}}
    assert summary.to_json()["status"] == "running" and summary.to_json()["error"] is None


@pytest.mark.skipif(not SHIPPED, reason="no shipped results/ in this checkout")
@pytest.mark.parametrize(
    "path", SHIPPED[:: max(1, len(SHIPPED) // 12)], ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}"
)
def test_shipped_summaries_load_and_round_trip_losslessly(path):
    raw = json.loads(path.read_text())
    written = raw.get("version", 0)  # results shipped before summaries had versions carry none
    summary = RunSummary.read(path)
    assert summary.version == written and summary.status is RunStatus.FINISHED
    assert summary.number(record.DEV_BLEU.key) is not None and summary.config
    out = summary.to_json()
    assert out.pop("version") == SUMMARY_VERSION and out == {k: v for k, v in raw.items() if k != "version"}


@pytest.mark.skipif(not SHIPPED, reason="no shipped results/ in this checkout")
def test_every_shipped_summary_loads():
    assert len({p.parent.parent for p in SHIPPED}) == len(list(RESULTS.glob("*/sweep.json")))  # every results folder
    assert all(RunSummary.read(p).status is RunStatus.FINISHED for p in SHIPPED)


def test_a_summary_from_a_newer_ablate_is_one_line(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"status": "finished", "version": SUMMARY_VERSION + 1}))
    with pytest.raises(RecordError) as err:
        RunSummary.read(tmp_path / "summary.json")
    message = str(err.value)
    assert "\n" not in message and f"summary version {SUMMARY_VERSION + 1}" in message and "upgrade ablate" in message
    assert RunSummary.peek(tmp_path) is None


def test_ill_typed_and_unreadable_summaries_say_why(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"status": "finished", "val/bleu": "high"}))
    with pytest.raises(RecordError, match=r"^summary.json: val/bleu is 'high', not a number$"):
        RunSummary.read(tmp_path)
    assert RunSummary.read(tmp_path, strict=False).metrics == {"val/bleu": "high"}
    (tmp_path / "summary.json").write_text(json.dumps({"status": "done"}))
    with pytest.raises(RecordError, match="status is 'done', not one of finished, failed, interrupted, running"):
        RunSummary.read(tmp_path)
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(UnreadableRecord, match="^unreadable summary.json: "):
        RunSummary.read(tmp_path)
    assert RunSummary.peek(tmp_path) is None and RunSummary.peek(tmp_path / "missing") is None


def test_headline_keeps_what_sweep_json_kept():
    summary = RunSummary.from_json(
        {"status": "finished", "val/bleu": 30.5, "test/bleu": 29.0, "test_2017/bleu": 27.0, "params": 10, "epoch": 3}
    )
    assert record.headline(summary) == {"val/bleu": 30.5, "test/bleu": 29.0, "test_2017/bleu": 27.0, "params": 10}


def test_metric_keys_of_splits():
    bleu = record.TEST_BLEU
    assert bleu.split_key("test_2016_flickr") == "test_test_2016_flickr/bleu"
    assert bleu.split_of("test_test_2016_flickr/bleu") == "test_2016_flickr"
    assert bleu.split_of("test/bleu") is None and bleu.split_of("test_x/chrf") is None
    assert record.DEV_BLEU.split_of("val_x/bleu") is None  # not a per-split metric


@pytest.mark.parametrize("depth", [200_000, 600])
def test_a_summary_nested_deep_is_an_unreadable_trial_not_a_recursion_error(tmp_path, depth):
    from ablate.report.trials import collect

    from tests.helpers.records import write_trial

    write_trial(tmp_path, "ok", {"status": "finished", "val/bleu": 1.0, "config": {"seed": 1}})
    (tmp_path / "deep").mkdir()
    deep = '{"a": ' * depth + "1" + "}" * depth  # 600: parsed, then flattening the config recursed too deep
    (tmp_path / "deep" / "summary.json").write_text('{"status": "finished", "val/bleu": 1.0, "config": ' + deep + "}")
    trials = {t.name: t for t in collect(str(tmp_path))}  # raised RecursionError, aborting the whole table
    assert trials["deep"].status == "failed" and "nested more than 100 levels deep" in trials["deep"].error
    assert trials["ok"].finished


def test_a_sweep_state_nested_deep_leaves_the_table_of_its_trials(tmp_path):
    """``ablate table`` over a received sweep folder whose ``sweep.json`` nests deeper than the parser follows:
    a RecursionError traceback, no table."""
    from ablate.report.trials import collect

    from tests.helpers.records import write_trial

    write_trial(tmp_path, "ok", {"status": "finished", "val/bleu": 1.0, "config": {"seed": 1}})
    (tmp_path / "sweep.json").write_text("[" * 200_000 + "]" * 200_000)
    assert [t.name for t in collect(str(tmp_path)) if t.finished] == ["ok"]
