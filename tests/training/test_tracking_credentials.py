"""W&B online without credentials falls back to offline with one line.

The login check reads only the environment and a netrc file; both are stubbed, nothing reaches the network."""

from __future__ import annotations

import pytest

from ablate.config import TrackingConfig
from ablate.training import tracking
from ablate.training.tracking import NO_CREDENTIALS, has_wandb_credentials, resolve_mode


@pytest.fixture()
def no_key(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    (tmp_path / "netrc").write_text("")
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    assert not has_wandb_credentials()


@pytest.mark.parametrize("wandb, env", [("online", None), ("auto", "online")])
def test_online_without_a_key_is_offline_said_once(no_key, monkeypatch, wandb, env):
    if env:
        monkeypatch.setenv("WANDB_MODE", env)
    said = []
    assert resolve_mode(TrackingConfig(wandb=wandb), said.append) == "offline"
    assert said == [NO_CREDENTIALS] and "\n" not in NO_CREDENTIALS and "ablate sync" in NO_CREDENTIALS


def test_a_key_keeps_online_and_other_modes_are_unchanged(no_key, monkeypatch):
    said = []
    assert resolve_mode(TrackingConfig(wandb="offline"), said.append) == "offline"
    assert resolve_mode(TrackingConfig(wandb="disabled"), said.append) == "disabled"
    assert resolve_mode(TrackingConfig(wandb="auto"), said.append) == "offline" and said == []  # auto: quietly
    monkeypatch.setattr(tracking, "has_wandb_credentials", lambda: True)
    assert resolve_mode(TrackingConfig(wandb="online"), said.append) == "online" and said == []


@pytest.mark.parametrize("before", [None, "offline"])
def test_an_offline_run_leaves_wandb_mode_as_it_found_it(no_key, tmp_path, monkeypatch, before):
    """Lightning's WandbLogger(offline=True) sets WANDB_MODE=dryrun for good: in a notebook, after one offline
    ``ablate.train`` and a ``wandb.login()``, the next run (and every ``wandb.init``) stayed offline. Its
    ``seed_everything`` left PL_GLOBAL_SEED=1 and PL_SEED_WORKERS=1 behind too."""
    import os

    from ablate.config import load_config
    from ablate.training.train import train

    from tests.helpers.tiny import tiny

    if before is not None:
        monkeypatch.setenv("WANDB_MODE", before)
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    monkeypatch.delenv("PL_SEED_WORKERS", raising=False)
    overrides = tiny("train.max_steps=2", "eval.beam=1", "tracking.wandb=auto", pairs=60, eval_pairs=8)
    summary = train(load_config(None, [*overrides, f"data.cache_dir={tmp_path / 'cache'}"]), tmp_path / "run")
    assert summary["status"] == "finished" and (tmp_path / "run" / "wandb").is_dir()  # it did log offline
    assert os.environ.get("WANDB_MODE") == before
    assert "PL_GLOBAL_SEED" not in os.environ and "PL_SEED_WORKERS" not in os.environ  # seed_everything's
