"""Checkpoint files that are written atomically and never end a training when the disk is full."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Optional

from pytorch_lightning.plugins.io import TorchCheckpointIO


class ResilientCheckpointIO(TorchCheckpointIO):
    """Lightning's ``torch.save`` checkpoint I/O, made safe for long runs on shared disks.

    Each checkpoint is written to a temporary file next to its target and renamed over it, so a
    kill or a full disk mid-write leaves the previous checkpoint intact (a resume never reads a torn
    file). A checkpoint that cannot be written (no space left, quota, I/O error) is skipped with a
    one-line warning and counted in :attr:`failures`; training goes on and resumes, if it must,
    from the last checkpoint that was written.
    """

    def __init__(self, warn: Callable[[str], None] = print):
        super().__init__()
        self.warn = warn
        self.failures: list[str] = []

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | Path, storage_options: Optional[Any] = None) -> None:
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            super().save_checkpoint(checkpoint, tmp, storage_options)
            os.replace(tmp, path)
        except OSError as err:
            try:
                tmp.unlink()
            except OSError:
                pass
            message = f"checkpoint {path.name} not written at step {checkpoint.get('global_step', '?')}: " \
                      f"{err.strerror or err}"
            self.failures.append(message)
            self.warn(f"warning: {message}; training goes on")
