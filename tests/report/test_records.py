"""Collecting trials from a sweep folder and from W&B's public API (stand-ins, no network)."""

from __future__ import annotations

import json

import pytest

from ablate.record import RunStatus, RunSummary
from ablate.report.trials import ReportError, clean_config, collect, from_summary, parse_wandb_path

from tests.helpers.records import N_SENTENCES, SPLITS, write_trial


def test_folder_reads_every_trial_with_status_config_and_texts(variant_sweep):
    trials = {t.name: t for t in collect(str(variant_sweep))}
    assert len(trials) == 15  # 5 variants x 3 seeds, sweep.json ignored
    assert trials["B-dk16-s3"].status == "failed"
    assert trials["B-dk16-s3"].error == "RuntimeError: CUDA out of memory"
    assert trials["E-learned-s3"].status == "running"
    base = trials["base-s2"]
    assert base.finished and base.variant == "base" and base.seed == 2 and base.sweep == "table3"
    assert base.config["model.heads"] == 4 and base.config["model.attention.score"] == "dot"
    assert not any(k.startswith("tracking.") for k in base.config)  # run names never split rows
    assert base.metrics["test/bleu"] == 27.5 and base.metrics["params"] == 9_500_000
    assert sorted(base.hyps) == sorted(SPLITS) and len(base.refs[SPLITS[0]]) == N_SENTENCES
    assert [h["step"] for h in base.history] == [100, 200, 300, 400, 500]
    # the trial holds the typed run record it was read from; its view (metrics, history) agrees with it
    assert isinstance(base.summary, RunSummary) and base.summary.status is RunStatus.FINISHED
    assert base.summary.number("test/bleu") == base.metrics["test/bleu"] and base.summary.params == 9_500_000
    assert [h["step"] for h in base.summary.history] == [h["step"] for h in base.history]


def test_nested_and_dotted_configs_flatten_alike():
    nested = clean_config(
        {
            "model": {"heads": 8, "attention": {"score": "dot"}},
            "train": {"betas": [0.9, 0.98]},
            "tracking": {"name": "x"},
            "_wandb": {"v": 1},
        }
    )
    dotted = clean_config(
        {"model.heads": 8, "model.attention.score": "dot", "train.betas": [0.9, 0.98], "tracking.name": "y"}
    )
    assert nested == dotted == {"model.heads": 8, "model.attention.score": "dot", "train.betas": (0.9, 0.98)}


@pytest.mark.parametrize(
    "summary, config, expected",
    [
        ({"accelerator": "cpu"}, {"train": {"accelerator": "auto"}}, "cpu"),  # recorded: "auto" resolved
        ({"accelerator": "gpu"}, {}, "gpu"),
        ({}, {"train": {"accelerator": "cpu"}}, "cpu"),  # older runs: an explicit config says it
        ({}, {"train.accelerator": "gpu"}, "gpu"),  # a W&B run's dotted config
        ({}, {"train": {"accelerator": "auto"}}, None),  # older runs on "auto": not known
        ({"accelerator": "tpu?"}, {}, None),
    ],
)
def test_a_trial_knows_what_trained_it_where_its_record_says(summary, config, expected):
    trial = from_summary("t", {"status": "finished", **summary, "config": config})
    assert trial.accelerator == expected and "accelerator" not in trial.metrics


def test_unreadable_summary_is_a_failed_trial_not_dropped(tmp_path):
    write_trial(tmp_path, "ok", {"status": "finished", "val/bleu": 1.0, "config": {"seed": 1}})
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "summary.json").write_text("{not json")
    trials = {t.name: t for t in collect(str(tmp_path))}
    assert trials["broken"].status == "failed" and "unreadable" in trials["broken"].error


@pytest.mark.parametrize(
    "source, message",
    [
        ("/nonexistent/sweep", "sweep folder not found"),
        ("wandb:only-entity", "use wandb:<entity>/<project>"),
        ("wandb:a/b/c/d", "use wandb:<entity>/<project>"),
    ],
)
def test_bad_sources_are_one_line_errors(source, message):
    with pytest.raises(ReportError, match=message) as err:
        collect(source)
    assert "\n" not in str(err.value)


def test_empty_folder_is_an_error(tmp_path):
    with pytest.raises(ReportError, match="no trials"):
        collect(str(tmp_path))


def test_wandb_path():
    assert parse_wandb_path("ent/proj") == ("ent", "proj", None)
    assert parse_wandb_path("ent/proj/grp") == ("ent", "proj", "grp")


def test_wandb_source_reads_the_same_records(variant_sweep, wandb_api):
    folder = {t.name: t for t in collect(str(variant_sweep))}
    remote = {t.name: t for t in collect("wandb:me/ablate/table3", api=wandb_api)}
    assert wandb_api.calls == [("me/ablate", {"group": "table3"})]
    assert folder.keys() == remote.keys()
    for name, f in folder.items():
        r = remote[name]
        assert (r.status, r.error, r.variant, r.seed, r.sweep) == (f.status, f.error, f.variant, f.seed, f.sweep), name
        assert r.config == f.config, name
        assert r.metrics == f.metrics, name
        assert r.hyps == f.hyps and r.refs == f.refs, name
        assert r.summary is not None and r.summary.number("test/bleu") == f.summary.number("test/bleu"), name
        assert [(h["step"], h["val/bleu"]) for h in r.history] == [(h["step"], h["val/bleu"]) for h in f.history]


def test_wandb_group_with_no_runs_is_an_error(wandb_api):
    with pytest.raises(ReportError, match="no runs in group 'other'"):
        collect("wandb:me/ablate/other", api=wandb_api)


def test_only_newlines_split_saved_texts(tmp_path):
    """A detokenized hypothesis may hold other Unicode line breaks (U+2028, form feed); line i stays sentence i."""
    from tests.helpers.records import write_trial

    write_trial(
        tmp_path,
        "t",
        {"status": "finished", "test/bleu": 1.0},
        hyps={"test": ["a\u2028b", "c\x0cd", ""]},
        refs={"test": ["a b", "c d", "e"]},
    )
    (trial,) = collect(str(tmp_path))
    assert trial.hyps["test"] == ["a\u2028b", "c\x0cd", ""] and len(trial.refs["test"]) == 3


def test_reading_many_trials_shows_progress_on_stderr(tmp_path, monkeypatch, caplog):
    """A folder whose reading runs past a few seconds says how far it is; here a clock
    that moves one second per look stands in for a slow disk."""
    import logging
    import types

    from ablate.utils import commands

    for seed in range(1, 7):
        write_trial(tmp_path, f"base-seed={seed}", {"status": "finished", "test/bleu": 20.0, "config": {"seed": seed}})
    ticks = iter(range(1000))
    monkeypatch.setattr(commands, "time", types.SimpleNamespace(monotonic=lambda: float(next(ticks))))
    with caplog.at_level(logging.INFO, logger="ablate.report.trials"):
        assert len(collect(str(tmp_path))) == 6
    assert [m for m in caplog.messages if m.startswith("read ")] == [
        f"read {tmp_path}: 3/6 (3 s)",
        f"read {tmp_path}: 6/6 (6 s)",
    ]


def test_the_title_is_the_sweeps_name_not_its_wandb_group_id(tmp_path):
    """A folder's trials take the name from ``sweep.json``; a W&B group loses the id ``ablate sweep`` appends."""
    import json

    from ablate.report.trials import sweep_name

    assert sweep_name("quickstart-598a74") == "quickstart" and sweep_name("table3") == "table3"
    assert sweep_name("my-sweep") == "my-sweep" and sweep_name(None) is None
    write_trial(tmp_path, "base", {"status": "finished", "sweep": {"name": "quickstart-598a74"}, "config": {"seed": 1}})
    (tmp_path / "sweep.json").write_text(json.dumps({"name": "quickstart", "trials": []}))
    assert [t.sweep for t in collect(str(tmp_path))] == ["quickstart"]


def test_a_key_that_leaves_the_trained_model_alone_never_splits_a_row():
    """A seed rerun with ``trainer.enable_progress_bar=false`` (a resume may change it: ``config.NOT_TRAINING``)
    was its own row beside the other seeds of the same configuration; every such key is ignored, as the run's
    fingerprint ignores it, and ``train.accelerator`` too (a row is a configuration, on any device). But not the
    device count: ``train.max_tokens`` is per device, and 2 devices' seeds were one row with 1 device's (or, seed
    for seed, dropped as 'seed 1 again in row train.devices=-')."""
    from ablate.config import NOT_TRAINING, SCALES_BATCH, Config, flatten, to_dict

    base = flatten(to_dict(Config()))
    ignored = [k for k in base if k.startswith(NOT_TRAINING) and k not in SCALES_BATCH]
    for key in [*ignored, "trainer.profiler", "train.accelerator"]:
        assert clean_config({**base, key: "changed"}) == clean_config(base), key
    assert clean_config({**base, "train.devices": 2}) != clean_config(base)
    assert clean_config({**base, "model.heads": 2}) != clean_config(base)


def test_a_finished_trial_whose_folder_is_gone_says_so(two_by_two, tmp_path):
    """``sweep.json`` records 30 finished trials; only 4 run folders are here (the rest deleted or not copied).
    The 26 were listed as 'excluded - no hyps/test_2016_flickr while other trials have them, so the significance
    test cannot use it', as if a run had lost its hypotheses."""
    import shutil
    from pathlib import Path

    from ablate.report import table as report_table
    from ablate.report.render import render

    folder = tmp_path / "part"
    shutil.copytree(two_by_two, folder)
    shutil.copy(Path(__file__).resolve().parents[2] / "results" / "mission-cpu" / "sweep.json", folder)
    md = render(report_table(str(folder), significance=False).table, "md")
    assert "no hyps/" not in md
    assert "Trials: 4 of 30 in the table; not in it: 26 invalid" in md
    line = next(x for x in md.splitlines() if x.startswith("- heads-1-seed=1 "))
    assert line == (
        "- heads-1-seed=1 (variant heads-1, seed 1): invalid - sweep.json records it finished, but no summary.json "
        "of it is here (its run folder moved or deleted?)"
    )


def test_a_record_from_someone_else_cannot_send_control_characters_to_the_terminal(variant_sweep, tmp_path):
    """A received sweep whose failed trial records an error and a variant holding escape sequences: ``ablate table``
    printed them raw, so the record could clear the screen, erase the lines above or retitle the terminal."""
    import shutil

    from typer.testing import CliRunner

    from ablate.report.commands import app

    sweep = tmp_path / "sweep"
    shutil.copytree(variant_sweep, sweep)
    path = sweep / "B-dk16-s3" / "summary.json"
    summary = json.loads(path.read_text())
    summary.update(error="boom\x1b[2J\x1b[1A\x1b]0;pwned\x07 end", variant="B-dk16\x1b[8m")
    path.write_text(json.dumps(summary))
    for fmt in ("rich", "md", "csv"):
        result = CliRunner().invoke(app, ["table", str(sweep), "--format", fmt, "--samples", "50"])
        assert result.exit_code == 0, result.output
        assert "boom?[2J?[1A?]0;pwned? end" in result.output and not set(result.output) & {"\x1b", "\x07"}, fmt


def test_a_received_trial_folder_name_cannot_send_control_characters_to_the_terminal(variant_sweep, tmp_path):
    """Trial folders whose *names* hold escape sequences (a failed one, listed under the table; a finished one,
    named in a footnote): ``ablate table`` printed them raw; the folders are still read by their own names."""
    import shutil

    from typer.testing import CliRunner

    from ablate.report.commands import app

    sweep = tmp_path / "sweep"
    shutil.copytree(variant_sweep, sweep)
    (sweep / "B-dk16-s3").rename(sweep / "B-dk16-s3\x1b]0;pwned\x07")
    summary = json.loads((sweep / "base-s1" / "summary.json").read_text())
    summary["test_test_2016_flickr/bleu"] = 99.0  # disagrees with its hypotheses: a footnote names the trial
    (sweep / "base-s1" / "summary.json").write_text(json.dumps(summary))
    (sweep / "base-s1").rename(sweep / "base-s1\x1b[2J")
    for fmt in ("rich", "md", "csv", "latex"):
        result = CliRunner().invoke(app, ["table", str(sweep), "--format", fmt, "--samples", "50"])
        assert result.exit_code == 0, result.output
        assert "B-dk16-s3?]0;pwned?" in result.output and not set(result.output) & {"\x1b", "\x07"}, fmt
        assert fmt == "csv" or "base-s1?[2J" in result.output, fmt


def test_a_received_config_value_cannot_send_control_characters_to_the_terminal(grid_sweep, tmp_path):
    """A received trial whose config value holds escape sequences (``model.positions: "learned<ESC>]0;..."``):
    ``ablate table`` printed it raw in its hyperparameter cell, in every format."""
    import shutil

    from typer.testing import CliRunner

    from ablate.report.commands import app

    sweep = tmp_path / "sweep"
    shutil.copytree(grid_sweep, sweep)
    for path in sweep.glob("*/summary.json"):
        summary = json.loads(path.read_text())
        if summary["config"]["model"]["positions"] == "learned":
            summary["config"]["model"]["positions"] = summary["sweep"]["params"]["model.positions"] = "l\x1b]0;x\x07"
            path.write_text(json.dumps(summary))
    for fmt in ("rich", "md", "csv", "latex"):
        result = CliRunner().invoke(app, ["table", str(sweep), "--format", fmt, "--samples", "50"])
        assert result.exit_code == 0, result.output
        assert "l?]0;x?" in result.output and not set(result.output) & {"\x1b", "\x07"}, fmt


def test_a_received_key_row_or_sweep_name_cannot_break_a_table_or_reach_the_terminal_raw(grid_sweep, tmp_path):
    """A received grid sweep whose config holds a key with escape sequences, a value with a newline and a ``|``,
    and whose sweep name holds both: the key's header reached the rich table raw; ``--per-seed`` and the paper's
    side-by-side printed the row named by that value (``model.positions=le|a<newline>rn...``) on two Markdown
    lines, the sweep name as a title broken over two lines, and both with their escape sequences, in every format."""
    import shutil

    from typer.testing import CliRunner

    from ablate.report.commands import app

    sweep = tmp_path / "sweep"
    shutil.copytree(grid_sweep, sweep)
    for path in sweep.glob("*/summary.json"):
        summary = json.loads(path.read_text())
        learned = summary["config"]["model"]["positions"] == "learned"
        if learned:
            summary["config"]["model"]["positions"] = summary["sweep"]["params"]["model.positions"] = (
                "le|a\nrn\x1b]0;x\x07"
            )
        summary["config"]["model"]["k\x1b[2J"] = int(learned)
        summary["sweep"]["name"] = "g\x1b[2J\nrid"
        path.write_text(json.dumps(summary))
    runs = [[], ["--per-seed"]] + [["--reference", "vaswani2017-table3", "--samples", "50"]]
    for fmt in ("rich", "md", "csv", "latex"):
        for more in runs if fmt != "csv" else runs[:2]:
            result = CliRunner().invoke(app, ["table", str(sweep), "--format", fmt, "--no-significance", *more])
            assert result.exit_code == 0, result.output
            out = result.output
            assert "rn?]0;x?" in out and not set(out) & {"\x1b", "\x07"}, (fmt, more)
            assert "g?[2J rid" in out or fmt == "csv", (fmt, more)  # the title (CSV has none)
            if fmt == "md":  # every table line holds its whole row
                assert all(line.startswith("|") for line in out.splitlines() if "rn?]0;x?" in line), more


def test_a_received_split_name_reaches_no_header_raw(grid_sweep, tmp_path):
    """A received summary recording ``test_x|y<ESC>[2J/bleu``: its column header reached the rich table raw, and
    ``--per-seed`` printed it raw in every header, its ``|`` splitting the Markdown header into one cell too many."""
    import shutil

    from typer.testing import CliRunner

    from ablate.report.commands import app

    sweep = tmp_path / "sweep"
    shutil.copytree(grid_sweep, sweep)
    for path in sweep.glob("*/summary.json"):
        summary = json.loads(path.read_text())
        summary["test_x|y\x1b[2J/bleu"] = summary["test/bleu"]
        path.write_text(json.dumps(summary))
    for fmt in ("rich", "md", "latex", "csv"):
        for more in ([], ["--per-seed"]):
            result = CliRunner().invoke(app, ["table", str(sweep), "--format", fmt, "--no-significance", *more])
            assert result.exit_code == 0, result.output
            assert "x" in result.output and "\x1b" not in result.output, (fmt, more)
    result = CliRunner().invoke(app, ["table", str(sweep), "--format", "md", "--per-seed"])
    head, align = [line for line in result.output.splitlines() if line.startswith("|")][:2]
    assert "BLEU (x\\|y?[2J)" in head and head.count(" | ") == align.count(" | ")


def test_a_failed_trials_received_seed_reaches_no_terminal_raw(variant_sweep, tmp_path):
    """A failed trial whose config records the seed "3<ESC>[2J": the line listing it under the table,
    "B-dk16-s3 (variant B-dk16, seed 3<ESC>[2J): failed - ...", printed the escape sequence raw."""
    import shutil

    from typer.testing import CliRunner

    from ablate.report.commands import app

    sweep = tmp_path / "sweep"
    shutil.copytree(variant_sweep, sweep)
    path = sweep / "B-dk16-s3" / "summary.json"
    summary = json.loads(path.read_text())
    summary["config"]["seed"] = "3\x1b[2J"
    path.write_text(json.dumps(summary))
    for fmt in ("rich", "md", "latex"):
        result = CliRunner().invoke(app, ["table", str(sweep), "--format", fmt, "--no-significance"])
        assert result.exit_code == 0, result.output
        assert "seed 3?[2J" in result.output and "\x1b" not in result.output, fmt
