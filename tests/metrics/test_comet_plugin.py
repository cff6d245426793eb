"""The COMET plugin example of docs/reports.md: it registers as a metric everywhere, and scores real
Multi30k lines where unbabel-comet and its model are installed (skipped elsewhere, saying which is missing)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from ablate.metrics import METRIC_SCORERS, get_scorer

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reports.md"
MODEL = "Unbabel/wmt22-comet-da"


@pytest.fixture()
def comet_example():
    """The page's ``CometMetric`` block, run as a user would (it registers ``comet``); unregistered after."""
    block = next(b for b in re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S) if "class CometMetric" in b)
    namespace: dict = {}
    exec(block, namespace)
    yield namespace["CometMetric"]
    METRIC_SCORERS.pop("comet", None)


def test_the_docs_comet_example_registers_a_sentence_metric(comet_example):
    scorer = get_scorer("comet")
    assert isinstance(scorer, comet_example) and scorer.higher_is_better and scorer.label == "COMET"
    assert scorer.signature() == "comet|version:wmt22-comet-da"
    with pytest.raises(ValueError, match="needs the source sentences"):
        scorer.sentences(["a"], ["a"], None)


def test_the_docs_comet_example_scores_multi30k(comet_example, multi30k):
    pytest.importorskip("comet", reason="unbabel-comet is not installed (pip install -e '.[comet]')")
    from huggingface_hub import try_to_load_from_cache

    if not isinstance(try_to_load_from_cache(MODEL, "checkpoints/model.ckpt"), str):
        pytest.skip(f"the COMET model {MODEL} is not in the local Hugging Face cache (download it once online)")
    with gzip.open(multi30k / "test_2016_flickr.en.gz", "rt") as f:
        sources = [next(f).rstrip("\n") for _ in range(8)]
    with gzip.open(multi30k / "test_2016_flickr.de.gz", "rt") as f:
        refs = [next(f).rstrip("\n") for _ in range(8)]
    scorer = get_scorer("comet")
    good = scorer.sentences(refs, refs, sources)
    bad = scorer.sentences([" ".join(reversed(r.split())) for r in refs], refs, sources)
    assert len(good) == 8 and all(0 <= x <= 100 for x in good)
    assert sum(good) > sum(bad)  # the reference itself beats its words reversed
    assert scorer.corpus(refs, refs, sources) == pytest.approx(sum(good) / 8)
