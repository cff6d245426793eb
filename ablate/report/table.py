"""The paper-style layout, after Table 3 of Vaswani et al. (2017), independent of format.

The base row comes first and shows every varying hyperparameter; each other row shows only
what it changes (a blank cell means "same as base"), grouped by ablation. Metric columns
follow: validation perplexity, validation BLEU, test BLEU on every test split, parameters
(millions) and training tokens/s, each as mean ± std over seeds, the best mean of a column
marked, and test BLEU marked † where it differs significantly from the base.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ablate.report.aggregate import Stat, Sweep
from ablate.report.records import Trial
from ablate.report.significance import TESTS, Comparison

MARK = "†"
# Paper symbols for the hyperparameters of Table 3; other keys use their shortest unique suffix.
PAPER_LABELS = {
    "model.layers": "N", "model.d_model": "d_model", "model.d_ff": "d_ff", "model.heads": "h",
    "model.d_k": "d_k", "model.d_v": "d_v", "model.dropout": "P_drop",
    "train.label_smoothing": "eps_ls", "train.max_steps": "steps", "model.positions": "positions",
    "model.attention.score": "score", "model.attention.scale": "scale",
}


@dataclass(frozen=True)
class Column:
    """A metric column.

    Attributes:
        key: the summary metric, e.g. ``val/ppl`` or ``test_test_2016_flickr/bleu``.
        label: header text.
        decimals: digits after the point in every text format.
        scale: factor applied to values before display and export (1e-6 for parameters).
        higher_better: which end of the column is best.
        split: the test split whose hypotheses the significance test compares, if any.
        show_std: print ``± std`` in text formats (not for parameter counts, fixed per row).
    """

    key: str
    label: str
    decimals: int
    scale: float = 1.0
    higher_better: bool = True
    split: Optional[str] = None
    show_std: bool = True


@dataclass(frozen=True)
class Cell:
    """One metric cell: the scaled statistic, whether it is the column's best, and its p-value."""

    stat: Optional[Stat]
    best: bool = False
    p_value: Optional[float] = None
    mark: str = ""


@dataclass(frozen=True)
class TableRow:
    """One rendered row.

    Attributes:
        group: the group label, set on the first row of each group only (``base``, ``A``, ...).
        name: the row's name (variant, or what it changes).
        settings: display text per hyperparameter column; None where equal to the base.
        values: the row's raw value per hyperparameter column (never blanked).
        cells: one per metric column.
        n: finished seeds in the row.
        new_group: first row of a group (formats draw a rule above it).
    """

    group: str
    name: str
    settings: list[Optional[str]]
    values: list[Any]
    cells: list[Cell]
    n: int
    new_group: bool


@dataclass(frozen=True)
class Unfinished:
    """A trial left out of the table (failed, interrupted, running) and why."""

    name: str
    who: str
    status: str
    reason: str

    def __str__(self) -> str:
        detail = f" ({self.who})" if self.who else ""
        return f"{self.name}{detail}: {self.status} - {self.reason}"


@dataclass(frozen=True)
class Table:
    """The whole table, ready for any format."""

    title: str
    keys: list[str]
    labels: list[str]
    columns: list[Column]
    rows: list[TableRow]
    unfinished: list[Unfinished]
    footnotes: list[str]
    show_names: bool


def show_value(value: Any) -> str:
    """Config value as table text: ``-`` for unset, ``true``/``false`` for booleans."""
    if value is None or value == "<unset>":
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return ",".join(show_value(v) for v in value)
    return str(value)


def key_labels(keys: list[str]) -> list[str]:
    """Header per dotted key: the paper symbol, else the shortest suffix unique among ``keys``."""
    labels = []
    for key in keys:
        if key in PAPER_LABELS:
            labels.append(PAPER_LABELS[key])
            continue
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            label = ".".join(parts[-n:])
            if sum(k.endswith("." + label) or k == label for k in keys) == 1:
                break
        labels.append(label)
    return labels


def metric_columns(sweep: Sweep, comparisons: dict[tuple[str, str], Comparison]) -> list[Column]:
    """The metric columns that at least one row reports, in Table 3 order."""
    present = {m for r in sweep.rows for m in r.stats}
    hyp_splits = sorted({s for (_, s) in comparisons})
    cols = [Column("val/ppl", "PPL (val)", 2, higher_better=False), Column("val/bleu", "BLEU (val)", 2)]
    splits = sweep.test_splits
    if splits:
        cols += [Column(f"test_{s}/bleu", f"BLEU ({s})", 2, split=s) for s in splits]
    else:
        only = hyp_splits[0] if len(hyp_splits) == 1 else None
        cols.append(Column("test/bleu", "BLEU (test)", 2, split=only))
    cols += [Column("params", "Params (M)", 2, scale=1e-6, higher_better=False, show_std=False),
             Column("train/tokens_per_sec", "Tokens/s (train)", 0)]
    return [c for c in cols if c.key in present]


def _scaled(st: Optional[Stat], scale: float) -> Optional[Stat]:
    if st is None or scale == 1.0:
        return st
    return Stat(st.mean * scale, None if st.std is None else st.std * scale, st.n)


def build_table(sweep: Sweep, comparisons: dict[tuple[str, str], Comparison] | None = None,
                alpha: float = 0.05, test: str = "bs", n_samples: int = 0) -> Table:
    """Lay out ``sweep`` as a paper-style table.

    Args:
        sweep: aggregated rows (base first).
        comparisons: ``{(row name, split): Comparison}`` from :func:`significance.compare`;
            None or empty when significance was not computed.
        alpha: significance level for the † mark.
        test, n_samples: how the comparisons were made (for the footnote).
    """
    comparisons = comparisons or {}
    columns = metric_columns(sweep, comparisons)
    best = {}
    for col in columns:
        means = [r.stats[col.key].mean for r in sweep.rows if col.key in r.stats]
        best[col.key] = max(means) if col.higher_better else min(means)
    rows, previous, labels = [], None, key_labels(sweep.keys)
    for row in sweep.rows:
        cells = []
        for col in columns:
            st = row.stats.get(col.key)
            comp = comparisons.get((row.name, col.split)) if col.split else None
            p = comp.p_value if comp else None
            cells.append(Cell(_scaled(st, col.scale), st is not None and st.mean == best[col.key], p,
                              MARK if p is not None and p < alpha else ""))
        settings = [show_value(row.settings[k]) if row.is_base or k in row.changed else None for k in sweep.keys]
        new_group = row.group != previous
        values = [row.settings[k] for k in sweep.keys]
        label = row.group
        if row.changed and row.group == "+".join(row.changed):  # grouped by the keys it changes
            label = "+".join(labels[sweep.keys.index(k)] for k in row.changed)
        rows.append(TableRow(label if new_group else "", row.name, settings, values, cells, len(row.trials),
                             new_group))
        previous = row.group
    return Table(
        title=f"Ablation: {sweep.name}" if sweep.name else "Ablation",
        keys=list(sweep.keys), labels=labels, columns=columns, rows=rows,
        unfinished=[_unfinished(t) for t in sorted(sweep.unfinished, key=lambda t: t.name)],
        footnotes=_footnotes(sweep, columns, comparisons, alpha, test, n_samples),
        show_names=sweep.uses_variants,
    )


def _unfinished(trial: Trial) -> Unfinished:
    who = [f"variant {trial.variant}"] if trial.variant else []
    if trial.seed is not None:
        who.append(f"seed {trial.seed}")
    reason = trial.error or {"running": "still running", "interrupted": "interrupted"}.get(
        trial.status, "no reason recorded")
    return Unfinished(trial.name, ", ".join(who), trial.status, " ".join(str(reason).split()))


def _footnotes(sweep: Sweep, columns: list[Column], comparisons: dict, alpha: float, test: str,
               n_samples: int) -> list[str]:
    notes = ["Cells: mean ± sample std over seeds (n = seeds); best mean per column in bold; "
             "blank hyperparameter = same as base."]
    tested = sorted({s for (_, s) in comparisons})
    if tested:
        samples = n_samples or (1000 if test == "bs" else 10000)
        notes.append(
            f"{MARK} p < {alpha:g} against the base row ({sweep.base.name}) on {', '.join(tested)}: two-sided "
            f"sacreBLEU {TESTS[test]} ({samples} samples) on hypotheses of seed-paired runs, "
            f"concatenated over seeds against repeated references."
        )
    elif any(c.split for c in columns):
        notes.append("No saved hypotheses: significance against the base was not tested.")
    for sig in sweep.signatures:
        notes.append(f"sacreBLEU: {sig}")
    return notes

