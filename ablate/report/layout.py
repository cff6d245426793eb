"""The layout + notes layer: the paper-style :class:`Table` (after Table 3 of Vaswani et al., 2017) and every footnote.

The base row shows every Table 3 hyperparameter and every varying one; each other row only what it changes,
grouped by ablation. The metric columns are :data:`COLUMNS` filtered to what the rows report, each mean ± std
over seeds, the best mean marked, test BLEU marked † where it differs from the base after Holm. The speed is
tokens per CPU-second where every run trained on a CPU and recorded its CPU time (wall-clock on a shared CPU
swings with the load), else wall-clock tokens/s. The footnotes say what the table may claim.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Sequence

import numpy as np

from ablate.errors import did_you_mean
from ablate.metrics import MetricScorer, get_scorer
from ablate.metrics.scorers import bleu_from_stats
from ablate.record import (
    DEV_BLEU,
    DEV_CHRF,
    DEV_PPL,
    PARAMS,
    STEPS,
    TEST_BLEU,
    TEST_CHRF,
    TESTED_STEP,
    TOKENS_PER_CPU_SEC,
    TOKENS_PER_SEC,
    TRAIN_CPU_SECONDS,
    TRAIN_TOKENS,
    WALL_TIME,
    Metric,
    RecordError,
    RunStatus,
)
from ablate.report.stats import (
    DEFAULT_TEST,
    MAX_SEEDS,
    NEUTRAL_KEYS,
    BorrowedNoise,
    Comparison,
    Hinge,
    Stat,
    Sweep,
    against_base,
    compare_alone,
    describe,
    describe_plan,
    detectable,
    late_sign_changes,
    marks_alone,
    not_compared,
    seeds_needed,
    sentence_stats,
    stat,
    strictest,
    test_splits,
)
from ablate.report.trials import DEFAULT_METRIC, ReportError, Trial, bleu_tokenizer, signature_of
from ablate.utils.io import printable

WALL = TOKENS_PER_SEC.key
CPU = TOKENS_PER_CPU_SEC.key
COUNTED = "training tokens (source + target, non-padding; warm-up steps left out, all devices together)"


@dataclass(frozen=True)
class Speed:
    """The speed column of a table: the metric shown, its header and the footnote saying what it measures."""

    key: str
    label: str
    note: str


def training_speed(sweep: Sweep) -> Speed:
    """The speed column for ``sweep``'s finished trials: tokens per CPU-second when every one trained on a CPU
    and recorded it, else wall-clock tokens/s."""
    trials = [t for r in sweep.rows for t in r.trials]
    on = {t.accelerator for t in trials}
    if on == {"cpu"} and all(CPU in t.metrics for t in trials):
        threads = sorted({int(t.metrics["threads"]) for t in trials if "threads" in t.metrics})
        one = f"; every run used {{}} torch thread{'s' if threads[:1] != [1] else ''}"
        note = (
            f"Tokens/CPU-s (train): {COUNTED} per second of process CPU time (user + system, every thread, "
            f"summed over devices) in the training steps, which trained on a CPU. Unlike wall-clock tokens/s it "
            f"leaves out time spent waiting for a core, so other processes' load moves it little (cache and "
            f"memory contention still do); threads' overhead counts in it"
            f"{_alike(threads, one, '; the runs used {} torch threads', 'threads')}."
        )
        return Speed(CPU, COLUMNS["tokens_per_cpu_sec"].label, note)
    label = COLUMNS["tokens_per_sec"].label
    wall = f"Tokens/s (train): wall-clock {COUNTED} per second of the training steps"
    if on == {"gpu"}:
        used = sorted({t.precision for t in trials if t.precision})  # recorded by the GPU runs
        precision = _alike(used, ", in {}", "; the runs trained in {}", "precision")
        return Speed(WALL, label, f"{wall} (each step synchronised on the GPU){precision}.")
    if on == {"cpu"}:
        why = "these runs trained on a CPU but not all recorded their CPU time"
    elif "cpu" in on:
        why = "the runs trained on different devices (CPU and GPU or not recorded)"
    else:
        why = "the runs did not record whether they trained on a CPU or a GPU"
    note = (
        f"{wall}. Wall-clock, so it depends on the machine's load: on a CPU shared with other processes "
        f"it swings with their work ({why}, so tokens per CPU-second cannot be shown)."
    )
    return Speed(WALL, label, note)


def _alike(values: list, one: str, many: str, what: str) -> str:
    """``one`` naming the one value recorded, ``many`` naming several (with a warning to compare rows of equal
    ``what``), or "" for none."""
    if len(values) == 1:
        return one.format(values[0])
    return f"{many.format(', '.join(map(str, values)))}, so compare rows of equal {what}" if values else ""


MARK = "†"
FLIP = "‡"  # per-seed Δs against the base disagree in sign


def significance_notes(
    sweep: Sweep,
    comparisons: Sequence[Comparison],
    alpha: float,
    test: str,
    n_samples: int,
    has_test_column: bool,
    label: str = "BLEU",
) -> list[str]:
    """The significance footnotes of a table; ``label`` names the compared metric."""
    missing = not_compared(sweep)
    skipped = [f"Not compared (named by the sweep's comparisons): {'; '.join(missing)}."] if missing else []
    if not comparisons:
        if test_splits(sweep):
            return [
                "Significance was not tested: no comparison was made (`--no-significance`, or the planned "
                "comparisons pair no two rows of this table), though the trials saved hypotheses."
            ] + skipped
        return (["No saved hypotheses: significance was not tested."] if has_test_column else []) + skipped
    tested = [c for c in comparisons if c.tested]
    if not tested:
        return [
            f"No {MARK} is claimed: every row has one seed, so the training-seed variance cannot be estimated, "
            "and two runs of one configuration with other seeds differ by more than the test set's sampling "
            "error (results/calibration-cpu). Train >= 2 seeds per row; `--test bs` gives the sentence "
            "bootstrap alone, which measures test-set variance only."
        ] + skipped
    how = describe(test, n_samples)
    splits = sorted({c.split for c in tested})
    family = (
        f"family-wise alpha = {alpha:g}: Holm-Bonferroni over all {len(tested)} comparisons of this table"
        if len(tested) > 1
        else f"alpha = {alpha:g}, no correction needed for the table's one comparison"
    )
    named = f" In the cells, {MARK} compares a row with the base; the named comparisons are listed below."
    notes = [
        f"{MARK} significant at {family} ({describe_plan(sweep)}; test splits {', '.join(splits)}). "
        f"Test: two-sided {how['name']}, {how['samples']}; a row's score is the mean over its seeds of corpus {label}."
        + (named if sweep.comparisons else "")
    ]
    if test == "seeds":
        notes += _seed_notes(sweep, tested, alpha, label)
        notes += hinge_notes(sweep, comparisons, alpha, n_samples, label)
    else:
        notes.append(
            "This test measures test-set variance only: two seeds of one configuration differ by more than it "
            "allows for (results/calibration-cpu), so its marks are about these runs, not the configurations; "
            "the default `--test seeds` adds the training-seed variance."
        )
    notes += skipped
    if any(c.sign_flip for c in comparisons if c.reference == sweep.base.name):
        notes.append(f"{FLIP} the per-seed Δs against the base (same seed values) disagree in sign (`--per-seed`).")
    return notes


FITS = {True: "a row + seed fit", False: "the pooled within-row spread"}  # by Comparison.paired


def _sigma_note(sweep: Sweep, groups: list[list[Comparison]], borrowed: Optional[BorrowedNoise], label: str) -> str:
    """The seed σ footnote: the σ of the first group, and of the other one where rows test with two."""
    first = groups[0][0]
    trials = sum(len(r.trials) for r in sweep.rows)
    fed = first.scores.noise.trials[not first.paired] if first.scores is not None else trials
    paired = "; rows trained with the same seed values are compared seed-paired" if first.paired else ""
    floor = (
        f", floored at the per-seed sentence variance the bootstrap puts inside it (the {first.sigma_df}-df "
        "estimate came out below it)"
        if first.sigma_floored
        else ""
    )
    lent = f"{borrowed.trials} seeds of its base setup from {borrowed.source} (`--sigma-from`)" if borrowed else ""
    pooled = lent if not first.paired else ""
    over = f"the table's {trials} trials" if fed == trials else f"{fed} of the table's {trials} trials"
    over = f"the {pooled}" if fed == 0 and pooled else over + (f" and {pooled}" if pooled else "")
    alone = (
        f"; the table's {trials} trials, one per row, add none"
        if fed == 0
        else f"; a trial alone in its row{' or seed value' if first.paired else ''} adds none"
        if fed < trials
        else ""
    )
    others = ""
    for group in groups[1:]:
        c = group[0]
        rows = ", ".join(
            dict.fromkeys(x.row if x.reference == sweep.base.name else f"{x.row} vs {x.reference}" for x in group)
        )
        with_lent = f" and {lent}" if lent and not c.paired else ""
        others += f"; {c.sigma:.2f} {label} from {FITS[c.paired]}{with_lent} ({c.sigma_df} df) for {rows}"
        others += ", whose two rows were trained with different seed values" if not c.paired else ""
    return (
        f"Seed σ ({first.split}): {first.sigma:.2f} {label} per trial, from {FITS[first.paired]} over {over}"
        f" ({first.sigma_df} df{alone}{paired}){floor}{others}, added to the test-sentence bootstrap variance of "
        f"each Δ; 95% CIs of every Δ in `--format csv` and `ablate plot` (delta_ci.png); each trial's Δ in "
        "`--per-seed`."
    )


def _mde_note(groups: list[list[Comparison]], alpha: float, tests: int, label: str) -> str:
    """The minimum detectable effect at each σ the comparisons are tested with."""
    parts = []
    for group in groups:
        c = group[0]
        assert c.sigma is not None, "a seed test's p-value needs sigma (SplitScores.compare), so a tested one has it"
        k = int(statistics.median(min(x.seeds) for x in group))
        sentence = statistics.median(x.sentence_fixed for x in group)
        mde = detectable(c.sigma, c.sigma_df, k, sentence, alpha / tests)
        loose = detectable(c.sigma, c.sigma_df, k, sentence, alpha)
        parts.append((k, mde, loose, c.sigma))
    if all(mde == 0 for _, mde, _, _ in parts):
        return (
            f"Minimum detectable effect: none to state: the table shows no variance ({label} the same for every seed "
            "of each row, and no Δ moves over resampled test sentences, as when every trial wrote the same hypotheses)."
        )
    k, mde, loose, _ = parts[0]
    level = f"Holm's strictest level (alpha/{tests}), {loose:.2f} uncorrected" if tests > 1 else f"alpha {alpha:g}"
    text = (
        f"Minimum detectable effect at 80% power with {k} seed{'s' * (k != 1)} per row: {mde:.2f} {label} at {level}"
        + (f" at σ {parts[0][3]:.2f}" if len(parts) > 1 else "")
    )
    for k, mde, loose, sigma in parts[1:]:
        text += f"; with σ {sigma:.2f} and {k} seed{'s' * (k != 1)} per row: {mde:.2f} {label}, {loose:.2f} uncorrected"
    return text + "; smaller Δs are within this table's noise."


def _seed_notes(sweep: Sweep, tested: Sequence[Comparison], alpha: float, label: str = "BLEU") -> list[str]:
    split = tested[0].split
    here = [c for c in tested if c.split == split]
    by_sigma: dict[tuple, list[Comparison]] = {}  # as SeedNoise.for_rows picks each pair's σ; the first's first
    for c in here:
        by_sigma.setdefault((c.paired, c.sigma, c.sigma_df), []).append(c)
    groups, first = list(by_sigma.values()), here[0]
    borrowed = first.scores.noise.borrowed if first.scores is not None else None
    notes = [_sigma_note(sweep, groups, borrowed, label)]
    if borrowed is not None:  # what --sigma-from brought to the seed σ, and in which keys its runs differ from the base
        pooling = [", ".join(dict.fromkeys(c.row for c in g)) for g in groups if not g[0].paired]
        own = (
            f"The table's rows share their seed values and the row + seed fit has the df, so that fit is used and the "
            f"{borrowed.trials} seeds of {borrowed.source} (σ {borrowed.sigma:.2f} {label}) are not"
            if not pooling
            else f"{borrowed.source} adds {borrowed.df} df (its {borrowed.trials} seeds: σ {borrowed.sigma:.2f} {label} "
            "alone), pooled under the assumption the table makes of its own rows: one seed σ for the setup"
            + (f"; to the within-row σ of {pooling[0]}, not to the row + seed fit of the rest" if first.paired else "")
        )
        keys = "; ".join(f"{k}: {NEUTRAL_KEYS[k]}" for k in borrowed.differs)
        notes.append(
            own + (f". Its runs differ from the base only in {keys}." if keys else "; its runs have the base's config.")
        )
    notes.append(_mde_note(groups, alpha, len(tested), label))
    unmarked = [c for c in here if not c.significant(alpha)]
    if unmarked:
        fit = first.scores.seeds if first.scores is not None else {r.name: r.seeds for r in sweep.rows}
        rows, shared = len(fit), len({frozenset(map(str, s)) for s in fit.values()}) == 1
        extra = borrowed.df if borrowed is not None else 0
        needs = [
            f"{c.row} ({signed(c.delta)}): {_seeds_text(c, c.sigma or 0.0, alpha / len(tested), rows, shared, extra)}"
            for c in unmarked
        ]
        notes.append(
            f"Seeds per row that a true Δ of the observed size would need (80% power at {strictest(alpha, len(tested))} with that "
            f"many seeds in each of the table's {rows} rows, at the df the σ fit would then have"
            + ("; each row at the σ it is tested with" if len(groups) > 1 else "")
            + "): "
            + "; ".join(needs)
            + "."
        )
    return notes


def _seeds_text(c: Comparison, sigma: float, alpha: float, rows: int, shared: bool, borrowed_df: int = 0) -> str:
    """What :func:`ablate.report.stats.seeds_needed` says for ``c``, in words."""
    n = seeds_needed(c.delta, sigma, c.sentence_fixed, alpha, rows, shared, borrowed_df=borrowed_df)
    if n is None:
        return "none (test-set noise)" if c.sentence_fixed != 0 else "none (a Δ of 0)"
    return f"more than {MAX_SEEDS:,}" if n > MAX_SEEDS else f"{n:,}"


def hinge_notes(
    sweep: Sweep, comparisons: Sequence[Comparison], alpha: float, n_samples: int, label: str = "BLEU"
) -> list[str]:
    """Which marks hinge on the table-pooled σ (:func:`ablate.report.stats.marks_alone`); none for a table of two
    rows, which is its comparisons' two rows. A re-run keeps the ``--sigma-from`` seeds where its fit pools them."""
    hinges = marks_alone(comparisons, alpha, lambda c: compare_alone(sweep, c, n_samples)) if sweep.rows[2:] else []
    if not hinges:
        return []
    weak = [h for h in hinges if not h.holds(alpha)]
    lent = comparisons[0].scores.noise.borrowed if comparisons[0].scores is not None else None

    def lent_too(*hinged: Hinge) -> str:  # the --sigma-from seeds, where these re-runs' σ pools them (not paired)
        pooled = any(h.alone is not None and not h.alone.paired for h in hinged)
        return f" and the {lent.trials} seeds of {lent.source}" if pooled and lent is not None else ""

    if not weak:
        return [
            f"Every {MARK} holds on its own rows: with the seed σ from the two rows' own seeds"
            f"{lent_too(*hinges) or ' alone'} (the rest of the table left out of the fit), each is still "
            "significant after Holm."
        ]
    parts, splits = [], {c.split for c in comparisons}
    for h in weak:
        c, own = h.comparison, h.alone
        where = f"{c.row} vs {c.reference}" if c.reference != sweep.base.name else c.row
        where += f" on {c.split}" if len(splits) > 1 else ""
        if own is None or not own.tested:
            parts.append(f"{where} (Holm p {c.p_adjusted:.2g} here; its two rows have no seed variance of their own)")
        else:
            parts.append(
                f"{where} (Holm p {c.p_adjusted:.2g} here; alone p {own.p_value:.2g}, {h.p_adjusted:.2g} after Holm "
                f"over the table's {len([x for x in comparisons if x.tested])}, with σ {own.sigma:.2f} {label} from its "
                f"own two rows' seeds{lent_too(h)}, {own.sigma_df} df)"
            )
    return [
        f"{MARK} that hinge{'s' if len(weak) == 1 else ''} on the σ pooled over the whole table (the two rows' own "
        f"seeds{lent_too(*weak)}, without the unrelated rows, would not mark {'it' if len(weak) == 1 else 'them'}): "
        + "; ".join(parts)
        + f". {len(hinges) - len(weak)} of {len(hinges)} marks hold on their own rows."
    ]


# Paper symbols (text, LaTeX) for the hyperparameters of Table 3; other keys use their shortest unique suffix.
PAPER_LABELS: dict[str, tuple[str, Optional[str]]] = {
    "model.layers": ("N", "$N$"),
    "model.d_model": ("d_model", r"$d_{\mathrm{model}}$"),
    "model.d_ff": ("d_ff", r"$d_{\mathrm{ff}}$"),
    "model.heads": ("h", "$h$"),
    "model.d_k": ("d_k", "$d_k$"),
    "model.d_v": ("d_v", "$d_v$"),
    "model.dropout": ("P_drop", r"$P_{\mathrm{drop}}$"),
    "train.label_smoothing": ("eps_ls", r"$\epsilon_{ls}$"),
    "train.max_steps": ("max_steps", "max steps"),
    "model.positions": ("positions", None),
    "model.attention.score": ("score", None),
    "model.attention.scale": ("scale", None),
}


@dataclass(frozen=True)
class Column:
    """How a table shows a recorded metric (:data:`ablate.record.METRICS`): an entry of :data:`COLUMNS`,
    or a column of a table built from one.

    Attributes:
        key: the summary metric, e.g. ``val/ppl`` or ``test_test_2016_flickr/bleu``.
        scale: factor applied to values before display and export (1e-6 for millions).
        split: the test split whose hypotheses the significance test compares, if any.
        show_std: print ``± std`` (not for a count fixed per row, e.g. parameters).
        ranked: mark the column's best mean (not for what a row was given, e.g. steps trained).
        latex: the LaTeX header, where it is not the escaped label.
        per_split: recorded per test split too (``test_<split>/...``), each headed ``split_label``.
        tested: the metric the significance test compares (its cells get the † mark).
        place: ``budget`` (what was trained), ``score``, then ``cost``.
        speed: a training speed; the table shows the one :func:`training_speed` picks.
        column: shown where the runs have it (``False``: registered, recorded, not shown).
    """

    key: str
    label: str
    decimals: int = 2
    scale: float = 1.0
    higher_better: bool = True
    split: Optional[str] = None
    show_std: bool = True
    ranked: bool = True
    latex: Optional[str] = None
    per_split: bool = False
    split_label: Optional[str] = None
    tested: bool = False
    place: str = "score"
    speed: bool = False
    column: bool = True


PLACES = ("budget", "score", "cost")
COLUMNS: dict[str, Column] = {}
"""Name -> column, in table order within each place; :func:`register_column` adds one."""


def register_column(column: Column, name: Optional[str] = None) -> Column:
    """Add ``column`` to :data:`COLUMNS` under ``name`` (default: its key); RecordError if taken or misplaced."""

    name = name or column.key
    if name in COLUMNS:
        raise RecordError(f"metric name {name!r} is taken by {COLUMNS[name].key!r}; pick another name")
    if any(c.key == column.key for c in COLUMNS.values()):
        raise RecordError(f"metric key {column.key!r} is registered already")
    if column.place not in PLACES:
        raise RecordError(f"metric place {column.place!r} is not one of {', '.join(PLACES)}")
    COLUMNS[name] = column
    return column


def registered_columns(place: Optional[str] = None) -> list[Column]:
    """The registered columns (of one place, or all in place order)."""
    return [c for p in PLACES if place in (None, p) for c in COLUMNS.values() if c.place == p and c.column]


for _name, _column in {
    "steps": Column(STEPS.key, "train steps", 0, ranked=False, place="budget"),
    "tested_step": Column(TESTED_STEP.key, "tested step", 0, ranked=False, place="budget"),
    "train_tokens": Column(TRAIN_TOKENS.key, "train tokens (M)", 2, 1e-6, ranked=False, place="budget"),
    "dev_ppl": Column(DEV_PPL.key, "PPL (dev)", higher_better=False),
    "dev_bleu": Column(DEV_BLEU.key, "BLEU (dev)"),
    "dev_chrf": Column(DEV_CHRF.key, "chrF (dev)", column=False),
    "test_bleu": Column(TEST_BLEU.key, "BLEU (test)", per_split=True, split_label="BLEU ({split})", tested=True),
    "test_chrf": Column(TEST_CHRF.key, "chrF (test)", per_split=True, split_label="chrF ({split})", column=False),
    "params": Column(PARAMS.key, "Params (M)", 2, 1e-6, higher_better=False, show_std=False, place="cost"),
    "tokens_per_sec": Column(TOKENS_PER_SEC.key, "Tokens/s (train)", 0, place="cost", speed=True),
    "tokens_per_cpu_sec": Column(TOKENS_PER_CPU_SEC.key, "Tokens/CPU-s (train)", 0, place="cost", speed=True),
    "train_cpu_seconds": Column(TRAIN_CPU_SECONDS.key, "CPU s (train)", 0, column=False),
    "wall_time": Column(WALL_TIME.key, "wall time (s)", 0, column=False, place="cost"),
}.items():
    register_column(_column, _name)


@dataclass(frozen=True)
class Cell:
    """One metric cell: the scaled statistic, best in column, p-values against the base (raw, Holm), marks
    (:data:`MARK`, :data:`FLIP`) and the comparison they come from."""

    stat: Optional[Stat]
    best: bool = False
    p_value: Optional[float] = None
    mark: str = ""
    p_adjusted: Optional[float] = None
    comparison: Optional[Comparison] = None


@dataclass(frozen=True)
class TableRow:
    """One rendered row: ``group`` set on a group's first row only; ``settings`` the display text per
    hyperparameter (None: as the base), ``values`` the raw ones; ``n`` finished seeds."""

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
    comparisons: list[str] = field(default_factory=list)
    """One line per named comparison (when the sweep names them), under the footnotes."""
    pairs: list[Cell] = field(default_factory=list)
    """The named comparisons that leave out the base (no row's cell shows them), one cell each (no statistic)."""


def select_columns(table: Table, names: list[str]) -> Table:
    """``table`` with only the columns named by header (``d_model``) or key (``model.d_model``), in table
    order; the row names and ``n`` stay (naming them selects nothing more). ReportError for a name that is no
    column, or none that is, listing the headers."""
    hyper = {name: i for i, (k, lbl) in enumerate(zip(table.keys, table.labels)) for name in (k, lbl)}
    metric = {name: i for i, c in enumerate(table.columns) for name in (c.key, c.label)}
    kept = ["variant", "n"] if table.show_names else ["n"]  # headers of what always stays
    names = [n for n in names if n in hyper or n in metric or n not in kept]
    unknown = [n for n in names if n not in hyper and n not in metric]
    if unknown or not names:
        headers = [*table.labels, *(c.label for c in table.columns)]
        what = f"no column '{unknown[0]}' in this table" if unknown else "it names no column"
        guess = did_you_mean(unknown[0], [*hyper, *metric]) if unknown else ""
        raise ReportError(f"--columns: {what}{guess}; its columns: {', '.join(headers)}")
    h, m = sorted({hyper[n] for n in names if n in hyper}), sorted({metric[n] for n in names if n in metric})

    def keep(items: list, at: list[int]) -> list:
        return [items[i] for i in at]

    rows = [
        replace(r, settings=keep(r.settings, h), values=keep(r.values, h), cells=keep(r.cells, m)) for r in table.rows
    ]
    return replace(
        table, keys=keep(table.keys, h), labels=keep(table.labels, h), columns=keep(table.columns, m), rows=rows
    )


def signed(value: float, digits: int = 2) -> str:
    """``value`` with its sign and ``digits`` decimals, one that rounds to zero as ``+0.00`` (never ``-0.00``):
    what Python 3.11's ``z`` option (PEP 682) writes, for every Δ the report prints."""
    text = f"{value:+.{digits}f}"
    return "+" + text[1:] if text.startswith("-") and not text.strip("-0.") else text


def show_value(value: Any) -> str:
    """Config value as table text: ``-`` for unset, ``true``/``false`` for booleans; a received record's string
    through :func:`~ablate.utils.io.printable` (no escape sequences)."""
    if value is None or value == "<unset>":
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return ",".join(show_value(v) for v in value)
    return printable(str(value))


def key_labels(keys: list[str]) -> list[str]:
    """Header per dotted key: the paper symbol, else the shortest suffix unique among ``keys``, through
    :func:`~ablate.utils.io.printable` (a received record's key holds no escape sequences)."""

    def label(key: str) -> str:
        if key in PAPER_LABELS:
            return PAPER_LABELS[key][0]
        parts = key.split(".")
        suffixes = [".".join(parts[-n:]) for n in range(1, len(parts) + 1)]
        return next((s for s in suffixes if sum(k.endswith("." + s) or k == s for k in keys) == 1), key)

    return [printable(label(key)) for key in keys]


def metric_columns(
    sweep: Sweep,
    comparisons: dict[tuple[str, str], Comparison],
    extra: Optional[list[Column]] = None,
    metric: str = DEFAULT_METRIC,
) -> list[Column]:
    """The registered columns that some row reports, by place (``extra`` after the scores), on ``metric``;
    a per-split metric a column per test split, of the speeds the one :func:`training_speed` picks."""
    present = {m for r in sweep.rows for m in r.stats} | {c.key for c in extra or []}
    hyp_splits = sorted({s for (_, s) in comparisons})
    only = hyp_splits[0] if len(hyp_splits) == 1 else None
    speed = training_speed(sweep)  # tokens per CPU-second on CPU, else wall-clock tokens/s
    cols: list[Column] = []
    for place in PLACES:
        if place == "cost":
            cols += list(extra or [])
        for entry in registered_columns(place):
            entry = on_metric(entry, metric)
            recorded = Metric(entry.key, entry.per_split)
            if entry.speed:
                cols += [replace(entry, label=speed.label)] if entry.key == speed.key else []
            elif splits := sorted({s for k in present if (s := recorded.split_of(k)) is not None}):
                label = entry.split_label or entry.label + " ({split})"
                cols += [
                    replace(
                        entry,
                        key=recorded.split_key(s),
                        label=printable(label.format(split=s)),  # a received record's split name
                        split=s if entry.tested else None,
                    )
                    for s in splits
                ]
            else:
                cols.append(replace(entry, split=only if entry.tested else None))
    return [c for c in cols if c.key in present]


def on_metric(entry: Column, metric: str) -> Column:
    """``entry`` as the table on ``metric`` shows it: the dev and test BLEU columns become that metric's
    (its keys, label, decimals and direction); every other entry is as registered."""
    if metric == DEFAULT_METRIC or entry.key not in (DEV_BLEU.key, TEST_BLEU.key):
        return entry
    m = get_scorer(metric)
    group, _, _ = entry.key.partition("/")
    where = "dev" if entry.key == DEV_BLEU.key else "test"
    return replace(
        entry,
        key=f"{group}/{metric}",
        label=f"{m.label} ({where})",
        decimals=m.decimals,
        higher_better=m.higher_is_better,
        split_label=f"{m.label} ({{split}})",
        latex=None,
    )


def build_table(
    sweep: Sweep,
    comparisons: list[Comparison] | None = None,
    alpha: float = 0.05,
    test: str = DEFAULT_TEST,
    n_samples: int = 0,
    by_length: Optional[ByLength] = None,
    metric: str = DEFAULT_METRIC,
) -> Table:
    """Lay out ``sweep`` as a paper-style table.

    Args:
        comparisons: Holm-adjusted, from :func:`ablate.report.stats.compare`; empty when not computed.
        alpha: family-wise significance level for the † mark.
        test, n_samples: how the comparisons were made (for the footnote).
        by_length: BLEU by length: its columns after the scores, and its footnote.
        metric: the score of the dev and test columns and of the † test (``comparisons`` must be on it).
    """
    comparisons, scorer = list(comparisons or []), get_scorer(metric)
    vs_base = against_base(comparisons, sweep)  # a cell's mark is always against the base; other pairs are listed
    extra_cols, extra_stats, extra_note = (
        (by_length.columns(), by_length.row_stats(), by_length.note()) if by_length else ([], {}, "")
    )
    columns = metric_columns(sweep, vs_base, extra_cols, metric)

    def stat_of(row, key):
        return extra_stats.get(row.name, {}).get(key) or row.stats.get(key)

    def shown(col, mean):  # the mean as its cell prints it: means that print equal share the bold
        return f"{mean * col.scale:.{col.decimals}f}"

    best = {}  # a column whose rows all print the same has no best to mark
    for col in columns:
        means = [st.mean for r in sweep.rows if (st := stat_of(r, col.key)) is not None]
        if len({shown(col, m) for m in means}) > 1:
            best[col.key] = shown(col, max(means) if col.higher_better else min(means))
    rows, previous, labels = [], None, key_labels(sweep.keys)
    for row in sweep.rows:
        cells = []
        for col in columns:
            st = stat_of(row, col.key)
            is_best = col.ranked and st is not None and shown(col, st.mean) == best.get(col.key)
            comp = vs_base.get((row.name, col.split)) if col.split else None
            if st is not None and col.scale != 1.0:
                st = Stat(st.mean * col.scale, None if st.std is None else st.std * col.scale, st.n)
            cells.append(_cell(st, is_best, comp, alpha))
        settings = [show_value(row.settings[k]) if row.is_base or k in row.changed else None for k in sweep.keys]
        new_group = row.group != previous
        values = [row.settings[k] for k in sweep.keys]
        label = row.group
        if not sweep.uses_variants and not row.is_base:  # grouped by the keys it changes
            label = "+".join(labels[sweep.keys.index(k)] if k in sweep.keys else k for k in row.group.split("+"))
        rows.append(TableRow(label if new_group else "", row.name, settings, values, cells, len(row.trials), new_group))
        previous = row.group
    return Table(  # names of received folders are shown: through printable (the folders are found by raw names)
        title=printable(f"Ablation: {sweep.name}" if sweep.name else "Ablation"),
        keys=list(sweep.keys),
        labels=labels,
        columns=columns,
        rows=rows,
        unfinished=[_unfinished(t) for t in sorted(sweep.unfinished, key=lambda t: t.name)],
        footnotes=[
            printable(n) for n in _footnotes(sweep, columns, comparisons, alpha, test, n_samples, scorer, extra_note)
        ],
        show_names=sweep.uses_variants,
        comparisons=_comparison_lines(sweep, comparisons, alpha, scorer.label) if sweep.comparisons else [],
        pairs=[_cell(None, False, c, alpha) for c in comparisons if sweep.base.name not in (c.row, c.reference)],
    )


def _cell(st: Optional[Stat], best: bool, comp: Optional[Comparison], alpha: float) -> Cell:
    """A cell of ``st`` with ``comp``'s p-values and marks (where tested)."""
    tested = comp if comp is not None and comp.tested else None
    marks = MARK * comp.significant(alpha) + FLIP * comp.sign_flip if comp else ""
    return Cell(st, best, tested.p_value if tested else None, marks, tested.p_adjusted if tested else None, comp)


def _unfinished(trial: Trial) -> Unfinished:
    who = [f"variant {trial.variant}"] if trial.variant else []
    if trial.seed is not None:
        who.append(f"seed {trial.seed}")
    reasons: dict[str, str] = {
        RunStatus.RUNNING: "still running",
        RunStatus.INTERRUPTED: RunStatus.INTERRUPTED,
        RunStatus.PENDING: "not started",
    }
    reason = trial.error or reasons.get(trial.status, "no reason recorded")
    return Unfinished(printable(trial.name), printable(", ".join(who)), trial.status, " ".join(str(reason).split()))


def _footnotes(
    sweep: Sweep,
    columns: list[Column],
    comparisons: list[Comparison],
    alpha: float,
    test: str,
    n_samples: int,
    scorer: MetricScorer,
    extra_note: str,
) -> list[str]:
    """Every footnote of a table, in order (``extra_note``: BLEU by length's, "" for none)."""
    label = scorer.label
    notes = [
        "Cells: mean ± sample std over seeds (n = seeds); best mean per column in bold; "
        "blank hyperparameter = same as base; d_k, d_v, lr: the values the runs used. "
        f"Dev PPL and {label} are from one validation, of the checkpoint that was tested (the best by dev BLEU"
        + ("; its step is column tested step)." if any(c.key == TESTED_STEP.key for c in columns) else ").")
    ]
    if not scorer.higher_is_better:
        notes.append(
            f"{label} is an error rate, lower is better: the best mean per column is the lowest, "
            f"and a Δ {label} below 0 is an improvement."
        )
    used = sum(len(r.trials) for r in sweep.rows)  # the finished trials in its rows, of every one found or planned
    if sweep.unfinished:
        left = ", ".join(f"{n} {status}" for status, n in sorted(Counter(t.status for t in sweep.unfinished).items()))
        notes.append(
            f"Trials: {used} of {used + len(sweep.unfinished)} in the table; not in it: {left} (listed below, with why)."
        )
    else:
        notes.append(f"Trials: all {used} in the table.")
    if found := sweep.disagreements:  # the summary's test BLEU is not the BLEU of the hypotheses the † test reads
        more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
        notes.append(
            f"Summary and hypotheses disagree for {len(found)} trial scores (the cells show the summaries, "
            f"the significance test reads the hypotheses): " + "; ".join(found[:3]) + more + "."
        )
    notes.append(budget_note(sweep))
    if late := late_sign_changes(sweep, on_metric(COLUMNS["dev_bleu"], scorer.name).key):  # seed-paired dev Δs
        rows = "; ".join(f"{row} (step{'s' * (len(at) > 1)} {', '.join(f'{s:g}' for s in at)})" for row, at in late)
        notes.append(
            f"Budget-dependent: the dev {label} Δ against the base changed sign in the last half of training for {rows}."
        )
    notes += significance_notes(sweep, comparisons, alpha, test, n_samples, any(c.split for c in columns), label)
    if scorer.name == DEFAULT_METRIC:
        notes += [f"sacreBLEU: {sig}" for sig in sweep.signatures]
    else:
        notes += [f"{label}: {sig}" for sig in signature_of(scorer.name, [t for r in sweep.rows for t in r.trials])]
    speed = training_speed(sweep)  # what the speed column measures, where the table has one
    speed_note = speed.note if any(c.key == speed.key for c in columns) else ""
    return notes + [n for n in (extra_note, speed_note) if n]


BUDGETS = (
    ("train.max_steps", "{} steps", lambda v: v is not None and v > 0),
    ("train.max_epochs", "{} epochs", lambda v: v is not None),
    ("train.max_time", "{:g} s of training time", lambda v: v is not None),
)


def budget_note(sweep: Sweep) -> str:
    """Which training budget the rows had (steps, epochs or time) and what that means for them."""
    found = []
    for key, text, is_set in BUDGETS:
        values = sorted({r.config[key] for r in sweep.rows if is_set(r.config.get(key))}, key=float)
        if values:
            found.append((key, " / ".join(text.format(v) for v in values)))
    if not found:
        return "Budget: not recorded; train steps shows what each row trained."
    said = ", ".join(f"{what} ({key})" for key, what in found)
    first = " whichever ended first;" if len(found) > 1 else ""
    if any(key == "train.max_time" for key, _ in found):
        return (
            f"Budget: {said};{first} a time budget, so faster rows trained more steps and rows differ "
            f"in speed as well as in design (train steps and tokens show what each row trained)."
        )
    return f"Budget: {said};{first} train steps and tokens show what each row trained."


def _comparison_lines(sweep: Sweep, comparisons: list[Comparison], alpha: float, label: str = "BLEU") -> list[str]:
    """``row vs reference on split: ΔBLEU [CI], p, Holm p`` per named comparison, in plan order."""
    rows = {r.name: r for r in sweep.rows}
    varying = [k for k in sweep.keys if len({str(r.settings[k]) for r in sweep.rows}) > 1]
    labels = dict(zip(sweep.keys, key_labels(sweep.keys)))
    lines = []
    for c in comparisons:
        a, b = rows[c.reference], rows[c.row]
        if sweep.uses_variants:
            what = f"{c.row} vs {c.reference}"
        else:  # "score additive vs dot at d_k=32, scale=true"
            differ = [k for k in varying if str(a.settings[k]) != str(b.settings[k])]
            same = [k for k in varying if k not in differ]
            what = "; ".join(f"{labels[k]} {show_value(b.settings[k])} vs {show_value(a.settings[k])}" for k in differ)
            if same:
                what += " at " + ", ".join(f"{labels[k]}={show_value(a.settings[k])}" for k in same)
        scores = f"({c.bleu:.2f} vs {c.base_bleu:.2f}, seeds {c.seeds[1]} vs {c.seeds[0]})"
        if not c.tested:
            lines.append(f"{what} ({c.split}): Δ{label} {signed(c.delta)} {scores}, not tested: {c.note}")
            continue
        mark = f" {MARK}" if c.significant(alpha) else ""
        lines.append(
            f"{what} ({c.split}): Δ{label} {signed(c.delta)} [95% CI {signed(c.ci[0])}, {signed(c.ci[1])}] {scores}, "
            f"p {_p4(c.p_value)}, Holm p {_p4(c.p_adjusted)}{mark}"
        )
    return lines


def _p4(p: float) -> str:
    """``= 0.0150``, or ``< 0.0001`` for a p the four decimals would show as 0."""
    return "< 0.0001" if p < 0.00005 else f"= {p:.4f}"


N_BUCKETS = 4


@dataclass(frozen=True)
class ByLength:
    """BLEU per source-length bucket (``(shortest, longest)`` words, ascending) of one test split (Bahdanau
    et al. 2015, Fig. 2); ``basis``: ``source`` or ``reference`` lengths; ``stats``: row -> a Stat per bucket."""

    split: str
    buckets: list[tuple[int, int]]
    basis: str
    stats: dict[str, list[Optional[Stat]]]

    @property
    def labels(self) -> list[str]:
        return [f"{lo}-{hi}" if lo != hi else str(lo) for lo, hi in self.buckets]

    def columns(self) -> list[Column]:
        """Table columns ``BLEU len a-b`` (keys ``len:<split>:a-b``)."""
        return [Column(f"len:{self.split}:{label}", f"BLEU len {label}", 2) for label in self.labels]

    def row_stats(self) -> dict[str, dict[str, Stat]]:
        """Row name -> column key -> :class:`Stat`, for :func:`ablate.report.layout.build_table`."""
        keys = [c.key for c in self.columns()]
        return {name: {k: s for k, s in zip(keys, stats) if s is not None} for name, stats in self.stats.items()}

    def note(self) -> str:
        return (
            f"BLEU len a-b: corpus BLEU of the {self.split} sentences whose {self.basis} has a to b words "
            f"(about equal-sized buckets), mean ± std over seeds (Bahdanau et al. 2015, Fig. 2)."
        )


def buckets(lengths: list[int], n: int = N_BUCKETS) -> list[tuple[int, int]]:
    """About equal-count buckets of ``lengths`` as inclusive ``(lo, hi)`` word counts, ascending."""
    if not lengths:
        return []
    qs = np.quantile(np.asarray(lengths), np.linspace(0, 1, n + 1)[1:-1], method="higher")
    uppers = sorted({int(q) for q in qs} | {max(lengths)})  # lengths found ("higher"): no bucket is empty
    return list(zip([min(lengths)] + [hi + 1 for hi in uppers[:-1]], uppers))


def bleu_by_length(sweep: Sweep, split: Optional[str] = None, n: int = N_BUCKETS) -> Optional[ByLength]:
    """BLEU per source-length bucket for every row on ``split`` (default: the first with hypotheses), or None."""
    split = split or next(iter(test_splits(sweep)), None)
    if split is None:
        return None
    trials = [
        t
        for r in sweep.rows
        for t in r.trials
        if split in t.hyps and split in t.refs and len(t.hyps[split]) == len(t.refs[split])
    ]
    if not trials:
        return None
    with_sources = [t for t in trials if len(t.sources.get(split, ())) == len(t.refs[split])]
    basis = "source" if with_sources else "reference"
    first = (with_sources or trials)[0]
    texts = first.sources[split] if with_sources else first.refs[split]
    lengths = np.array([len(x.split()) for x in texts])
    edges = buckets(lengths.tolist(), n)
    masks = [(lengths >= lo) & (lengths <= hi) for lo, hi in edges]
    usable, tokenize = {id(t) for t in trials}, bleu_tokenizer(trials)
    out: dict[str, list[Optional[Stat]]] = {}
    for row in sweep.rows:
        per_seed = []
        for t in row.trials:
            if id(t) not in usable or t.refs[split] != first.refs[split]:
                continue
            sent = sentence_stats(t.hyps[split], t.refs[split], tokenize)
            per_seed.append([float(bleu_from_stats(sent[m].sum(axis=0))) for m in masks])
        out[row.name] = [stat([s[i] for s in per_seed]) for i in range(len(edges))] if per_seed else [None] * len(edges)
    return ByLength(split, edges, basis, out)
