"""A corpus whose sides differ in length stops ``train`` with an error naming both files and both counts."""

from __future__ import annotations

import pytest

from ablate.config import load_config
from ablate.data.sources import DataError
from ablate.training.train import train

from tests.helpers.corpus import make_folder
from tests.helpers.tiny import tiny

PAIRS = {f"{s}.{lang}": [f"{lang} sentence {i}" for i in range(20)] for s in ("train", "val") for lang in ("en", "de")}


def test_misaligned_error_names_both_files_and_counts(tmp_path, cache_dir):
    folder = make_folder(tmp_path, {**PAIRS, "train.de": ["x"] * 19})
    with pytest.raises(DataError) as err:
        train(load_config(None, [*tiny("tracking.wandb=disabled"), f"data.source={folder}"]), tmp_path / "run")
    message = str(err.value)
    assert "train.en" in message and "train.de" in message and "20" in message and "19" in message
