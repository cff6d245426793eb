"""The one atomic write: text, bytes and JSON each fsync the file, rename it, then fsync its folder; the result has
the permissions a plain write gives, and JSON never holds NaN."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ablate.utils import io


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
