"""Fixtures of the report tests: constructed sweep folders and a W&B public-API stand-in."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.records import FakeApi, make_grid_sweep, make_variant_sweep


@pytest.fixture(scope="session")
def variant_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Table-3-style sweep folder (named variants, 3 seeds, one failed and one running trial).
    Shared by all tests: read it, never write into it."""
    return make_variant_sweep(tmp_path_factory.mktemp("sweeps") / "table3")


@pytest.fixture(scope="session")
def grid_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One-at-a-time sweep folder without variant names and without hypotheses (read only)."""
    return make_grid_sweep(tmp_path_factory.mktemp("sweeps") / "grid")


@pytest.fixture()
def wandb_api(variant_sweep: Path) -> FakeApi:
    """A ``wandb.Api`` stand-in serving the runs of ``variant_sweep`` (group ``table3``)."""
    return FakeApi(variant_sweep)
