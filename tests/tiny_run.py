"""The tiny training run the end-to-end tests start from: a 1+1-layer, d_model-32 Transformer on the built-in task.

Each test adds the budget, batch size and tracking it needs; a later ``key=value`` wins over an earlier one.
"""

from __future__ import annotations

MODEL = ("data.vocab_size=300", "model.d_model=32", "model.layers=1", "model.heads=2", "model.d_ff=64")


def tiny(*overrides: str, pairs: int = 200) -> list[str]:
    """``key=value`` overrides of a tiny run on ``pairs`` built-in sentence pairs, then ``overrides``."""
    return [f"data.builtin_pairs={pairs}", *MODEL, *overrides]
