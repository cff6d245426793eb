"""What a run leaves in W&B: artifact files that ``wandb sync`` finds from any folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ablate.training.tracking import publish


class FakeRun:
    """A W&B run as :func:`publish` uses it: an id, a summary, logged artifacts."""

    id = "abc123"

    def __init__(self):
        self.summary: dict = {}
        self.artifacts: list = []

    def log_artifact(self, artifact, aliases=()):
        self.artifacts.append(artifact)


def test_artifact_files_are_found_after_the_folder_changes(tmp_path, monkeypatch):
    train_cwd = tmp_path / "train"
    run_dir = train_cwd / "runs" / "r1"
    (run_dir / "hyps").mkdir(parents=True)
    (run_dir / "refs").mkdir()
    (run_dir / "hyps" / "test.txt").write_text("ein Hund\n")
    (run_dir / "refs" / "test.txt").write_text("a dog\n")
    monkeypatch.chdir(train_cwd)
    run = FakeRun()
    publish(run, Path("runs/r1"), {"status": "finished", "test/bleu": 1.0})  # trained with a relative --run-dir
    (entry,) = [e for art in run.artifacts for name, e in art.manifest.entries.items() if name == "hyps/test.txt"]
    monkeypatch.chdir(tmp_path)  # `ablate sync` from elsewhere: the path still names the file
    assert os.path.isabs(entry.local_path) and Path(entry.local_path).read_text() == "ein Hund\n"


def test_wandb_summary_holds_each_test_score_once_and_the_record_as_a_run_file(tmp_path, cache_dir):
    """An offline W&B run's summary has each test score under one key (``test_<split>/<name>``) and no
    nested field; the run file ``summary.json`` is the local record, whole, and a W&B reader finds in it
    what the summary leaves out. The local ``summary.json`` keeps ``test/bleu`` beside it (old tables read it)."""
    from ablate.config import load_config
    from ablate.report.trials import from_summary, from_wandb_run
    from ablate.training.train import train

    from tests.helpers.offline_api import RunView
    from tests.helpers.tiny import tiny
    from tests.helpers.wandb_offline import ended_run, offline_runs

    overrides = tiny("train.max_steps=6", "train.max_tokens=512", "train.val_every=3", "eval.beam=1")
    run_dir = tmp_path / "run"
    train(load_config(None, [*overrides, "data.builtin_eval_pairs=40", "tracking.wandb=offline"]), run_dir)
    local = json.loads((run_dir / "summary.json").read_text())
    assert local["test/bleu"] == local["test_test/bleu"] and local["history"]

    (folder,) = offline_runs(run_dir)
    logged = ended_run(folder)
    per_split = {k for k in local if k.startswith("test_")}
    assert {k for k in logged.summary if k.startswith("test")} == per_split | {"test/sents_per_sec"}
    assert all(logged.summary[k] == local[k] for k in per_split)
    assert not [k for k in ("test/bleu", "test/chrf") if any(k in row for row in logged.history)]
    nested = [k for k, v in logged.summary.items() if isinstance(v, (dict, list)) and not k.startswith("_")]
    assert nested == [], nested  # history, environment, machine, data, checkpoints: in the run file
    assert json.loads(logged.files["summary.json"].read_text()) == local

    remote = from_wandb_run(RunView(logged))
    mine = from_summary("run", local)
    assert remote.history == mine.history and remote.resolved == mine.resolved
    assert remote.metrics["test/bleu"] == mine.metrics["test/bleu"]
