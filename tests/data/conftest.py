"""Fixtures for the data tests: small slices of the real Multi30k, written to a temp folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.config import DataConfig

from tests.helpers.corpus import read_lines, write_lines


@pytest.fixture(scope="session")
def small_multi30k(multi30k: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2000/200/200 lines of Multi30k en-de, mixing ``.gz`` and plain files."""
    folder = tmp_path_factory.mktemp("m30k")
    layout = {
        ("train", 2000): ("train.en.gz", "train.de"),
        ("val", 200): ("val.en", "val.de.gz"),
        ("test_2016_flickr", 200): ("test_2016_flickr.en", "test_2016_flickr.de"),
    }
    for (split, n), names in layout.items():
        for lang, name in zip(("en", "de"), names):
            write_lines(folder / name, read_lines(multi30k / f"{split}.{lang}.gz", n))
    return folder


@pytest.fixture()
def make_cfg(tmp_path: Path):
    """``make_cfg(source, **overrides)`` -> a small-vocabulary DataConfig with a private cache."""

    def make(source: str, **overrides) -> DataConfig:
        values = dict(source=str(source), vocab_size=500, builtin_pairs=400, cache_dir=str(tmp_path / "cache"))
        values.update(overrides)
        return DataConfig(**values)

    return make
