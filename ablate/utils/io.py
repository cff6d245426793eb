"""Files on disk: atomic writes, strict JSON, sentence lines, lock files, and user outputs whole or not at all.

Atomic writes are fsynced and get a plain ``open``'s permissions (``0666 & ~umask``), so a shared cache
stays shareable. Sentence files split on ``\\n`` only. Locks are ``flock`` on a file naming its holder,
dropped by the kernel when the holder dies, even by SIGKILL. A user output is refused when it is, lies in
or contains a source, and is written into a temporary sibling renamed into place.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import math
import os
import shutil
import socket
import stat
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

from filelock import FileLock, Timeout

from ablate.errors import AblateError


def cache_root(configured: str = "") -> Path:
    """The folder of every cache (data, statistics, bootstrap, W&B downloads): ``configured`` (``data.cache_dir``)
    if set, else ``$ABLATE_CACHE``, else ``~/.cache/ablate``."""
    return Path(configured or os.environ.get("ABLATE_CACHE") or "~/.cache/ablate").expanduser()


def umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux ``/proc``)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def plain_mode(directory: bool = False) -> int:
    """The mode a plain create gives: ``0666 & ~umask`` for a file, ``0777 & ~umask`` for a folder."""
    return (0o777 if directory else 0o666) & ~umask()


def replace(src: str | Path, dst: str | Path) -> None:
    """Rename ``src`` over ``dst`` (a file, or a folder onto a missing or empty one) and fsync the folder, so the
    rename survives a power cut (best effort: some file systems cannot open or fsync a folder)."""
    os.replace(src, dst)
    with contextlib.suppress(OSError):
        fd = os.open(Path(dst).parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(path: str | Path, data: bytes, *, fsync_folder: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename, fsynced.

    ``fsync_folder=False`` skips the folder's fsync (half the cost of a cache of many small files): a
    rename lost in a power cut then leaves the file missing, never half written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, plain_mode())  # mkstemp makes 0600; a plain write would follow the umask
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        replace(tmp, path) if fsync_folder else os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Text version of :func:`atomic_write_bytes` (UTF-8, ``\n`` as written: ablate runs on POSIX only, fcntl)."""
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


MAX_DEPTH = 100
"""Deepest nesting of lists and mappings a JSON record may hold (a real ``summary.json`` nests 4 levels)."""


def loads_json(text: str | bytes) -> Any:
    """The JSON value of ``text``; ``ValueError`` (one line) where it is not JSON or nests deeper than
    :data:`MAX_DEPTH`: a planted file stops here, not in a ``RecursionError`` of the parser or of a later walk."""
    deep = ValueError(f"nested more than {MAX_DEPTH} levels deep")
    try:
        data = json.loads(text)
    except RecursionError:  # deeper than the parser can follow
        raise deep from None
    if nesting_depth(data) > MAX_DEPTH:  # checked before anything walks it recursively
        raise deep
    return data


def read_json(path: str | Path) -> Any:
    """:func:`loads_json` of the UTF-8 file at ``path``; ``OSError`` where it cannot be read or is a device or a
    pipe (:func:`regular`)."""
    return loads_json(regular(Path(path)).read_text(encoding="utf-8"))


def nesting_depth(value: Any) -> int:
    """How deeply lists and mappings nest in ``value`` (a scalar: 0), found without recursion."""
    deepest, level = 0, [value] if isinstance(value, (dict, list)) else []
    while level:  # one level of containers at a time: a scalar is looked at once, never stacked
        deepest += 1
        level = [
            child
            for item in level
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, (dict, list))
        ]
    return deepest


def file_sha256(path: str | Path) -> str:
    """The sha256 of the file at ``path``, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def one_line(text: str) -> str:
    """``text`` with the line separator ``\\n`` (and ``\\r``, which readers may translate) as spaces."""
    return text.replace("\r", " ").replace("\n", " ")


_CONTROLS = {c: "?" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]} | dict.fromkeys(map(ord, "\t\n\r"), " ")


def printable(text: str) -> str:
    """``text`` on one line with each other control character (ESC, BEL, ...) as ``?``: text a record from someone
    else holds cannot clear the screen, erase the lines above it or retitle the terminal it is shown in."""
    return text.translate(_CONTROLS)


def unlinked(path: Path) -> Path:
    """``path``, a link in its place removed first: a log appended to in a folder from someone else (resumed) is
    started afresh there, never appended to through a link to a file of the user's."""
    if path.is_symlink():
        path.unlink()
    return path


def write_lines(path: str | Path, lines: Iterable[str]) -> None:
    """Write one sentence per line, atomically; :func:`read_lines` gives back exactly ``lines``."""
    atomic_write_text(path, "".join(one_line(line) + "\n" for line in lines))


def read_lines(path: str | Path) -> list[str]:
    """The lines of a file written by :func:`write_lines`: split on ``\\n`` only, never on U+2028 & co."""
    with open(path, encoding="utf-8", newline="") as handle:
        return split_lines(handle.read())


def split_lines(text: str) -> list[str]:
    """``text`` split on ``\n`` only (a final newline ends the last line; it does not start another)."""
    if not text:
        return []
    return text.removesuffix("\n").split("\n")


class LockHeld(AblateError):
    """The lock is held by another live process; ``holder`` is what its file says (or ``unknown``)."""

    def __init__(self, path: Path, holder: str):
        super().__init__(f"{path} is in use by {holder}; wait for it to finish or stop it")
        self.path = path
        self.holder = holder


class HolderLock:
    """``with HolderLock(path):`` holds the lock file ``path`` (its folder must exist) exclusively and
    writes ``holder`` (default ``pid@host``) into it; :meth:`acquire` raises :class:`LockHeld` when another
    live process holds it, unless ``wait`` (for a shared cache entry being built), and ``OSError`` when
    the file cannot be written."""

    def __init__(self, path: str | Path, holder: Optional[str] = None, wait: bool = False):
        self.path, self.holder, self.wait = Path(path), holder, wait
        self._lock = FileLock(str(self.path), timeout=0, mode=plain_mode())

    def acquire(self) -> HolderLock:
        if self.path.is_symlink() or (self.path.exists() and not self.path.is_file()):
            # planted in a received folder: filelock < 3.20.1 truncates where a link leads; a pipe never opens
            raise OSError(
                errno.EINVAL, f"{self.path.name} is a link, a pipe or a device, not a lock file", str(self.path)
            )
        before = _read_holder(self.path)  # read first: some filelock versions truncate the file on every try
        try:
            self._lock.acquire(timeout=-1 if self.wait else 0)
        except Timeout:
            raise LockHeld(self.path, _read_holder(self.path) or before or "unknown") from None
        try:
            fd = os.open(self.path, os.O_WRONLY)
            try:
                os.ftruncate(fd, 0)
                holder = self.holder or f"{os.getpid()}@{socket.gethostname()}"
                os.pwrite(fd, f"{holder}\n".encode(), 0)
            finally:
                os.close(fd)
        except OSError:
            self._lock.release()
            raise
        return self

    def release(self) -> None:
        if self._lock.is_locked:
            self._lock.release()

    @property
    def is_locked(self) -> bool:
        """Whether this object holds the lock now."""
        return self._lock.is_locked

    def __enter__(self) -> HolderLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _read_holder(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def is_held(path: str | Path) -> Optional[bool]:
    """Whether a live process holds the lock file ``path``: True; False when it is free (its holder
    released it, ended or was killed, even by SIGKILL); None when there is no lock file (an older
    run, or a record copied from elsewhere), so liveness cannot be told. Never creates or changes it."""
    try:  # a link or a pipe is no lock file (and a pipe would not open until written to)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops a shared lock this probe took
    return False


class OutputError(AblateError):
    """An output that cannot (or must not) be written; the message names it and what to do."""


def check_apart(
    out: str | Path, sources: Iterable[str | Path | None], what: str = "output", file: bool = False
) -> None:
    """Refuse ``out`` (an :class:`OutputError` naming both paths) when it is one of ``sources``, lies
    inside one, or contains one (links followed); ``file``: ``out`` names a file, so an existing folder too."""
    out = Path(out)
    if file and out.is_dir():
        raise OutputError(f"{what} {out} is an existing folder, not a file: choose a file path")
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


def is_folder_name(text: Any) -> bool:
    """Whether ``text`` names one folder inside another (never empty, ``.``, ``..``, a path or a NUL), as
    every sweep and trial name ablate makes does: a name read back from a folder must not lead a run outside it."""
    return isinstance(text, str) and text not in ("", ".", "..") and not any(c in text for c in "/\\\x00")


def regular(path: Path) -> Path:
    """``path``; an ``OSError`` where it is a device or a pipe (a planted link to ``/dev/zero``, a FIFO), which a
    read would never finish (or never start)."""
    if path.exists() and not (path.is_file() or path.is_dir()):
        raise OSError(errno.EINVAL, "not a regular file (a device or a pipe)", str(path))
    return path


def read_inside(path: str | Path, root: str | Path) -> bytes:
    """The bytes of ``path``, a file under ``root``; an :class:`OutputError` if its real path (links
    followed) leaves ``root``."""
    path, root = Path(path), Path(root)
    real, top = path.resolve(), root.resolve()
    if top not in real.parents:
        raise OutputError(
            f"{path} is a link to {real}, outside {root}: refusing to copy it (replace the link by the file itself)"
        )
    return regular(real).read_bytes()


WHY: dict[Optional[int], str] = {
    **dict.fromkeys((errno.ENOSPC, errno.EDQUOT), "no space left on the disk (free some and run again)"),
    errno.EROFS: "the file system is read-only",
}
"""Why an output was not written, by ``errno`` (else the error's own text)."""


@contextmanager
def _translated(out: Path, existed: bool) -> Iterator[None]:
    """An ``OSError`` in the block as the :class:`OutputError` saying why ``out`` was not written."""
    try:
        yield
    except OSError as err:
        why = WHY.get(err.errno, f"{err.strerror or err}{f' ({err.filename})' if err.filename else ''}")
        kept = "the old one is kept" if existed else "nothing was left behind"
        raise OutputError(f"{out} was not written: {why}; {kept}") from None


@contextmanager
def output_folder(out: str | Path, sources: Iterable[str | Path | None] = (), force: bool = False) -> Iterator[Path]:
    """Yield an empty temporary sibling of ``out``, which becomes ``out`` when the block ends normally (an existing
    ``out`` only with ``force``); an exception (a full disk, Ctrl-C) leaves ``out`` as it was.

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
    """Yield an empty temporary folder whose files, when the block ends normally, each replace their namesake in
    ``out_dir`` in one rename (figures beside the user's other files); an exception leaves ``out_dir`` as it was.

    Raises:
        OutputError: ``out_dir`` is a file, is not apart from ``sources``, or cannot be written.
    """
    out_dir = Path(out_dir)
    check_apart(out_dir, sources)
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputError(f"{out_dir} is an existing file, not a folder: choose a folder path")
    created, done = not out_dir.exists(), False
    with _translated(out_dir, not created):
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=out_dir))
    try:
        with _translated(out_dir, True):
            yield tmp
            for path in sorted(tmp.iterdir()):
                path.chmod(plain_mode(directory=path.is_dir()))
                replace(path, out_dir / path.name)
            done = True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if created and not done:
            with contextlib.suppress(OSError):
                out_dir.rmdir()  # the folder the block made, empty: gone again


def write_output_text(path: str | Path, text: str, sources: Iterable[str | Path | None] = ()) -> None:
    """Write ``text`` to the user-named file ``path`` whole or not at all; OutputError when ``path`` is a folder, is
    not apart from ``sources``, or cannot be written (the old file, if any, is kept)."""
    path = Path(path)
    check_apart(path, sources, file=True)
    with _translated(path, path.exists()):
        atomic_write_text(path, text)
