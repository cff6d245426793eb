"""The tiny training run the end-to-end tests start from: a 1+1-layer, d_model-32 Transformer on the built-in task.

The one definition of "tiny": each test adds the budget, batch size and tracking it needs; a later
``key=value`` wins over an earlier one. Sweep files and sweep configs take the same values from
:func:`tiny_parameters` and :func:`tiny_sweep_yaml`.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

TINY: dict[str, Any] = {
    "data.vocab_size": 300,
    "model.d_model": 32,
    "model.layers": 1,
    "model.heads": 2,
    "model.d_ff": 64,
}
"""Vocabulary and model size of the tiny run (the data source and budget are each test's)."""

MODEL = tuple(f"{key}={value}" for key, value in TINY.items())
""":data:`TINY` as ``key=value`` overrides."""

EVAL_PAIRS = 100
"""Validation and test pairs of a tiny run, each, where a test asks for them (``eval_pairs=EVAL_PAIRS``; sweeps
always): decoding the built-in task's default 500 and 500 is most of a tiny run's seconds."""

SWEEP_TINY = {"data.builtin_eval_pairs": EVAL_PAIRS, **TINY}
"""What a tiny sweep's trials share: :data:`TINY` on :data:`EVAL_PAIRS` validation and test pairs."""


def tiny(*overrides: str, pairs: int = 200, eval_pairs: int | None = None) -> list[str]:
    """``key=value`` overrides of a tiny run on ``pairs`` built-in sentence pairs, validated and tested on
    ``eval_pairs`` pairs each (None: the built-in task's default), then ``overrides``."""
    evals = [f"data.builtin_eval_pairs={eval_pairs}"] if eval_pairs is not None else []
    return [f"data.builtin_pairs={pairs}", *evals, *MODEL, *overrides]


def tiny_parameters(**extra: Any) -> dict[str, dict[str, Any]]:
    """:data:`TINY` and :data:`EVAL_PAIRS` as the ``parameters`` of a W&B-format sweep config
    (``{key: {"value": v}}``), then ``extra`` (dotted keys spelled with ``__``: ``train__max_steps=5``)."""
    values = {**SWEEP_TINY, **{key.replace("__", "."): value for key, value in extra.items()}}
    return {key: {"value": value} for key, value in values.items()}


def tiny_sweep_yaml(indent: str = "  ") -> str:
    """:data:`TINY` and :data:`EVAL_PAIRS` as lines of a sweep file's ``parameters:`` block
    (``  model.d_model: {value: 32}``)."""
    return "".join(f"{indent}{key}: {{value: {value}}}\n" for key, value in SWEEP_TINY.items())


CHECKPOINTING = (
    "train.max_tokens=512",
    "train.warmup=4",
    "eval.beam=1",
    "tracking.wandb=disabled",
    "train.val_every=1000",
    "train.checkpoint_every=5",
)
"""A tiny run that saves a checkpoint every 5 steps and never validates on the way: the budget of
the tests that interrupt, damage or resume a run's folder (they add ``train.max_steps``)."""


def tiny_checkpointing(*overrides: str) -> list[str]:
    """:func:`tiny` on :data:`EVAL_PAIRS` validation and test pairs with :data:`CHECKPOINTING`, then ``overrides``."""
    return tiny(*CHECKPOINTING, *overrides, eval_pairs=EVAL_PAIRS)


@contextmanager
def trained_once(factory: Any, overrides: list[str]) -> Iterator[Path]:
    """A run trained once with ``overrides`` in a fresh folder of ``factory`` (pytest's
    ``tmp_path_factory``), for a module's tests to copy; its data cache is ``ABLATE_CACHE`` while the
    block runs. Yields the run folder."""
    import pytest

    from ablate.config import load_config
    from ablate.training.train import train

    base = factory.mktemp("trained")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ABLATE_CACHE", str(base / "cache"))
        train(load_config(None, overrides), base / "run")
        yield base / "run"
