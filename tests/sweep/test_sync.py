"""``ablate sync runs/<sweep>``: every trial's offline run uploaded once.

``wandb sync`` is replaced by a stub that does what it does to the folder: it marks each record
log it uploaded with W&B's ``run-<id>.wandb.synced`` file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ablate import cli  # imported before subprocess.run is stubbed: numpy runs lscpu on import
from ablate.sweep import wandb_server


def _trial(root: Path, name: str, status: str, attempts: int = 1) -> list[Path]:
    folders = []
    for i in range(attempts):
        folder = root / name / "wandb" / f"offline-run-2026010{i}_000000-{name}"
        folder.mkdir(parents=True)
        (folder / f"run-{name}.wandb").write_bytes(b":W&B")
        folders.append(folder)
    (root / name / "summary.json").write_text(json.dumps({"status": status}))
    return folders


class StubWandb:
    def __init__(self, returncode: int = 0):
        self.calls, self.returncode = [], returncode

    def __call__(self, argv, **kwargs):
        self.calls.append(argv)
        if self.returncode == 0:
            for folder in argv[argv.index("sync") + 1 :]:
                if not folder.startswith("--") and Path(folder).is_dir():
                    for log in Path(folder).glob("run-*.wandb"):
                        log.with_suffix(".wandb.synced").touch()
        return subprocess.CompletedProcess(argv, self.returncode, "", "wandb: ERROR api key not configured\n")


def test_sync_uploads_every_trial_once(tmp_path, monkeypatch):
    root = tmp_path / "quickstart"
    done = _trial(root, "a-seed=1", "finished") + _trial(root, "b-seed=1", "failed")
    resumed = _trial(root, "c-seed=1", "finished", attempts=2)  # resumed: two attempts, one W&B run
    _trial(root, "d-seed=1", "running")
    (root / "sweep.json").write_text("{}")
    stub = StubWandb()
    monkeypatch.setattr(wandb_server.subprocess, "run", stub)
    result = CliRunner().invoke(cli.app, ["sync", str(root), "--project", "p"])
    assert result.exit_code == 0, result.output
    assert len(stub.calls) == 1
    argv = stub.calls[0]
    assert argv[argv.index("sync") + 1 : argv.index("sync") + 3] == ["--project", "p"]
    assert sorted(argv[argv.index("sync") + 3 :]) == sorted(str(p) for p in done + resumed)
    assert "skipped (still running)" in result.output and "synced 4 run(s)" in result.output

    again = CliRunner().invoke(cli.app, ["sync", str(root)])  # idempotent: nothing new to upload
    assert again.exit_code == 0 and len(stub.calls) == 1 and "already synced: 4 run(s)" in again.output

    (root / "d-seed=1" / "summary.json").write_text(json.dumps({"status": "finished"}))
    CliRunner().invoke(cli.app, ["sync", str(root)])
    assert len(stub.calls) == 2 and stub.calls[1][-1].endswith("offline-run-20260100_000000-d-seed=1")


def test_sync_errors_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(wandb_server.subprocess, "run", StubWandb(returncode=1))
    for args, message in (
        (["sync", str(tmp_path / "nope")], "folder not found"),
        (["sync", str(tmp_path)], "no offline W&B runs"),
    ):
        result = CliRunner().invoke(cli.app, args)
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    _trial(tmp_path / "s", "a", "finished")
    result = CliRunner().invoke(cli.app, ["sync", str(tmp_path / "s")])
    assert (
        result.exit_code == 2
        and result.output.strip() == "error: wandb sync failed: wandb: ERROR api key not configured"
    )


@pytest.mark.slow
def test_the_real_wandb_command_is_found():
    argv = wandb_server.wandb_command()
    proc = subprocess.run([*argv, "sync", "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "--include-synced" in proc.stdout


def test_sync_from_another_folder_passes_paths_that_resolve_there(tmp_path, monkeypatch):
    """A relative sweep folder is synced from the caller's folder: W&B gets absolute paths."""
    root = tmp_path / "work" / "runs" / "quickstart"
    done = _trial(root, "a-seed=1", "finished")
    monkeypatch.chdir(tmp_path / "work")
    stub = StubWandb()
    monkeypatch.setattr(wandb_server.subprocess, "run", stub)
    result = CliRunner().invoke(cli.app, ["sync", "runs/quickstart"])
    assert result.exit_code == 0, result.output
    folders = stub.calls[0][stub.calls[0].index("sync") + 1 :]
    assert folders == [str(done[0])] and all(Path(f).is_absolute() for f in folders)


def test_sync_inside_a_received_run_never_imports_its_wandb_folder(tmp_path):
    """Every run folder holds a ``wandb/`` folder, and ``ablate sync .`` is run from inside one: W&B's command must
    not put the working directory on ``sys.path``, or a ``wandb/__init__.py`` planted there runs instead of W&B."""
    run = tmp_path / "theirs"
    _trial(tmp_path, "theirs", "finished")
    marker = tmp_path / "marker"
    for name in ("__init__.py", "__main__.py"):
        (run / "wandb" / name).write_text(f"open({str(marker)!r}, 'a').write('ran')\n")
    proc = subprocess.run([*wandb_server.wandb_command(), "--version"], cwd=run, capture_output=True, text=True)
    assert not marker.exists(), "the planted wandb/ folder ran"
    assert proc.returncode == 0 and "version" in proc.stdout.lower(), proc.stdout + proc.stderr
