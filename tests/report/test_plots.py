"""Figures: files written, non-trivial, and the Pareto front."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.image import imread

from ablate.report.aggregate import aggregate
from ablate.report.plots import pareto_front, plot_all
from ablate.report.records import collect
from ablate.report.significance import compare

NAMES = ["test_bleu.png", "bleu_vs_speed.png", "bleu_vs_params.png", "learning_curves.png"]


def test_pareto_front_keeps_only_undominated_points():
    xs, ys = [1.0, 2.0, 3.0, 2.0, 0.5], [5.0, 4.0, 1.0, 3.0, 5.0]
    # maximise x and y: (2,3) is beaten by (2,4); (0.5,5) by (1,5)
    assert pareto_front(xs, ys, maximize_x=True) == [0, 1, 2]
    # minimise x, maximise y: only (0.5, 5) is undominated
    assert pareto_front(xs, ys, maximize_x=False) == [4]


@pytest.mark.parametrize("fixture", ["variant_sweep", "grid_sweep"])
def test_every_figure_is_written_and_has_content(fixture, request, tmp_path):
    sweep = aggregate(collect(str(request.getfixturevalue(fixture))))
    paths = plot_all(sweep, tmp_path / "plots", compare(sweep, n_samples=100))
    with_hyps = ["bleu_by_length.png"] if fixture == "variant_sweep" else []  # the grid saved no hypotheses
    assert sorted(p.name for p in paths) == sorted(NAMES + with_hyps)
    for path in paths:
        assert path.stat().st_size > 20_000, path.name
        image = imread(path)
        assert image.shape[0] > 400 and image.shape[1] > 700, path.name
        colours = np.unique((image[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
        assert len(colours) > 50, path.name  # more than blank axes: bars, points, curves, text


def test_missing_metrics_skip_the_figure_instead_of_failing(variant_sweep, tmp_path):
    sweep = aggregate(collect(str(variant_sweep)))
    for row in sweep.rows:
        row.stats.pop("train/tokens_per_sec")  # e.g. runs logged before throughput existed
    paths = plot_all(sweep, tmp_path, None)
    assert "bleu_vs_speed.png" not in [p.name for p in paths] and len(paths) == 4
