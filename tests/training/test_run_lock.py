"""Liveness from the run lock: a record that says running, whose lock is free, was killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from ablate.report.trials import collect_folder
from ablate.sweep.wandb_server import plan_sync
from ablate.training.run_folder import LOCK_FILE, RunLock, is_held, running_status

HOLD = "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)"


def _running_trial(root: Path, name: str) -> Path:
    run = root / name
    (run / "wandb" / "offline-run-1").mkdir(parents=True)
    (run / "wandb" / "offline-run-1" / "run-x.wandb").write_bytes(b":W&B")
    (run / "summary.json").write_text(json.dumps({"status": "running", "config": {"seed": 1}}))
    return run


def test_a_lock_held_by_a_live_process_then_freed_by_sigkill(tmp_path):
    assert is_held(tmp_path) is None  # no lock file: cannot tell (older runs, copied records)
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / LOCK_FILE)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        assert is_held(tmp_path) is True and running_status(tmp_path, "running") == "running"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert is_held(tmp_path) is False  # the kernel dropped the lock of the killed holder
    assert running_status(tmp_path, "running") == "interrupted"
    assert running_status(tmp_path, "finished") == "finished"
    with RunLock(tmp_path):  # is_held neither took nor broke the lock
        assert is_held(tmp_path) is True


def test_table_and_sync_call_a_killed_run_interrupted_and_a_live_one_running(tmp_path):
    killed, live = _running_trial(tmp_path, "killed"), _running_trial(tmp_path, "live")
    RunLock(killed).acquire().release()  # a lock file whose holder is gone
    with RunLock(live):
        status = {t.name: t.status for t in collect_folder(tmp_path)}
        assert status == {"killed": "interrupted", "live": "running"}
        todo = plan_sync(tmp_path)
        assert todo.running == [live] and todo.pending == [killed / "wandb" / "offline-run-1"]


def test_a_finished_run_in_a_read_only_folder_says_it_is_finished(tmp_path, monkeypatch):
    """Root writes anywhere, so the read-only folder is the lock's own error (EACCES), raised as on a real one."""
    import errno

    from ablate.config import load_config
    from ablate.training.run_folder import claim_run_dir
    from ablate.training.train import train
    from ablate.utils import io

    from tests.helpers.tiny import tiny

    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "cache"))
    cfg = load_config(None, tiny("tracking.wandb=disabled"))
    claim_run_dir(cfg, tmp_path / "run")
    (tmp_path / "run" / "summary.json").write_text(json.dumps({"status": "finished", "val/bleu": 1.0}))

    def read_only(self):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(io.HolderLock, "acquire", read_only)
    assert train(cfg, tmp_path / "run")["status"] == "finished"  # refused: "cannot write to run dir"
