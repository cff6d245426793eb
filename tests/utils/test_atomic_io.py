"""Atomic writes: records and cache entries get the permissions a plain write gives; JSON never holds NaN."""

from __future__ import annotations

import json
import os

import pytest


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
