"""Files every part of ablate writes and reads: atomic writes, strict JSON, one line discipline.

* Atomic writes: a reader never sees a half-written summary, state or cache file, and the file
  gets the permissions a plain ``open(path, "w")`` would give (``0666 & ~umask``), so a cache or
  a run folder shared by a team stays shareable. Every atomic write (text, bytes, JSON) and every
  rename into place (:func:`replace`) goes through here, and each fsyncs the file and then its
  folder, so the rename itself survives a power cut.
* Strict JSON: non-finite floats are written as ``null`` (``NaN`` is not JSON), never as a
  literal other tools reject.
* Lines: text files of sentences (corpora, hypotheses, references) are split on ``\\n`` only,
  both when written and when read, so a sentence holding U+2028, U+0085 or a form feed stays one
  line (``str.splitlines`` would cut it in two).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable


def umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux ``/proc``)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def plain_mode(directory: bool = False) -> int:
    """The mode a plain create gives: ``0666 & ~umask`` for a file, ``0777 & ~umask`` for a folder."""
    return (0o777 if directory else 0o666) & ~umask()


def fsync_dir(folder: str | Path) -> None:
    """Flush ``folder``'s entries to disk, so a rename into it survives a power cut (best effort:
    some file systems cannot open or fsync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace(src: str | Path, dst: str | Path) -> None:
    """Rename ``src`` over ``dst`` (a file, or a folder onto a missing or empty one) and make it durable."""
    os.replace(src, dst)
    fsync_dir(Path(dst).parent)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename, fsynced."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, plain_mode())  # mkstemp makes 0600; a plain write would follow the umask
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str, newline: str | None = None) -> None:
    """Text version of :func:`atomic_write_bytes` (UTF-8; ``newline`` as for :func:`open`)."""
    if newline != "":
        text = text.replace("\n", newline or os.linesep)
    atomic_write_bytes(path, text.encode("utf-8"))


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, inf) replaced by ``None``, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(data: Any, **kwargs: Any) -> str:
    """Strict JSON text: NaN and infinities become ``null``, other non-JSON values strings."""
    return json.dumps(finite(data), allow_nan=False, default=str, **kwargs)


def atomic_write_json(path: str | Path, data: Any, indent: int = 2, sort_keys: bool = True) -> None:
    """JSON version of :func:`atomic_write_text` (strict: no NaN literal; sorted keys by default)."""
    atomic_write_text(path, dumps(data, indent=indent, sort_keys=sort_keys) + "\n")


def one_line(text: str) -> str:
    """``text`` with the line separator ``\\n`` (and ``\\r``, which readers may translate) as spaces."""
    return text.replace("\r", " ").replace("\n", " ")


def write_lines(path: str | Path, lines: Iterable[str]) -> None:
    """Write one sentence per line, atomically; :func:`read_lines` gives back exactly ``lines``."""
    atomic_write_text(path, "".join(one_line(line) + "\n" for line in lines), newline="")


def read_lines(path: str | Path) -> list[str]:
    """The lines of a file written by :func:`write_lines`: split on ``\\n`` only, never on U+2028 & co."""
    with open(path, encoding="utf-8", newline="") as handle:
        return split_lines(handle.read())


def split_lines(text: str) -> list[str]:
    """``text`` split on ``\n`` only (a final newline ends the last line; it does not start another)."""
    if not text:
        return []
    return text.removesuffix("\n").split("\n")
