"""Published results beside a sweep's table: ``ablate table SOURCE --reference NAME``.

A reference is ``references/<name>.yaml`` (:data:`REFERENCES`; fields in docs/). Rows are matched by what
they change from the base (``d_k = d_model / heads`` where unset): the same keys, equal text values, numbers
moving the same way, nearest by log ratio to the base. Counts come with :func:`agreement_test`: our Δs share
one noisy base and the paper's signs are lopsided (Table 3: 15 down, 2 up), so neither a fair coin nor a bare
count is a fair null.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from ablate.config import ConfigError, flatten, from_flat, to_dict, valid_keys
from ablate.errors import did_you_mean
from ablate.record import DEV_BLEU, DEV_PPL, TESTED_STEP, is_number
from ablate.report.layout import MARK, Column, Table, signed
from ablate.report.render import latex_escape, latex_float, md_escape, md_line
from ablate.report.stats import AgreementTest, Correlation, Row, Sweep, agreement_test, p_text, pearson, sign_count
from ablate.report.trials import ReportError, hashable
from ablate.utils.io import printable
from ablate.utils.typed import read_yaml

FACTS: dict[str, str] = {
    "data": "training data and the set the scores are on",
    "tokens": "segmentation and vocabulary",
    "batch": "batch size as the source states it",
    "budget": "training length as the source states it",
    "optimizer": "optimizer and learning-rate rule where config keys cannot say it",
    "checkpoints": "which checkpoint is scored",
    "metric": "how BLEU is computed",
    "runs": "runs per row (seeds)",
}
"""The plain (non-config) keys a ``setup`` block may hold, with what each states."""

_FILE_KEYS = {"name", "title", "citation", "data", "min_delta", "setup", "base", "rows"}
_ROW_KEYS = {"label", "changes", "bleu", "ppl", "params", "metric", "source"}


@dataclass(frozen=True)
class PaperRow:
    """One published row: its label (``(A) h=1``), changes (dotted key -> value), BLEU, PPL, params (M),
    and the metric and source of its number where the reference states them per row."""

    label: str
    changes: dict[str, Any]
    bleu: Optional[float] = None
    ppl: Optional[float] = None
    params: Optional[float] = None
    metric: str = ""
    source: str = ""


@dataclass(frozen=True)
class Setup:
    """How the paper trained: dotted config key -> value (as a run's config holds it), and :data:`FACTS` -> text."""

    config: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Reference:
    """A paper's table: its base (``settings``: the base's hyperparameters), its rows and its setup."""

    name: str
    title: str
    citation: str
    data: str
    settings: dict[str, Any]
    base: PaperRow
    rows: tuple[PaperRow, ...]
    min_delta: float = 0.0
    setup: Setup = field(default_factory=Setup)


@dataclass(frozen=True)
class Departure:
    """A setup key or fact where our base differs from the paper's (``ours`` :data:`NOT_RECORDED` if absent)."""

    key: str
    ours: Any
    paper: Any

    def text(self) -> str:
        return f"{self.key}: {_show(self.ours)} (paper: {_show(self.paper)})"


NOT_RECORDED = "<not recorded>"
"""Our value of a setup key the base row's runs do not record (or do not share across seeds)."""


def _show(value: Any) -> str:
    """A setup value in a sentence (``unset``, ``[0.9, 0.98]``, ``0.0``): not :func:`~ablate.report.layout.show_value`,
    whose table cells print ``-``, ``0.9,0.98`` and ``0``; a received string through ``printable``."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return "not recorded" if value == NOT_RECORDED else printable(str(value))


def departures(ours: dict[str, Any], setup: Setup) -> list[Departure]:
    """The keys of ``setup.config`` where ``ours`` (a row's flattened config, lists as tuples) holds another value,
    in setup order."""
    mine = {key: ours.get(key, NOT_RECORDED) for key in setup.config}
    return [Departure(key, mine[key], paper) for key, paper in setup.config.items() if mine[key] != paper]


def _check_fields(where: str, given: Iterable[str], allowed: set[str]) -> None:
    """A :class:`ReportError` naming the first field of ``given`` not in ``allowed``, if any."""
    if unknown := set(given) - allowed:
        key = min(unknown)
        hint = did_you_mean(key, allowed) or f"; valid: {', '.join(sorted(allowed))}"
        raise ReportError(f"{where}: unknown field '{key}'{hint}")


def _row(entry: Any, where: str, extra: frozenset[str] = frozenset()) -> PaperRow:
    if not isinstance(entry, dict) or "label" not in entry:
        raise ReportError(f"{where}: each row needs a 'label'")
    _check_fields(f"{where} ({entry['label']})", entry, _ROW_KEYS | extra)
    fields: dict[str, Any] = {k: entry.get(k) for k in ("bleu", "ppl", "params")}
    fields |= {k: str(entry.get(k) or "") for k in ("metric", "source")}
    return PaperRow(str(entry["label"]), dict(entry.get("changes") or {}), **fields)


def _setup(block: Any, settings: dict[str, Any], where: str) -> Setup:
    """Split a ``setup`` block into checked config values and facts; refuse anything else."""
    if block is None:
        return Setup()
    if not isinstance(block, dict):
        raise ReportError(f"{where}: must be a mapping of config keys and facts ({', '.join(FACTS)})")
    keys = valid_keys()
    if unknown := {k for k in block if k not in FACTS and k not in keys}:
        key = min(unknown)
        hint = did_you_mean(key, [*keys, *FACTS], cutoff=0.5)
        raise ReportError(
            f"{where}: unknown key '{key}'{hint} (a setup key is an ablate config key or one of: {', '.join(FACTS)})"
        )
    given = {k: v for k, v in block.items() if k not in FACTS}
    try:
        typed = flatten(to_dict(from_flat(given, trust="never")))  # a reference file's plugins never run
    except ConfigError as err:
        raise ReportError(f"{where}: {err}") from None
    config = {k: hashable(typed[k]) for k in given}
    clash = next((k for k in config if k in settings and hashable(settings[k]) != config[k]), None)
    if clash:
        raise ReportError(f"{where}: {clash}={config[clash]!r} but the base's settings say {settings[clash]!r}")
    return Setup(config, {k: str(v) for k, v in block.items() if k in FACTS})


def load_reference(path: Path) -> Reference:
    """Read one reference file (see ``references/vaswani2017-table3.yaml``)."""
    data = read_yaml(path, error=ReportError, kind="reference file", holds="a reference table")
    _check_fields(path.name, data, _FILE_KEYS)
    base = data.get("base") or {}
    settings = dict(base.get("settings") or {})
    rows = tuple(_row(r, f"{path.name}: rows[{i}]") for i, r in enumerate(data.get("rows") or []))
    min_delta = data.get("min_delta", 0.0)
    if not is_number(min_delta) or min_delta < 0:
        raise ReportError(f"{path.name}: min_delta must be a BLEU difference of 0 or more, not {min_delta!r}")
    return Reference(
        str(data.get("name") or path.stem),
        str(data.get("title") or path.stem),
        str(data.get("citation") or ""),
        str(data.get("data") or ""),
        settings,
        _row({"label": "base", **base}, f"{path.name}: base", frozenset({"settings"})),
        rows,
        float(min_delta),
        _setup(data.get("setup"), settings, f"{path.name}: setup"),
    )


REFERENCES: dict[str, Path] = {p.stem: p for p in sorted((Path(__file__).parent / "references").glob("*.yaml"))}
"""Name -> reference file shipped with the package (a new reference is one more YAML file)."""


def get(name: str) -> Reference:
    """The shipped reference ``name``; a one-line :class:`ReportError` listing valid names otherwise."""
    if name not in REFERENCES:
        raise ReportError(f"unknown reference '{name}' (choose from: {', '.join(REFERENCES)})")
    return load_reference(REFERENCES[name])


def effective(config: dict[str, Any]) -> dict[str, Any]:
    """A flattened config with ``model.d_k``/``model.d_v`` as the model uses them (:func:`ablate.config.head_dims`):
    d_k is d_model / heads if unset, d_v is d_k if unset."""
    out = dict(config)
    d_model, heads = out.get("model.d_model"), out.get("model.heads")
    if out.get("model.d_k") is None and isinstance(d_model, int) and isinstance(heads, int) and heads > 0:
        out["model.d_k"] = d_model // heads
    if out.get("model.d_v") is None and out.get("model.d_k") is not None:
        out["model.d_v"] = out["model.d_k"]
    return out


def row_config(row: Row) -> dict[str, Any]:
    """The effective config shared by every seed of ``row`` (seed excluded)."""
    configs = [effective(t.config) for t in row.trials]
    return {k: v for k, v in configs[0].items() if k != "seed" and all(c.get(k) == v for c in configs[1:])}


def changes(row: Row, base: Row) -> dict[str, Any]:
    """Keys whose effective value in ``row`` differs from ``base`` -> the row's value."""
    ours, theirs = row_config(row), row_config(base)
    return {k: ours.get(k) for k in sorted(set(ours) | set(theirs)) if ours.get(k) != theirs.get(k)}


def _distance(ours: Any, our_base: Any, paper: Any, paper_base: Any) -> float:
    """How far apart two changes are (0: the same relative change); ``inf`` when incomparable."""
    if not all(is_number(v) for v in (ours, our_base, paper, paper_base)):
        return 0.0 if ours == paper else math.inf
    if (ours > our_base) != (paper > paper_base):
        return math.inf
    if 0 in (ours, our_base, paper, paper_base):
        return abs(ours - paper)
    return abs(math.log(ours / our_base) - math.log(paper / paper_base))


def match(ours: dict[str, Any], base: dict[str, Any], reference: Reference) -> Optional[PaperRow]:
    """The paper row nearest to a row changing ``ours`` (key -> value) from our ``base`` config."""

    def distance(row: PaperRow) -> float:
        return sum(_distance(ours[k], base.get(k), row.changes[k], reference.settings.get(k)) for k in ours)

    best = min((row for row in reference.rows if set(row.changes) == set(ours)), key=distance, default=None)
    return best if best is not None and distance(best) < math.inf else None


@dataclass(frozen=True)
class Line:
    """One of our rows beside its paper row (``paper`` None: unmatched); ``agree`` None where a BLEU Δ is
    0 or missing, ``significant`` None where the table made no test, ``se`` our Δ's from the table's test."""

    name: str
    changes: dict[str, Any]
    paper: Optional[PaperRow]
    paper_delta: Optional[float]
    bleu: Optional[float]
    std: Optional[float]
    n: int
    delta: Optional[float]
    agree: Optional[bool]
    significant: Optional[bool]
    ppl: Optional[float]
    params: Optional[float]
    paper_ppl_delta: Optional[float] = None
    ppl_delta: Optional[float] = None
    se: Optional[float] = None

    def clears(self, min_delta: float) -> str:
        """Which side's Δ clears its own noise: ``both``, ``paper``, ``ours`` or ``""``."""
        paper = abs(self.paper_delta or 0.0) >= min_delta
        ours = self.delta is not None and self.se is not None and abs(self.delta) >= self.se
        return {(True, True): "both", (True, False): "paper", (False, True): "ours"}.get((paper, ours), "")


@dataclass(frozen=True)
class Sensitivity:
    """The counts with our base mean moved by ``shift`` (BLEU; our Δs move by ``-shift``)."""

    shift: float
    headline: AgreementTest
    all_rows: AgreementTest
    coin: Optional[float]
    """The all-rows count's p against a fair coin per row."""


@dataclass(frozen=True)
class SideBySide:
    """Our table beside a reference: one line per row, the base first; ``min_delta`` the paper's noise,
    ``base_se`` our base mean's standard error (None: unknown)."""

    reference: Reference
    metric: str
    base: Line
    lines: list[Line]
    not_run: list[PaperRow]
    min_delta: float = 0.0
    departures: list[Departure] = field(default_factory=list)
    base_se: Optional[float] = None
    facts: list[Departure] = field(default_factory=list)
    """The setup facts ablate knows of its own runs (metric, checkpoints) where ours departs from the paper's."""

    @property
    def counted(self) -> list[Line]:
        """Matched rows where both BLEU Δs have a sign (the all-rows count)."""
        return [ln for ln in self.lines if ln.agree is not None]

    def _signed(self, shift: float) -> list[Line]:
        """Matched rows with a sign on both sides once our base moves by ``shift``."""
        return [ln for ln in self.lines if ln.paper_delta and ln.delta is not None and ln.delta - shift]

    def headline(self, shift: float = 0.0) -> AgreementTest:
        """The headline count and its test (:func:`~ablate.report.stats.agreement_test`): the rows clearing noise
        are selected again in every assignment of the null, since which rows those are depends on the pairing."""
        return self.all_rows(shift, self.min_delta)

    def all_rows(self, shift: float = 0.0, min_delta: Optional[float] = None) -> AgreementTest:
        """The count and test over every matched row with a sign on both sides (clearing ``min_delta``, if given)."""
        rows = self._signed(shift)
        paper, ours = [ln.paper_delta or 0.0 for ln in rows], [(ln.delta or 0.0) - shift for ln in rows]
        return agreement_test(paper, ours, [ln.se for ln in rows], min_delta=min_delta)

    def sensitivity(self) -> list[Sensitivity]:
        """Both counts with our base mean moved by -1 and +1 SE (empty where its SE is unknown)."""
        if not self.base_se or not self.counted:
            return []
        out = []
        for shift in (-self.base_se, self.base_se):
            moved = sign_count((ln.paper_delta, (ln.delta or 0.0) - shift) for ln in self._signed(shift))
            out.append(Sensitivity(shift, self.headline(shift), self.all_rows(shift), moved.p_value))
        return out

    def sensitivity_text(self) -> str:
        """``base -1 SE (-0.50): headline 6 of 14 (p 0.13), all rows 6 of 17 (p 0.088); ...``."""
        parts = []
        for sens in self.sensitivity():
            side = "-1" if sens.shift < 0 else "+1"
            h, a = sens.headline, sens.all_rows
            coin = "-" if sens.coin is None else p_text(sens.coin)
            parts.append(
                f"base {side} SE ({sens.shift:+.2f} BLEU): headline {h.agree} of {h.n} ({_p(h)}), all rows "
                f"{a.agree} of {a.n} ({_p(a)}; a fair coin per row would give p = {coin})"
            )
        return "; ".join(parts)

    def ppl(self) -> AgreementTest:
        """Paper PPL Δ against our dev PPL Δ, over the rows with a sign on both sides: the BLEU count's null
        (both sign margins kept; our PPL Δs share one base too), with no SE known, so Fisher's exact test."""
        rows = [(ln.paper_ppl_delta, ln.ppl_delta) for ln in self.lines if ln.paper_ppl_delta and ln.ppl_delta]
        return agreement_test([p for p, _ in rows], [o for _, o in rows], [None] * len(rows))

    def correlation(self) -> Correlation:
        """Pearson r of paper Δ and our Δ BLEU over the matched rows with both (zeros included)."""
        pairs = [(ln.paper_delta, ln.delta) for ln in self.lines if ln.paper_delta is not None and ln.delta is not None]
        return pearson([p for p, _ in pairs], [o for _, o in pairs])

    def provenance(self) -> str:
        """Each published row's metric and source, the base first, saying where a Δ mixes two metrics."""
        base, used = self.reference.base, {ln.paper.label for ln in self.lines if ln.paper}
        parts = []
        for r in [base, *(r for r in self.reference.rows if r.label in used)]:
            if not (r.metric or r.source):
                continue
            bleu = "" if r.bleu is None else f" ({r.bleu:g})"
            text = f"{r.label}{bleu}: " + ", ".join(x for x in (r.metric, r.source) if x)
            if r is not base and r.metric and base.metric and r.metric != base.metric:
                text += " - not the base's metric, so its paper Δ mixes two metrics"
            parts.append(text)
        return "; ".join(parts)

    def headline_text(self) -> str:
        """The headline count and its test, or plainly why there is nothing to count."""
        count = self.headline()
        if count.n:
            return count.text()
        if not self.counted:
            return "no matched row has a sign on both sides: nothing to count"
        return (
            f"no matched row has a paper |Δ| of {self.min_delta:g} or more or one of ours beyond its SE: "
            "every Δ on both sides is within noise, nothing to count"
        )

    def summary(self) -> list[tuple[str, str]]:
        """``(label, text)`` per summary line, the headline first (the notes under the side-by-side)."""
        out = [
            (
                f"Headline, rows where either side clears its own noise (paper |Δ| ≥ {self.min_delta:g} BLEU, "
                "or our |Δ| ≥ its SE)",
                self.headline_text(),
            ),
            ("All matched rows", self.all_rows().text()),
        ]
        if self.base_se and self.counted:
            moves = f"its mean ± 1 SE = {self.base_se:.2f} BLEU; every one of our Δs moves with it"
            out.append((f"Sensitivity to our base ({moves})", self.sensitivity_text()))
        out += [
            ("PPL, paper Δ vs our dev PPL Δ", self.ppl().text()),
            ("Correlation of paper Δ and our Δ BLEU over the matched rows", self.correlation().text()),
        ]
        setup = self.reference.setup
        if setup.config or self.facts:
            text = "; ".join(d.text() for d in [*self.departures, *self.facts])
            text = text or f"none of the {len(setup.config)} keys it states"
            out.append(("Where our base departs from the paper's setup", text))
        provenance = self.provenance()
        if provenance:
            out.append(("Metric and source of each published number", provenance))
        rest = {k: v for k, v in setup.facts.items() if k not in {d.key for d in self.facts}}
        if rest:
            out.append(("Paper setup without a config key", "; ".join(f"{k}: {v}" for k, v in rest.items())))
        return out


def _p(test: AgreementTest) -> str:
    return "not testable" if test.p_value is None else f"p = {p_text(test.p_value)}"


def _test_column(table: Table) -> Optional[tuple[int, Column]]:
    """The table's first tested BLEU column (the one its † marks belong to), else its first test BLEU."""
    cols = list(enumerate(table.columns))
    return next(((i, c) for i, c in cols if c.split), None) or next(
        ((i, c) for i, c in cols if c.key.startswith("test") and c.key.endswith("/bleu")), None
    )


def _delta(value: Optional[float], base: Optional[float]) -> Optional[float]:
    """``value - base`` rounded to 6 decimals (a published 25.3 - 25.8 is -0.5), None if either is missing."""
    return None if value is None or base is None else round(value - base, 6)


def side_by_side(sweep: Sweep, table: Table, reference: Reference) -> SideBySide:
    """Match ``sweep``'s rows to ``reference``, reading our BLEU and † from ``table`` (built from ``sweep``)."""
    found = _test_column(table)
    if found is None:
        raise ReportError("the table has no test BLEU column to compare with the paper")
    col_index, col = found
    base_row, base_config = sweep.base, row_config(sweep.base)
    base_stat, base_ppl = base_row.stats.get(col.key), base_row.stats.get(DEV_PPL.key)
    lines, used = [], set()
    for row, shown in zip(sweep.rows, table.rows):
        if row.name != shown.name:
            raise ReportError(f"table row '{shown.name}' is not sweep row '{row.name}'")
        st, ppl, params = (row.stats.get(key) for key in (col.key, DEV_PPL.key, "params"))
        changed = {} if row.is_base else changes(row, base_row)
        paper = reference.base if row.is_base else match(changed, base_config, reference)
        paper_delta = delta = paper_ppl_delta = ppl_delta = None
        if not row.is_base:
            if paper is not None:
                used.add(paper.label)
                paper_delta = _delta(paper.bleu, reference.base.bleu)
                paper_ppl_delta = _delta(paper.ppl, reference.base.ppl)
            delta = st.mean - base_stat.mean if st is not None and base_stat is not None else None
            ppl_delta = ppl.mean - base_ppl.mean if ppl is not None and base_ppl is not None else None
        cell = shown.cells[col_index]
        c = cell.comparison
        lines.append(
            Line(
                row.name,
                changed,
                paper,
                paper_delta,
                st.mean if st else None,
                st.std if st else None,
                len(row.trials),
                delta,
                (paper_delta > 0) == (delta > 0) if paper_delta and delta else None,
                None if cell.p_value is None else MARK in cell.mark,
                ppl.mean if ppl else None,
                params.mean * 1e-6 if params else None,
                paper_ppl_delta,
                ppl_delta,
                c.se if c is not None and c.tested and math.isfinite(c.se) else None,
            )
        )
    not_run = [r for r in reference.rows if r.label not in used]
    gone = departures(base_config, reference.setup)
    base_se = _base_se(table, col_index, base_row, col.key)
    facts = our_facts(sweep, col.split or "", reference.setup)
    return SideBySide(reference, col.label, lines[0], lines[1:], not_run, reference.min_delta, gone, base_se, facts)


def _base_se(table: Table, col_index: int, base: Row, key: str) -> Optional[float]:
    """SE of our base mean: the table's median seed σ / sqrt(seeds), else its own std / sqrt(seeds)."""
    ses = [
        c.sigma / math.sqrt(c.seeds[0])
        for r in table.rows
        if (c := r.cells[col_index].comparison) is not None and c.tested and c.sigma is not None
    ]
    if ses:
        return statistics.median(ses)
    st = base.stats.get(key)
    n = len(base.trials)
    return st.std / math.sqrt(n) if st is not None and st.std is not None and n > 1 else None


def our_facts(sweep: Sweep, split: str, setup: Setup) -> list[Departure]:
    """Ours beside the paper's ``metric`` (always a departure) and ``checkpoints`` (none where both are the last)."""
    out, facts, trials = [], setup.facts, [t for r in sweep.rows for t in r.trials]
    if "metric" in facts:
        sig = " / ".join(sweep.signatures) or "signature not recorded"
        ours = f"sacreBLEU on detokenized output, no compound splitting ({sig}), on {split or 'the test split'}"
        out.append(Departure("metric", ours, facts["metric"]))
    if "checkpoints" in facts and trials:
        counts = sorted({sum(1 for h in t.history if h.get(DEV_BLEU.key) is not None) for t in trials})
        tested = [t.metrics.get(TESTED_STEP.key) for t in trials]
        last = sum(step is not None and step == t.metrics.get("step") for step, t in zip(tested, trials))
        n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        ours = (
            "the last (each run validated once, at its end)"
            if counts == [1] and last == len(trials)
            else f"the best of {n} validations by dev BLEU (best.ckpt; the last one in {last} of {len(trials)} trials)"
        )
        paper_last = facts["checkpoints"].strip().lower().startswith("the last")
        if not (paper_last and ours.startswith("the last")):
            out.append(Departure("checkpoints", ours, facts["checkpoints"]))
    return out


def _num(x: Optional[float], digits: int = 2, sign: bool = False) -> str:
    return "" if x is None else signed(x, digits) if sign else f"{x:.{digits}f}"


NO_MATCH = PaperRow("(no match)", {})
COLUMNS: dict[str, Callable[[Line, PaperRow, float], str]] = {
    "row": lambda ln, p, d: ln.name,
    "paper row": lambda ln, p, d: p.label,
    "paper BLEU": lambda ln, p, d: _num(p.bleu, 1),
    "paper Δ": lambda ln, p, d: _num(ln.paper_delta, 1, sign=True),
    "our BLEU": lambda ln, p, d: _num(ln.bleu) + ("" if ln.bleu is None or ln.std is None else f" ± {ln.std:.2f}"),
    "our Δ": lambda ln, p, d: _num(ln.delta, sign=True),
    "our SE": lambda ln, p, d: _num(ln.se),
    "clears noise": lambda ln, p, d: "" if ln.paper_delta is None else ln.clears(d),
    "same sign": lambda ln, p, d: {True: "yes", False: "NO", None: ""}[ln.agree],
    "significant": lambda ln, p, d: {True: "†", False: "no", None: ""}[ln.significant],
    "paper PPL": lambda ln, p, d: _num(p.ppl),
    "our PPL (dev)": lambda ln, p, d: _num(ln.ppl),
    "paper params (M)": lambda ln, p, d: _num(p.params, 0),
    "our params (M)": lambda ln, p, d: _num(ln.params),
}
"""Header -> the cell of a line ``ln`` of the side-by-side, given its paper row ``p`` (:data:`NO_MATCH` where it has
none) and the reference's ``min_delta`` ``d``."""
HEADER = list(COLUMNS)


def _rows(sbs: SideBySide) -> list[list[str]]:
    """The cells of each line, the base first."""
    lines = [sbs.base, *sbs.lines]
    return [[cell(ln, ln.paper or NO_MATCH, sbs.min_delta) for cell in COLUMNS.values()] for ln in lines]


def _notes(sbs: SideBySide) -> tuple[str, list[str]]:
    """The headline line, and the lines below it: the other summary lines, the legend, the paper rows without
    one of ours and the source."""
    (head_label, head), *rest = sbs.summary()
    notes = [f"{label}: {text}." for label, text in rest]
    notes.append(
        f"Δ: change from the base row; ours is {sbs.metric}, mean over seeds; our SE: the standard error of our Δ "
        f"in the table's test (seed and test-sentence noise, the base's included). Rows are matched by the keys "
        f"they change and by each change's ratio to the base (ablate.report.reference). A Δ of 0 has no sign and "
        f"is not counted. Clears noise: the paper's |Δ| is at least {sbs.min_delta:g} BLEU (below it a published "
        f"single run is taken as noise) and/or ours is at least its SE; the headline counts those rows only. "
        f"Test: the agreement expected when our Δs are redrawn from their noise (one shared base draw for every "
        f"row), against every assignment of our rows to the paper's (both sign margins kept; with no SE known, "
        f"Fisher's exact test); one-sided. The † column is the table's own test and correction."
    )
    if sbs.not_run:
        notes.append("Paper rows without a row here: " + "; ".join(r.label for r in sbs.not_run) + ".")
    if sbs.reference.citation:
        notes.append(f"Source: {sbs.reference.citation}")
    return f"{head_label}: {head}.", notes


def to_markdown(sbs: SideBySide) -> str:
    """The side-by-side as a Markdown table, then its summary lines (headline first) and notes."""
    ref, (head, notes) = sbs.reference, _notes(sbs)
    lines = [f"**Beside {ref.title}** ({ref.data})", "", md_line(HEADER), md_line([":--", ":--", *["--:"] * 12])]
    lines += [md_line(map(md_escape, cells)) for cells in _rows(sbs)]
    lines += ["", f"**{head}**  ", *(f"{note}  " for note in notes)]
    return "\n".join(lines).rstrip() + "\n"


def to_latex(sbs: SideBySide) -> str:
    """The side-by-side as a second booktabs table (for under ``ablate table --format latex``), the headline
    in bold first among its notes."""
    head, notes = _notes(sbs)
    rows = [" & ".join(map(latex_escape, cells)) + r" \\" for cells in _rows(sbs)]
    caption = f"Beside {sbs.reference.title} ({sbs.reference.data})"
    notes = [rf"\textbf{{{latex_escape(head)}}}", *map(latex_escape, notes)]
    return latex_float("ll" + "r" * (len(HEADER) - 2), map(latex_escape, HEADER), rows, notes, caption)


def to_rich(sbs: SideBySide) -> Any:
    """The side-by-side as a rich renderable (under ``ablate table``'s terminal table): the table, its
    headline in bold and its notes dimmed, the cells :func:`to_markdown` prints."""
    from rich.console import Group
    from rich.table import Table as RichTable
    from rich.text import Text

    ref, (head, notes) = sbs.reference, _notes(sbs)
    rt = RichTable(title=Text(f"Beside {ref.title} ({ref.data})", style="bold"), header_style="bold")
    for i, name in enumerate(HEADER):
        rt.add_column(Text(name), justify="left" if i < 2 else "right")
    for cells in _rows(sbs):
        rt.add_row(*map(Text, cells))
    return Group(rt, Text(head, style="bold"), *(Text(n, style="dim") for n in notes))


def render(sbs: SideBySide, fmt: str) -> str:
    """LaTeX for ``latex``, else Markdown (``rich`` in a terminal is :func:`to_rich`; no CSV: one CSV holds one
    table, so ``ablate table --format csv`` refuses ``--reference``)."""
    return to_latex(sbs) if fmt == "latex" else to_markdown(sbs)
