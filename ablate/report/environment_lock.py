"""An export's environment lock: ``environment.txt``, the packages the trials ran with.

Each run keeps its freeze in ``<run>/environment.txt`` and the freeze's sha256 and main package
versions in ``summary.json`` (:mod:`ablate.utils.provenance`). The export writes the freeze the
trials recorded (the one most trials share as ``environment.txt``, any other as
``environment-<sha256[:12]>.txt``); runs from before ablate recorded it get the exporting machine's
freeze instead, and the manifest and README say which it is. A run folder's file counts only when
it is what its summary recorded and reads as ``name==version`` lines.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

from ablate.utils.provenance import ENVIRONMENT_FILE as LOCK, freeze, freeze_sha256, freeze_text, package_versions

_LINE = re.compile(r"[a-z0-9][a-z0-9-]*==\S+")
MAX_BYTES = 1 << 20  # a freeze is a few kB; a bigger file is not one


def recorded_environment(summary: dict[str, Any]) -> dict[str, Any]:
    env = summary.get("environment")
    return env if isinstance(env, dict) else {}


def recorded_freeze(run_dir: Path, summary: dict[str, Any]) -> Optional[list[str]]:
    """The freeze ``run_dir`` recorded (``environment.txt`` matching the summary's sha256), or None."""
    sha = recorded_environment(summary).get("freeze_sha256")
    path = run_dir / LOCK
    if not isinstance(sha, str) or not path.is_file() or path.stat().st_size > MAX_BYTES:
        return None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if freeze_sha256(lines) != sha or not all(_LINE.fullmatch(line) for line in lines):
        return None
    return lines


def write_environment_lock(source: Path, summaries: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """Write the lock file(s) of an export of ``source`` into ``out``; return the manifest's ``environment``.

    ``summaries`` are the trials' summaries, each with its folder name under ``_name``.
    """
    found: dict[str, tuple[list[str], list[dict[str, Any]]]] = {}
    for summary in summaries:
        name = summary.get("_name")
        lines = recorded_freeze(source / name, summary) if isinstance(name, str) else None
        if lines is not None:
            found.setdefault(freeze_sha256(lines), (lines, []))[1].append(summary)
    if not found:
        lines = freeze()
        (out / LOCK).write_text(freeze_text(lines), encoding="utf-8")
        files = [{"file": LOCK, "freeze_sha256": freeze_sha256(lines), "trials": 0}]
        return {"source": "export", "files": files, "versions": package_versions(), "trials_without": len(summaries)}
    files = []
    ordered = sorted(found.items(), key=lambda item: (-len(item[1][1]), item[0]))
    for i, (sha, (lines, trials)) in enumerate(ordered):
        file = LOCK if i == 0 else f"environment-{sha[:12]}.txt"
        (out / file).write_text(freeze_text(lines), encoding="utf-8")
        files.append({"file": file, "freeze_sha256": sha, "trials": len(trials)})
    versions = recorded_environment(ordered[0][1][1][0]).get("versions")
    return {
        "source": "trials",
        "files": files,
        "versions": versions if isinstance(versions, dict) else {},
        "trials_without": len(summaries) - sum(f["trials"] for f in files),
    }


def readme_line(env: Optional[dict[str, Any]]) -> Optional[str]:
    """The README's ``- Environment:`` line, or None for a manifest from before exports wrote one."""
    if not env:
        return None
    files = env.get("files") or []
    names = ", ".join(f"`{f['file']}` ({f['trials']} trials)" for f in files) if len(files) > 1 else f"`{LOCK}`"
    if env.get("source") == "export":
        where = "the packages of the machine that exported: these trials did not record theirs"
    else:
        where = "the packages the trials ran with (`pip install -r` reads it)"
        if env.get("trials_without"):
            where += f"; {env['trials_without']} trials did not record theirs"
    versions = ", ".join(f"{k} {v}" for k, v in (env.get("versions") or {}).items() if v)
    return f"- Environment: {names}, {where}" + (f"; {versions}" if versions else "")
