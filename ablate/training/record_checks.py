"""Checks on what a checkpoint says about its run (it may come from someone else's run folder).

Only well-formed values are taken: a planted or damaged entry (a BLEU of 1e9, a string, NaN) is
dropped, not believed.
"""

from __future__ import annotations

import math
from typing import Any

from ablate.record import DEV_BLEU, DEV_CHRF, DEV_PPL


def nonnegative(value: Any) -> float | None:
    """``value`` as a float when it is a finite, non-negative number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def checked_record(record: Any, history: list[dict[str, float]]) -> dict[str, Any]:
    """A checkpoint's best-validation record if well formed and one of the (checked) ``history``, else ``{}``."""
    if not isinstance(record, dict):
        return {}
    scores = checked_history([record])
    hyps = record.get("hypotheses")
    seen = {(h["step"], h[DEV_BLEU.key]) for h in history}
    if (
        not scores
        or (scores[0]["step"], scores[0][DEV_BLEU.key]) not in seen
        or not isinstance(hyps, list)
        or not all(isinstance(h, str) for h in hyps)
    ):
        return {}
    return {**scores[0], "hypotheses": list(hyps)}


def checked_history(history: Any) -> list[dict[str, float]]:
    """The validation history of a checkpoint, keeping only well-formed entries.

    Each entry is ``{"step": int >= 0, "val/bleu": [0, 100], "val/chrf": [0, 100], "val/ppl": >= 1 or None}``,
    with ``"train/grad_norm": >= 0`` where it was recorded;
    a planted or damaged entry (a BLEU of 1e9, a string, NaN) is dropped, not believed.
    """
    if not isinstance(history, list):
        return []
    out = []
    for entry in history:
        if not isinstance(entry, dict) or isinstance(entry.get("step"), bool) or not isinstance(entry.get("step"), int):
            continue
        bleu, chrf, ppl = (nonnegative(entry.get(k)) for k in (DEV_BLEU.key, DEV_CHRF.key, DEV_PPL.key))
        if entry["step"] < 0 or bleu is None or bleu > 100 or chrf is None or chrf > 100:
            continue
        checked = {"step": entry["step"], DEV_BLEU.key: bleu, DEV_CHRF.key: chrf, DEV_PPL.key: ppl}
        if (norm := nonnegative(entry.get("train/grad_norm"))) is not None:
            checked["train/grad_norm"] = norm
        out.append(checked)
    return out
