"""ablate's registry tests, run on this folder's plugin score."""

from pathlib import Path

import ablate.testing
from ablate.utils.plugins import load


def test_cosine_keeps_the_score_contract():
    load([str(Path(__file__).with_name("cosine.py"))])
    ablate.testing.check_score("cosine")
    ablate.testing.check_score("cosine", temperature=30.0, learn_temperature=False)
