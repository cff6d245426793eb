"""What a run leaves in W&B: artifact files that ``wandb sync`` finds from any folder."""

from __future__ import annotations

import os
from pathlib import Path

from ablate.training.publish import publish


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
