"""Budget dependence: how each row's Δ against the base moves with the training step.

A table compares rows at one training budget, and a Δ measured early in training can have the
other sign later (an under-fitted row that learns faster, then plateaus lower). Every trial
validates during training (its ``history``), so one sweep gives the Δ at every validated step.

**Pairing.** Seed ``s`` of a row is compared with seed ``s`` of the base (same seed value, so the
same data order and initialisation stream): ``Δ_s(step) = row_s(step) - base_s(step)``. Each
trial's history is linearly interpolated onto the union of the paired trials' steps, within its
own step range only (no extrapolation, as :func:`ablate.report.aggregate.curve` does), so a
pair has a Δ at a step only where both of its trials cover it. A row trained with none of the
base's seeds has no curve; :attr:`BudgetCurves.skipped` says why.

**Per step.** The mean of the paired Δs over the seeds that cover the step and its Student t
interval with ``pairs - 1`` degrees of freedom, ``mean ± t(0.975, n-1) · sd / sqrt(n)`` (none with
one pair). The interval is about training seeds only (the dev set is fixed), and it is not
corrected for looking at many steps.

**Sign changes.** A step at which the mean Δ has the opposite sign to the mean at the last
earlier step where it was not zero (a touch of zero is no change).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
from scipy import stats as st

from ablate.record import DEV_BLEU, DEV_PPL
from ablate.report.aggregate import Row, Sweep, value_order
from ablate.report.records import Trial

METRICS = (DEV_BLEU.key, DEV_PPL.key)
"""The validation metrics whose Δ the budget figure shows."""
LEVEL = 0.95


@dataclass(frozen=True)
class DeltaCurve:
    """One row's Δ against the base on one validation metric, per step.

    Attributes:
        row: the row's name.
        metric: the history metric, e.g. ``val/bleu``.
        steps: (S,) steps at which at least one seed pair has both trials validated.
        mean: (S,) mean over seed pairs of ``row - base``.
        low, high: (S,) the t interval of the mean; nan where one pair covers the step.
        pairs: (S,) seed pairs covering each step.
        seeds: the seed values paired with the base, in seed order.
        sign_changes: steps at which ``mean`` changes sign (:func:`sign_changes`).
    """

    row: str
    metric: str
    steps: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    pairs: np.ndarray
    seeds: tuple[str, ...]
    sign_changes: tuple[float, ...]

    @property
    def last_step(self) -> float:
        return float(self.steps[-1])


@dataclass(frozen=True)
class Skipped:
    """A row without a Δ curve and why (no shared seed, no history)."""

    row: str
    reason: str


@dataclass(frozen=True)
class BudgetCurves:
    """Δ against the base per step for every row of a sweep, on one metric.

    Attributes:
        metric: the history metric.
        base: the base row's name.
        curves: one per row with at least one step covered by a seed pair, in table order.
        skipped: the other non-base rows.
    """

    metric: str
    base: str
    curves: tuple[DeltaCurve, ...]
    skipped: tuple[Skipped, ...]

    def curve(self, row: str) -> Optional[DeltaCurve]:
        return next((c for c in self.curves if c.row == row), None)


def history(trial: Trial, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, values)`` of one trial's validations of ``metric``, in step order, finite values only."""
    pts = sorted(
        (float(h["step"]), float(h[metric]))
        for h in trial.history
        if h.get("step") is not None and h.get(metric) is not None and math.isfinite(float(h[metric]))
    )
    return np.array([p[0] for p in pts]), np.array([p[1] for p in pts])


def paired_deltas(
    base: Sequence[Trial], row: Sequence[Trial], metric: str
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Seed-paired Δs of ``row`` minus ``base`` on one interpolated step grid.

    Returns:
        ``(steps, deltas, seeds)``: steps (S,) the union of the paired trials' validated steps;
        deltas (P, S), nan where a pair's two trials do not both cover the step; the P seeds.
    """
    by_seed = _by_seed(base, metric)
    pairs = [(s, by_seed[s], h) for s, h in _by_seed(row, metric).items() if s in by_seed]
    pairs.sort(key=lambda p: value_order(_number(p[0])))
    if not pairs:
        return np.zeros(0), np.zeros((0, 0)), ()
    steps = np.unique(np.concatenate([h[0] for _, a, b in pairs for h in (a, b)]))
    deltas = np.stack([_on(steps, *b) - _on(steps, *a) for _, a, b in pairs])
    covered = ~np.all(np.isnan(deltas), axis=0)
    return steps[covered], deltas[:, covered], tuple(s for s, _, _ in pairs)


def t_interval(deltas: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per column of ``deltas`` (P, S) with nans: ``(mean, low, high, n)``, each (S,).

    The interval is Student's t over the column's n finite values: ``mean ± t(q, n-1) · sd/sqrt(n)``
    with ``q = (1 + level) / 2`` and sample sd (ddof=1); nan where n < 2.
    """
    n = np.sum(~np.isnan(deltas), axis=0)
    mean = np.nanmean(deltas, axis=0) if deltas.size else np.zeros(0)
    low, high = np.full(mean.shape, np.nan), np.full(mean.shape, np.nan)
    for j in np.flatnonzero(n > 1):
        values = deltas[:, j][~np.isnan(deltas[:, j])]
        half = float(st.t.ppf(0.5 + level / 2, len(values) - 1)) * np.std(values, ddof=1) / math.sqrt(len(values))
        low[j], high[j] = mean[j] - half, mean[j] + half
    return mean, low, high, n


def sign_changes(steps: Sequence[float], mean: Sequence[float]) -> list[float]:
    """Steps at which ``mean`` has the opposite sign to its last earlier nonzero value."""
    out, previous = [], 0.0
    for step, value in zip(steps, mean):
        sign = float(np.sign(value)) if math.isfinite(value) else 0.0
        if sign and previous and sign != previous:
            out.append(float(step))
        previous = sign or previous
    return out


def delta_curves(sweep: Sweep, metric: str = DEV_BLEU.key, level: float = LEVEL) -> BudgetCurves:
    """Every non-base row's seed-paired Δ against the base per step (see the module docstring)."""
    base = sweep.base
    curves, skipped = [], []
    for row in sweep.rows:
        if row.is_base:
            continue
        reason = _why_not(base, row, metric)
        if reason:
            skipped.append(Skipped(row.name, reason))
            continue
        steps, deltas, seeds = paired_deltas(base.trials, row.trials, metric)
        if not len(steps):
            skipped.append(Skipped(row.name, f"no step that both trials of a seed pair validated ({metric})"))
            continue
        mean, low, high, n = t_interval(deltas, level)
        changes = tuple(sign_changes(steps, mean))
        curves.append(DeltaCurve(row.name, metric, steps, mean, low, high, n, seeds, changes))
    return BudgetCurves(metric, base.name, tuple(curves), tuple(skipped))


def late_sign_changes(sweep: Sweep, metric: str = DEV_BLEU.key) -> list[tuple[str, float]]:
    """``(row name, step)`` for every sign change of a row's mean Δ in the last half of its
    training: after half of the last step its seed pairs cover."""
    return [(c.row, s) for c in delta_curves(sweep, metric).curves for s in c.sign_changes if s > c.last_step / 2]


def _why_not(base: Row, row: Row, metric: str) -> str:
    """Why ``row`` cannot be paired with ``base`` on ``metric``; empty when it can."""
    theirs, ours = _by_seed(base.trials, metric), _by_seed(row.trials, metric)
    if not theirs:
        return f"the base ({base.name}) has no validation history of {metric}"
    if not ours:
        return f"no validation history of {metric}"
    if not set(ours) & set(theirs):
        return f"no seed shared with the base (row: {', '.join(ours)}; base: {', '.join(theirs)})"
    return ""


def _by_seed(trials: Sequence[Trial], metric: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Seed value (as text) -> the history of the first trial with that seed and some history."""
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for t in trials:
        steps, values = history(t, metric)
        if t.seed is not None and len(steps) and str(t.seed) not in out:
            out[str(t.seed)] = (steps, values)
    return out


def _on(grid: np.ndarray, steps: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` interpolated onto ``grid`` within ``[steps.min(), steps.max()]``, nan outside."""
    out = np.full(grid.shape, np.nan)
    inside = (grid >= steps[0]) & (grid <= steps[-1])
    out[inside] = np.interp(grid[inside], steps, values)
    return out


def _number(text: str) -> object:
    try:
        return float(text)
    except ValueError:
        return text
