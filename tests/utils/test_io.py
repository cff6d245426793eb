"""ablate.utils.io: the one atomic write (fsync of file and folder, a plain write's permissions, JSON
without NaN), the one lock (taken over from a dead holder, probed without changing it), and user outputs
written whole or not at all, apart from their sources."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest

from ablate.utils import io
from ablate.utils.io import (
    OutputError,
    check_apart,
    output_files,
    output_folder,
    read_inside,
    write_output_text,
)


@pytest.fixture
def fsyncs(monkeypatch):
    """The paths ``os.fsync`` was called on, in order (``dir:`` for a folder)."""
    seen: list[str] = []
    real = os.fsync

    def record(fd: int) -> None:
        mode = os.fstat(fd).st_mode
        seen.append(("dir:" if stat.S_ISDIR(mode) else "") + os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(io.os, "fsync", record)
    return seen


@pytest.mark.parametrize(
    "write, data, expected",
    [
        (io.atomic_write_text, "a\nb\n", b"a\nb\n"),
        (io.atomic_write_bytes, b"\x00\xff", b"\x00\xff"),
        (io.atomic_write_json, {"b": float("nan"), "a": 1}, b'{\n  "a": 1,\n  "b": null\n}\n'),
    ],
)
def test_every_atomic_write_fsyncs_the_file_then_its_folder(tmp_path, fsyncs, write, data, expected):
    path = tmp_path / "out" / "f.txt"
    write(path, data)
    assert path.read_bytes() == expected
    assert len(fsyncs) == 2 and fsyncs[0].startswith(".f.txt.") and fsyncs[1] == "dir:out"
    assert sorted(p.name for p in path.parent.iterdir()) == ["f.txt"]  # no temporary file left


def test_replace_makes_the_rename_durable(tmp_path, fsyncs):
    (tmp_path / "new").write_text("x")
    io.replace(tmp_path / "new", tmp_path / "old")
    assert (tmp_path / "old").read_text() == "x" and fsyncs == [f"dir:{tmp_path.name}"]


def test_json_keeps_insertion_order_when_asked(tmp_path):
    io.atomic_write_json(tmp_path / "s.json", {"b": 1, "a": 2}, indent=1, sort_keys=False)
    assert (tmp_path / "s.json").read_text() == '{\n "b": 1,\n "a": 2\n}\n'


def test_atomic_writes_and_cache_entries_follow_the_umask(tmp_path):
    """Records and cache entries get the permissions a plain write gives (shareable caches)."""
    from ablate.data.cache import cached_entry
    from ablate.utils.io import atomic_write_json

    old = os.umask(0o002)
    try:
        atomic_write_json(tmp_path / "summary.json", {"a": 1})
        (tmp_path / "plain.json").write_text("{}")
        entry, _ = cached_entry(tmp_path / "cache", "things", "k", lambda d: (d / "f.txt").write_text("x"))
    finally:
        os.umask(old)
    mode = lambda p: p.stat().st_mode & 0o777  # noqa: E731
    assert mode(tmp_path / "summary.json") == mode(tmp_path / "plain.json") == 0o664
    assert mode(entry) == 0o775 and mode(entry / "f.txt") == 0o664


def test_json_records_never_hold_nan(tmp_path):
    """NaN and infinities are written as null (``NaN`` is not JSON)."""
    from ablate.utils.io import atomic_write_json

    atomic_write_json(tmp_path / "s.json", {"a": float("nan"), "b": [float("inf"), 1.5]})
    assert json.loads((tmp_path / "s.json").read_text(), parse_constant=pytest.fail) == {"a": None, "b": [None, 1.5]}


HOLD = (
    "import pathlib, sys, time; from ablate.utils.io import HolderLock; "
    "lock = HolderLock(pathlib.Path(sys.argv[1]), holder='holder-7').acquire(); "
    "print('held', flush=True); time.sleep(60)"
)


def _hold_in_child(path):
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_second_holder_is_refused_naming_the_first_until_the_first_is_killed(tmp_path):
    path = tmp_path / ".lock"
    assert io.is_held(path) is None  # no file: cannot tell
    child = _hold_in_child(path)
    try:
        with pytest.raises(io.LockHeld) as refused:
            io.HolderLock(path).acquire()
        assert refused.value.holder == "holder-7"
        assert path.read_text() == "holder-7\n"  # the refused try left the holder's name alone
        assert io.is_held(path) is True
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert io.is_held(path) is False  # the kernel dropped the killed holder's lock
    before = path.stat().st_mtime_ns, path.read_text()
    assert io.is_held(path) is False and (path.stat().st_mtime_ns, path.read_text()) == before  # a probe writes nothing
    with io.HolderLock(path) as lock:  # taken over; the file names the new holder
        assert lock.is_locked and path.read_text() == f"{os.getpid()}@{socket.gethostname()}\n"
    assert io.is_held(path) is False and path.exists()  # released, the file stays for the next probe


class FileLock312:
    """The lock of filelock 3.12 to 3.20.0, which ``filelock>=3.12`` allows: ``os.open(path, O_RDWR | O_CREAT |
    O_TRUNC)``, a link followed (3.20.1 added ``O_NOFOLLOW``)."""

    def __init__(self, path: str, timeout: float = 0, mode: int = 0o644):
        self.path, self.fd = path, None

    @property
    def is_locked(self) -> bool:
        return self.fd is not None

    def acquire(self, timeout: float = 0) -> None:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def release(self) -> None:
        os.close(self.fd)
        self.fd = None


@pytest.mark.parametrize("filelock", ["installed", "3.12"])
def test_a_lock_file_that_is_a_link_is_refused_never_written_through(tmp_path, monkeypatch, filelock):
    """A received run or sweep folder's ``.lock`` linked to a file of the user's: taking the lock wrote "pid@host"
    over that file wherever filelock follows the link (3.12 to 3.20.0)."""
    if filelock == "3.12":
        monkeypatch.setattr(io, "FileLock", FileLock312)
    thesis = tmp_path / "thesis.tex"
    thesis.write_text("my thesis\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / ".lock").symlink_to(thesis)
    with pytest.raises(OSError, match="is a link, a pipe or a device, not a lock file"):
        io.HolderLock(tmp_path / "run" / ".lock").acquire()
    assert thesis.read_text() == "my thesis\n"
    assert io.is_held(tmp_path / "run" / ".lock") is None  # not a lock file: whether one holds it cannot be told


LOCK_PIPE = (
    "import os, pathlib, sys; from ablate.utils.io import HolderLock, is_held; path = pathlib.Path(sys.argv[1]); "
    "os.mkfifo(path); print(is_held(path), flush=True); HolderLock(path).acquire()"
)


def test_a_lock_file_that_is_a_pipe_is_refused_never_a_hang(tmp_path):
    """A received run or sweep folder's ``.lock`` planted as a FIFO: ``ablate train --run-dir`` and ``ablate sweep
    status`` waited forever to open it."""
    proc = subprocess.run(
        [sys.executable, "-c", LOCK_PIPE, str(tmp_path / ".lock")], capture_output=True, text=True, timeout=30
    )
    assert proc.stdout == "None\n" and "not a lock file" in proc.stderr.splitlines()[-1], proc.stderr


def test_a_waiting_lock_waits_for_the_holder_to_release(tmp_path):
    path = tmp_path / "entry.lock"
    first = io.HolderLock(path).acquire()
    got = threading.Event()

    def second() -> None:
        with io.HolderLock(path, wait=True):
            got.set()

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.3)
    assert not got.is_set()  # still waiting on the first holder
    first.release()
    thread.join(timeout=10)
    assert got.is_set()


def test_an_output_that_is_inside_or_contains_a_source_is_refused(tmp_path):
    source = tmp_path / "par" / "sweepA"
    source.mkdir(parents=True)
    for out, word in ((source, "itself"), (tmp_path / "par", "contains"), (source / "base-seed=1", "inside")):
        with pytest.raises(OutputError, match=word):
            check_apart(out, [source])
    check_apart(tmp_path / "results" / "sweepA", [source])  # a sibling is fine


def test_a_link_counts_where_it_leads(tmp_path):
    source = tmp_path / "sweep"
    source.mkdir()
    (tmp_path / "alias").symlink_to(source)
    with pytest.raises(OutputError, match="itself"):
        check_apart(tmp_path / "alias", [source])


def test_read_inside_refuses_a_link_out_of_the_tree_and_copies_one_that_stays(tmp_path):
    root = tmp_path / "sweep"
    (root / "t").mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("private key")
    (root / "t" / "a.txt").write_text("inside")
    (root / "t" / "out.txt").symlink_to(secret)
    (root / "t" / "in.txt").symlink_to(root / "t" / "a.txt")
    (root / "linked").symlink_to(tmp_path)  # a folder on the way that leads out
    assert read_inside(root / "t" / "in.txt", root) == b"inside"
    for path in (root / "t" / "out.txt", root / "linked" / "secret.txt"):
        with pytest.raises(OutputError, match=f"outside {root}"):
            read_inside(path, root)


def test_output_folder_replaces_the_old_one_only_when_complete(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with pytest.raises(OutputError, match="--force"):
        with output_folder(out):
            pass
    with output_folder(out, force=True) as tmp:
        (tmp / "new.txt").write_text("new")
        assert not (out / "new.txt").exists()  # not visible until the end
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]  # no temporary folder left


@pytest.mark.parametrize("fault", [KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device")])
def test_ctrl_c_or_a_full_disk_midway_leave_the_old_output(tmp_path, fault):
    out = tmp_path / "results"
    out.mkdir()
    (out / "old.txt").write_text("old")
    expected = KeyboardInterrupt if isinstance(fault, KeyboardInterrupt) else OutputError
    with pytest.raises(expected) as caught:
        with output_folder(out, force=True) as tmp:
            (tmp / "table.md").write_text("half")
            raise fault
    if expected is OutputError:
        assert "no space left" in str(caught.value) and "old one is kept" in str(caught.value)
        assert "\n" not in str(caught.value)
    assert [p.name for p in out.iterdir()] == ["old.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


def test_a_new_output_interrupted_leaves_nothing(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with output_folder(tmp_path / "new") as tmp:
            (tmp / "table.md").write_text("half")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_an_output_folder_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "afile").write_text("mine")
    with pytest.raises(OutputError, match="is an existing file"):
        with output_folder(tmp_path / "afile", force=True):
            pass
    assert (tmp_path / "afile").read_text() == "mine"


def test_output_files_move_in_whole_and_keep_the_users_other_files(tmp_path):
    out = tmp_path / "plots"
    out.mkdir()
    (out / "mine.txt").write_text("mine")
    (out / "a.png").write_text("old a")
    with pytest.raises(KeyboardInterrupt):
        with output_files(out) as tmp:
            (tmp / "a.png").write_text("new a")
            raise KeyboardInterrupt
    assert (out / "a.png").read_text() == "old a"
    with output_files(out) as tmp:
        (tmp / "a.png").write_text("new a")
    assert (out / "a.png").read_text() == "new a" and (out / "mine.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == ["a.png", "mine.txt"]


def test_a_full_disk_keeps_the_old_file_never_a_truncated_one(tmp_path, monkeypatch):
    path = tmp_path / "table.md"
    path.write_text("old table")
    real = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OutputError, match="no space left"):
        write_output_text(path, "new table")
    monkeypatch.setattr(os, "fsync", real)
    assert path.read_text() == "old table"
    assert [p.name for p in tmp_path.iterdir()] == ["table.md"]
    with pytest.raises(OutputError, match="inside the source"):
        write_output_text(tmp_path / "sweep" / "t" / "summary.json", "{}", [tmp_path / "sweep"])
