"""The training progress bar's label: no ``Epoch 5/-2`` when epochs are unbounded."""

from __future__ import annotations

from pytorch_lightning.callbacks import TQDMProgressBar

from ablate.training.trainer import BudgetProgressBar, StatusLines, progress_bar, status_line, train_description


def test_label_shows_the_bounds_the_run_has():
    assert train_description(5, -1, 312, 1800) == "Epoch 5 · step 312/1800"  # max_epochs=null: steps only
    assert train_description(5, None, 312, 1800) == "Epoch 5 · step 312/1800"
    assert train_description(3, 10, 40, -1) == "Epoch 3/9"  # an epoch budget, as Lightning labels it
    assert train_description(3, 10, 40, 500) == "Epoch 3/9 · step 40/500"
    assert train_description(0, -1, 0, -1) == "Epoch 0"  # a time budget alone


def test_the_bar_is_added_unless_turned_off_or_brought():
    assert [type(c) for c in progress_bar({}, [], terminal=True)] == [BudgetProgressBar]
    assert [type(c) for c in progress_bar({}, [], terminal=False)] == [StatusLines]  # a log file, a notebook
    assert progress_bar({"enable_progress_bar": False}, []) == []
    assert progress_bar({}, [TQDMProgressBar()]) == []  # Lightning refuses two progress bars


def test_the_rich_bar_draws_on_stderr():
    assert BudgetProgressBar()._console_kwargs == {"stderr": True}  # stdout holds only the command's result


def test_a_status_line_says_step_loss_speed_bleu_and_time_left():
    line = status_line(120, 600, 4.21349, 8920.4, 3.214, 312.2)
    assert line == "step 120/600 · loss 4.213 · 8,920 tok/s · val/bleu 3.21 · ETA 0:05:12"
    assert status_line(7, -1, None, None, None, None) == "step 7"  # a time budget, before anything is known


def test_a_notebook_gets_one_line_rewritten_in_place(caplog):
    import io
    import logging

    stream = io.StringIO()
    bar = StatusLines(stream=stream, rewrite=True)
    with caplog.at_level(logging.INFO, logger="ablate"):
        bar._write("step 4/12")
        bar._write("step 8/12")
        bar._open, bar._said = True, 0
        bar.on_train_end(type("T", (), {"global_rank": 0, "global_step": 0})(), None)
    assert stream.getvalue() == "\rstep 4/12\rstep 8/12\n"  # one line on screen, no widget
    plain = StatusLines(stream=stream, rewrite=False)
    with caplog.at_level(logging.INFO, logger="ablate"):
        plain._write("step 4/12")
    assert [r.getMessage() for r in caplog.records] == ["step 4/12"]  # elsewhere: logged, a line each


def test_the_status_line_speed_is_every_devices_as_the_summary_says():
    """Under ``train.devices=2`` the status line said rank 0's rate ('7,006 tok/s') and the last line and the
    summary every device's ('14,124 train tokens/s'): the line says the summary's number now."""
    from types import SimpleNamespace

    from ablate.training.trainer import Throughput

    meter = Throughput(pad_id=0)
    meter.all_tok, meter.all_sec = 70_000, 10.0  # this rank: 7,000 tokens/s
    module = SimpleNamespace(last_val={}, last_loss=None)
    trainer = SimpleNamespace(callbacks=[meter], world_size=2, global_step=10, max_steps=10)
    assert StatusLines().describe(trainer, module) == "step 10/10"  # before the rate over the devices is known
    meter.tokens_per_sec = 14_000.0  # every device's, as the Throughput callback logs it and the summary keeps it
    assert StatusLines().describe(trainer, module) == "step 10/10 · 14,000 tok/s"
    trainer.world_size = 1  # one device: its own rate is every device's, from the first step
    meter.tokens_per_sec = float("nan")
    assert StatusLines().describe(trainer, module) == "step 10/10 · 7,000 tok/s"
