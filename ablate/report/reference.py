"""Published results beside a sweep's table: ``ablate table SOURCE --reference NAME``.

A *reference* is a paper's table shipped as package data (``references/<name>.yaml``, read by
:mod:`ablate.report.papers`): the paper's base (its hyperparameters in ablate's config keys,
``settings``, and its scores), one entry per row with the keys it ``changes`` and the published
BLEU, PPL and parameters, the smallest published change taken as a direction (``min_delta``) and
how the paper trained (``setup``). The registry :data:`REFERENCES` maps each file's name to it.

Matching our rows to the paper's. Our rows are usually a scaled-down copy of the paper's (a
smaller base, so "d_model 256 of 512" becomes "d_model 64 of 128"), so rows are matched by what
they change, not by the values themselves:

1. A row's *changes* are the config keys whose effective value differs from our base row's, with
   ``model.d_k`` and ``model.d_v`` effective (``d_model / heads`` where the config leaves them
   unset), as the paper's table writes them. Heads 1 therefore changes ``heads, d_k, d_v``, like
   row (A) h=1; a row setting ``d_k`` and an unchanged ``d_v`` changes only ``d_k``, like row (B).
2. Candidates are the paper's rows that change exactly the same keys. Text and boolean values
   must be equal (``positions: learned``). Numbers must move in the same direction from the base
   and are compared by their ratio to the base, on a log scale (our d_model 64 of 128 and the
   paper's 256 of 512 are both 1/2); a value or base of 0 is compared as a value (dropout 0.0).
3. Each of our rows takes the nearest candidate (the sum over keys of the log-ratio distances);
   rows without a candidate are listed as unmatched, and paper rows that no row matched as not run.

Per matched row the comparison shows the published BLEU and its change Δ from the paper's base,
our test BLEU (mean ± std over seeds) and its Δ from our base, whether the two Δs have the same
sign, and whether ours is significant: the † of the table, i.e. the significance test and
correction the table already made (nothing is tested again here). Validation perplexity and
parameters are shown beside them.

What is counted (:mod:`ablate.report.agreement` for the statistics). A Δ of 0 (or a missing one)
has no sign, so a row where either Δ is 0 is never in a sign count.

- *Headline*: the BLEU sign agreement over the matched rows whose Δ is significant here (†) and
  whose paper |Δ| is at least ``min_delta`` (the reference's, or :func:`side_by_side`'s
  argument): the rows where both changes are more than noise. With its one-sided sign-test
  p-value P(X >= k | n, 1/2). No significant row (or none tested): nothing is counted, and the
  text says so.
- *All matched rows*: the same count over every matched row, significant or not, any paper |Δ|.
- *PPL*: the sign agreement of the paper's PPL Δ and our dev PPL Δ (``val/ppl`` of the row minus
  the base's) over the rows with both, with its p-value.
- *Correlation*: Pearson's r of paper Δ and our Δ BLEU over every matched row with both (a Δ of
  0 included), with a 95% Fisher-z interval; none below 4 rows.
- *Setup departures*: each config key of the reference's ``setup`` where our base row's config
  (shared by its seeds) differs, e.g. ``model.norm: pre (paper: post)``, then the setup's facts
  that no config key states (data, batch, budget) as text. The scaled sizes of ``settings`` are
  what the rows are matched by, not departures.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Any, Optional

from ablate.record import DEV_PPL
from ablate.report.aggregate import Row, Sweep
from ablate.report.agreement import Correlation, SignCount, pearson, sign_count
from ablate.report.footnotes import MARK
from ablate.report.papers import (  # noqa: F401 - re-exported: the reference API lives here
    REFERENCE_DIR,
    REFERENCES,
    Departure,
    PaperRow,
    Reference,
    departures,
    get,
    load_reference,
)
from ablate.report.records import ReportError
from ablate.report.table import Column, Table

_DERIVED = ("model.d_k", "model.d_v")


# --------------------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------------------


def effective(config: dict[str, Any]) -> dict[str, Any]:
    """A flattened config with ``model.d_k``/``model.d_v`` as the model uses them (d_model / heads if unset)."""
    out = dict(config)
    d_model, heads = out.get("model.d_model"), out.get("model.heads")
    for key in _DERIVED:
        if out.get(key) is None and isinstance(d_model, int) and isinstance(heads, int) and heads > 0:
            out[key] = d_model // heads
    return out


def row_config(row: Row) -> dict[str, Any]:
    """The effective config shared by every seed of ``row`` (seed excluded)."""
    configs = [effective(t.config) for t in row.trials]
    return {k: v for k, v in configs[0].items() if k != "seed" and all(c.get(k) == v for c in configs[1:])}


def changes(row: Row, base: Row) -> dict[str, Any]:
    """Keys whose effective value in ``row`` differs from ``base`` -> the row's value."""
    ours, theirs = row_config(row), row_config(base)
    return {k: ours.get(k) for k in sorted(set(ours) | set(theirs)) if ours.get(k) != theirs.get(k)}


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _distance(ours: Any, our_base: Any, paper: Any, paper_base: Any) -> float:
    """How far apart two changes are (0: the same relative change); ``inf`` when incomparable."""
    if not all(_is_number(v) for v in (ours, our_base, paper, paper_base)):
        return 0.0 if ours == paper else math.inf
    if (ours > our_base) != (paper > paper_base):
        return math.inf
    if 0 in (ours, our_base, paper, paper_base):
        return abs(ours - paper)
    return abs(math.log(ours / our_base) - math.log(paper / paper_base))


def match(ours: dict[str, Any], base: dict[str, Any], reference: Reference) -> Optional[PaperRow]:
    """The paper row nearest to a row changing ``ours`` (key -> value) from our ``base`` config."""
    best, best_d = None, math.inf
    for row in reference.rows:
        if set(row.changes) != set(ours):
            continue
        d = sum(_distance(ours[k], base.get(k), row.changes[k], reference.settings.get(k)) for k in ours)
        if d < best_d:
            best, best_d = row, d
    return best


# --------------------------------------------------------------------------------------
# Side by side
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One of our rows beside its paper row (``paper`` None: unmatched).

    ``agree`` is None where either BLEU Δ is 0 or missing; ``significant`` is None where the table
    made no test for the row. ``paper_ppl_delta`` and ``ppl_delta`` are the PPL changes from each
    base (ours: dev PPL), None where a PPL is missing.
    """

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


@dataclass(frozen=True)
class SideBySide:
    """Our table beside a reference: one line per row, the base first, and what agrees.

    Attributes:
        min_delta: the smallest paper |Δ BLEU| the headline counts (see the module docstring).
        departures: setup keys where our base differs from the paper's.
    """

    reference: Reference
    metric: str
    base: Line
    lines: list[Line]
    not_run: list[PaperRow]
    min_delta: float = 0.0
    departures: list[Departure] = field(default_factory=list)

    @property
    def counted(self) -> list[Line]:
        """Matched rows where both BLEU Δs have a sign (the all-rows count)."""
        return [ln for ln in self.lines if ln.agree is not None]

    @property
    def headline_rows(self) -> list[Line]:
        """Counted rows whose Δ is significant here and whose paper |Δ| is at least ``min_delta``."""
        return [ln for ln in self.counted if ln.significant is True and abs(ln.paper_delta or 0.0) >= self.min_delta]

    def headline(self) -> SignCount:
        return sign_count((ln.paper_delta, ln.delta) for ln in self.headline_rows)

    def all_rows(self) -> SignCount:
        return sign_count((ln.paper_delta, ln.delta) for ln in self.counted)

    def ppl(self) -> SignCount:
        """Paper PPL Δ against our dev PPL Δ, over the rows with both."""
        return sign_count((ln.paper_ppl_delta, ln.ppl_delta) for ln in self.lines)

    def correlation(self) -> Correlation:
        """Pearson r of paper Δ and our Δ BLEU over the matched rows with both (zeros included)."""
        pairs = [(ln.paper_delta, ln.delta) for ln in self.lines if ln.paper_delta is not None and ln.delta is not None]
        return pearson([p for p, _ in pairs], [o for _, o in pairs])

    def headline_text(self) -> str:
        """The headline count, or plainly why there is nothing to count."""
        count = self.headline()
        if count.n:
            return count.text()
        if all(ln.significant is None for ln in self.lines):
            return "no row is significant here (significance was not tested): nothing to count"
        if not any(ln.significant for ln in self.counted):
            return "no matched row is significant here: nothing to count"
        return f"no significant row has a paper |Δ| of {self.min_delta:g} or more: nothing to count"

    def summary(self) -> list[tuple[str, str]]:
        """``(label, text)`` per summary line, the headline first (Markdown and CSV print these)."""
        out = [
            (f"Headline, rows significant here (†) with paper |Δ| ≥ {self.min_delta:g} BLEU", self.headline_text()),
            ("All matched rows, significant or not", self.all_rows().text()),
            ("PPL, paper Δ vs our dev PPL Δ", self.ppl().text()),
            ("Correlation of paper Δ and our Δ BLEU over the matched rows", self.correlation().text()),
        ]
        setup = self.reference.setup
        if setup.config:
            text = "; ".join(d.text() for d in self.departures) or f"none of the {len(setup.config)} keys it states"
            out.append(("Where our base departs from the paper's setup", text))
        if setup.facts:
            out.append(("Paper setup without a config key", "; ".join(f"{k}: {v}" for k, v in setup.facts.items())))
        return out


def _test_column(table: Table) -> Optional[tuple[int, Column]]:
    """The table's first tested BLEU column (the one its † marks belong to), else its first test BLEU."""
    cols = list(enumerate(table.columns))
    return next(((i, c) for i, c in cols if c.split), None) or next(
        ((i, c) for i, c in cols if c.key.startswith("test") and c.key.endswith("/bleu")), None
    )


def _delta(value: Optional[float], base: Optional[float]) -> Optional[float]:
    """``value - base`` rounded to 6 decimals (a published 25.3 - 25.8 is -0.5), None if either is missing."""
    return None if value is None or base is None else round(value - base, 6)


def side_by_side(sweep: Sweep, table: Table, reference: Reference, min_delta: Optional[float] = None) -> SideBySide:
    """Match ``sweep``'s rows to ``reference`` and read our BLEU and its significance from ``table``.

    Args:
        sweep, table: the sweep and the table built from it (same rows in the same order).
        reference: the published table.
        min_delta: the smallest paper |Δ BLEU| the headline counts; None: the reference's ``min_delta``.
    """
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
        st, cell = row.stats.get(col.key), shown.cells[col_index]
        changed = {} if row.is_base else changes(row, base_row)
        paper = reference.base if row.is_base else match(changed, base_config, reference)
        paper_delta = delta = agree = paper_ppl_delta = ppl_delta = None
        ppl = row.stats.get(DEV_PPL.key)
        if paper is not None and not row.is_base:
            used.add(paper.label)
            paper_delta = _delta(paper.bleu, reference.base.bleu)
            paper_ppl_delta = _delta(paper.ppl, reference.base.ppl)
        if not row.is_base:
            delta = st.mean - base_stat.mean if st is not None and base_stat is not None else None
            ppl_delta = ppl.mean - base_ppl.mean if ppl is not None and base_ppl is not None else None
        if paper_delta and delta:
            agree = (paper_delta > 0) == (delta > 0)
        params = row.stats.get("params")
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
                agree,
                None if cell.p_value is None else MARK in cell.mark,
                ppl.mean if ppl else None,
                params.mean * 1e-6 if params else None,
                paper_ppl_delta,
                ppl_delta,
            )
        )
    not_run = [r for r in reference.rows if r.label not in used]
    threshold = reference.min_delta if min_delta is None else min_delta
    gone = departures(base_config, reference.setup)
    return SideBySide(reference, col.label, lines[0], lines[1:], not_run, threshold, gone)


# --------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------


def _num(x: Optional[float], digits: int = 2, sign: bool = False) -> str:
    if x is None:
        return ""
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def _cells(ln: Line) -> list[str]:
    ours = "" if ln.bleu is None else _num(ln.bleu) + (f" ± {ln.std:.2f}" if ln.std is not None else "")
    paper = ln.paper
    agree = {True: "yes", False: "NO", None: ""}[ln.agree]
    sig = {True: "†", False: "no", None: ""}[ln.significant]
    return [
        ln.name,
        paper.label if paper else "(no match)",
        _num(paper.bleu if paper else None, 1),
        _num(ln.paper_delta, 1, sign=True),
        ours,
        _num(ln.delta, sign=True),
        agree,
        sig,
        _num(paper.ppl if paper else None),
        _num(ln.ppl),
        _num(paper.params if paper else None, 0),
        _num(ln.params),
    ]


HEADER = [
    "row",
    "paper row",
    "paper BLEU",
    "paper Δ",
    "our BLEU",
    "our Δ",
    "same sign",
    "significant",
    "paper PPL",
    "our PPL (dev)",
    "paper params (M)",
    "our params (M)",
]


def to_markdown(sbs: SideBySide) -> str:
    """The side-by-side as a Markdown table, then its summary lines (headline first) and notes."""
    ref = sbs.reference
    lines = [
        f"**Beside {ref.title}** ({ref.data})",
        "",
        "| " + " | ".join(HEADER) + " |",
        "| :-- | :-- | " + " | ".join(["--:"] * (len(HEADER) - 2)) + " |",
    ]
    for ln in [sbs.base, *sbs.lines]:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in _cells(ln)) + " |")
    (head_label, head), *rest = sbs.summary()
    lines += ["", f"**{head_label}: {head}.**  "]
    lines += [f"{label}: {text}.  " for label, text in rest]
    lines.append(
        f"Δ: change from the base row; ours is {sbs.metric}, mean over seeds. Rows are matched by the keys they "
        f"change and by each change's ratio to the base (ablate.report.reference). A Δ of 0 has no sign and is "
        f"not counted; the headline counts only rows significant here (the table's †, its test and correction) "
        f"whose paper |Δ| is at least {sbs.min_delta:g} BLEU, below which a published single run is taken as "
        f"noise. Binomial p: one-sided, P(at least that many agree | each row agrees by a coin flip).  "
    )
    if sbs.not_run:
        lines.append("Paper rows without a row here: " + "; ".join(r.label for r in sbs.not_run) + ".  ")
    if ref.citation:
        lines.append(f"Source: {ref.citation}")
    return "\n".join(lines).rstrip() + "\n"


def to_csv(sbs: SideBySide) -> str:
    """The side-by-side as CSV (numbers unrounded where they are ours), then a blank line and
    one ``summary line, text`` row per summary line."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(HEADER)
    for ln in [sbs.base, *sbs.lines]:
        cells = _cells(ln)
        cells[4] = "" if ln.bleu is None else f"{ln.bleu:.10g}"
        cells[5] = "" if ln.delta is None else f"{ln.delta:.10g}"
        w.writerow(cells)
    w.writerow([])
    w.writerows(sbs.summary())
    return buf.getvalue()


def render(sbs: SideBySide, fmt: str) -> str:
    """CSV for ``csv``; Markdown for every other format (it reads as plain text in a terminal)."""
    return to_csv(sbs) if fmt == "csv" else to_markdown(sbs)
