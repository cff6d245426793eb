"""Fixtures of the report tests: constructed sweep folders and a W&B public-API stand-in."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from tests.helpers.marks import spy_on_plots
from tests.helpers.records import FakeApi, make_grid_sweep, make_variant_sweep

MISSION = Path(__file__).resolve().parents[2] / "results" / "mission-cpu"


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


@pytest.fixture(scope="session")
def two_by_two(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """base and score-additive of results/mission-cpu, seeds 1 and 2 (test BLEU -3.1 apart), as shipped:
    a results folder's gzip'd texts (read only)."""
    out = tmp_path_factory.mktemp("small") / "two-by-two"
    for name in ("base-seed=1", "base-seed=2", "score-additive-seed=1", "score-additive-seed=2"):
        shutil.copytree(MISSION / name, out / name)
    return out


@pytest.fixture(scope="session")
def two_by_two_runs(two_by_two: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``two_by_two`` as a sweep folder holds it (plain texts, which ``ablate export`` ships), not gzip'd."""
    out = tmp_path_factory.mktemp("runs") / "two-by-two"
    for path in sorted(two_by_two.rglob("*")):
        if path.is_file():
            target = out / path.relative_to(two_by_two)
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix == ".gz":
                target.with_suffix("").write_bytes(gzip.decompress(path.read_bytes()))
            else:
                shutil.copy(path, target)
    return out


@pytest.fixture()
def drawing(monkeypatch: pytest.MonkeyPatch) -> list:
    """What ``ablate plot`` and ``ablate export`` pass to the figures: ``[(sweep, comparisons)]`` per call
    (:func:`tests.helpers.marks.spy_on_plots`)."""
    return spy_on_plots(monkeypatch)
