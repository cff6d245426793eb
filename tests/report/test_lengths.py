"""BLEU by source length (Bahdanau et al. 2015, Fig. 2): buckets, per-bucket BLEU, table columns."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
from typer.testing import CliRunner

from ablate.report import table as report_table
from ablate.report.commands import app
from ablate.report.layout import bleu_by_length, buckets
from ablate.report.stats import aggregate
from ablate.report.trials import collect

from tests.helpers.records import SPLITS


def test_buckets_hold_about_equal_numbers_of_sentences():
    lengths = list(range(1, 41))
    assert buckets(lengths, 4) == [(1, 11), (12, 21), (22, 31), (32, 40)]
    assert buckets([5] * 10, 4) == [(5, 5)]  # one length: one bucket
    assert buckets([], 4) == []


@pytest.fixture(scope="module")
def with_sources(variant_sweep, tmp_path_factory) -> Path:
    """The variant sweep with ``sources/<split>.txt``: each source is as long as its reference,
    padded by a word for every third sentence, so source and reference lengths differ."""
    root = tmp_path_factory.mktemp("sweeps") / "table3"
    shutil.copytree(variant_sweep, root)
    for refs in root.glob("*/refs/*.txt"):
        lines = refs.read_text().split("\n")[:-1]
        sources = [line + (" extra" if i % 3 == 0 else "") for i, line in enumerate(lines)]
        (refs.parent.parent / "sources").mkdir(exist_ok=True)
        (refs.parent.parent / "sources" / refs.name).write_text("\n".join(sources) + "\n")
    return root


def test_bleu_per_bucket_is_the_mean_over_seeds_of_corpus_bleu_on_the_bucket(with_sources):
    sweep = aggregate(collect(str(with_sources)))
    data = bleu_by_length(sweep)
    assert data.split == SPLITS[0] and data.basis == "source"
    base = sweep.base
    lengths = np.array([len(s.split()) for s in base.trials[0].sources[data.split]])
    for i, (lo, hi) in enumerate(data.buckets):
        idx = [j for j, n in enumerate(lengths) if lo <= n <= hi]
        assert idx
        per_seed = [
            sacrebleu.corpus_bleu([t.hyps[data.split][j] for j in idx], [[t.refs[data.split][j] for j in idx]]).score
            for t in base.trials
        ]
        assert data.stats["base"][i].mean == pytest.approx(np.mean(per_seed), abs=1e-9)
        assert data.stats["base"][i].n == 3
    assert len(data.buckets) >= 3


def test_runs_without_sources_fall_back_to_reference_length(variant_sweep):
    assert bleu_by_length(aggregate(collect(str(variant_sweep)))).basis == "reference"


def test_table_by_length_adds_a_column_per_bucket(with_sources):
    table = report_table(str(with_sources), significance=False, by_length=True).table
    labels = [c.label for c in table.columns if c.key.startswith("len:")]
    assert labels and all(label.startswith("BLEU len ") for label in labels)
    assert any("source has a to b words" in n for n in table.footnotes)
    result = CliRunner().invoke(app, ["table", str(with_sources), "--by-length", "--no-significance", "-f", "md"])
    assert result.exit_code == 0 and "BLEU len " in result.output


def test_by_length_without_hypotheses_is_a_one_line_error(grid_sweep):
    result = CliRunner().invoke(app, ["table", str(grid_sweep), "--by-length", "--no-significance"])
    assert result.exit_code == 2 and "--by-length needs saved hypotheses" in result.output
