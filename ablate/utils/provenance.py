"""Which code and which environment produced a result: the commit (:func:`git_commit`), the main libraries'
versions, and every installed distribution as ``name==version`` (:func:`freeze`, what ``pip freeze`` lists) with its
digest, so two runs can be told apart by their environment without comparing the lists."""

from __future__ import annotations

import contextlib
import hashlib
import json
import platform
import re
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Optional

CHECKOUT = Path(__file__).resolve().parents[2]
MAIN_PACKAGES = ("torch", "pytorch-lightning", "sacrebleu", "tokenizers", "datasets", "wandb", "numpy")
"""The libraries whose version a result depends on, recorded by name beside python's and ablate's."""
ENVIRONMENT_FILE = "environment.txt"
"""A freeze as a file (a run folder's, an export's): one ``name==version`` per line, ``pip install -r`` reads it."""


def git_commit(repo: Path = CHECKOUT) -> str:
    """The commit of the ablate checkout (``+dirty`` with uncommitted changes); for an installed copy,
    the commit pip installed it from (``pip install git+https://...@<rev>``); else ``unknown`` (an
    installed copy from a folder or an index: its version is in :func:`package_versions`).

    Only a folder that is an ablate checkout counts: an installed copy lives in site-packages,
    which may sit inside someone else's repository (a ``.venv`` in a project), whose commit is not ours.
    """
    if (repo / "pyproject.toml").is_file() and (repo / "ablate" / "__init__.py").is_file():

        def git(*args: str, check: bool = False) -> str:
            run = subprocess.run(
                ["git", "-C", str(repo), *args], capture_output=True, text=True, check=check, timeout=10
            )
            return run.stdout.strip()

        with contextlib.suppress(OSError, subprocess.SubprocessError):
            head = git("rev-parse", "HEAD", check=True)
            return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    return installed_commit(_direct_url()) or "unknown"


def _direct_url() -> Optional[str]:
    """pip's ``direct_url.json`` of the installed ablate (PEP 610), if any."""
    try:
        return metadata.distribution("ablate").read_text("direct_url.json")
    except (metadata.PackageNotFoundError, OSError):
        return None


def installed_commit(direct_url: Optional[str]) -> Optional[str]:
    """The VCS commit in a ``direct_url.json`` text (``vcs_info.commit_id``), or None (not from a VCS)."""
    try:
        info = json.loads(direct_url or "")
    except ValueError:
        return None
    vcs = info.get("vcs_info") if isinstance(info, dict) else None
    commit = vcs.get("commit_id") if isinstance(vcs, dict) else None
    return commit if isinstance(commit, str) and commit else None


def version_of(name: str) -> Optional[str]:
    """The installed version of the distribution ``name``; None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def package_versions() -> dict[str, Optional[str]]:
    """``{"python": "3.11.9", "ablate": "0.1.0", "torch": ..., ...}``; None for a package not installed."""
    return {
        "python": platform.python_version(),
        "ablate": version_of("ablate"),
        **{n: version_of(n) for n in MAIN_PACKAGES},
    }


@lru_cache(maxsize=1)
def _freeze() -> tuple[str, ...]:
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name:  # the first on sys.path wins, as for import
            canonical = re.sub(r"[-_.]+", "-", name).lower()  # PEP 503: Typing_Extensions == typing-extensions
            found.setdefault(canonical, f"{canonical}=={dist.version}")
    return tuple(sorted(found.values()))


def freeze() -> list[str]:
    """Every installed distribution as ``name==version``, sorted, one line each (read once per process)."""
    return list(_freeze())


def freeze_sha256(lines: list[str]) -> str:
    """The sha256 of ``lines`` written one per line: what :func:`environment` records of a freeze."""
    return hashlib.sha256(freeze_text(lines).encode()).hexdigest()


def freeze_text(lines: list[str]) -> str:
    """``lines`` as the text of an environment lock file (``pip install -r`` reads it)."""
    return "".join(f"{line}\n" for line in lines)


def environment() -> dict:
    """What a run record keeps of its environment: the main versions and the digest of the freeze."""
    lines = freeze()
    return {"versions": package_versions(), "freeze_sha256": freeze_sha256(lines), "packages": len(lines)}
