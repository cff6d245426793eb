"""What a run records of the code and environment that produced it."""

from __future__ import annotations

import hashlib
import json
from importlib import metadata

import torch

from ablate.config import Config
from ablate.training.run_folder import RunRecord
from ablate.utils import provenance
from ablate.utils.provenance import (
    ENVIRONMENT_FILE,
    MAIN_PACKAGES,
    freeze,
    freeze_sha256,
    git_commit,
    installed_commit,
    package_versions,
)

VCS = json.dumps({"url": "https://github.com/x/ablate.git", "vcs_info": {"vcs": "git", "commit_id": "0123abcd" * 5}})


def test_main_package_versions_are_the_installed_ones():
    versions = package_versions()
    assert set(versions) == {"python", "ablate", *MAIN_PACKAGES}
    assert versions["torch"] == torch.__version__ == metadata.version("torch")
    assert versions["pytorch-lightning"] == metadata.version("pytorch-lightning")
    assert versions["python"].count(".") == 2


def test_the_freeze_is_every_distribution_once_sorted_and_hashed():
    lines = freeze()
    assert lines == sorted(set(lines)) and len(lines) > 20
    assert f"torch=={torch.__version__}" in lines and f"sacrebleu=={metadata.version('sacrebleu')}" in lines
    assert all(line == line.lower() and "_" not in line.split("==")[0] for line in lines)  # PEP 503 names
    assert freeze_sha256(lines) != freeze_sha256(lines[:-1])
    assert freeze_sha256(["a==1", "b==2"]) == hashlib.sha256(b"a==1\nb==2\n").hexdigest()  # the file's digest


def test_a_pip_installed_copy_names_the_commit_it_was_installed_from(tmp_path, monkeypatch):
    assert installed_commit(VCS) == "0123abcd" * 5
    assert installed_commit(json.dumps({"url": "file:///src/ablate", "dir_info": {}})) is None  # from a folder
    assert installed_commit(None) is None and installed_commit("not json") is None
    site = tmp_path / "site-packages"  # not a checkout: no pyproject.toml beside the package
    (site / "ablate").mkdir(parents=True)
    monkeypatch.setattr(provenance, "_direct_url", lambda: VCS)
    assert git_commit(site) == "0123abcd" * 5
    monkeypatch.setattr(provenance, "_direct_url", lambda: None)
    assert git_commit(site) == "unknown"


def test_every_run_record_holds_versions_and_the_freeze_it_digests(tmp_path):
    RunRecord(tmp_path, Config()).write("running")
    summary = json.loads((tmp_path / "summary.json").read_text())
    env = summary["environment"]
    assert env["versions"] == package_versions()
    lines = (tmp_path / ENVIRONMENT_FILE).read_text().splitlines()
    assert lines == freeze() and env["freeze_sha256"] == freeze_sha256(lines) and env["packages"] == len(lines)
