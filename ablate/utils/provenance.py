"""Which code produced a result: the git commit of the ablate checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]


def git_commit(repo: Path = CHECKOUT) -> str:
    """The commit of the ablate checkout (``+dirty`` with uncommitted changes), or ``unknown``
    (an installed copy outside git, or no git).

    Only a folder that is an ablate checkout counts: an installed copy lives in site-packages,
    which may sit inside someone else's repository (a ``.venv`` in a project), whose commit is not ours.
    """
    if not ((repo / "pyproject.toml").is_file() and (repo / "ablate" / "__init__.py").is_file()):
        return "unknown"
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
