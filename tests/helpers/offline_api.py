"""A stand-in for ``wandb.Api`` that serves offline runs from their record logs.

It answers the calls ``ablate table wandb:...`` makes (``runs(path, filters)``, a run's
``name``, ``group``, ``state``, ``config``, ``summary``, ``scan_history``, ``files`` and
``logged_artifacts``, each with ``download``) from what ``wandb sync`` would upload: the records
of each ``offline-run-*`` folder, its saved run files and the local files its artifact manifests
point at.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Iterator

from tests.helpers.wandb_offline import OfflineArtifact, OfflineRun, read_run


class ArtifactView:
    def __init__(self, art: OfflineArtifact):
        self.name, self.type, self.aliases, self._files = art.name, art.type, art.aliases, art.files

    def download(self, root: str | None = None) -> str:
        for name, local in self._files.items():
            target = Path(root) / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(local, target)
        return str(root)


class FileView:
    """A run file, like ``wandb.apis.public.File``: ``name`` and ``download(root, replace)``."""

    def __init__(self, name: str, local: Path):
        self.name, self._local = name, local

    def download(self, root: str = ".", replace: bool = False) -> None:
        target = Path(root) / self.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self._local, target)


class RunView:
    """Like ``wandb.apis.public.Run`` (config without W&B's ``_`` keys, as the API returns it)."""

    def __init__(self, run: OfflineRun):
        self.id, self.name, self.group, self.tags = run.id, run.name, run.group, run.tags
        self.state = {None: "running", 0: "finished"}.get(run.exit_code, "failed")
        self.config = {k: v for k, v in run.config.items() if not k.startswith("_")}
        self.summary = dict(run.summary)
        self._history, self._artifacts, self._files = run.history, run.artifacts, run.files

    def scan_history(self, keys=None, **_) -> Iterator[dict[str, Any]]:
        for row in self._history:
            if not keys or all(k in row for k in keys):
                yield row

    def files(self) -> list[FileView]:
        return [FileView(name, local) for name, local in self._files.items()]  # the texts are an artifact

    def logged_artifacts(self) -> list[ArtifactView]:
        return [ArtifactView(a) for a in self._artifacts]


class OfflineApi:
    """``runs(path, filters)`` over every offline run under ``roots`` (newest first, as W&B)."""

    def __init__(self, *roots: Path):
        folders = sorted(f for root in roots for f in Path(root).glob("**/wandb/offline-run-*"))
        self._runs = [RunView(read_run(f)) for f in reversed(folders)]

    def runs(self, path: str, filters: dict | None = None, **_) -> list[RunView]:
        group = (filters or {}).get("group")
        return [r for r in self._runs if group is None or r.group == group]
