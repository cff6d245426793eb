"""The training progress bar's label: no ``Epoch 5/-2`` when epochs are unbounded."""

from __future__ import annotations

from pytorch_lightning.callbacks import TQDMProgressBar

from ablate.training.progress_bar import BudgetProgressBar, progress_bar, train_description


def test_label_shows_the_bounds_the_run_has():
    assert train_description(5, -1, 312, 1800) == "Epoch 5 · step 312/1800"  # max_epochs=null: steps only
    assert train_description(5, None, 312, 1800) == "Epoch 5 · step 312/1800"
    assert train_description(3, 10, 40, -1) == "Epoch 3/9"  # an epoch budget, as Lightning labels it
    assert train_description(3, 10, 40, 500) == "Epoch 3/9 · step 40/500"
    assert train_description(0, -1, 0, -1) == "Epoch 0"  # a time budget alone


def test_the_bar_is_added_unless_turned_off_or_brought():
    assert [type(c) for c in progress_bar({}, [])] == [BudgetProgressBar]
    assert progress_bar({"enable_progress_bar": False}, []) == []
    assert progress_bar({}, [TQDMProgressBar()]) == []  # Lightning refuses two progress bars
