"""What a command writes for the user (an export folder, figures, a table file): all of it or nothing.

Every writer of a user-named output goes through this module, so the same four promises hold for all:

* Apart from the sources: an output that is a source, lies inside one, or contains one is refused
  before anything is written (replacing ``runs/`` with the export of ``runs/sweep`` would delete
  the sweep it is made from).
* Whole or not at all: the output is written into a temporary sibling and renamed into place, so a
  full disk, a crash or Ctrl-C leave the old output (or none), never a plausible half.
* Inside the source tree: a file read for copying (:func:`read_inside`) whose real path, links
  followed, leaves the source tree is refused with its path, never copied verbatim.
* One line: a full disk or a read-only folder is an :class:`OutputError` naming the output.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Optional

from ablate.errors import AblateError
from ablate.utils.io import atomic_write_text, plain_mode, replace

FULL = (errno.ENOSPC, errno.EDQUOT)


class OutputError(AblateError):
    """An output that cannot (or must not) be written; the message names it and what to do."""


def check_apart(out: str | Path, sources: Iterable[str | Path | None], what: str = "output") -> None:
    """Refuse ``out`` when it is one of ``sources``, lies inside one, or contains one (links followed).

    Raises:
        OutputError: naming both paths.
    """
    out = Path(out)
    real = out.resolve()
    for source in sources:
        if source is None:
            continue
        src = Path(source).resolve()
        if real == src:
            raise OutputError(f"{what} {out} is the source {source} itself: choose another path")
        if src in real.parents:
            raise OutputError(f"{what} {out} is inside the source {source}: choose a path outside it")
        if real in src.parents:
            raise OutputError(f"{what} {out} contains the source {source}: replacing it would delete the source")


def read_inside(path: str | Path, root: str | Path) -> bytes:
    """The bytes of ``path``, a file under ``root``, if its real path (links followed) stays under ``root``.

    Raises:
        OutputError: ``path`` (or a folder on its way) is a link that leads out of ``root``.
    """
    path, root = Path(path), Path(root)
    real, top = path.resolve(), root.resolve()
    if top not in real.parents:
        raise OutputError(
            f"{path} is a link to {real}, outside {root}: refusing to copy it (replace the link by the file itself)"
        )
    return real.read_bytes()


def _why(err: OSError) -> str:
    if err.errno in FULL:
        return "no space left on the disk (free some and run again)"
    if err.errno == errno.EROFS:
        return "the file system is read-only"
    where = f" ({err.filename})" if err.filename else ""
    return f"{err.strerror or err}{where}"


@contextmanager
def _translated(out: Path, existed: bool) -> Iterator[None]:
    try:
        yield
    except OSError as err:
        kept = "the old one is kept" if existed else "nothing was left behind"
        raise OutputError(f"{out} was not written: {_why(err)}; {kept}") from None


@contextmanager
def output_folder(out: str | Path, sources: Iterable[str | Path | None] = (), force: bool = False) -> Iterator[Path]:
    """Yield an empty temporary sibling of ``out``; when the block ends normally it becomes ``out``.

    An existing ``out`` is replaced only with ``force``, and only once the new one is complete;
    an exception (a full disk, Ctrl-C) removes the temporary folder and leaves ``out`` as it was.

    Raises:
        OutputError: ``out`` is a file, is not empty (without ``force``), is not apart from
            ``sources`` (:func:`check_apart`), or cannot be written.
    """
    out = Path(out)
    check_apart(out, sources)
    existed = out.exists() or out.is_symlink()
    if existed and not out.is_dir():
        raise OutputError(f"{out} is an existing file, not a folder: choose a folder path")
    if existed and any(out.iterdir()) and not force:
        raise OutputError(f"{out} exists and is not empty: pass --force to replace it")
    with _translated(out, existed):
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        with _translated(out, existed):
            tmp.chmod(plain_mode(directory=True))
            yield tmp
            _swap(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _swap(new: Path, out: Path) -> None:
    """Put the folder ``new`` at ``out``; an old ``out`` is moved aside first and deleted last."""
    aside: Optional[Path] = None
    if out.exists() or out.is_symlink():
        aside = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:8]}")
        os.rename(out, aside)
    try:
        replace(new, out)
    except BaseException:
        if aside is not None:
            replace(aside, out)
        raise
    if aside is not None:
        if aside.is_symlink() or not aside.is_dir():
            aside.unlink()
        else:
            shutil.rmtree(aside, ignore_errors=True)


@contextmanager
def output_files(out_dir: str | Path, sources: Iterable[str | Path | None] = ()) -> Iterator[Path]:
    """Yield an empty temporary folder; when the block ends normally its files move into ``out_dir``.

    For a folder of named files (figures) that may hold other files of the user's: each file
    replaces its namesake in one rename, nothing else in ``out_dir`` is touched, and an exception
    leaves ``out_dir`` as it was.

    Raises:
        OutputError: ``out_dir`` is a file, is not apart from ``sources``, or cannot be written.
    """
    out_dir = Path(out_dir)
    check_apart(out_dir, sources)
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputError(f"{out_dir} is an existing file, not a folder: choose a folder path")
    with _translated(out_dir, out_dir.exists()):
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=out_dir))
    try:
        with _translated(out_dir, True):
            yield tmp
            for path in sorted(tmp.iterdir()):
                path.chmod(plain_mode(directory=path.is_dir()))
                replace(path, out_dir / path.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_output_text(path: str | Path, text: str, sources: Iterable[str | Path | None] = ()) -> None:
    """Write ``text`` to the user-named file ``path`` whole (temporary sibling and rename) or not at all.

    Raises:
        OutputError: ``path`` is a folder, is not apart from ``sources``, or cannot be written
            (the old file, if any, is kept).
    """
    path = Path(path)
    check_apart(path, sources)
    if path.is_dir():
        raise OutputError(f"{path} is an existing folder, not a file: choose a file path")
    with _translated(path, path.exists()):
        atomic_write_text(path, text)
