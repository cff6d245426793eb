"""A cache root that cannot hold the cache: one line, and no run folder left behind."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from ablate.data.cache import check_cache_root
from ablate.data.sources import DataError

from tests.helpers.tiny import tiny


@pytest.mark.parametrize("where", ["file", "under-a-file"])
def test_a_cache_root_that_is_a_file_is_one_line(tmp_path, where):
    afile = tmp_path / "afile"
    afile.write_text("mine")
    root = afile if where == "file" else afile / "cache"
    with pytest.raises(DataError) as err:
        check_cache_root(root)
    assert f"the data cache {root}" in str(err.value) and "is a file" in str(err.value) and "\n" not in str(err.value)
    assert afile.read_text() == "mine"


def test_a_read_only_cache_root_is_one_line(tmp_path, monkeypatch):
    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(os, "access", lambda path, mode: False)
    monkeypatch.setattr(os, "statvfs", lambda path: ReadOnly())
    with pytest.raises(DataError, match="is on a read-only file system; point ABLATE_CACHE"):
        check_cache_root(tmp_path / "cache")


def test_a_usable_root_passes_and_is_not_made_by_the_check(tmp_path):
    assert check_cache_root(tmp_path / "a" / "cache") == tmp_path / "a" / "cache"
    assert list(tmp_path.iterdir()) == []


def test_train_with_a_cache_root_that_is_a_file_leaves_no_run_folder(tmp_path, monkeypatch):
    from ablate import cli

    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("ABLATE_CACHE", str(tmp_path / "afile"))
    run_dir = tmp_path / "run"
    args = ["train", *tiny("train.max_steps=2", "tracking.wandb=disabled"), "--run-dir", str(run_dir)]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: the data cache") and len(result.output.strip().splitlines()) == 1
    assert not run_dir.exists()
