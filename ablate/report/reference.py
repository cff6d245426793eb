"""Published results beside a sweep's table: ``ablate table SOURCE --reference NAME``.

A *reference* is a paper's table shipped as package data (``references/<name>.yaml``): the
paper's base (its hyperparameters in ablate's config keys, ``settings``, and its scores) and one
entry per row with the keys it ``changes`` and the published BLEU, PPL and parameters. The
registry :data:`REFERENCES` maps each file's name to it.

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

Per matched row the comparison shows the published BLEU and its change from the paper's base,
our test BLEU (mean ± std over seeds) and its change from our base, whether the two changes have
the same sign (a paper change of 0 has no sign and is not counted), and whether ours is
significant: the † of the table, i.e. the significance test the table already made (nothing is
tested again here). Validation perplexity and parameters are shown beside them.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ablate.report.aggregate import Row, Sweep
from ablate.report.records import ReportError
from ablate.report.table import Column, Table
from ablate.utils.typed import read_yaml

REFERENCE_DIR = Path(__file__).parent / "references"
_DERIVED = ("model.d_k", "model.d_v")


# --------------------------------------------------------------------------------------
# Published tables
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PaperRow:
    """One published row: what it changes from the paper's base and its scores.

    Attributes:
        label: as the paper names it, e.g. ``(A) h=1``.
        changes: dotted config key -> the paper's value (empty for the base).
        bleu, ppl: published BLEU and perplexity (None where not published).
        params: parameters in millions (None where the paper leaves it blank).
    """

    label: str
    changes: dict[str, Any]
    bleu: Optional[float] = None
    ppl: Optional[float] = None
    params: Optional[float] = None


@dataclass(frozen=True)
class Reference:
    """A paper's table: its base (``settings``: the base's hyperparameters) and its rows."""

    name: str
    title: str
    citation: str
    data: str
    settings: dict[str, Any]
    base: PaperRow
    rows: tuple[PaperRow, ...]


def _row(entry: dict[str, Any], where: str) -> PaperRow:
    if not isinstance(entry, dict) or "label" not in entry:
        raise ReportError(f"{where}: each row needs a 'label'")
    unknown = set(entry) - {"label", "changes", "settings", "bleu", "ppl", "params"}
    if unknown:
        raise ReportError(f"{where} ({entry['label']}): unknown field(s) {', '.join(sorted(unknown))}")
    return PaperRow(
        str(entry["label"]), dict(entry.get("changes") or {}), entry.get("bleu"), entry.get("ppl"), entry.get("params")
    )


def load_reference(path: Path) -> Reference:
    """Read one reference file (see ``references/vaswani2017-table3.yaml``)."""
    data = read_yaml(path, error=ReportError, kind="reference file", holds="a reference table")
    base = data.get("base") or {}
    rows = tuple(_row(r, f"{path.name}: rows[{i}]") for i, r in enumerate(data.get("rows") or []))
    return Reference(
        str(data.get("name") or path.stem),
        str(data.get("title") or path.stem),
        str(data.get("citation") or ""),
        str(data.get("data") or ""),
        dict(base.get("settings") or {}),
        _row({"label": "base", **base}, f"{path.name}: base"),
        rows,
    )


REFERENCES: dict[str, Path] = {p.stem: p for p in sorted(REFERENCE_DIR.glob("*.yaml"))}
"""Name -> reference file shipped with the package (a new reference is one more YAML file)."""


def get(name: str) -> Reference:
    """The shipped reference ``name``; a one-line :class:`ReportError` listing valid names otherwise."""
    if name not in REFERENCES:
        raise ReportError(f"unknown reference '{name}' (choose from: {', '.join(REFERENCES)})")
    return load_reference(REFERENCES[name])


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

    ``agree`` is None where either change is 0 or missing; ``significant`` is None where the table
    made no test for the row.
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


@dataclass(frozen=True)
class SideBySide:
    """Our table beside a reference: one line per row, the base first."""

    reference: Reference
    metric: str
    base: Line
    lines: list[Line]
    not_run: list[PaperRow]

    @property
    def counted(self) -> list[Line]:
        return [ln for ln in self.lines if ln.agree is not None]

    def summary(self) -> str:
        """``k of n rows agree in sign with the paper; m significant`` (and how many of those agree)."""
        counted = self.counted
        agree = sum(ln.agree for ln in counted)
        sig = [ln for ln in counted if ln.significant]
        return (
            f"{agree} of {len(counted)} rows agree in sign with the paper; {len(sig)} significant "
            f"({sum(ln.agree for ln in sig)} of them agree)"
        )


def _test_column(table: Table) -> Optional[tuple[int, Column]]:
    """The table's first tested BLEU column (the one its † marks belong to), else its first test BLEU."""
    cols = list(enumerate(table.columns))
    return next(((i, c) for i, c in cols if c.split), None) or next(
        ((i, c) for i, c in cols if c.key.startswith("test") and c.key.endswith("/bleu")), None
    )


def side_by_side(sweep: Sweep, table: Table, reference: Reference) -> SideBySide:
    """Match ``sweep``'s rows to ``reference`` and read our BLEU and its significance from ``table``.

    ``table`` must be the table built from ``sweep`` (same rows in the same order).
    """
    found = _test_column(table)
    if found is None:
        raise ReportError("the table has no test BLEU column to compare with the paper")
    col_index, col = found
    base_row, base_config = sweep.base, row_config(sweep.base)
    base_stat = base_row.stats.get(col.key)
    lines, used = [], set()
    for row, shown in zip(sweep.rows, table.rows):
        if row.name != shown.name:
            raise ReportError(f"table row '{shown.name}' is not sweep row '{row.name}'")
        st, cell = row.stats.get(col.key), shown.cells[col_index]
        changed = {} if row.is_base else changes(row, base_row)
        paper = reference.base if row.is_base else match(changed, base_config, reference)
        paper_delta = delta = agree = None
        if paper is not None and not row.is_base:
            used.add(paper.label)
            if paper.bleu is not None and reference.base.bleu is not None:
                paper_delta = round(paper.bleu - reference.base.bleu, 6)
        if st is not None and base_stat is not None and not row.is_base:
            delta = st.mean - base_stat.mean
        if paper_delta and delta:
            agree = (paper_delta > 0) == (delta > 0)
        ppl = row.stats.get("val/ppl")
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
                None if cell.p_value is None else bool(cell.mark),
                ppl.mean if ppl else None,
                params.mean * 1e-6 if params else None,
            )
        )
    not_run = [r for r in reference.rows if r.label not in used]
    return SideBySide(reference, col.label, lines[0], lines[1:], not_run)


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
        _num(paper and paper.bleu, 1),
        _num(ln.paper_delta, 1, sign=True),
        ours,
        _num(ln.delta, sign=True),
        agree,
        sig,
        _num(paper and paper.ppl),
        _num(ln.ppl),
        _num(paper and paper.params, 0),
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
    """The side-by-side as a Markdown table with its sign-agreement count and notes."""
    ref = sbs.reference
    lines = [
        f"**Beside {ref.title}** ({ref.data})",
        "",
        "| " + " | ".join(HEADER) + " |",
        "| :-- | :-- | " + " | ".join(["--:"] * (len(HEADER) - 2)) + " |",
    ]
    for ln in [sbs.base, *sbs.lines]:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in _cells(ln)) + " |")
    lines += [
        "",
        f"**{sbs.summary()}.**  ",
        f"Δ: change from the base row; ours is {sbs.metric}, mean over seeds. Rows are matched by the keys they "
        f"change and by each change's ratio to the base (ablate.report.reference); a paper Δ of 0 has no sign "
        f"and is not counted. Significant: the table's † (its test and correction).  ",
    ]
    if sbs.not_run:
        lines.append("Paper rows without a row here: " + "; ".join(r.label for r in sbs.not_run) + ".  ")
    if ref.citation:
        lines.append(f"Source: {ref.citation}")
    return "\n".join(lines).rstrip() + "\n"


def to_csv(sbs: SideBySide) -> str:
    """The side-by-side as CSV (numbers unrounded where they are ours)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(HEADER)
    for ln in [sbs.base, *sbs.lines]:
        cells = _cells(ln)
        cells[4] = "" if ln.bleu is None else f"{ln.bleu:.10g}"
        cells[5] = "" if ln.delta is None else f"{ln.delta:.10g}"
        w.writerow(cells)
    return buf.getvalue()


def render(sbs: SideBySide, fmt: str) -> str:
    """CSV for ``csv``; Markdown for every other format (it reads as plain text in a terminal)."""
    return to_csv(sbs) if fmt == "csv" else to_markdown(sbs)
