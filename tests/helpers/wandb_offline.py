"""Test helper: read an offline W&B run back from its folder, without the network.

Only the tests read W&B's record log (what a run logged, what ``wandb sync`` would upload), so
this reader lives beside them, not in the package.

An offline run (``<run_dir>/wandb/offline-run-<time>-<id>/``) is W&B's record log
``run-<id>.wandb``: a 7-byte header, then LevelDB-style 32 KiB blocks of chunks (crc32, length,
type) holding protobuf ``Record`` messages of ``wandb.proto``. ``wandb sync`` uploads exactly
these records, so what they hold is what the server will show: the config (with W&B's sweep
locking already applied), the summary, the history and the artifacts (their manifests point at
the local files that ``wandb sync`` uploads) and the run files (``run.save``, copied or linked under
the run's ``files/`` folder).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

_BLOCK, _HEADER = 32768, 7


@dataclass
class OfflineArtifact:
    """One logged artifact: name, type, aliases and ``{path in artifact: local file}``."""

    name: str
    type: str
    aliases: list[str]
    files: dict[str, Path]
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class OfflineRun:
    """What an offline run's record log holds."""

    id: str
    project: str
    group: str
    name: str
    tags: list[str]
    config: dict[str, Any]
    summary: dict[str, Any]
    history: list[dict[str, Any]]
    artifacts: list[OfflineArtifact]
    exit_code: int | None
    folder: Path
    files: dict[str, Path] = field(default_factory=dict)
    """Run files (``run.save``): ``{name in the run: the copy under the run's files/ folder}``."""


def records(path: str | Path) -> Iterator[Any]:
    """Every ``wandb_internal_pb2.Record`` of a ``run-<id>.wandb`` file, in order."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    pos, pending = _HEADER, b""
    while pos + 7 <= len(data):
        room = _BLOCK - pos % _BLOCK
        if room < 7:
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        pending = chunk if kind in (1, 2) else pending + chunk  # full/first, then middle/last
        if kind not in (1, 4):
            continue
        record = pb.Record()
        record.ParseFromString(pending)
        yield record


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


def _set(target: dict[str, Any], item: Any) -> None:
    value = json.loads(item.value_json)
    if item.key or len(item.nested_key) == 1:
        target[item.key or item.nested_key[0]] = value
        return
    node = target
    for part in item.nested_key[:-1]:
        node = node.setdefault(part, {})
    node[item.nested_key[-1]] = value


def read_run(folder: str | Path) -> OfflineRun:
    """The run in ``folder`` (an ``offline-run-*`` directory, or the ``run-<id>.wandb`` file)."""
    folder = Path(folder)
    files = [folder] if folder.suffix == ".wandb" else sorted(folder.glob("run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"no run-*.wandb record log in {folder}")
    run = OfflineRun("", "", "", "", [], {}, {}, [], [], None, files[0].parent)
    for record in records(files[0]):
        which = record.WhichOneof("record_type")
        if which == "run":
            r = record.run
            run.id, run.project, run.group, run.name = r.run_id, r.project, r.run_group, r.display_name
            run.tags = list(r.tags)
            for item in r.config.update:
                _set(run.config, item)
        elif which == "config":
            for item in record.config.update:
                _set(run.config, item)
            for item in record.config.remove:
                run.config.pop(_key(item), None)
        elif which == "summary":
            for item in record.summary.update:
                _set(run.summary, item)
            for item in record.summary.remove:
                run.summary.pop(_key(item), None)
        elif which == "history":
            row: dict[str, Any] = {}
            for item in record.history.item:
                row[_key(item)] = json.loads(item.value_json)
            run.history.append(row)
        elif which == "artifact":
            a = record.artifact
            entries = {e.path: Path(e.local_path) for e in a.manifest.contents}
            meta = json.loads(a.metadata) if a.metadata else {}
            run.artifacts.append(OfflineArtifact(a.name, a.type, list(a.aliases), entries, meta))
        elif which == "files":
            for item in record.files.files:
                run.files[item.path] = run.folder / "files" / item.path
        elif which == "exit":
            run.exit_code = record.exit.exit_code
    return run


def ended_run(folder: str | Path, timeout_s: float = 60.0) -> OfflineRun:
    """:func:`read_run` once the record log holds the run's exit: W&B's service writes the log
    after ``wandb.finish()`` returns, so a test reading it in the training's process waits for it."""
    import time

    deadline = time.monotonic() + timeout_s
    run = read_run(folder)
    while run.exit_code is None and time.monotonic() < deadline:
        time.sleep(0.2)
        run = read_run(folder)
    return run


def offline_runs(run_dir: str | Path) -> list[Path]:
    """The offline W&B run folders under ``<run_dir>/wandb``, oldest first."""
    return sorted(Path(run_dir).glob("wandb/offline-run-*"))


def read_offline_run(path: str | Path) -> dict[str, dict[str, Any]]:
    """``{"history": last value of each logged key, "summary": the run summary}`` of ``run-<id>.wandb``,
    once it holds the run's exit (:func:`ended_run`)."""
    run = ended_run(path)
    history: dict[str, Any] = {}
    for row in run.history:
        history.update(row)
    return {"history": history, "summary": run.summary}
