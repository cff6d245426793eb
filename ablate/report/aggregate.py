"""Group trials into table rows and aggregate their seeds.

A *row* is one configuration: a named variant (``"A-heads1"``) when the sweep uses them,
otherwise one combination of the sweep's varying non-seed parameters. The seeds of a row
are aggregated as mean, sample standard deviation (ddof=1; undefined for one seed) and n.

The *base* row is the one the sweep declares: its ``base`` parameter (:mod:`ablate.sweep.spec`),
else the variant named ``base``, else the one variant that applies no overrides (a bare name).
Otherwise it is the configuration that differs from all others in the fewest keys (a
one-at-a-time sweep's base); a tie there is broken, in a grid without variants, by ablate's
defaults, and a tie left is an error that names the fix (declare ``base``). Other rows are grouped by ablation: the variant-name prefix
(``"A"`` of ``"A-heads1"``, after Table 3 of Vaswani et al., 2017) or the keys they change
from the base. Hyperparameter columns follow Table 3's order (N, d_model, d_ff, h, d_k, d_v,
P_drop, eps_ls), then any other varying key alphabetically. Table 3's columns are always shown
(the base row states the whole model), and every value is the one the run used: where a config
leaves it implicit (``model.d_k: null`` means d_model / h), the trial's ``resolved`` value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from ablate.record import DEV_BLEU, TEST_BLEU
from ablate.report.records import ReportError, Trial
from ablate.report.validation import cell_disagreements, check_one_config, check_trials, distinct_seeds

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


def column_order(key: str) -> tuple:
    """Sort key of a hyperparameter column: Table 3's order first, then alphabetical."""
    return (PAPER_ORDER.index(key), "") if key in PAPER_ORDER else (len(PAPER_ORDER), key)


@dataclass(frozen=True)
class Stat:
    """Mean, sample standard deviation (None for n=1) and count of one metric over seeds."""

    mean: float
    std: Optional[float]
    n: int


def stat(values: Sequence[float]) -> Optional[Stat]:
    """Aggregate seed values; None when there are none (NaNs are dropped)."""
    vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not vals:
        return None
    std = float(np.std(vals, ddof=1)) if len(vals) > 1 else None
    return Stat(float(np.mean(vals)), std, len(vals))


@dataclass(frozen=True)
class Row:
    """One configuration of the sweep and its aggregated seeds.

    Attributes:
        name: the variant name, or ``key=value`` of what the row changes from the base.
        group: ablation group label (``"A"``, or the dotted keys changed, joined by ``+``).
        settings: every varying hyperparameter's value in this row.
        changed: the keys whose value differs from the base row (empty for the base).
        trials: the finished trials (one per seed).
        stats: metric name -> :class:`Stat` over ``trials``.
        is_base: True for the base row.
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
        name: the sweep (or W&B group) name, if known.
        keys: the varying hyperparameters shown as columns, dotted, in column order.
        rows: table rows, base first, then grouped by ablation.
        unfinished: failed, interrupted, running, pending, invalid and excluded trials, listed under the table.
        uses_variants: rows are named variants rather than parameter combinations.
        comparisons: the sweep's named comparisons ``[(key, values or None)]``, or None.
        disagreements: trials whose summary's test BLEU is not their hypotheses' (see
            :func:`ablate.report.validation.cell_disagreements`), one line each.
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
        found = {s for r in self.rows for m in r.stats if (s := TEST_BLEU.split_of(m)) is not None}
        return sorted(found)

    @property
    def signatures(self) -> list[str]:
        return sorted({t.signature for r in self.rows for t in r.trials if t.signature})


def value_order(value: Any) -> tuple:
    """Sort key for mixed config values: unset < numbers/bools < strings."""
    if value is None or value == _MISSING:
        return (0, 0.0, "")
    if isinstance(value, (bool, int, float)):
        return (1, float(value), "")
    return (2, 0.0, str(value))


def aggregate(trials: Sequence[Trial]) -> Sweep:
    """Rows of the table from the trials of one sweep.

    Trials go through :mod:`ablate.report.validation` first: those a cell or the † test could not
    use, and a seed's second run in a row, are left out and listed with the reason.

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
    candidates = _candidate_keys(done)
    groups: dict[Any, list[Trial]] = {}
    for t in done:
        ident = t.variant if uses_variants and t.variant else tuple(t.config.get(k, _MISSING) for k in candidates)
        groups.setdefault(ident, []).append(t)
    for ident, ts in groups.items():
        label = ident if isinstance(ident, str) else ", ".join(f"{k}={_show(v)}" for k, v in zip(candidates, ident))
        check_one_config(label or BASE, ts)
        groups[ident], repeats = distinct_seeds(label or BASE, ts)
        unfinished += repeats
    declared = {ident: _row_config(ts) for ident, ts in groups.items()}
    configs = {ident: _with_resolved(declared[ident], ts) for ident, ts in groups.items()}
    keys = sorted(
        (
            k
            for k in set().union(*(c.keys() for c in configs.values()))
            if len({value_order(c.get(k, _MISSING)) for c in configs.values()}) > 1
            or (k in TABLE3 and all(k in c for c in configs.values()))
        ),
        key=column_order,
    )
    keys = [
        k
        for k in keys
        if not (
            k in ALIASES
            and ALIASES[k] in keys
            and all(
                value_order(c.get(k, _MISSING)) == value_order(c.get(ALIASES[k], _MISSING)) for c in configs.values()
            )
        )
    ]
    settings = {ident: {k: configs[ident].get(k, _MISSING) for k in keys} for ident in groups}

    order = sorted(groups, key=_ident_order)
    base_ident = _base_ident(order, groups, configs, settings, keys, candidates, uses_variants)
    base = settings[base_ident]
    rows = []
    for ident in order:
        s = settings[ident]
        changed = tuple(k for k in keys if value_order(s[k]) != value_order(base[k]))
        is_base = ident == base_ident
        if uses_variants and isinstance(ident, str):
            name = ident
            group = BASE if is_base else ident.split("-", 1)[0]
        else:  # named by what the sweep varies (d_k follows heads; the columns show it)
            named = [k for k in changed if k in candidates] or list(changed)
            name = BASE if is_base else ", ".join(f"{k}={_show(s[k])}" for k in named)
            group = BASE if is_base else "+".join(named)
        ts = tuple(sorted(groups[ident], key=lambda t: (value_order(t.seed), t.name)))
        metrics = sorted(set().union(*(t.metrics.keys() for t in ts)))
        stats = {m: st for m in metrics if (st := stat([t.metrics.get(m) for t in ts])) is not None}
        rows.append(Row(name, group, s, changed, ts, stats, is_base, declared[ident]))
    rows.sort(key=lambda r: _row_order(r, keys, uses_variants))
    name = next((t.sweep for t in trials if t.sweep), None)
    notes = cell_disagreements([(r.name, r.trials) for r in rows])
    return Sweep(name, keys, rows, unfinished, uses_variants, _comparisons(trials), notes)


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
    """``config`` with each implicit value (unset, ``auto``) replaced by the one the runs used,
    where every seed used the same."""
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


def _candidate_keys(done: Sequence[Trial]) -> list[str]:
    """Keys that define a configuration: the sweep's parameters, else every differing key."""
    declared = sorted({k for t in done for k in t.params if k != "seed"})
    if declared:
        return declared
    every = set().union(*(t.config.keys() for t in done)) - {"seed"}
    return sorted(k for k in every if len({value_order(t.config.get(k, _MISSING)) for t in done}) > 1)


def _row_config(trials: Sequence[Trial]) -> dict[str, Any]:
    """The config keys shared by every seed of a row (keys that vary across seeds are dropped)."""
    first = trials[0].config
    return {
        k: v
        for k, v in first.items()
        if k != "seed" and all(value_order(t.config.get(k, _MISSING)) == value_order(v) for t in trials)
    }


def _ident_order(ident: Any) -> tuple:
    """Variant names alphabetically, then parameter combinations by value."""
    if isinstance(ident, str):
        return (0, ident, ())
    return (1, "", tuple(value_order(v) for v in ident))


def _base_ident(
    order: list[Any],
    groups: dict[Any, list[Trial]],
    configs: dict[Any, dict[str, Any]],
    settings: dict[Any, dict[str, Any]],
    keys: list[str],
    candidates: list[str],
    uses_variants: bool,
) -> Any:
    """The base row, as the sweep declares it: its ``base`` parameter, else the variant named
    ``base``, else the one variant that applies no overrides (a bare name); else inferred, as the
    row that differs from the others in the fewest keys. A tie there is broken, in a grid without
    variants, by ablate's defaults (the point that keeps most of them); a tie left is an error.

    Raises:
        ReportError: the declared base is not a row, or the base is ambiguous (naming the fix).
    """
    trials = [t for i in order for t in groups[i]]
    declared = next((t.declared_base for t in trials if t.declared_base is not None), None)
    if declared is not None:
        return _declared_base(declared, order, configs, uses_variants)
    if uses_variants and BASE in settings:
        return BASE
    bare = [i for i in order if isinstance(i, str) and all(t.bare_variant for t in groups[i])]
    if uses_variants and len(bare) == 1:
        return bare[0]

    def others(a: Any) -> int:
        return sum(value_order(settings[a][k]) != value_order(settings[b][k]) for b in order for k in keys)

    fewest = min(others(a) for a in order)
    tied = [a for a in order if others(a) == fewest]
    if len(tied) > 1 and not uses_variants:
        from ablate.config import Config, flatten, to_dict

        defaults = flatten(to_dict(Config()))

        def changed(a: Any) -> int:
            return sum(k in defaults and value_order(settings[a][k]) != value_order(defaults[k]) for k in keys)

        least = min(changed(a) for a in tied)
        tied = [a for a in tied if changed(a) == least]
    if len(tied) == 1:
        return tied[0]
    labels = [_label(i, candidates) for i in tied]
    example = tied[0] if isinstance(tied[0], str) else "{" + _label(tied[0], candidates, sep=": ") + "}"
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


def _declared_base(declared: Any, order: list[Any], configs: dict[Any, dict[str, Any]], uses_variants: bool) -> Any:
    """The row the sweep's ``base`` parameter names: a variant, or the grid point with its values."""
    if uses_variants and isinstance(declared, str):
        if declared in order:
            return declared
        rows = ", ".join(str(i) for i in order if isinstance(i, str))
        raise ReportError(f"the sweep's base '{declared}' is not a row of this table (its rows: {rows})")
    if isinstance(declared, dict) and not uses_variants:
        from ablate.config import flatten

        wanted = flatten(declared)
        match = [
            i
            for i in order
            if all(value_order(configs[i].get(k, _MISSING)) == value_order(v) for k, v in wanted.items())
        ]
        if len(match) == 1:
            return match[0]
        found = "no row" if not match else f"{len(match)} rows"
        raise ReportError(f"the sweep's base {declared} matches {found} of this table; name every varying key's value")
    kind = "a variant's name" if uses_variants else "a mapping of the grid's keys to the base point's values"
    raise ReportError(f"the sweep's base {declared!r} must be {kind}")


def _row_order(row: Row, keys: list[str], uses_variants: bool) -> tuple:
    """Base first; groups by name (variants) or by the keys changed; within a group by the
    columns changed, then by their values."""
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
    """Mean and standard deviation of a validation metric over the row's seeds, per step.

    Each seed's history is linearly interpolated onto the union of all seeds' steps within
    its own step range (no extrapolation), so seeds validated at different steps still align.

    Returns:
        ``(steps, mean, std)``, each of shape (S,); std is 0 where one seed covers a step.
    """
    series = []
    for t in row.trials:
        pts = [(h["step"], h[metric]) for h in t.history if h.get(metric) is not None]
        if pts:
            series.append((np.array([p[0] for p in pts], float), np.array([p[1] for p in pts], float)))
    if not series:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    steps = np.unique(np.concatenate([s for s, _ in series]))
    grid = np.full((len(series), len(steps)), np.nan)
    for i, (s, v) in enumerate(series):
        inside = (steps >= s.min()) & (steps <= s.max())
        grid[i, inside] = np.interp(steps[inside], s, v)
    count = np.sum(~np.isnan(grid), axis=0)
    filled = np.where(np.isnan(grid), 0.0, grid)
    mean = filled.sum(axis=0) / count
    sq = np.where(np.isnan(grid), 0.0, (grid - mean) ** 2).sum(axis=0)
    std = np.sqrt(np.divide(sq, count - 1, out=np.zeros_like(sq), where=count > 1))
    return steps, mean, std
