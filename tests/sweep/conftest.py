"""Fixtures for sweep tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.sweep import Events


@pytest.fixture()
def events(tmp_path: Path) -> Events:
    """Where the fake trainers of one test record what they did."""
    return Events(tmp_path / "events.log")
