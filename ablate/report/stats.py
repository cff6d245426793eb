"""The stats layer: rows over seeds (:func:`aggregate`), the pairs a table compares (:func:`planned_pairs`),
the seed-aware test, Holm, MDE, seeds needed, budget curves and agreement with a paper.

docs/reports.md ("Significance") describes the method; its sources: the paired sentence bootstrap
(Koehn 2004) with the same sentence ids for every seed of both rows; seed variance (Clark et al. 2011;
Bouthillier et al. 2021) pooled over the table, from a row + seed least-squares fit for rows trained
with the same seed values, else within rows; approximate randomisation (Riezler & Maxwell 2005);
Holm (1979); the sign test (Dixon & Mood 1946) and Pearson's r with a Fisher-z interval (Fisher 1921).
The p-value is Student's t at the seed estimate's df, not Welch-Satterthwaite: the plug-in df is
largest exactly when σ̂ came out small by chance, so with few seeds it is too liberal (7.6% false
positives at α 0.05 in 20,000 simulated 2-vs-2 nulls with the calibration-cpu values); t at ν is the
conservative "smallest df" bound (Hsu 1938).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import math
from collections import Counter
from dataclasses import dataclass, field, replace
from math import comb
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np
from scipy import special as sc

from ablate.config import Config, flatten, to_dict
from ablate.metrics import (
    SentenceMetric,
    read_npy,
    scorers as bleu_metric,
    write_npy,
)
from ablate.metrics.scorers import bleu_from_stats
from ablate.record import DEV_BLEU, TEST_BLEU, RunStatus
from ablate.report.trials import (
    DEFAULT_METRIC,
    INVALID,
    ReportError,
    Trial,
    cell_disagreements,
    check_one_config,
    check_trials,
    clean_config,
    collect,
    distinct_seeds,
    local_folders,
    scorer_for,
    statistics,
    tested_splits,
    with_metric,
)
from ablate.utils.io import cache_root, printable

BASE = "base"
_MISSING = "<unset>"
# Column order of Table 3 (Vaswani et al., 2017); other varying keys follow alphabetically.
PAPER_ORDER = (
    "model.arch",
    "model.layers",
    "model.encoder_layers",
    "model.decoder_layers",
    "model.d_model",
    "model.d_ff",
    "model.heads",
    "model.d_k",
    "model.d_v",
    "model.dropout",
    "train.label_smoothing",
    "train.lr",
    "train.max_steps",
    "model.positions",
    "model.attention.score",
    "model.attention.scale",
)
# Table 3's hyperparameters: columns even when the sweep does not vary them.
TABLE3 = (
    "model.layers",
    "model.d_model",
    "model.d_ff",
    "model.heads",
    "model.d_k",
    "model.d_v",
    "model.dropout",
    "train.label_smoothing",
)
# Columns shown only where they differ from another column in some row.
ALIASES = {"model.encoder_layers": "model.layers", "model.decoder_layers": "model.layers"}
UNRESOLVED = (None, "auto")


@dataclass(frozen=True)
class Stat:
    """Mean, sample standard deviation (None for n=1) and count of one metric over seeds."""

    mean: float
    std: Optional[float]
    n: int


def stat(values: Sequence[Optional[float]]) -> Optional[Stat]:
    """Aggregate seed values; None when there are none (NaNs are dropped)."""
    vals = np.array([float(v) for v in values if v is not None and not math.isnan(float(v))])
    if not len(vals):
        return None
    mean = np.add.reduce(vals) / len(vals)  # np.mean and np.std(ddof=1), the same operations without their checks
    std = math.sqrt(np.add.reduce((vals - mean) ** 2) / (len(vals) - 1)) if len(vals) > 1 else None
    return Stat(float(mean), std, len(vals))


@dataclass(frozen=True)
class Row:
    """One configuration of the sweep and its aggregated seeds.

    Attributes:
        name: the variant name, or ``key=value`` of what the row changes from the base.
        group: ablation group label (``"A"``, or the dotted keys changed, joined by ``+``).
        settings: every column's value in this row; changed: the keys differing from the base row.
        trials: the finished trials (one per seed); stats: metric name -> :class:`Stat` over them.
        config: the config shared by every seed of the row, as declared (not resolved).
    """

    name: str
    group: str
    settings: dict[str, Any]
    changed: tuple[str, ...]
    trials: tuple[Trial, ...]
    stats: dict[str, Stat] = field(default_factory=dict)
    is_base: bool = False
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def seeds(self) -> list[Any]:
        return [t.seed for t in self.trials]


@dataclass(frozen=True)
class Sweep:
    """All rows of a sweep, base first, plus the trials that did not finish.

    Attributes:
        keys: the hyperparameters shown as columns, dotted, in column order.
        unfinished: failed, interrupted, running, pending, invalid and excluded trials, listed under the table.
        uses_variants: rows are named variants rather than parameter combinations.
        comparisons: the sweep's named comparisons ``[(key, values or None)]``, or None.
        disagreements: one line per trial whose summary's test BLEU is not its hypotheses'
            (:func:`ablate.report.trials.cell_disagreements`).
    """

    name: Optional[str]
    keys: list[str]
    rows: list[Row]
    unfinished: list[Trial]
    uses_variants: bool
    comparisons: Optional[list[tuple[str, Optional[list[Any]]]]] = None
    disagreements: list[str] = field(default_factory=list)

    @property
    def base(self) -> Row:
        return self.rows[0]

    @property
    def test_splits(self) -> list[str]:
        """Test splits with a per-split BLEU (``test_<split>/bleu``), sorted."""
        return sorted({s for r in self.rows for m in r.stats if (s := TEST_BLEU.split_of(m)) is not None})

    @property
    def signatures(self) -> list[str]:
        return sorted({s for r in self.rows for t in r.trials if (s := t.signatures.get("bleu"))})


def value_order(value: Any) -> tuple:
    """Sort key for mixed config values: unset < numbers/bools < strings."""
    if value is None or value == _MISSING:
        return (0, 0.0, "")
    if isinstance(value, (bool, int, float)):
        return (1, float(value), "")
    return (2, 0.0, str(value))


def aggregate(trials: Sequence[Trial]) -> Sweep:
    """Rows of the table from the trials of one sweep: a named variant (``"A-heads1"``), else one
    combination of the varying non-seed parameters, its seeds aggregated; base first (:func:`_base_ident`),
    the rest grouped by variant-name prefix (``"A"``, after Table 3 of Vaswani et al., 2017) or the keys
    they change. Trials a cell or the † test could not use (:func:`~ablate.report.trials.check_trials`),
    and a seed's second run in a row, are left out and listed with the reason.

    Raises:
        ReportError: no trial finished, or a row's trials differ in config.
    """
    trials = check_trials(trials)
    done = [t for t in trials if t.finished]
    unfinished = [t for t in trials if not t.finished]
    if not done:
        states = ", ".join(sorted({t.status for t in trials}))
        raise ReportError(f"no finished trial among {len(trials)} ({states}); nothing to tabulate")
    uses_variants = any(t.variant for t in done)
    # the keys that define a row: the sweep's parameters, else every key that differs
    candidates = sorted({k for t in done for k in t.params if k != "seed"})
    candidates = candidates or sorted(_varying([t.config for t in done]) - {"seed"})
    groups, repeats = _group_seeds(done, candidates, uses_variants)
    declared = {ident: _row_config(ts) for ident, ts in groups.items()}
    configs = {ident: _with_resolved(declared[ident], ts) for ident, ts in groups.items()}
    keys = _column_keys(configs)
    settings = {ident: {k: configs[ident].get(k, _MISSING) for k in keys} for ident in groups}
    order = sorted(groups, key=lambda i: (0, i, ()) if isinstance(i, str) else (1, "", tuple(map(value_order, i))))
    grid = _Grid(order, groups, configs, settings, keys, candidates, uses_variants)  # variants by name, then points
    base = _base_among(grid, unfinished)
    rows = [_row(grid, ident, base, declared[ident]) for ident in grid.order]
    rows.sort(key=lambda r: _row_order(r, keys, uses_variants))
    name = next((t.sweep for t in trials if t.sweep), None)
    notes = cell_disagreements([(r.name, r.trials) for r in rows])
    return Sweep(name, keys, rows, unfinished + repeats, uses_variants, _comparisons(trials), notes)


def _group_seeds(
    done: Sequence[Trial], candidates: list[str], uses_variants: bool
) -> tuple[dict[Any, list[Trial]], list[Trial]]:
    """The finished trials by row (a variant's name, else the candidate keys' values), and the repeated seeds."""
    groups: dict[Any, list[Trial]] = {}
    for t in done:
        ident = t.variant if uses_variants and t.variant else tuple(t.config.get(k, _MISSING) for k in candidates)
        groups.setdefault(ident, []).append(t)
    repeats: list[Trial] = []
    for ident, ts in groups.items():
        label = ident if isinstance(ident, str) else ", ".join(f"{k}={_show(v)}" for k, v in zip(candidates, ident))
        check_one_config(label or BASE, ts)
        groups[ident], again = distinct_seeds(label or BASE, ts)
        repeats += again
    return groups, repeats


def _column_keys(configs: dict[Any, dict[str, Any]]) -> list[str]:
    """The columns: every key that varies between rows, and Table 3's wherever every row has them, in
    Table 3's order, then alphabetically; an alias column (encoder layers) only where it differs from its key."""

    def differ(a: str, b: str) -> bool:
        return any(value_order(c.get(a, _MISSING)) != value_order(c.get(b, _MISSING)) for c in configs.values())

    stated = [k for k in TABLE3 if all(k in c for c in configs.values())]
    keys = sorted(
        _varying(list(configs.values())) | set(stated),
        key=lambda k: (PAPER_ORDER.index(k), "") if k in PAPER_ORDER else (len(PAPER_ORDER), k),
    )
    return [k for k in keys if not (k in ALIASES and ALIASES[k] in keys and not differ(k, ALIASES[k]))]


@dataclass(frozen=True)
class _Grid:
    """The rows :func:`aggregate` builds, by ident (a variant's name, else the candidate keys' values):
    their trials, resolved configs and column values, the columns and the keys that define a row."""

    order: list[Any]
    groups: dict[Any, list[Trial]]
    configs: dict[Any, dict[str, Any]]
    settings: dict[Any, dict[str, Any]]
    keys: list[str]
    candidates: list[str]
    uses_variants: bool

    def differences(self, a: Any, values: Mapping[str, Any]) -> int:
        """How many columns of row ``a`` differ from ``values`` (keys ``values`` lacks do not count)."""
        return sum(k in values and value_order(self.settings[a][k]) != value_order(values[k]) for k in self.keys)


def _row(grid: _Grid, ident: Any, base: Any, config: dict[str, Any]) -> Row:
    """One row: named and grouped by its variant, else by what it changes from the base; its seeds aggregated."""
    s, is_base = grid.settings[ident], ident == base
    changed = tuple(k for k in grid.keys if value_order(s[k]) != value_order(grid.settings[base][k]))
    if grid.uses_variants and isinstance(ident, str):
        name, group = ident, BASE if is_base else ident.split("-", 1)[0]
    else:  # named by what the sweep varies (d_k follows heads; the columns show it)
        named = [k for k in changed if k in grid.candidates] or list(changed)
        name = BASE if is_base else printable(", ".join(f"{k}={_show(s[k])}" for k in named))  # on one line
        group = BASE if is_base else "+".join(named)
    ts = tuple(sorted(grid.groups[ident], key=lambda t: (value_order(t.seed), t.name)))
    metrics = sorted(set().union(*(t.metrics.keys() for t in ts)))
    stats = {m: st for m in metrics if (st := stat([t.metrics.get(m) for t in ts])) is not None}
    return Row(name, group, s, changed, ts, stats, is_base, config)


def load(source: str, api: Any = None, metric: str = DEFAULT_METRIC) -> Sweep:
    """Collect and aggregate the trials of ``source`` (``api``: a ``wandb.Api`` stand-in), each with
    ``metric`` scored from its saved hypotheses where its summary lacks it."""
    return load_pooled([source], api, metric)


def load_pooled(sources: Sequence[str], api: Any = None, metric: str = DEFAULT_METRIC) -> Sweep:
    """:func:`load` of several sources as one sweep: their trials pooled, so the seeds of one
    configuration trained by two sweeps (``calibration-cpu`` and ``calibration-cpu-17-32``) form one row."""
    return aggregate([trial for source in sources for trial in with_metric(collect(source, api=api), metric)])


def _comparisons(trials: Sequence[Trial]) -> Optional[list[tuple[str, Optional[list[Any]]]]]:
    """The sweep's ``comparisons`` parameter, parsed; a malformed one is a one-line error."""
    declared = next((t.comparisons for t in trials if t.comparisons), None)
    if declared is None:
        return None
    from ablate.sweep.spec import SweepError, parse_comparisons

    try:
        return parse_comparisons(declared, "the sweep's comparisons")
    except SweepError as err:
        raise ReportError(str(err)) from None


def _with_resolved(config: dict[str, Any], trials: Sequence[Trial]) -> dict[str, Any]:
    """``config`` with each implicit value (unset, ``auto``) replaced by the one every seed used."""
    out = dict(config)
    for key, value in trials[0].resolved.items():
        if out.get(key) in UNRESOLVED and all(value_order(t.resolved.get(key)) == value_order(value) for t in trials):
            out[key] = scale_rule(value, trials[0].resolved.get("model.d_k")) if key == SCALE else value
    return out


SCALE = "model.attention.scale"


def scale_rule(factor: Any, d_k: Any) -> Any:
    """A resolved score factor as the rule it follows, so rows of different d_k read alike:
    ``1/sqrt(d_k)``, ``none`` (1) or the number; ``self,cross`` when the two sites differ."""
    if isinstance(factor, (list, tuple)):
        return ",".join(str(scale_rule(f, d_k)) for f in factor)
    if isinstance(d_k, (int, float)) and d_k > 0 and math.isclose(factor, d_k**-0.5):
        return "1/sqrt(d_k)"
    return "none" if factor == 1.0 else factor


def _varying(configs: Sequence[Mapping[str, Any]]) -> set[str]:
    """The keys whose value differs between ``configs`` (a key that one lacks is unset there)."""
    every = set().union(*(c.keys() for c in configs))
    return {k for k in every if len({value_order(c.get(k, _MISSING)) for c in configs}) > 1}


_PLAIN = (int, float, str, bool, type(None))


def _same_value(a: Any, b: Any) -> bool:
    """``value_order(a) == value_order(b)``, without building them for one object or two equal plain values."""
    if a is b or (type(a) is type(b) and type(a) in _PLAIN and a == b):
        return True
    return value_order(a) == value_order(b)


def _row_config(trials: Sequence[Trial]) -> dict[str, Any]:
    """The config keys shared by every seed of a row (keys that vary across seeds are dropped)."""
    first = trials[0].config
    return {
        k: v for k, v in first.items() if k != "seed" and all(_same_value(t.config.get(k, _MISSING), v) for t in trials)
    }


def _base_among(grid: _Grid, unfinished: Sequence[Trial]) -> Any:
    """:func:`_base_ident`, refused (naming the trials) where the base may be a row the table lacks: it fails while
    trials without a readable record plan such rows (their points in ``sweep.json``), or a variant sweep infers a
    base while they do; in an undeclared grid, the rule picks a point of unfinished trials over every planned point
    (:func:`_waiting_point`); in an undeclared variant sweep, the bare variant (the base by rule) has no finished
    trial yet."""
    unread = [t for t in unfinished if t.summary is None and t.status in (RunStatus.FAILED, INVALID)]
    try:
        base = _base_ident(grid)
    except ReportError:
        if not unread:
            raise
        raise _untold(unread) from None
    missing = [t for t in unread if t.params and not _has_row(grid, t)]  # params: its point in sweep.json
    # surely the base, whatever the missing rows are: a declared one, or the one bare variant while none is bare
    bare = isinstance(base, str) and all(t.bare_variant for t in grid.groups[base])
    if grid.uses_variants and missing and not (_declared(grid) or (bare and not any(t.bare_variant for t in missing))):
        raise _untold(missing)
    what, waiting = "", []
    if grid.uses_variants and not _declared(grid):  # the base variant, failed or not run yet
        waiting = [t for t in unfinished if t.bare_variant and t.variant and t.variant not in grid.groups]
        what = f"variant {waiting[0].variant} (no overrides)" if waiting else ""
    elif not _declared(grid):
        what, waiting = _waiting_point(grid, unfinished)
    if unreadable := [t for t in waiting if t in unread]:
        raise _untold(unreadable)
    if waiting:
        states = ", ".join(f"{t.name}: {t.status}" for t in waiting[:4]) + (" ..." if waiting[4:] else "")
        raise ReportError(
            f"the table's base cannot be told yet: {what} has no finished trial ({states}); wait for it or rerun it"
        )
    return base


def _waiting_point(grid: _Grid, unfinished: Sequence[Trial]) -> tuple[str, list[Trial]]:
    """The point :func:`_base_ident`'s rule picks over every point a grid plans (its rows and its unfinished trials'
    points, on the keys that vary between them), named, and its trials, where it is no row of the table; else
    ``("", [])`` (a tie among the planned points leaves the base to the rows, as when the sweep is done)."""
    from ablate.sweep.spec import resolve

    waiting = [  # a readable record's config, else its point in sweep.json (params)
        (t, t.config if t.summary is not None else clean_config(resolve(t.params)))
        for t in unfinished
        if t.summary is not None or t.params
    ]
    every = [grid.groups[i][0].config for i in grid.order] + [values for _, values in waiting]
    shared = set(every[0]).intersection(*every[1:]) - {"seed", "plugins"}  # a plugin: a file there, a digest here
    keys = sorted(k for k in shared if len({value_order(v[k]) for v in every}) > 1)
    points = {tuple(value_order(v[k]) for k in keys): v for v in every[: len(grid.order)]}
    trials: dict[tuple, list[Trial]] = {}
    for t, values in waiting:
        if (key := tuple(value_order(values[k]) for k in keys)) not in points or key in trials:
            points[key] = values
            trials.setdefault(key, []).append(t)
    if not trials:
        return "", []
    settings = {key: {k: v[k] for k in keys} for key, v in points.items()}
    try:
        base = _base_ident(_Grid(list(points), {k: [] for k in points}, {}, settings, keys, keys, False))
    except ReportError:
        return "", []
    return f"point {_label(tuple(settings[base].values()), keys)}", trials.get(base, [])


def _declared(grid: _Grid) -> bool:
    """Whether the sweep names its base: a ``base:`` parameter, or a variant named ``base``."""
    return BASE in grid.groups or any(t.declared_base is not None for i in grid.order for t in grid.groups[i])


def _untold(unread: Sequence[Trial]) -> ReportError:
    """The one-line refusal naming the trials without a readable record that may hold the base."""
    named = ", ".join(f"{t.name} ({t.error or t.status})" for t in unread[:4]) + (" ..." if unread[4:] else "")
    return ReportError(
        f"the table's base cannot be told: it may be among the {len(unread)} trials without a readable record: "
        f"{named}; restore or rerun them"
    )


def _has_row(grid: _Grid, trial: Trial) -> bool:
    """Whether the sweep's planned point of an unreadable trial (its ``params``) is a row of the table; a point
    whose values do not all match one row's counts as missing."""
    from ablate.sweep.spec import resolve

    variant = trial.params.get("variant")
    if grid.uses_variants and variant:
        return str(variant.get("name") if isinstance(variant, dict) else variant) in grid.groups
    point = {k: value_order(v) for k, v in resolve(trial.params).items() if k != "seed"}
    configs = [grid.groups[i][0].config for i in grid.order if not isinstance(i, str)]
    return any(all(value_order(c.get(k, _MISSING)) == v for k, v in point.items()) for c in configs)


def _base_ident(grid: _Grid) -> Any:
    """The base row: the sweep's ``base`` parameter, else the variant named ``base``, else the one bare
    variant (no overrides); else the row differing from the others in the fewest keys, a tie broken in
    a grid by ablate's defaults (the point that keeps most of them); a tie left is an error.

    Raises:
        ReportError: the declared base is not a row, or the base is ambiguous (naming the fix).
    """
    order, uses_variants = grid.order, grid.uses_variants
    declared = next((t.declared_base for i in order for t in grid.groups[i] if t.declared_base is not None), None)
    if declared is not None:
        return _declared_base(declared, grid)
    if uses_variants and BASE in grid.settings:
        return BASE
    bare = [i for i in order if isinstance(i, str) and all(t.bare_variant for t in grid.groups[i])]
    if uses_variants and len(bare) == 1:
        return bare[0]
    others = {a: sum(grid.differences(a, grid.settings[b]) for b in order) for a in order}
    fewest = min(others.values())
    tied = [a for a in order if others[a] == fewest]
    if len(tied) > 1 and not uses_variants:
        defaults = flatten(to_dict(Config()))
        least = min(grid.differences(a, defaults) for a in tied)
        tied = [a for a in tied if grid.differences(a, defaults) == least]
    if len(tied) == 1:
        return tied[0]
    labels = [_label(i, grid.candidates) for i in tied]
    example = tied[0] if isinstance(tied[0], str) else "{" + _label(tied[0], grid.candidates, sep=": ") + "}"
    fix = "or give the base variant no overrides" if uses_variants else "naming the base point's values"
    raise ReportError(
        f"the table's base is ambiguous: {('; ' if not uses_variants else ', ').join(labels[:4])}{' ...' if len(labels) > 4 else ''} each differ "
        f"from the other rows in {fewest} values; declare it in the sweep file's parameters "
        f"(base: {{value: {example}}}), {fix}"
    )


def _label(ident: Any, candidates: list[str], sep: str = "=") -> str:
    """A row as the sweep names it: the variant, or the grid point's parameter values (as YAML writes them)."""
    if isinstance(ident, str):
        return ident
    from ablate.sweep.spec import format_value

    return ", ".join(f"{k}{sep}{format_value(v)}" for k, v in zip(candidates, ident) if v != _MISSING)


def _declared_base(declared: Any, grid: _Grid) -> Any:
    """The row the sweep's ``base`` parameter names: a variant, or the grid point with its values."""
    order, uses_variants = grid.order, grid.uses_variants
    if uses_variants and isinstance(declared, str):
        if declared in order:
            return declared
        rows = ", ".join(str(i) for i in order if isinstance(i, str))
        raise ReportError(f"the sweep's base '{declared}' is not a row of this table (its rows: {rows})")
    if isinstance(declared, dict) and not uses_variants:
        wanted = flatten(declared)
        match = [
            i
            for i in order
            if all(value_order(grid.configs[i].get(k, _MISSING)) == value_order(v) for k, v in wanted.items())
        ]
        if len(match) == 1:
            return match[0]
        found = "no row" if not match else f"{len(match)} rows"
        raise ReportError(f"the sweep's base {declared} matches {found} of this table; name every varying key's value")
    kind = "a variant's name" if uses_variants else "a mapping of the grid's keys to the base point's values"
    raise ReportError(f"the sweep's base {declared!r} must be {kind}")


def _row_order(row: Row, keys: list[str], uses_variants: bool) -> tuple:
    """Base first; groups by name (variants) or by the keys changed; within one by columns changed, then values."""
    columns = tuple(keys.index(k) for k in row.changed)
    values = tuple(value_order(row.settings[k]) for k in row.changed)
    if row.is_base:
        return (0, (0, ""), (), (), row.name)
    if uses_variants:  # a named variant's group, e.g. "A"
        return (1, (0, row.group), columns, values, row.name)
    return (1, (1, columns), (), values, row.name)


def _show(value: Any) -> str:
    return "-" if value is None or value == _MISSING else str(value)


def curve(row: Row, metric: str = DEV_BLEU.key) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and standard deviation of a validation metric over the row's seeds, per step: each seed's
    history interpolated onto the union of all seeds' steps within its own step range (:func:`_on`).

    Returns:
        ``(steps, mean, std)``, each of shape (S,); std is 0 where one seed covers a step.
    """
    series = [h for h in (history(t, metric) for t in row.trials) if len(h[0])]
    if not series:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    steps = np.unique(np.concatenate([s for s, _ in series]))
    grid = np.stack([_on(steps, s, v) for s, v in series])
    count = np.sum(~np.isnan(grid), axis=0)
    mean = np.nansum(grid, axis=0) / count
    sq = np.where(np.isnan(grid), 0.0, (grid - mean) ** 2).sum(axis=0)
    std = np.sqrt(np.divide(sq, count - 1, out=np.zeros_like(sq), where=count > 1))
    return steps, mean, std


VARIANT = "variant"


def planned_pairs(sweep: Sweep) -> list[tuple[str, str]]:
    """``(reference row, row)`` names the table tests, in table order, without repeats; a :class:`ReportError`
    where the comparisons name a row or key that no trial of the sweep has (:func:`not_compared`)."""
    not_compared(sweep)
    if not sweep.comparisons:
        return [(sweep.base.name, r.name) for r in sweep.rows if not r.is_base]
    pairs: list[tuple[str, str]] = []
    for key, values in sweep.comparisons:
        found = _named(sweep.rows, values) if key == VARIANT else _differing_in(sweep.rows, key, values)
        pairs += [p for p in found if p not in pairs]
    return pairs


def not_compared(sweep: Sweep) -> list[str]:
    """What the sweep's comparisons name that no finished row is, e.g. ``A-x (no finished trial)``, for the footnote.

    Raises:
        ReportError: a named row that no trial of the sweep has, or a key no row sets (a typo).
    """
    missing: list[str] = []
    names = [r.name for r in sweep.rows]
    for key, values in sweep.comparisons or []:
        if key == VARIANT:
            known = {t.variant for t in sweep.unfinished}
            for name in [str(v) for v in values or [] if str(v) not in names]:
                if name not in known:
                    raise ReportError(
                        f"the sweep's comparisons name '{name}', which is no row of this table "
                        f"(rows: {', '.join(names)}); fix the comparisons in the sweep file"
                    )
                missing.append(f"{name} (no finished trial)")
            continue
        if not any(key in r.config for r in sweep.rows):
            raise ReportError(f"the sweep's comparisons are between {key}, which no row of this table sets")
        present = {value_order(r.config.get(key)) for r in sweep.rows}
        missing += [f"{key}={_text(v)} (no finished row)" for v in values or [] if value_order(v) not in present]
    return missing


def describe_plan(sweep: Sweep) -> str:
    """Words for the footnote: what the comparisons are."""
    if not sweep.comparisons:
        return f"each row against the base row ({sweep.base.name})"
    parts = []
    for key, values in sweep.comparisons:
        what = "the named rows" if key == VARIANT else key
        vals = f" ({_text(values[0])} as reference vs {', '.join(map(_text, values[1:]))})" if values else ""
        parts.append(f"{what}{vals}" + ("" if key == VARIANT else " with all else equal"))
    return "the sweep's named comparisons: " + "; ".join(parts)


def _named(rows: Sequence[Row], values: Optional[list[Any]]) -> list[tuple[str, str]]:
    names = [str(v) for v in values] if values else [r.name for r in rows]
    present = {r.name for r in rows}
    ref = names[0]
    return [(ref, n) for n in names[1:] if ref in present and n in present and n != ref]


def _differing_in(rows: Sequence[Row], key: str, values: Optional[list[Any]]) -> list[tuple[str, str]]:
    """Pairs of rows equal in every declared key but ``key``, reference value first."""

    def value(row: Row) -> tuple:
        return value_order(row.config.get(key))

    pairs: list[tuple[Row, Row]] = []
    ref, others = (value_order(values[0]), {value_order(v) for v in values[1:]}) if values else (None, set())
    for a, b in itertools.combinations(rows, 2):
        va, vb = value(a), value(b)
        if va == vb or not _equal_except(a.config, b.config, key):  # equal too where neither row sets key
            continue
        if not values:
            pairs.append((a, b) if va < vb else (b, a))
        elif va == ref and vb in others:
            pairs.append((a, b))
        elif vb == ref and va in others:
            pairs.append((b, a))
    if not values:  # every value against the lowest one present in its group
        pairs = [
            (a, b)
            for a, b in pairs
            if not any(_equal_except(a.config, c.config, key) and value(c) < value(a) for c in rows)
        ]
    return [(a.name, b.name) for a, b in pairs]


def _equal_except(a: dict[str, Any], b: dict[str, Any], key: str) -> bool:
    return all(value_order(a.get(k)) == value_order(b.get(k)) for k in set(a) | set(b) if k != key)


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# --- Resampled test sentences (Koehn 2004; Riezler & Maxwell 2005) ---


SEED = 12345
Score = Callable[[np.ndarray], np.ndarray]
"""(..., k) summed statistics -> (...) corpus scores: a scorer's ``from_statistics``."""


def sentence_stats(hyps: Sequence[str], refs: Sequence[str], tokenize: Optional[str] = None) -> np.ndarray:
    """sacreBLEU's per-sentence BLEU statistics (:func:`ablate.metrics.scorers.sentence_stats`); a
    :class:`ReportError` where the hypotheses and references differ in length."""
    if len(hyps) != len(refs) or not refs:
        raise ReportError(f"hypotheses and references differ in length ({len(hyps)}, {len(refs)})")
    return bleu_metric.sentence_stats(hyps, refs, tokenize)


class Resamples:
    """One split's ``samples`` bootstrap resamples of its ``n`` sentences, shared by every trial and comparison.

    :meth:`shared` keeps one per ``(n, samples, seed)`` in the process, and each keeps the resampled
    scores of the statistics it has seen (by identity: :func:`ablate.metrics.statistics` gives
    one array per text), so a table's two-row re-runs (:func:`compare_alone`) resample nothing again.
    """

    def __init__(self, n: int, samples: int, seed: int = SEED):
        rng = np.random.default_rng(seed)
        self.n, self.seed = n, seed
        self.weights = rng.multinomial(n, np.full(n, 1.0 / n), size=samples).astype(np.float64)  # (B, n)
        self._single = self.weights.astype(np.float32)  # exact for counts whose weighted sums stay below 2^24
        self._seen: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}

    @staticmethod
    @functools.lru_cache(maxsize=4)
    def shared(n: int, samples: int, seed: int = SEED) -> Resamples:
        """The process's one :class:`Resamples` of these parameters (the same weights as a new one)."""
        return Resamples(n, samples, seed)

    def bleu_many(self, stats: Sequence[np.ndarray], score: Score = bleu_from_stats) -> list[np.ndarray]:
        """(B,) corpus score (``score`` of summed statistics) of each trial's (n, k) statistics under each
        resample; whole-number statistics (BLEU's and chrF's counts) go through one matrix product
        (:func:`_resample_counts`), and ``score`` takes 64 trials' (B, k) sums at once."""
        bad = [s.shape[0] for s in stats if s.shape[0] != self.n]
        if bad:
            raise ReportError(f"hypotheses cover {bad[0]} sentences, the split has {self.n}")
        name = getattr(score, "__qualname__", repr(score))
        ours = getattr(score, "__func__", score) in _ANY_SHAPE
        todo = [s for s in {id(s): s for s in stats}.values() if self._seen.get((id(s), name), (None,))[0] is not s]
        files = {id(s): self._boot_file(s, name) for s in todo} if ours else {}
        for s in todo:  # read back from the bootstrap cache: (1, B) resampled scores
            saved = read_npy(files[id(s)]) if id(s) in files else None
            if saved is not None and saved.shape == (1, len(self.weights)):
                self._seen[(id(s), name)] = (s, saved[0])
        by_id = {id(s): s for s in todo if self._seen.get((id(s), name), (None,))[0] is not s}
        found = {id(s): self._seen[(id(s), name)][1] for s in stats if id(s) not in by_id}
        counts = {key: s for key, s in by_id.items() if s.ndim == 2 and np.array_equal(s, np.rint(s))}
        summed = itertools.chain(
            _resample_counts(self.weights, list(counts.values()), self._single),
            ((key, self.weights @ s) for key, s in by_id.items() if key not in counts),
        )
        while batch := list(itertools.islice(summed, 64)):  # ours: scored 64 trials at a time, as one array
            if ours and len({b.shape for _, b in batch}) == 1:
                boots = list(score(np.stack([b for _, b in batch])))
            else:
                boots = [score(b) for _, b in batch]
            for (key, _), boot in zip(batch, boots):
                if len(self._seen) >= 4096:
                    self._seen.clear()
                self._seen[(key, name)] = (by_id[key], boot)
                found[key] = boot
                if key in files:
                    write_npy(files[key], np.asarray(boot, dtype=np.float64).reshape(1, -1))  # (1, B)
        return [found[id(s)] for s in stats]

    def _boot_file(self, stats: np.ndarray, name: str) -> Path:
        """Where the bootstrap cache keeps ``stats``' resampled scores: named by a sha256 of the
        resamples (n, B, seed, numpy's version: its generator's stream), the score and the statistics."""
        digest = hashlib.sha256(
            f"{BOOT_VERSION}|{np.__version__}|{self.n}|{len(self.weights)}|{self.seed}|{name}|{stats.shape}|{stats.dtype}|".encode()
        )
        digest.update(np.ascontiguousarray(stats).data)
        return cache_root() / "bootstrap" / f"{digest.hexdigest()}.npy"


BOOT_VERSION = 1
"""Bumped when the resampled scores of the same statistics would change (the bootstrap cache's key)."""


_ANY_SHAPE = (
    bleu_from_stats,
    bleu_metric.chrf_from_stats,
    bleu_metric.ter_from_stats,
    SentenceMetric.from_statistics,
)
"""Scores of summed statistics that take any leading shape, elementwise (a plugin's may expect (B, k))."""


def _resample_counts(
    weights: np.ndarray, stats: Sequence[np.ndarray], single: np.ndarray, chunk: int = 64
) -> Iterable[tuple[int, np.ndarray]]:
    """``(id(s), weights @ s)`` for each (n, k) ``s`` of whole numbers, bit for bit, with fewer columns
    multiplied: a column equal to the first trial's (the references' lengths or n-gram counts) is
    resampled once, and one that is another of its trial's columns plus a constant on all but a few
    sentences (BLEU's n-gram totals: the length minus n - 1) is that column's resamples, plus the
    constant times the resample's size (each row of ``weights`` sums to n), plus those few sentences'
    part. The rest go ``chunk`` trials per (B, n) @ (n, columns) product: whole numbers make it exact,
    in float64 (below 2^53) and, where every sum stays below 2^24, in float32 (``single``: the weights
    in float32), which takes half the time."""
    if not stats:
        return
    sizes = weights.sum(axis=1)  # (B,): n each
    first, first_out = stats[0], np.zeros(0)
    for start in range(0, len(stats), chunk):
        part = stats[start : start + chunk]
        plans = [_columns(s, None if s is first else first) for s in part]
        own = [s[:, plan[0]] for s, plan in zip(part, plans)]
        matrix = np.concatenate(own, axis=1)
        if weights.shape[1] * float(np.abs(matrix).max(initial=0.0)) < 2**24:
            product = (single @ matrix.astype(np.float32)).astype(np.float64)  # (B, own columns)
        else:
            product = weights @ matrix
        lo = 0
        for s, (columns, derived) in zip(part, plans):
            out = np.empty((weights.shape[0], s.shape[1]), dtype=np.float64)
            out[:, columns] = product[:, lo : lo + len(columns)]
            lo += len(columns)
            for j, i, constant, rows, rest in derived:
                if i < 0:  # the first trial's column j
                    out[:, j] = first_out[:, j]
                    continue
                out[:, j] = out[:, i] + constant * sizes
                if len(rows):
                    out[:, j] += weights[:, rows] @ rest
            if s is first:
                first_out = out
            yield id(s), out


def _columns(
    s: np.ndarray, first: Optional[np.ndarray]
) -> tuple[list[int], list[tuple[int, int, float, np.ndarray, np.ndarray]]]:
    """Which columns of the (n, k) ``s`` :func:`_resample_counts` multiplies, and how it gets the others:
    ``(j, -1, ...)`` for a column equal to ``first``'s column j, ``(j, i, c, rows, rest)`` for column i
    (0 or j - 1, multiplied) plus ``c`` but on ``rows`` (at most n / 16), where it is column i plus ``rest``."""
    n, k = s.shape
    columns = np.ascontiguousarray(s.T)  # (k, n): a column's sentences side by side
    if first is not None and first.shape == s.shape:
        same = (columns == np.ascontiguousarray(first.T)).all(axis=1)
    else:
        same = np.zeros(k, dtype=bool)
    top = int(np.argmax(columns[0])) if n else 0  # a sentence where a constant difference holds, if one does
    bases = [
        columns - columns[:1],
        np.concatenate([columns[:1], columns[1:] - columns[:-1]]),
    ]  # - column 0, - column j-1
    constants = [b[:, top] if n else np.zeros(k) for b in bases]
    off = [np.count_nonzero(b != c[:, None], axis=1) for b, c in zip(bases, constants)]
    own: list[int] = []
    derived: list[tuple[int, int, float, np.ndarray, np.ndarray]] = []
    for j in range(k):
        if same[j]:
            derived.append((j, -1, 0.0, np.zeros(0, dtype=np.int64), np.zeros(0)))
            continue
        for b, i in ((0, 0), (1, j - 1)):
            if 0 <= i < j and i in own and off[b][j] <= n // 16:
                difference = bases[b][j]
                rows = np.flatnonzero(difference != constants[b][j])
                derived.append((j, i, float(constants[b][j]), rows, difference[rows] - constants[b][j]))
                break
        else:
            own.append(j)
    return own, derived


def bootstrap_p(deltas: np.ndarray, observed: float) -> float:
    """Two-sided p-value of ``observed`` from its bootstrap distribution ``deltas`` (shifted to
    mean 0, as sacreBLEU's paired bootstrap): ``(1 + #{|d - mean d| >= |observed|}) / (B + 1)``."""
    if observed == 0.0:
        return 1.0
    extreme = int(np.sum(np.abs(deltas - deltas.mean()) >= abs(observed)))
    return (extreme + 1) / (len(deltas) + 1)


def approximate_randomization(
    a: np.ndarray, b: np.ndarray, trials: int, seed: int = SEED, score: Score = bleu_from_stats, paired: bool = True
) -> float:
    """Two-sided approximate randomisation p-value (``trials`` random reassignments, Riezler & Maxwell 2005) of
    the table's Δ ``mean_s score(b_s) - mean_s score(a_s)``; ``a``, ``b``: (K_a, n, k), (K_b, n, k) statistics.
    ``paired`` (trial i of each trained with one seed value): each sentence's pair swapped with probability
    1/2, as MultEval's stratified test; else each sentence's K_a + K_b statistics shuffled over the trials of
    both rows (Fisher's permutation test within each sentence), since a seed value only one row trained has
    no partner to swap with."""
    observed = float(score(b.sum(1)).mean() - score(a.sum(1)).mean())
    if observed == 0.0:
        return 1.0
    rng = np.random.default_rng(seed)
    n, pool = a.shape[1], np.concatenate([a, b]).transpose(1, 0, 2)  # (n, K_a + K_b, k)
    extreme, chunk = 0, max(1, 2_000_000 // (n * pool.shape[1] * (1 if paired else pool.shape[2])))
    for start in range(0, trials, chunk):
        size = min(chunk, trials - start)
        if paired:
            keep = (rng.random((size, n)) >= 0.5).astype(np.float64)
            sa = np.einsum("bn,knj->bkj", keep, a) + np.einsum("bn,knj->bkj", 1 - keep, b)
            sb = np.einsum("bn,knj->bkj", keep, b) + np.einsum("bn,knj->bkj", 1 - keep, a)
        else:
            order = rng.random((size, n, pool.shape[1])).argsort(axis=2)  # each sentence's trials shuffled
            slots = pool[np.arange(n)[:, None], order].sum(axis=1)  # (B, K_a + K_b, k)
            sa, sb = slots[:, : len(a)], slots[:, len(a) :]
        d = score(sb).mean(axis=1) - score(sa).mean(axis=1)
        extreme += int(np.sum(np.abs(d) >= abs(observed) - 1e-12))
    return (extreme + 1) / (trials + 1)


# --- Training-seed variance (Clark et al. 2011) ---


POWER = 0.8  # the power at which minimum detectable effects and needed seeds are stated
SEED_EFFECT = 0.5
"""The seed main effect :func:`use_paired` plans for, as a variance ratio τ²/σ_e² (seed effect over the row + seed
fit's residual): the smallest the shipped tables measure (two-way ANOVA, ``(F - 1) / rows``: mission-cpu 0.50,
table3-budget-cpu 0.80, table3-cpu 1.34, mission-budget-cpu 2.67)."""


@functools.lru_cache(maxsize=1024)
def use_paired(paired_df: int, unpaired_df: int, alpha: float = 0.05) -> bool:
    """Whether rows that share their seed values are tested with the row + seed fit's σ (Clark et al. 2011) rather
    than the within-row one. With shared seeds the within-row variance holds the seed main effect too (σ_e² + τ²), an
    SE too wide by ``sqrt(1 + τ²/σ_e²)`` (size 1-3% at nominal 5% for 3x3 and 4x3 at the shipped tables' τ); the
    row + seed fit is exactly sized but pays one df per seed value, a critical value wider by ``t(ν_p) / t(ν_u)``.
    Paired where that costs less than the SE it saves at :data:`SEED_EFFECT`: ``t(ν_p) <= sqrt(1 + 0.5) t(ν_u)``.
    Decided by the design alone, so the test keeps its size. Simulated (each row against the first, Holm; power
    at Δ = 3σ_e sqrt(2/k)): it takes the fit with the more power at τ²/σ_e² = 0.5 in every design from 2x2 to 19x2
    (2x2, 2x3, 2x4, 3x2 stay within-row; 2x5, 3x3, 4x2, 4x3 and larger pair); 4x3 at 0.5: size 2.5% -> 4.9%, power
    35% -> 46%; without seed effects it costs 53% -> 47%."""
    if paired_df <= 0:
        return False
    if unpaired_df <= 0:
        return True
    q = 1 - alpha / 2
    return _t_quantile(q, paired_df) <= math.sqrt(1 + SEED_EFFECT) * _t_quantile(q, unpaired_df)


@dataclass(frozen=True)
class BorrowedNoise:
    """Seed variance of one split measured on another source's trials of the table's setup (``ablate table
    --sigma-from``): ``trials`` seeds of one configuration, ``ss`` the sum of squares of their per-trial
    scores about their mean (df ``trials - 1``). ``differs``: the config keys in which those runs differ
    from the table's base, each one that leaves the training alone (:data:`NEUTRAL_KEYS`). ``per_seed_var``: the
    per-seed part of their sentence-bootstrap variance (:func:`per_seed_sentence_var`), for rows of one seed."""

    source: str
    trials: int
    ss: float
    differs: tuple[str, ...] = ()
    per_seed_var: float = 0.0

    @property
    def df(self) -> int:
        return self.trials - 1

    @property
    def sigma(self) -> float:
        return math.sqrt(self.ss / self.df)


@dataclass(frozen=True)
class SeedNoise:
    """The table's per-trial seed σ of one score, pooled over its rows: ``paired``, σ_e of the row + seed fit
    (None without residual df), and ``unpaired``, σ_w within rows (None without replicated rows), each with its df;
    ``borrowed``: the other source's seeds pooled into ``unpaired`` (:meth:`borrowing`); ``trials``: (paired,
    unpaired) how many of the table's trials feed each fit (leverage below 1: not alone in a row or seed value)."""

    paired: Optional[float]
    paired_df: int
    unpaired: Optional[float]
    unpaired_df: int
    borrowed: Optional[BorrowedNoise] = None
    trials: tuple[int, int] = (0, 0)

    def borrowing(self, other: Optional[BorrowedNoise]) -> SeedNoise:
        """The within-row σ pooled with ``other``'s: ``sqrt((SS_w + SS_o) / (df_w + df_o))`` at ``df_w + df_o``,
        the pooled variance of independent samples with one σ (e.g. Snedecor & Cochran 1989, sec. 6.9). Its
        runs are seeds of one configuration, so their spread holds the seed main effect that the row + seed fit
        removes: pooled only into the within-row σ, which is exact for rows of distinct seeds and conservative
        for rows that share them (:func:`use_paired` still picks the paired fit where it has the df)."""
        if other is None:
            return self
        ss = (self.unpaired or 0.0) ** 2 * self.unpaired_df + other.ss
        df = self.unpaired_df + other.df
        return replace(self, unpaired=math.sqrt(ss / df), unpaired_df=df, borrowed=other)

    def for_rows(self, seeds_a: Sequence[Any], seeds_b: Sequence[Any]) -> tuple[Optional[float], int, bool]:
        """``(σ, df, paired)`` for rows trained with these seed values: the paired fit where they share
        them and :func:`use_paired` takes it. The choice depends on the design alone (df), never on the
        estimates, so it does not change the test's size."""
        paired = sorted(map(str, seeds_a)) == sorted(map(str, seeds_b)) and len(seeds_a) > 0
        if paired and self.paired is not None and use_paired(self.paired_df, self.unpaired_df):
            return self.paired, self.paired_df, True
        return self.unpaired, self.unpaired_df, False


def floored(sigma: Optional[float], floor_var: float) -> Optional[float]:
    """``max(σ, sqrt(floor_var))``: a seed σ no smaller than the seed x sentence variance ``s`` the
    bootstrap measures inside it (:func:`per_seed_sentence_var`), a variance "fudge" in the spirit of
    SAM's s0 (Tusher, Tibshirani & Chu 2001, PNAS 98(9)); docs/reports.md gives its effect."""
    if sigma is None or floor_var <= 0:
        return sigma
    return max(sigma, math.sqrt(floor_var))


def fit_seed_noise(scores: Mapping[str, Mapping[Any, float]], borrowed: Optional[BorrowedNoise] = None) -> SeedNoise:
    """Pool the seed variance of ``scores`` (row name -> {seed value: per-trial score}); seeds match
    across rows by ``str(seed)``, so seed 1 of every row shares one seed effect in the two-way fit;
    ``borrowed``: another source's seeds of the same setup, pooled in (:meth:`SeedNoise.borrowing`)."""
    rows = [r for r in scores if scores[r]]
    values = [(r, str(s), float(v)) for r in rows for s, v in scores[r].items() if math.isfinite(float(v))]
    n = len(values)
    within = sum(_ss([v for r2, _, v in values if r2 == r]) for r in rows)
    w_df = n - len({r for r, _, _ in values})
    seeds = sorted({s for _, s, _ in values})
    paired, p_df, p_trials = None, 0, 0
    if n:
        design = np.zeros((n, len(rows) + max(len(seeds) - 1, 0)))
        for i, (r, s, _) in enumerate(values):
            design[i, rows.index(r)] = 1.0
            if seeds.index(s) > 0:
                design[i, len(rows) + seeds.index(s) - 1] = 1.0
        y = np.array([v for _, _, v in values])
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        p_df = n - int(np.linalg.matrix_rank(design))
        if p_df > 0:
            paired = math.sqrt(float(np.sum((y - design @ coef) ** 2)) / p_df)
            p_trials = int(np.sum(np.einsum("ij,ji->i", design, np.linalg.pinv(design)) < 1 - 1e-9))  # hat diagonal
    w_trials = sum(c for c in Counter(r for r, _, _ in values).values() if c > 1)
    unpaired = math.sqrt(within / w_df) if w_df > 0 else None
    return SeedNoise(paired, p_df, unpaired, w_df, trials=(p_trials, w_trials)).borrowing(borrowed)


def per_seed_sentence_var(boots: Mapping[str, Sequence[np.ndarray]]) -> float:
    """The per-seed part ``s`` of one trial's sentence-bootstrap variance (the seed x sentence
    interaction): within a row, ``Var(b_i) - Cov(b_i, b_j)`` (i != j) of its trials' (B,) bootstrap
    scores, averaged over the rows of ``boots`` with >= 2 seeds (weighted by seeds); 0 without one.
    It is inside σ already, so :func:`sentence_split` keeps it from being counted twice."""
    total, weight = 0.0, 0
    for trials in boots.values():
        if len(trials) < 2:
            continue
        cov = np.cov(np.stack(trials))  # (k, k)
        k = cov.shape[0]
        off = (cov.sum() - np.trace(cov)) / (k * (k - 1))
        total += k * float(np.trace(cov) / k - off)
        weight += k
    return max(total / weight, 0.0) if weight else 0.0


def sentence_split(sentence_var: float, per_seed: float, k_a: int, k_b: int) -> float:
    """The k-independent part of a Δ's sentence-bootstrap variance ``v``: ``max(v - s (1/K_a + 1/K_b), 0)``
    (``s``: :func:`per_seed_sentence_var`). On results/calibration-cpu ``v·k`` is constant over k = 1..8."""
    return max(sentence_var - per_seed * (1 / k_a + 1 / k_b), 0.0)


def _ss(values: Sequence[float]) -> float:
    return float(np.sum((np.asarray(values) - np.mean(values)) ** 2)) if values else 0.0


@dataclass(frozen=True)
class SeedTest:
    """One seed-aware comparison: Δ (mean of b's seeds minus a's), se = sqrt(seed_var + sentence_var),
    the test's df (the seed σ's; inf when the seed part is 0), the two-sided p (Student's t at df), the
    per-trial seed σ used and whether the rows shared their seeds."""

    delta: float
    se: float
    seed_var: float
    sentence_var: float
    df: float
    p_value: float
    sigma: float
    paired: bool

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The two-sided ``level`` confidence interval of Δ (uncorrected for multiple comparisons)."""
        half = _t_quantile(0.5 + level / 2, self.df) * self.se
        return self.delta - half, self.delta + half


def seed_test(
    a: Sequence[float], b: Sequence[float], sentence_var: float, sigma: float, df: int, paired: bool
) -> SeedTest:
    """Two-sided test of ``mean(b) - mean(a)`` (per-trial scores) with the table's seed σ at ``df``
    (``paired``: the two-way fit's) and ``sentence_var``, the k-independent part of the Δ's variance
    over resampled sentences (:func:`sentence_split`)."""
    delta = float(np.mean(b) - np.mean(a))
    seed_var = sigma**2 * (1 / len(a) + 1 / len(b))
    se = standard_error(sigma, len(a), len(b), sentence_var)
    dof = math.inf if seed_var == 0 else float(df)  # not Welch-Satterthwaite: see the module docstring
    p = float(2 * sc.stdtr(dof, -abs(delta) / se)) if se else float(delta == 0)  # Student's t survival function
    return SeedTest(delta, se, seed_var, sentence_var, dof, p, sigma, paired)


@functools.lru_cache(maxsize=1024)
def _t_quantile(q: float, df: float) -> float:
    """Student's t quantile at ``df`` (the normal one at inf): ``scipy.stats.t.ppf`` without importing scipy.stats."""
    return float(sc.ndtri(q) if math.isinf(df) else sc.stdtrit(df, q))


def standard_error(sigma: float, seeds_a: int, seeds_b: int, sentence_var: float) -> float:
    """SE(k) of a Δ between rows of ``seeds_a`` and ``seeds_b`` seeds: ``sqrt(σ² (1/K_a + 1/K_b) + v0)``,
    ``v0`` the k-independent sentence part (:func:`sentence_split`): each source of variance once."""
    return math.sqrt(sigma**2 * (1 / seeds_a + 1 / seeds_b) + max(sentence_var, 0.0))


def design_df(rows: int, seeds: int, shared: bool, borrowed_df: int = 0) -> int:
    """Degrees of freedom of the seed σ a table of ``rows`` rows with ``seeds`` seeds each would have
    (:func:`fit_seed_noise`): ``(R-1)(k-1)`` from the row + seed fit where the rows share their seed values
    (``shared``) and :func:`use_paired` takes it, else ``R(k-1)`` within rows, plus ``borrowed_df`` from
    another source's seeds (:meth:`SeedNoise.borrowing`)."""
    unpaired, paired = rows * (seeds - 1) + borrowed_df, (rows - 1) * (seeds - 1)
    return paired if shared and use_paired(paired, unpaired) else unpaired


def _power_at(nc: float, df: float, alpha: float) -> float:
    """Two-sided power ``P(T' > c) + P(T' < -c)`` of T' ~ noncentral t(ν = ``df``, ``nc`` >= 0), ``c = t(1-α/2, ν)``
    (Owen 1968; normal where ν = inf), as ``scipy.stats.nct`` computes it without importing scipy.stats. Where
    nctdtr returns nan (far tails, nc - c > 24) the upper tail is 1 and the lower 0: off by < 1e-6 at α >= 0.001.
    An α outside (0, 1] is refused (at 0 no noncentrality has power: :func:`_noncentrality` would search forever)."""
    if not 0 < alpha <= 1:
        raise ReportError(f"alpha={alpha:g}: a significance level is above 0 and at most 1")
    crit = _t_quantile(1 - alpha / 2, df)
    if math.isinf(df):
        return float(sc.ndtr(nc - crit) + sc.ndtr(-crit - nc))
    upper = 1.0 - float(sc.nctdtr(df, nc, crit))
    lower = float(sc.nctdtr(df, nc, -crit))
    upper = upper if math.isfinite(upper) else float(nc > crit)
    lower = lower if math.isfinite(lower) else 0.0
    return min(upper + lower, 1.0)


@functools.lru_cache(maxsize=1024)
def _noncentrality(df: float, alpha: float, power: float) -> float:
    """The smallest noncentrality at which :func:`_power_at` reaches ``power`` (bisection; the power
    rises with nc)."""
    lo, hi = 0.0, float(sc.ndtri(1 - alpha / 2) + sc.ndtri(power)) + 1.0
    while _power_at(hi, df, alpha) < power:
        lo, hi = hi, 2 * hi
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _power_at(mid, df, alpha) >= power else (mid, hi)
    return hi


def power(
    delta: float, sigma: float, df: float, seeds_a: int, seeds_b: int, sentence_var: float, alpha: float
) -> float:
    """Predicted power of the two-sided seed-aware test for a true ``delta``: the noncentral t at
    ``df`` with noncentrality ``|delta| / SE(k)`` (:func:`standard_error`; exact when ``v0`` = 0; with
    ``v0`` > 0 the test, whose v0 part of the SE is fixed, has a little more)."""
    se = standard_error(sigma, seeds_a, seeds_b, sentence_var)
    if se == 0:
        return 1.0 if delta else alpha
    return _power_at(abs(delta) / se, max(float(df), 1.0) if sigma else math.inf, alpha)  # as seed_test's df


def detectable(sigma: float, df: int, seeds: int, sentence_var: float, alpha: float, power: float = POWER) -> float:
    """Minimum detectable |Δ| of a two-sided test at ``alpha`` with ``power`` between two rows of ``seeds``
    seeds: ``nc* · SE(k)``, nc* the noncentrality at which the noncentral t at ``df`` (inf where σ is 0) has that power
    (:func:`power`'s model; ``sentence_var``: :func:`sentence_split`). The shortcut ``(t(1-α/2) + t(power)) · SE``
    falls short of ``power``: 78.5% at table3-cpu's 18 df and α/18, 76.6% at 2 df and α 0.05, 67% at 2 df and α/18."""
    se = standard_error(sigma, seeds, seeds, sentence_var)
    return _noncentrality(float(max(df, 1)) if sigma else math.inf, alpha, power) * se  # as seed_test's df


MAX_SEEDS = 1000  # the most seeds per row :func:`seeds_needed` searches


def seeds_needed(
    delta: float,
    sigma: float,
    sentence_var: float,
    alpha: float,
    rows: int,
    shared: bool,
    power: float = POWER,
    max_seeds: int = MAX_SEEDS,
    borrowed_df: int = 0,
) -> Optional[int]:
    """Seeds per row k for a true ``delta`` to be found with ``power`` at ``alpha`` by the table's own test: the
    smallest k >= 2 (>= 1 with ``borrowed_df`` from another source's seeds) at which :func:`power` (SE²(k) =
    2σ²/k + v0, v0 = ``sentence_var``: :func:`sentence_split`) at the df of a table of ``rows`` rows of k seeds
    (:func:`design_df`; ``shared``: the same seed values) reaches ``power``. None when the test set's own variance
    hides an effect that small at any k; ``max_seeds + 1`` when more than ``max_seeds`` would be needed. The search
    starts at the normal limit's k (df = inf), a lower bound; the normal-quantile rule alone is up to 2.5x short
    (for two rows, 2 seeds where the test needs 4 at α 0.05)."""
    v0 = max(sentence_var, 0.0)
    room = (abs(delta) / _noncentrality(math.inf, alpha, power)) ** 2 - v0
    if room <= 0:
        return None
    least = 1 if borrowed_df > 0 else 2
    if sigma == 0:
        return least  # the test's df is inf without seed variance (:func:`seed_test`)
    start = max(math.ceil(2 * sigma**2 / room) - 1, least)  # one below, against rounding
    for k in range(start, max_seeds + 1):
        df = design_df(rows, k, shared, borrowed_df)
        if df > 0 and _power_at(abs(delta) / standard_error(sigma, k, k, v0), df, alpha) >= power:
            return k
    return max_seeds + 1


# --- Comparisons of a table's rows, Holm-corrected (Holm 1979) ---


TESTS = {
    "seeds": "seed-aware t-test (table-pooled training-seed variance + paired bootstrap over test sentences)",
    "bs": "paired bootstrap resampling over test sentences (test-set variance only)",
    "ar": "approximate randomization over test sentences, paired by seed where both rows trained the same seed values, "
    "else shuffled over both rows' trials (test-set variance only)",
}
DEFAULT_TEST = "seeds"
DEFAULT_ALPHA = 0.05
"""The family-wise level of the † mark (``ablate table --alpha``) when none is given."""
DEFAULT_SAMPLES = {"seeds": 2000, "bs": 2000, "ar": 10000}
LEVEL = 0.95  # confidence level of every interval a table shows


@dataclass(frozen=True)
class Comparison:
    """Row ``row`` against row ``reference`` on one test split.

    Attributes:
        p_value: two-sided, uncorrected (nan: not tested, ``note`` says why); p_adjusted: Holm over the table.
        base_bleu, bleu: mean over seeds of the corpus score (BLEU, or ``metric``) of ``reference`` and ``row``.
        seeds: seeds used on each side; test: a key of :data:`TESTS`.
        se, ci: standard error of Δ (seed + sentence parts for ``seeds``, sentence alone otherwise), 95% CI.
        sentence_var: variance of Δ over resampled sentences; sentence_fixed: its k-independent part
            (:func:`sentence_split`), what the seed-aware test adds to the seed σ's.
        sigma, sigma_df, paired: the per-trial seed σ used (None: not estimable), its df, whether seed-paired;
            sigma_floored: whether ``sigma`` is the floor (:func:`floored`).
        per_seed: ``(seed, Δ)`` for every seed value both rows trained with.
    """

    reference: str
    row: str
    split: str
    p_value: float
    base_bleu: float
    bleu: float
    seeds: tuple[int, int]
    p_adjusted: float = math.nan
    test: str = DEFAULT_TEST
    se: float = math.nan
    ci: tuple[float, float] = (math.nan, math.nan)
    sentence_var: float = math.nan
    sentence_fixed: float = math.nan
    sigma: Optional[float] = None
    sigma_df: int = 0
    paired: bool = False
    sigma_floored: bool = False
    per_seed: tuple[tuple[str, float], ...] = ()
    note: str = ""
    metric: str = DEFAULT_METRIC
    scores: Optional[SplitScores] = field(default=None, compare=False, repr=False)
    """The table's scores of the split it was made from (:func:`compare_alone` re-runs it from them)."""

    @property
    def delta(self) -> float:
        return self.bleu - self.base_bleu

    @property
    def tested(self) -> bool:
        return not math.isnan(self.p_value)

    @property
    def sign_flip(self) -> bool:
        """Per-seed Δs disagree in sign (some seeds say better, some worse)."""
        return len({d > 0 for _, d in self.per_seed if d != 0}) > 1

    def significant(self, alpha: float) -> bool:
        return self.tested and self.p_adjusted < alpha

    def turned(self) -> Comparison:
        """``reference`` against ``row``: the same test, its Δ, interval and per-seed Δs of the other sign."""
        per_seed = tuple((s, -d) for s, d in self.per_seed)
        return replace(
            self, reference=self.row, row=self.reference, base_bleu=self.bleu, bleu=self.base_bleu,
            seeds=self.seeds[::-1], ci=(-self.ci[1], -self.ci[0]), per_seed=per_seed,
        )  # fmt: skip


def strictest(alpha: float, comparisons: int) -> str:
    """Holm's strictest level in words: ``alpha/10`` for ten comparisons, ``alpha 0.05`` for one (no correction)."""
    return f"alpha/{comparisons}" if comparisons > 1 else f"alpha {alpha:g}"


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (Holm 1979): step-down, monotone, capped at 1."""
    values = np.asarray(p_values, dtype=np.float64)
    if np.all(values >= 0):  # the loop below, in numpy (a table's hinge notes ask for it once per mark)
        order = np.argsort(values, kind="stable")
        scaled = np.minimum(1.0, (len(values) - np.arange(len(values))) * values[order])
        adjusted = np.empty(len(values))
        adjusted[order] = np.maximum.accumulate(scaled)
        return adjusted.tolist()
    ranked = sorted(range(len(p_values)), key=lambda i: p_values[i])
    m, running, out = len(p_values), 0.0, [1.0] * len(p_values)
    for rank, i in enumerate(ranked):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


# --- One split: every usable trial's statistics, resampled once ---


class SplitScores:
    """Per-sentence statistics, corpus score and bootstrap scores of every trial on one split, built once
    per table (:meth:`of_sweep`; ``rows``: row name -> ``[(seed, (n, k) statistics)]``, ``score``: the
    metric's corpus score of summed statistics), so :meth:`compare` costs a few vector operations;
    ``borrowed``: another source's seeds of the setup, pooled into the seed σ (:meth:`SeedNoise.borrowing`)."""

    def __init__(
        self,
        split: str,
        rows: dict[str, list[tuple[Any, np.ndarray]]],
        samples: int,
        score: Score = bleu_from_stats,
        metric: str = DEFAULT_METRIC,
        borrowed: Optional[BorrowedNoise] = None,
    ):
        self.split, self.rows = split, {r: list(ts) for r, ts in rows.items() if ts}
        self.score, self.metric, self.borrowed = score, metric, borrowed
        sizes = {s.shape[0] for ts in self.rows.values() for _, s in ts}
        if len(sizes) > 1:
            raise ReportError(f"{split}: hypotheses cover different numbers of sentences ({sorted(sizes)})")
        self.bleu = {r: [float(score(s.sum(0))) for _, s in ts] for r, ts in self.rows.items()}
        every = [s for ts in self.rows.values() for _, s in ts]
        boots = iter(Resamples.shared(sizes.pop(), samples).bleu_many(every, score) if sizes else [])
        self.boot = {r: [next(boots) for _ in ts] for r, ts in self.rows.items()}
        self.seeds = {r: [str(seed) for seed, _ in ts] for r, ts in self.rows.items()}
        self._fit()

    def _fit(self) -> None:
        """The table's seed σ and the per-seed part of its trials' bootstrap variance (the lent seeds' where
        no row has two seeds to measure it: counted twice, it left one-seed tables at 3.5% size)."""
        self.noise = fit_seed_noise({r: dict(zip(self.seeds[r], self.bleu[r])) for r in self.bleu}, self.borrowed)
        lent = None if any(len(b) > 1 for b in self.boot.values()) else self.borrowed
        self.per_seed_var = per_seed_sentence_var(self.boot) if lent is None else lent.per_seed_var

    @classmethod
    def of_values(
        cls,
        split: str,
        bleu: dict[str, list[float]],
        boot: dict[str, list[np.ndarray]],
        seeds: dict[str, list[str]],
        borrowed: Optional[BorrowedNoise] = None,
    ) -> SplitScores:
        """A table from per-trial scores alone (row -> per-seed corpus BLEU, (B,) bootstrap BLEU and seed
        values), e.g. for calibration; ``ar`` (which needs the sentence statistics) is not available on it."""
        texts = {r: [str(x) for x in v] for r, v in seeds.items()}
        return cls(split, {}, 0, borrowed=borrowed)._with({}, dict(bleu), dict(boot), texts)

    def _with(self, rows: dict, bleu: dict, boot: dict, seeds: dict) -> SplitScores:
        """A copy holding these per-trial parts (row name -> one entry per trial), its seed σ fitted to them."""
        out = copy.copy(self)
        out.rows, out.bleu, out.boot, out.seeds = rows, bleu, boot, seeds
        out._fit()
        return out

    def _select(self, keep: Mapping[str, tuple[str, Sequence[int]]]) -> SplitScores:
        """A copy whose row ``name`` holds the trials ``indices`` of row ``row``, for each ``name: (row, indices)``."""
        parts = (self.rows, self.bleu, self.boot, self.seeds)
        return self._with(
            *({n: [part[r][i] for i in ix] for n, (r, ix) in keep.items()} if part else {} for part in parts)
        )

    def pair(self, rows: Sequence[Row], samples: int) -> Optional[SplitScores]:
        """The table of ``rows`` alone (what :meth:`of_sweep` makes of them) from this table's statistics,
        scores and resamples, if it holds every usable trial of both with ``samples`` resamples; else None."""
        whole = all(
            r.name in self.boot and len(self.rows.get(r.name, ())) == len(_usable(r.trials, self.split)) for r in rows
        )
        if not whole or any(len(b) != samples for r in rows for b in self.boot[r.name]):
            return None
        return self._select({r.name: (r.name, range(len(self.bleu[r.name]))) for r in rows})

    @classmethod
    def of_sweep(
        cls,
        sweep: Sweep,
        split: str,
        samples: int,
        metric: str = DEFAULT_METRIC,
        borrowed: Optional[BorrowedNoise] = None,
    ) -> SplitScores:
        """Every usable trial of ``sweep`` (the first usable trial's references), scored with ``metric``."""
        scorer, refs = scorer_for(metric, sweep.base.trials), None
        rows: dict[str, list[tuple[Any, np.ndarray]]] = {}
        for row in sweep.rows:
            for t in _usable(row.trials, split):
                refs = refs if refs is not None else t.refs[split]
                if t.refs[split] == refs:
                    sources = _aligned(t.sources.get(split), refs)
                    rows.setdefault(row.name, []).append((t.seed, statistics(scorer, t.hyps[split], refs, sources)))
        return cls(split, rows, samples, scorer.from_statistics, metric, borrowed)

    def relabel(self, row: str, i: int, j: int) -> SplitScores:
        """A copy in which ``row``'s i-th and j-th seeds are two one-seed rows ``row@<seed>`` (its other
        seeds left out), for calibration."""
        keep = {r: (r, range(len(ts))) for r, ts in self.bleu.items() if r != row}
        return self._select(keep | {f"{row}@{self.seeds[row][x]}": (row, [x]) for x in (i, j)})

    def compare(self, reference: str, row: str, test: str = DEFAULT_TEST, trials: int = 0) -> Optional[Comparison]:
        """``row`` against ``reference`` (uncorrected; ``trials``: swaps for ``ar``, 0 the default); None
        when either has no usable trial."""
        if reference not in self.bleu or row not in self.bleu:
            return None
        xa, xb = self.bleu[reference], self.bleu[row]
        deltas = np.mean(self.boot[row], axis=0) - np.mean(self.boot[reference], axis=0)
        observed = float(np.mean(xb) - np.mean(xa))
        estimated, df, paired = self.noise.for_rows(self.seeds[reference], self.seeds[row])
        sigma = floored(estimated, self.per_seed_var)
        v = float(np.var(deltas, ddof=1))
        base = Comparison(
            reference, row, self.split, math.nan, float(np.mean(xa)), float(np.mean(xb)), (len(xa), len(xb)),
            test=test, sentence_var=v, sentence_fixed=sentence_split(v, self.per_seed_var, len(xa), len(xb)),
            sigma=sigma, sigma_df=df, paired=paired, per_seed=self._per_seed(reference, row), metric=self.metric,
            sigma_floored=sigma != estimated,
        )  # fmt: skip
        if test == "seeds":
            if sigma is None:
                return replace(base, note="no seed variance: every row of the table has one seed")
            result = seed_test(xa, xb, base.sentence_fixed, sigma, df, paired)
            return replace(base, p_value=result.p_value, se=result.se, ci=result.interval(LEVEL))
        se = math.sqrt(base.sentence_var)
        half = _t_quantile(0.5 + LEVEL / 2, math.inf) * se
        if test == "bs":
            p = bootstrap_p(deltas, observed)
        else:
            a, b, paired = self._trial_stats(reference, row)
            p = approximate_randomization(a, b, trials or DEFAULT_SAMPLES["ar"], score=self.score, paired=paired)
        return replace(base, p_value=p, se=se, ci=(observed - half, observed + half))

    def _per_seed(self, reference: str, row: str) -> tuple[tuple[str, float], ...]:
        """``(seed, Δ)`` for the seed values both rows trained with, in seed order."""
        base = dict(zip(self.seeds[reference], self.bleu[reference]))
        shared = [(s, x - base[s]) for s, x in zip(self.seeds[row], self.bleu[row]) if s in base]
        return tuple(sorted(shared, key=lambda p: value_order(_number(p[0]))))

    def _trial_stats(self, reference: str, row: str) -> tuple[np.ndarray, np.ndarray, bool]:
        """(K, n, k) statistics of every trial of both rows, and whether they pair: both rows trained the same
        seed values, once each (then ``row``'s in the reference's seed order)."""
        a, b = self.seeds[reference], self.seeds[row]
        paired = len(set(a)) == len(a) and sorted(a) == sorted(b)
        order = [b.index(s) for s in a] if paired else range(len(b))
        return np.stack([s for _, s in self.rows[reference]]), np.stack([self.rows[row][i][1] for i in order]), paired


def _number(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


def _usable(trials: Sequence[Trial], split: str) -> list[Trial]:
    ok = [t for t in trials if split in t.hyps and split in t.refs and len(t.hyps[split]) == len(t.refs[split])]
    return sorted(ok, key=lambda t: (value_order(t.seed), t.name))


def check_alpha(alpha: Any) -> None:
    """Refuse, in one line naming the value given, a significance level that is not a number in (0, 1] (the
    Python API's ``alpha``; ``--alpha`` is typed, but 0 passes its range)."""
    number = isinstance(alpha, (int, float)) and not isinstance(alpha, bool)
    if not number or not 0 < alpha <= 1:
        raise ReportError(f"alpha={alpha!r}: a significance level is a number above 0 and at most 1, e.g. 0.05")


def check_test(test: str, samples: int = 0) -> None:
    """Refuse, in one line, a significance test that does not exist, a negative number of resamples, or one
    resample where the test takes a variance over them (``seeds``, ``bs``)."""
    if test not in TESTS:
        raise ReportError(f"unknown significance test '{test}' (choose from: {', '.join(TESTS)})")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        raise ReportError(f"samples={samples!r}: give a whole number of resamples, or 0 for the default")
    if samples == 1 and test != "ar":  # ar's samples are random swaps; its interval takes the default resamples
        raise ReportError(
            "samples=1: the variance of a Δ needs at least 2 resamples; give 2 or more, or 0 for the default"
        )


def split_scores(
    sweep: Sweep,
    n_samples: int = 0,
    test: str = DEFAULT_TEST,
    metric: str = DEFAULT_METRIC,
    borrowed: Optional[Mapping[str, BorrowedNoise]] = None,
) -> dict[str, SplitScores]:
    """:class:`SplitScores` of every test split with saved hypotheses (``n_samples`` bootstrap
    resamples; for ``ar``, whose samples are swaps, the bootstrap's default), on ``metric``; ``borrowed``:
    split -> another source's seeds pooled into its seed σ (:func:`borrow_noise`)."""
    samples = (n_samples if test != "ar" else 0) or DEFAULT_SAMPLES["bs"]
    borrowed = borrowed or {}
    return {
        split: SplitScores.of_sweep(sweep, split, samples, metric, borrowed.get(split)) for split in test_splits(sweep)
    }


# Config keys in which a --sigma-from source may differ from the table's base: they leave the training alone.
NEUTRAL_KEYS = {
    "train.val_every": "how often the runs validate, which picks the checkpoint tested but not what is trained",
    "train.checkpoint_every": "how often the runs save a checkpoint",
    "eval.max_sentences": "sentences per decoding batch",
}
BUILTIN_KEYS = ("data.builtin_pairs", "data.builtin_eval_pairs")  # read only where data.source is builtin


def borrow_noise(
    sweep: Sweep, source: str, table_sources: Sequence[str] = (), api: Any = None, metric: str = DEFAULT_METRIC
) -> dict[str, BorrowedNoise]:
    """The seed variance of ``source``'s runs (seeds of the table's base configuration from another sweep, e.g.
    results/calibration-cpu) on each test split of ``sweep`` (the table of ``table_sources``), pooled into its
    seed σ (``ablate table --sigma-from``, :meth:`SeedNoise.borrowing`).

    Raises:
        ReportError: in one line, where ``source`` is not >= 2 finished seeds of one configuration, shares a
            folder with the table, differs from its base in a key that changes the training (every key but
            :data:`NEUTRAL_KEYS`), or lacks a split's hypotheses of the same references.
    """
    for table_source in table_sources:
        for mine, theirs in itertools.product(local_folders(table_source), local_folders(source)):
            a, b = mine.resolve(), theirs.resolve()
            if a == b or a in b.parents or b in a.parents:
                raise ReportError(f"--sigma-from {source}: it shares runs with {table_source}; name another sweep")
        if source == table_source:
            raise ReportError(f"--sigma-from {source}: it is the table itself; name another sweep's seeds")
    runs, differs = _seeds_of_the_base(source, sweep.base.trials[0].config, api, metric)
    scorer, out = scorer_for(metric, sweep.base.trials), {}
    for split in test_splits(sweep):
        refs = next(t.refs[split] for r in sweep.rows for t in _usable(r.trials, split))  # what of_sweep scores
        out[split] = _lent(source, runs, split, refs, scorer, differs)
    return out


def check_sigma_from(sigma_from: Optional[str], test: str = DEFAULT_TEST, significance: bool = True) -> None:
    """Refuse ``--sigma-from`` (``sigma_from`` not None) where no seed test runs, in one line naming the flag:
    ``ablate table``, ``plot`` and ``export`` alike, before any work."""
    if sigma_from is not None and test != "seeds":
        raise ReportError("--sigma-from pools training-seed variance for the † test: it needs --test seeds")
    if sigma_from is not None and not significance:
        raise ReportError("--sigma-from pools training-seed variance for the † test: drop --no-significance")


def table_comparisons(
    source: str,
    test: str = DEFAULT_TEST,
    samples: int = 0,
    significance: bool = True,
    metric: str = DEFAULT_METRIC,
    sigma_from: Optional[str] = None,
    api: Any = None,
    sweep: Optional[Sweep] = None,
    alpha: float = 0.05,
) -> tuple[Sweep, list[Comparison]]:
    """The sweep of ``source`` (scored on ``metric``; ``sweep`` where it is already loaded, e.g. from an export's
    copy) and the comparisons whose Δ, CI and † ``ablate table`` prints with these options (``--test``,
    ``--samples``, ``--no-significance``, ``--metric``, ``--sigma-from``); none without significance.
    ``ablate table``, ``plot``, ``report``, ``export`` and ``ablate.plot`` all take theirs from here, so a figure
    draws what the table beside it marks. A bad test or ``sigma_from`` is refused in one line before any work
    (and by :func:`borrow_noise`), as is an ``alpha`` (the level its marks will use) outside (0, 1]."""
    check_alpha(alpha)
    check_test(test, samples)
    check_sigma_from(sigma_from, test, significance)
    if sweep is None:
        sweep = load(source, api, metric)
    if not significance:
        return sweep, []
    borrowed = None if sigma_from is None else borrow_noise(sweep, str(sigma_from), [source], api, metric)
    return sweep, compare(sweep, test=test, n_samples=samples, metric=metric, borrowed=borrowed)


def lent_for_plan(source: str, base: Mapping[str, Any], api: Any = None, metric: str = DEFAULT_METRIC) -> BorrowedNoise:
    """``source``'s seed variance on its first test split, for a sweep not yet run whose base has the flattened
    config ``base`` (``ablate sweep run --dry-run --sigma-from``); the checks of :func:`borrow_noise`."""
    runs, differs = _seeds_of_the_base(source, base, api, metric)
    splits = tested_splits(list(runs))
    if not splits:
        raise ReportError(f"--sigma-from {source}: its runs saved no test hypotheses (hyps/<split>.txt)")
    split = splits[0]
    refs = next((t.refs[split] for t in _usable(runs, split)), [])
    return _lent(source, runs, split, refs, scorer_for(metric, runs), differs)


def _seeds_of_the_base(
    source: str, base: Mapping[str, Any], api: Any, metric: str
) -> tuple[tuple[Trial, ...], tuple[str, ...]]:
    """``source``'s finished runs, if they are seeds of one configuration with the ``base`` config (flattened)
    but for :data:`NEUTRAL_KEYS`, and the neutral keys in which they differ; else ReportError (naming the flag)."""
    try:
        other = load(source, api, metric)
    except ReportError as err:  # "no finished trial among 1": of this source, not of the table's
        raise ReportError(f"--sigma-from {source}: {err}") from None
    if len(other.rows) != 1:
        names = ", ".join(r.name for r in other.rows[:4]) + (", ..." if len(other.rows) > 4 else "")
        raise ReportError(
            f"--sigma-from {source}: it holds {len(other.rows)} configurations ({names}); it takes seeds of one, "
            "the table's base (e.g. a calibration sweep)"
        )
    return other.base.trials, _setup_differences(base, other.base.trials[0].config, source)


def _lent(
    source: str, runs: Sequence[Trial], split: str, refs: Sequence[str], scorer: Any, differs: tuple[str, ...]
) -> BorrowedNoise:
    """The :class:`BorrowedNoise` of ``runs`` on ``split``, scored against ``refs`` (the table's)."""
    usable = _usable(runs, split)
    if len(usable) < 2:
        raise ReportError(
            f"--sigma-from {source}: {len(usable)} of its runs have hypotheses for {split} (hyps/{split}.txt); "
            "a seed σ needs at least 2"
        )
    if any(t.refs[split] != refs for t in usable):
        raise ReportError(f"--sigma-from {source}: its runs scored other references on {split} than the table's")
    stats = [statistics(scorer, t.hyps[split], refs, _aligned(t.sources.get(split), refs)) for t in usable]
    values = [float(scorer.from_statistics(s.sum(0))) for s in stats]  # trials.corpus_score of each
    boots = Resamples.shared(len(refs), DEFAULT_SAMPLES["bs"]).bleu_many(stats, scorer.from_statistics)
    return BorrowedNoise(source, len(values), _ss(values), differs, per_seed_sentence_var({source: boots}))


def _setup_differences(base: Mapping[str, Any], theirs: Mapping[str, Any], source: str) -> tuple[str, ...]:
    """The :data:`NEUTRAL_KEYS` in which ``theirs`` differs from the table's ``base`` config (keys only one
    records are not compared); ReportError naming any other key that differs."""
    keys = sorted(set(base) & set(theirs) - {"seed"})
    if base.get("data.source") != "builtin":
        keys = [k for k in keys if k not in BUILTIN_KEYS]
    differ = [k for k in keys if not _same_value(base[k], theirs[k])]
    training = [k for k in differ if k not in NEUTRAL_KEYS]
    if training:
        shown = "; ".join(f"{k}={theirs[k]!r} there, {base[k]!r} here" for k in training[:4])
        more = f" (and {len(training) - 4} more)" if len(training) > 4 else ""
        raise ReportError(
            f"--sigma-from {source}: its runs are not of the base configuration: {shown}{more}; a seed σ of "
            "another setup does not apply"
        )
    return tuple(differ)


def _aligned(sources: Optional[Sequence[str]], refs: Sequence[str]) -> Optional[Sequence[str]]:
    return sources if sources and len(sources) == len(refs) else None


def compare(
    sweep: Sweep,
    test: str = DEFAULT_TEST,
    n_samples: int = 0,
    plan: Optional[Sequence[tuple[str, str]]] = None,
    metric: str = DEFAULT_METRIC,
    borrowed: Optional[Mapping[str, BorrowedNoise]] = None,
) -> list[Comparison]:
    """The table's comparisons on every test split with saved hypotheses, Holm-adjusted together.

    Args:
        test: a key of :data:`TESTS`.
        n_samples: bootstrap resamples (``seeds``, ``bs``) or random swaps (``ar``); 0 for the default.
        plan: ``(reference row, row)`` name pairs; default :func:`planned_pairs`.
        metric: the metric compared (``bleu``, ``chrf``, ``ter``, a plugin's).
        borrowed: split -> another source's seeds of the setup for the seed σ (:func:`borrow_noise`).
    """
    check_test(test, n_samples)
    if borrowed and test != "seeds":
        raise ReportError(f"--sigma-from pools training-seed variance, which --test {test} does not use")
    plan = planned_pairs(sweep) if plan is None else plan
    return compare_scores(split_scores(sweep, n_samples, test, metric, borrowed).values(), plan, test, n_samples)


def compare_scores(
    splits: Iterable[SplitScores], plan: Sequence[tuple[str, str]], test: str = DEFAULT_TEST, n_samples: int = 0
) -> list[Comparison]:
    """The ``plan``'s comparisons on every one of ``splits``, Holm-adjusted together: what puts a
    † on a table's row (:func:`compare`), and what ``ablate calibrate`` runs on relabelled tables."""
    found = [
        replace(c, scores=scores)
        for scores in splits
        for ref, name in plan
        if (c := scores.compare(ref, name, test, n_samples)) is not None
    ]
    tested = [c for c in found if c.tested]
    adjusted = iter(holm([c.p_value for c in tested]))
    return [replace(c, p_adjusted=next(adjusted)) if c.tested else c for c in found]


def against_base(comparisons: Sequence[Comparison], sweep: Sweep) -> dict[tuple[str, str], Comparison]:
    """``{(row, split): Comparison}`` for the comparisons against the base row; a named pair with the base second
    turned round (:meth:`Comparison.turned`), unless the row is also compared the other way."""
    base = sweep.base.name
    turned = [c.turned() for c in comparisons if c.row == base and c.reference != base]
    return {(c.row, c.split): c for c in [*turned, *comparisons] if c.reference == base}


def test_splits(sweep: Sweep) -> list[str]:
    """Test splits with saved hypotheses (the validation split's are saved too, but not tested)."""
    return tested_splits([t for r in sweep.rows for t in r.trials])


def describe(test: str, n_samples: int) -> dict[str, Any]:
    """Words for the footnote: the test's name and its samples (``ar``'s are reassignments; its CIs bootstrap)."""
    samples, boot = n_samples or DEFAULT_SAMPLES[test], f"{DEFAULT_SAMPLES['bs']} bootstrap samples"
    words = f"{samples} random reassignments (95% CIs: {boot})" if test == "ar" else f"{samples} bootstrap samples"
    return {"name": TESTS[test], "samples": words}


# --- Robustness of a mark: the same comparison with a σ from its own two rows alone ---


@dataclass(frozen=True)
class Hinge:
    """A marked ``comparison`` re-run on its two rows ``alone`` (None: no seed variance of their own), and
    the Holm-adjusted p the table would give it with ``alone``'s p in place of its own."""

    comparison: Comparison
    alone: Optional[Comparison]
    p_adjusted: float

    def holds(self, alpha: float) -> bool:
        return self.alone is not None and self.alone.tested and self.p_adjusted < alpha


def marks_alone(comparisons: Sequence[Comparison], alpha: float, alone: Any) -> list[Hinge]:
    """Every marked comparison (Holm p < ``alpha``) re-run by ``alone(comparison)`` on its two rows by
    themselves (:func:`compare_alone`), the rest of the table's p-values kept in the Holm family: a mark
    that does not hold hinges on the σ the table pooled over its unrelated rows."""
    tested = [c for c in comparisons if c.tested]
    out = []
    for i, c in enumerate(tested):
        if not c.significant(alpha):
            continue
        own = alone(c)
        ps = [x.p_value for x in tested]
        ps[i] = own.p_value if own is not None and own.tested else 1.0
        out.append(Hinge(c, own, holm(ps)[i]))
    return out


def compare_alone(sweep: Sweep, comparison: Comparison, n_samples: int = 0) -> Optional[Comparison]:
    """``comparison`` re-run on a table of its two rows only (the same trials, test and samples)."""
    rows = [r for r in sweep.rows if r.name in (comparison.reference, comparison.row)]
    if len(rows) != 2:
        return None
    rows = sorted(rows, key=lambda r: r.name != comparison.reference)
    samples = n_samples or DEFAULT_SAMPLES["seeds"]
    table = comparison.scores
    scores = table.pair(rows, samples) if table is not None and table.metric == comparison.metric else None
    if scores is None:
        pair = replace(sweep, rows=rows, comparisons=None)
        borrowed = table.borrowed if table is not None else None
        scores = SplitScores.of_sweep(pair, comparison.split, samples, comparison.metric, borrowed)
    return scores.compare(comparison.reference, comparison.row, comparison.test)


@dataclass(frozen=True)
class DeltaCurve:
    """One row's Δ against the base on one validation metric (e.g. ``val/bleu``), per step.

    Attributes:
        steps: (S,) steps at which at least one seed pair has both trials validated.
        mean, low, high: (S,) mean over seed pairs of ``row - base`` and its t interval (nan: one pair).
        pairs: (S,) seed pairs covering each step; seeds: the seed values paired, in seed order.
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
    """Δ against the ``base`` row per step on one history ``metric``: ``curves`` for every row with a step
    covered by a seed pair, in table order, the other non-base rows ``skipped``."""

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
    """Seed-paired Δs of ``row`` minus ``base``: ``(steps, deltas, seeds)``, steps (S,) the union of the paired
    trials' validated steps, deltas (P, S) (nan where a pair's two trials do not both cover the step)."""
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
    """Per column of ``deltas`` (P, S) with nans: ``(mean, low, high, n)``, each (S,), Student's t over the
    column's n finite values, ``mean ± t((1 + level) / 2, n-1) · sd/sqrt(n)``; nan where n < 2."""
    n = np.sum(~np.isnan(deltas), axis=0)
    mean = np.nanmean(deltas, axis=0) if deltas.size else np.zeros(0)
    low, high = np.full(mean.shape, np.nan), np.full(mean.shape, np.nan)
    for j in np.flatnonzero(n > 1):
        values = deltas[:, j][~np.isnan(deltas[:, j])]
        half = _t_quantile(0.5 + level / 2, len(values) - 1) * np.std(values, ddof=1) / math.sqrt(len(values))
        low[j], high[j] = mean[j] - half, mean[j] + half
    return mean, low, high, n


def sign_changes(steps: Iterable[float], mean: Iterable[float]) -> list[float]:
    """Steps at which ``mean`` has the opposite sign to its last earlier nonzero value."""
    out, previous = [], 0.0
    for step, value in zip(steps, mean):
        sign = float(np.sign(value)) if math.isfinite(value) else 0.0
        if sign and previous and sign != previous:
            out.append(float(step))
        previous = sign or previous
    return out


def delta_curves(sweep: Sweep, metric: str = DEV_BLEU.key, level: float = LEVEL) -> BudgetCurves:
    """Every non-base row's Δ against the base per step: seed ``s`` minus the base's seed ``s``
    (:func:`paired_deltas`), mean and t interval over the pairs (:func:`t_interval`)."""
    base = sweep.base
    curves, skipped = [], []
    for row in sweep.rows:
        if row.is_base:
            continue
        steps, deltas, seeds = paired_deltas(base.trials, row.trials, metric)
        unpaired = f"no step that both trials of a seed pair validated ({metric})" if not len(steps) else ""
        if reason := _why_not(base, row, metric) or unpaired:
            skipped.append(Skipped(row.name, reason))
            continue
        mean, low, high, n = t_interval(deltas, level)
        changes = tuple(sign_changes(steps, mean))
        curves.append(DeltaCurve(row.name, metric, steps, mean, low, high, n, seeds, changes))
    return BudgetCurves(metric, base.name, tuple(curves), tuple(skipped))


def late_sign_changes(sweep: Sweep, metric: str = DEV_BLEU.key) -> list[tuple[str, tuple[float, ...]]]:
    """``(row name, steps)`` for each row whose mean Δ changed sign after half of the last step its pairs cover."""
    curves = delta_curves(sweep, metric).curves
    late = [(c.row, tuple(s for s in c.sign_changes if s > c.last_step / 2)) for c in curves]
    return [(row, steps) for row, steps in late if steps]


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
    inside = (grid >= steps.min()) & (grid <= steps.max())
    out[inside] = np.interp(grid[inside], steps, values)
    return out


MIN_CORRELATION_N = 4  # Fisher's standard error 1/sqrt(n - 3) needs n > 3


def binomial_p(k: int, n: int) -> float:
    """P(X >= k) for X ~ Binomial(n, 1/2): how often chance alone agrees in k or more of n signs."""
    if not 0 <= k <= n:
        raise ValueError(f"k={k} must be in [0, n={n}]")
    from scipy import stats as st

    return float(st.binom.sf(k - 1, n, 0.5))


def p_text(p: float) -> str:
    """A p-value to two significant digits (``0.31``, ``0.0039``, ``1``)."""
    return f"{p:.2g}"


NOTHING_SIGNED = "no row has a sign on both sides: nothing to count"


@dataclass(frozen=True)
class SignCount:
    """``agree`` of ``n`` pairs of non-zero changes have the same sign."""

    agree: int
    n: int

    @property
    def p_value(self) -> Optional[float]:
        """One-sided sign-test p-value against chance 1/2; None when nothing was counted."""
        return binomial_p(self.agree, self.n) if self.n else None

    def text(self) -> str:
        """``3 of 4 agree in sign (binomial p = 0.31 against chance 1/2)``."""
        if (p := self.p_value) is None:  # nothing counted
            return NOTHING_SIGNED
        return f"{self.agree} of {self.n} agree in sign (binomial p = {p_text(p)} against chance 1/2)"


def sign_count(pairs: Iterable[tuple[Optional[float], Optional[float]]]) -> SignCount:
    """Count the pairs whose two changes have the same sign; pairs with a 0 or None are left out."""
    signed = [(a > 0, b > 0) for a, b in pairs if a and b]
    return SignCount(sum(x == y for x, y in signed), len(signed))


@dataclass(frozen=True)
class Correlation:
    """Pearson's r over ``n`` pairs and its confidence interval (None where it cannot be computed)."""

    n: int
    r: Optional[float] = None
    low: Optional[float] = None
    high: Optional[float] = None
    level: float = 0.95
    why_not: str = ""

    def text(self) -> str:
        """``Pearson r = 0.42, 95% CI [-0.07, 0.75] (Fisher z), n = 17``, or why there is none."""
        if self.r is None:
            return f"n = {self.n}: {self.why_not}"
        return (
            f"Pearson r = {self.r:.2f}, {self.level:.0%} CI [{self.low:.2f}, {self.high:.2f}] (Fisher z), n = {self.n}"
        )


def pearson(xs: list[float], ys: list[float], level: float = 0.95) -> Correlation:
    """Pearson's r of ``xs`` and ``ys`` (same length) with a Fisher-z interval at ``level``."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} x values but {len(ys)} y values")
    n = len(xs)
    if n < MIN_CORRELATION_N:
        return Correlation(n, level=level, why_not=f"n too small for a correlation (needs {MIN_CORRELATION_N})")
    if len(set(xs)) == 1 or len(set(ys)) == 1:
        return Correlation(n, level=level, why_not="one column is constant, so r is undefined")
    from scipy import stats as st

    r = max(-1.0, min(1.0, float(st.pearsonr(xs, ys).statistic)))
    half = float(sc.ndtri(0.5 + level / 2)) / math.sqrt(n - 3)
    z = math.atanh(r) if abs(r) < 1 else math.copysign(math.inf, r)
    return Correlation(n, r, math.tanh(z - half), math.tanh(z + half), level)


EXACT_LIMIT = 50_000  # most row assignments agreement_test enumerates; above it, DRAWS random ones
DRAWS = 20_000


@dataclass(frozen=True)
class AgreementTest:
    """The sign agreement of two columns of Δs (:func:`agreement_test`): of ``n`` rows with a sign on both
    sides (``paper_up`` of the paper's positive), ``agree`` as measured and ``expected`` when ours are redrawn
    from their noise; the one-sided permutation p (None where the paper's signs are all one way), ``exact``
    when every assignment was enumerated."""

    n: int
    paper_up: int
    agree: int
    expected: float
    p_value: Optional[float]
    exact: bool = True
    noise: bool = True
    """False where no Δ of ours had an SE: the statistic is the count itself and the test Fisher's exact test."""
    pool: Optional[tuple[int, int]] = None
    """``(rows, paper's up)`` of every row with a sign, where the count is over those clearing noise and the null
    reassigns them all (``agreement_test(min_delta=...)``)."""

    def text(self) -> str:
        """``10 of 17 agree in sign (9.5 expected from our noise; permutation p = 0.081, margins 2 up : 15 down kept)``."""
        if not self.n:
            return NOTHING_SIGNED
        head = f"{self.agree} of {self.n} agree in sign"
        if self.p_value is None:
            way = "up" if self.paper_up else "down"
            return (
                f"{head}; not testable: every paper Δ here is {way}, so with both sign margins kept every "
                f"assignment of our rows agrees equally often (the count is only how many of ours are {way})"
            )
        how = "" if self.exact else f", {DRAWS:,} random assignments"
        margins = f"margins kept: paper {self.paper_up} up : {self.n - self.paper_up} down"
        if self.pool is not None:  # the count is over a selection, made again in each assignment of all rows
            rows, ups = self.pool
            how += f" of all {rows} rows with a sign, the rows clearing noise selected in each"
            margins = f"margins kept: paper {ups} up : {rows - ups} down"
        if not self.noise:
            return f"{head} (Fisher's exact p = {p_text(self.p_value)}{how}, one-sided, {margins})"
        return f"{head} ({self.expected:.1f} expected from our noise; permutation p = {p_text(self.p_value)}{how}, {margins})"


def agreement_test(
    paper: Sequence[float],
    ours: Sequence[float],
    ses: Sequence[Optional[float]],
    seed: int = 0,
    min_delta: Optional[float] = None,
) -> AgreementTest:
    """Do our Δs take the paper's signs more often than rows assigned at random would?

    The statistic is the expected number of rows agreeing in sign when our Δs are redrawn from their
    noise, ``T = sum_i Φ(±Δ_i / SE_i)`` (exact by linearity of expectation, though a seed bootstrap's
    draws share the base's error; a row without SE counts 0/1, and with no SE at all this is Fisher's
    exact test of the 2 x 2 table of signs, one-sided). The null reassigns our rows (each with its SE)
    to the paper's, keeping both sign margins: every assignment up to :data:`EXACT_LIMIT`, else
    :data:`DRAWS` seeded random ones. Unlike a fair coin per row (:class:`SignCount`), whose p swings
    when our base moves every Δ at once (table3-cpu: 0.93 to 0.025 for ±1 SE), p hardly moves.

    Args:
        paper, ours: the two columns of Δs; rows with a 0 on either side have no sign and are left out.
        ses: the standard error of each of our Δs (None: unknown).
        min_delta: count only the rows where either side clears its own noise (paper |Δ| >= ``min_delta``, or
            ours >= its SE). Which rows those are depends on how rows pair, so the null reassigns our rows over
            every row with a sign and selects again in each of :data:`DRAWS` seeded random assignments.
    """
    rows = [(p, o, s) for p, o, s in zip(paper, ours, ses) if p and o]
    if min_delta is not None and not any(s is not None for _, _, s in rows):  # selected by the paper's side alone
        rows, min_delta = [r for r in rows if abs(r[0]) >= min_delta], None
    n = len(rows)
    up = np.array([p > 0 for p, _, _ in rows], dtype=bool)
    # q[i]: P(our i-th Δ, redrawn, is > 0)
    q = np.array([(1.0 if o > 0 else 0.0) if not s else float(sc.ndtr(o / s)) for _, o, s in rows])
    n_up = int(up.sum())
    noise = any(s for _, _, s in rows)
    big = np.array([min_delta is None or abs(p) >= min_delta for p, _, _ in rows], dtype=bool)
    clears = np.array([s is not None and abs(o) >= s for _, o, s in rows], dtype=bool)
    chosen = big | clears  # every row without min_delta
    agree = sum((p > 0) == (o > 0) for (p, o, _), c in zip(rows, chosen) if c)
    expected = float(np.sum(np.where(up, q, 1 - q)[chosen]))
    if n_up in (0, n):
        return AgreementTest(int(chosen.sum()), int(up[chosen].sum()), agree, expected, None, noise=noise)
    if min_delta is not None:
        # The rows selected change with the assignment, and with them their number, so the statistic is the
        # expected count agreeing minus disagreeing, sum(2 P(agree) - 1) over the selected (for a fixed
        # selection a function of the expected count, so the same test).
        def statistic(order: np.ndarray) -> np.ndarray:  # our row on each paper row: (..., n) -> (...)
            agreeing = np.where(up, 2 * q[order] - 1, 1 - 2 * q[order])
            return np.sum(np.where(big | clears[order], agreeing, 0.0), axis=-1)

        null = statistic(np.argsort(np.random.default_rng(seed).random((DRAWS, n)), axis=1))
        p = (int(np.sum(null >= statistic(np.arange(n)) - 1e-9)) + 1) / (DRAWS + 1)
        return AgreementTest(int(chosen.sum()), int(up[chosen].sum()), agree, expected, p, False, noise, (n, n_up))
    # T of an assignment = (n - n_up) - sum(q) + 2 * (sum of q over the rows landing on the paper's up rows)
    m = min(n_up, n - n_up)
    exact = comb(n, m) <= EXACT_LIMIT
    if exact:
        sums = np.array([q[list(c)].sum() for c in itertools.combinations(range(n), m)])
    else:
        rng = np.random.default_rng(seed)
        sums = np.array([q[rng.permutation(n)[:m]].sum() for _ in range(DRAWS)])
    up_sums = sums if m == n_up else q.sum() - sums
    null = (n - n_up) - q.sum() + 2 * up_sums
    hits = int(np.sum(null >= expected - 1e-9))
    p = hits / len(null) if exact else (hits + 1) / (len(null) + 1)
    return AgreementTest(n, n_up, agree, expected, p, exact, noise)
