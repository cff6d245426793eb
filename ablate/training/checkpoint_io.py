"""Checkpoint files: written atomically, never ending a training on a full disk, read safely.

Reading never runs code from the file: every checkpoint is loaded with ``torch.load(weights_only=True)``
(tensors, numbers, strings, lists and dicts only), so a pickled object planted in a shared or
downloaded run folder is refused instead of executed. Before it is loaded a checkpoint is verified:
every member of the file's zip must match its CRC32, and where the run record beside it
(``summary.json``'s ``checkpoints``, written when the run stopped) holds the file's sha256, the file
must still have it; a damaged one is refused in one line naming it. A damaged ``last.ckpt`` is not
the end of a run: the previous one (kept as ``last.prev.ckpt``) or ``best.ckpt`` takes its place.
"""

from __future__ import annotations

import hashlib
import logging
import os
import zipfile
from pathlib import Path
from typing import Any, Callable, Optional

import torch
from pytorch_lightning.plugins.io import TorchCheckpointIO

from ablate.errors import AblateError
from ablate.record import RunStatus, RunSummary, SavedCheckpoint
from ablate.utils import io

log = logging.getLogger(__name__)

RESUME_ORDER = ("last.ckpt", "last.prev.ckpt", "best.ckpt")
"""Checkpoints a run resumes from, newest first: the last one, the one before it, the best one."""
REQUIRED = ("state_dict", "global_step", "loops", "optimizer_states")


class CheckpointError(AblateError):
    """A checkpoint cannot be used; the message is one line naming the file and what to do."""


RESTORE = "restore it from a copy, or train the run again (--overwrite)"
"""What to do about a damaged checkpoint."""


def file_sha256(path: str | Path) -> str:
    """The sha256 of the file at ``path``, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def recorded_checkpoint(path: Path) -> Optional[SavedCheckpoint]:
    """What the run record beside ``<run>/checkpoints/<name>`` says of it: None for a checkpoint outside a
    run folder, a record from before digests, or a run still running (its checkpoints move on)."""
    if path.parent.name != "checkpoints":
        return None
    summary = RunSummary.peek(path.parent.parent)
    if summary is None or summary.status in (None, RunStatus.RUNNING):
        return None
    return summary.checkpoint(path.name)


def verify_checkpoint(path: str | Path) -> None:
    """Refuse a checkpoint whose bytes changed since it was written.

    ``torch.save`` writes a zip, each member with its CRC32: a flipped byte anywhere in a tensor
    fails it (a file that is not a zip at all is left to ``torch.load``, which names what it is).
    Where the run record holds the file's sha256 the file must still have it.

    Raises:
        CheckpointError: a member fails its CRC, or the digest is not the recorded one.
    """
    _check_crcs(Path(path))
    _check_digest(Path(path))


def _check_crcs(path: Path) -> None:
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return
    if bad is not None:
        raise CheckpointError(f"checkpoint {path} is damaged: {bad} fails its CRC check; {RESTORE}")


def _check_digest(path: Path) -> None:
    recorded = recorded_checkpoint(path)
    if recorded is not None and file_sha256(path) != recorded.sha256:
        raise CheckpointError(
            f"checkpoint {path} is damaged: its sha256 is not the {recorded.sha256[:12]}... the run recorded "
            f"for it (summary.json); {RESTORE}"
        )


def load_checkpoint_file(path: str | Path, required: tuple[str, ...] = ("state_dict",)) -> dict[str, Any]:
    """The checkpoint at ``path``, verified (:func:`verify_checkpoint`) and loaded without running any code from it.

    Raises:
        CheckpointError: damaged, unreadable, truncated, holding pickled objects, or missing ``required`` keys.
    """
    _check_crcs(Path(path))
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - torch raises many types for a damaged or hostile file
        text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if "weights_only" in str(err) or "Unsupported global" in str(err):
            text = "it holds pickled objects other than tensors (refused: loading them could run code)"
        raise CheckpointError(f"checkpoint {path} is unreadable: {text[:200]}") from None
    if not isinstance(checkpoint, dict) or any(key not in checkpoint for key in required):
        raise CheckpointError(f"checkpoint {path} is not an ablate checkpoint (missing {', '.join(required)})")
    _check_digest(Path(path))  # after the load, so a planted pickle is named as such
    return checkpoint


def resumable_checkpoint(ckpt_dir: Path, warn: Callable[[str], None] = log.warning) -> Optional[Path]:
    """The newest checkpoint in ``ckpt_dir`` that loads, or None when there is none at all.

    A damaged one is skipped with a warning naming it.

    Raises:
        CheckpointError: checkpoints exist but none of them loads (says how to start over).
    """
    damaged = []
    for name in RESUME_ORDER:
        path = Path(ckpt_dir) / name
        if not path.exists():
            continue
        try:
            step = load_checkpoint_file(path, REQUIRED)["global_step"]
        except CheckpointError as err:
            damaged.append(str(err))
            continue
        for message in damaged:
            warn(f"{message}; resuming from {path} (step {step}) instead")
        return path
    if damaged:
        raise CheckpointError(
            f"{damaged[0]}, and no earlier checkpoint is readable; pass --overwrite to start this run over"
        )
    return None


class ResilientCheckpointIO(TorchCheckpointIO):
    """Lightning's ``torch.save`` checkpoint I/O, made safe for long runs on shared disks.

    Each checkpoint is written to a temporary file next to its target and renamed over it, so a
    kill or a full disk mid-write leaves the previous checkpoint intact (a resume never reads a torn
    file). A checkpoint that cannot be written (no space left, quota, I/O error) is skipped with a
    one-line warning and counted in :attr:`failures`; training goes on and resumes, if it must,
    from the last checkpoint that was written.
    """

    def __init__(self, warn: Callable[[str], None] = log.warning):
        super().__init__()
        self.warn = warn
        self.failures: list[str] = []
        self.steps: dict[str, int] = {}  # file name -> the step of its last successful write in this process

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | Path, storage_options: Optional[Any] = None
    ) -> None:
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            super().save_checkpoint(checkpoint, tmp, storage_options)
            if path.name == "last.ckpt" and path.exists():  # keep the one before it, should this one go bad
                previous = path.with_name("last.prev.ckpt")
                link = path.with_name(".last.prev.ckpt.tmp")
                try:
                    link.unlink(missing_ok=True)
                    os.link(path, link)  # a second name, not a copy: no extra disk until last.ckpt is replaced
                    io.replace(link, previous)
                    if path.name in self.steps:
                        self.steps[previous.name] = self.steps[path.name]
                except OSError:  # no hard links on this file system: keep going without the spare
                    pass
            io.replace(tmp, path)
            self.steps[path.name] = int(checkpoint.get("global_step", -1))
        except OSError as err:
            try:
                tmp.unlink()
            except OSError:
                pass
            message = (
                f"checkpoint {path.name} not written at step {checkpoint.get('global_step', '?')}: "
                f"{err.strerror or err}"
            )
            self.failures.append(message)
            self.warn(f"{message}; training goes on")

    def load_checkpoint(
        self, path: str | Path, map_location: Optional[Any] = None, weights_only: Optional[bool] = None
    ) -> dict[str, Any]:
        """Lightning's resume goes through here: always ``weights_only=True`` (never runs pickled code)."""
        return load_checkpoint_file(path)


def saved_checkpoints(ckpt_dir: Path, steps: dict[str, int], recorded: Optional[RunSummary]) -> dict[str, Any]:
    """``{name: {step, sha256}}`` of the checkpoints now in ``ckpt_dir``, for the run record.

    The step is the one each file holds: from this process's writes (``steps``: a failed write leaves
    the earlier step), else from the ``recorded`` summary where the digest still matches, else read
    from the file. A file that does not load is left out.
    """
    out: dict[str, Any] = {}
    for name in RESUME_ORDER:
        path = Path(ckpt_dir) / name
        if not path.exists():
            continue
        try:
            digest = file_sha256(path)
        except OSError:
            continue
        step: Optional[int] = steps.get(name)
        known = recorded.checkpoint(name) if recorded is not None else None
        if step is None and known is not None and known.sha256 == digest:
            step = known.step
        if step is None:
            try:
                step = load_checkpoint_file(path).get("global_step")
            except CheckpointError:
                continue
        out[name] = {"step": step, "sha256": digest}
    return out
