"""The render layer: a :class:`~ablate.report.layout.Table` as rich (terminal), Markdown, LaTeX or CSV.

Every text format prints each statistic through :func:`fmt_stat`, so the numbers agree across formats;
CSV carries them unrounded. The writers are hand-written, not pandas': ``DataFrame.to_markdown`` pads every
cell to its column's width and ``Styler.to_latex`` writes its own rules and escapes, so neither reproduces
the shipped tables byte for byte. :func:`render_per_seed` is ``--per-seed``.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from typing import Any, Callable, Iterable, Optional, Sequence

from rich.console import Console, Group, JustifyMethod
from rich.measure import Measurement
from rich.table import Table as RichTable
from rich.text import Text

from ablate.errors import did_you_mean
from ablate.metrics import get_scorer
from ablate.record import Metric, RunStatus
from ablate.report.layout import FLIP, PAPER_LABELS, Cell, Column, Table, TableRow, show_value, signed
from ablate.report.stats import Sweep, value_order
from ablate.report.trials import DEFAULT_METRIC, ReportError
from ablate.utils.io import printable

FORMATS = ("rich", "md", "latex", "csv")
PM = "±"


def fmt_stat(cell: Cell, col: Column) -> str:
    """``mean ± std`` with the column's decimals (just the mean for one seed or a fixed quantity)."""
    st = cell.stat
    if st is None:
        return ""
    text = f"{st.mean:.{col.decimals}f}"
    if st.std is not None and col.show_std:
        text += f" {PM} {st.std:.{col.decimals}f}"
    return text


def _header(table: Table) -> list[str]:
    names = ["variant"] if table.show_names else []
    return ["", *names, *table.labels, *(c.label for c in table.columns), "n"]


def _notes(table: Table) -> list[str]:
    notes = list(table.footnotes)
    if table.comparisons:
        notes.append(f"Named comparisons ({len(table.comparisons)}):")
        notes += [f"  {line}" for line in table.comparisons]
    if table.unfinished:
        notes.append(f"Not in the table ({len(table.unfinished)} trials):")
    return notes


def md_escape(text: str) -> str:
    """A table cell or note on one Markdown line, as every Markdown writer of the report escapes it: ``\\`` and
    ``|`` escaped, any line break shown as a space (a newline in a row's name would end the row and split the
    table), other control characters as :func:`~ablate.utils.io.printable` shows them."""
    return " ".join(printable(text).replace("\\", "\\\\").replace("|", "\\|").splitlines())


def md_line(cells: Iterable[str]) -> str:
    """One Markdown table line of ``cells`` (already escaped)."""
    return "| " + " | ".join(cells) + " |"


def csv_text(rows: Iterable[Sequence[Any]]) -> str:
    """``rows`` as CSV text, ``\\n`` line ends, each text as :func:`~ablate.utils.io.printable` shows it (one line)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([printable(c) if isinstance(c, str) else c for c in r] for r in rows)
    return buf.getvalue()


def _row_texts(table: Table, row: TableRow, escape: Callable[[str], str], bold: str) -> list[str]:
    """A row's cells in a text format: each piece through ``escape``, a best statistic as ``bold.format(text)``."""
    cells = [escape(row.group)] + ([escape(row.name)] if table.show_names else [])
    cells += [escape(s or "") for s in row.settings]
    for cell, col in zip(row.cells, table.columns):
        text = escape(fmt_stat(cell, col))
        cells.append((bold.format(text) if text and cell.best else text) + escape(cell.mark))
    return cells + [str(row.n)]


def to_markdown(table: Table) -> str:
    """GitHub-flavoured Markdown: bold best values, † marks, footnotes and unfinished trials below."""
    align = [":--"] * (1 + table.show_names) + [":-:"] * len(table.labels) + ["--:"] * (len(table.columns) + 1)
    lines = [f"**{md_escape(table.title)}**", "", md_line(map(md_escape, _header(table))), md_line(align)]
    lines += [md_line(_row_texts(table, row, md_escape, "**{}**")) for row in table.rows]
    lines.append("")
    lines += [md_escape(n) + "  " for n in _notes(table)]
    lines += [f"- {md_escape(str(u))}" for u in table.unfinished]
    return "\n".join(lines).rstrip() + "\n"


_LATEX_SPECIAL = {ch: "\\" + ch for ch in "&%$#_{}"} | {
    "\\": r"\textbackslash{}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "|": r"\textbar{}",  # OT1 text fonts (pdflatex's default) print | as an em dash and < > as inverted ! ?
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}


# Symbols pdflatex's text fonts have no glyph for ("Unicode character σ (U+03C3) not set up for use with
# LaTeX"), as math (Greek letters: :func:`_greek`); Latin letters (ä, é) it reads as UTF-8 text.
_LATEX_SYMBOLS = {
    PM: r"$\pm$",
    "†": r"$^\dagger$",
    "‡": r"$^\ddagger$",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
    "×": r"$\times$",
    "·": r"$\cdot$",
    "−": r"$-$",
    "²": r"$^2$",
    "→": r"$\to$",
    "←": r"$\leftarrow$",
    "↑": r"$\uparrow$",
    "↓": r"$\downarrow$",
    "–": "--",
    "—": "---",
    "…": r"\ldots{}",
}


# Greek capitals with no macro of their own are set as the Latin letter they look like (Alpha is A).
_GREEK_AS_LATIN = {"alpha": "A", "beta": "B", "epsilon": "E", "zeta": "Z", "eta": "H", "iota": "I", "kappa": "K"}
_GREEK_AS_LATIN |= {"mu": "M", "nu": "N", "omicron": "O", "rho": "P", "tau": "T", "chi": "X"}
# What pdflatex's default UTF-8 input sets beyond ASCII: Latin-1 and Latin Extended-A (bar these), the rest of
# the symbols as math above. Measured with ``\ifcsname u8:<char>`` in a plain article (TeX Live 2023).
_PDFLATEX_UNSET = set("ĦħĸĿŀŉŦŧ")
_PDFLATEX_SET = set("ƒȘșȚț‐‑‒–—―‖‘’‚“”„†‡•…‰‹›€™")


def _greek(ch: str) -> Optional[str]:
    """A Greek letter as LaTeX (β -> ``$\beta$``, ς -> ``$\varsigma$``, Α -> ``A``); None for anything else."""
    m = re.fullmatch(r"GREEK (SMALL|CAPITAL) LETTER (FINAL SIGMA|[A-Z]+)", unicodedata.name(ch, ""))
    if m is None:
        return None
    word = {"lamda": "lambda", "final sigma": "varsigma"}.get(m[2].lower(), m[2].lower())
    if m[1] == "CAPITAL":
        return _GREEK_AS_LATIN.get(word) or rf"$\{word.capitalize()}$"
    return "o" if word == "omicron" else rf"$\{word}$"


def _latex_text(text: str) -> str:  # on one line: a blank line in a cell would end the paragraph inside a tabular
    return "".join(_LATEX_SPECIAL.get(ch) or _LATEX_SYMBOLS.get(ch) or _greek(ch) or ch for ch in printable(text))


def _pdflatex_note(tex: str) -> list[str]:
    """A comment line naming the characters of ``tex`` pdflatex has no glyphs for without a package (学, Я), or
    nothing: they stay as written, which xelatex and lualatex set."""
    unset = dict.fromkeys(ch for ch in tex if (ord(ch) >= 0x180 and ch not in _PDFLATEX_SET) or ch in _PDFLATEX_UNSET)
    if not unset:
        return []
    names = ", ".join(list(unset)[:8]) + (", ..." if len(unset) > 8 else "")
    return [f"% pdflatex has no glyphs for {names} without a package: compile with xelatex or lualatex"]


def latex_escape(text: str) -> str:
    """``text`` as LaTeX text: specials escaped, symbols as math, `code` as ``\\texttt`` (``--`` kept two hyphens)."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code spans
        return _latex_text(text)
    code = (r"\texttt{" + _latex_text(p).replace("--", "-{}-") + "}" for p in parts[1::2])
    return "".join(x for pair in zip(map(_latex_text, parts[::2]), [*code, ""]) for x in pair)


def latex_float(spec: str, head: Iterable[str], body: Sequence[str], notes: Sequence[str], caption: str) -> str:
    """A booktabs ``table`` float: ``head`` cells (LaTeX), ``body`` lines (rows ending ``\\\\``, or rules),
    ``notes`` (LaTeX) in small print below and the ``caption`` (plain text)."""
    lines = [r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{spec}}}", r"\toprule"]
    lines += [" & ".join(head) + r" \\", r"\midrule", *body, r"\bottomrule", r"\end{tabular}"]
    lines.append(r"\par\smallskip{\footnotesize " + r" \\ ".join(notes) + "}")
    lines += [rf"\caption{{{latex_escape(caption)}}}", r"\end{table}"]
    return "\n".join(_pdflatex_note("".join(lines)) + lines) + "\n"


def to_latex(table: Table) -> str:
    """A booktabs ``table`` environment (needs ``\\usepackage{booktabs}``), ready to paste."""
    lead = 1 + table.show_names
    spec = "l" * lead + "c" * len(table.labels) + "r" * (len(table.columns) + 1)
    head = ["", *(["variant"] if table.show_names else [])]
    head += [PAPER_LABELS.get(k, ("", None))[1] or latex_escape(lbl) for k, lbl in zip(table.keys, table.labels)]
    head += [c.latex or latex_escape(c.label) for c in table.columns] + ["$n$"]
    body = []
    for i, row in enumerate(table.rows):
        if row.new_group and i > 0:
            body.append(r"\midrule")
        body.append(" & ".join(_row_texts(table, row, latex_escape, r"\textbf{{{}}}")) + r" \\")
    notes = [latex_escape(n) for n in _notes(table)] + [r"\quad " + latex_escape(str(u)) for u in table.unfinished]
    return latex_float(spec, head, body, notes, table.title)


def _num(x: Optional[float]) -> str:
    return "" if x is None else f"{x:.10g}"


TESTED = ("p", "p_holm", "delta", "ci_low", "ci_high", "se", "seed_deltas", "marks")


def _csv_cells(table: Table, cells: Sequence[Cell]) -> list[str]:
    """Per column ``.mean``, ``.std``, ``.n`` and, where tested, the comparison against the base as :data:`TESTED`
    names them (``seed:Δ;...``)."""
    line: list[str] = []
    for cell, col in zip(cells, table.columns):
        st, c = cell.stat, cell.comparison
        line += ["", "", ""] if st is None else [_num(st.mean), _num(st.std), str(st.n)]
        if col.split and c is None:
            line += [""] * len(TESTED)
        elif col.split and c is not None:
            seeds = ";".join(f"{seed}:{d:.6g}" for seed, d in c.per_seed)
            line += [*map(_num, (cell.p_value, cell.p_adjusted, c.delta, *c.ci, c.se)), seeds, cell.mark]
    return line


def to_csv(table: Table) -> str:
    """Plain numbers: per metric ``.mean``, ``.std``, ``.n`` (and, where tested, the comparison
    against the base: :data:`TESTED`); where the sweep names pairs that leave out the base, a ``vs`` column
    (each line's reference) and one line per such pair with its comparison alone; then one line per
    unfinished trial with its status and reason."""
    head = ["group", "name", *table.keys]
    for col in table.columns:
        stats = ("mean", "std", "n", *TESTED) if col.split else ("mean", "std", "n")
        head += [f"{col.key}{'_millions' if col.scale == 1e-6 else ''}.{s}" for s in stats]
    by_pair: dict[tuple[str, str], dict[str, Cell]] = {}  # the named pairs without the base, by split
    for cell in table.pairs:
        assert cell.comparison is not None, "a pair's cell is its comparison"
        by_pair.setdefault((cell.comparison.row, cell.comparison.reference), {})[cell.comparison.split] = cell
    pairs = {k: v for k, v in by_pair.items() if any(col.split in v for col in table.columns)}  # a shown column's
    groups, no_vs = {}, [""] if pairs else []
    lines, group = [head + ["status", "reason"] + (["vs"] if pairs else [])], ""
    for row in table.rows:
        group = groups[row.name] = row.group or group
        line = [group, row.name] + ["" if v is None or v == "<unset>" else show_value(v) for v in row.values]
        vs = table.rows[0].name if any(cell.comparison for cell in row.cells) else ""
        lines.append(line + _csv_cells(table, row.cells) + [RunStatus.FINISHED, ""] + ([vs] if pairs else []))
    for (name, reference), cells in pairs.items():
        pair_cells = [cells.get(col.split or "", Cell(None)) for col in table.columns]
        lines.append(
            [groups.get(name, ""), name, *[""] * len(table.keys), *_csv_cells(table, pair_cells), "", "", reference]
        )
    lines += [["", u.name] + [""] * (len(head) - 2) + [u.status, u.reason] + no_vs for u in table.unfinished]
    return csv_text(lines)


def to_rich(table: Table):
    """A rich renderable: the table (best values highlighted), footnotes and unfinished trials."""
    rt = RichTable(title=Text(table.title, style="bold"), header_style="bold")
    lead, hyper = 1 + table.show_names, len(table.labels)
    for i, name in enumerate(_header(table)):
        justify: JustifyMethod = "left" if i < lead else "center" if i < lead + hyper else "right"
        rt.add_column(Text(name), justify=justify)
    for i, row in enumerate(table.rows):
        if row.new_group and i > 0:
            rt.rows[-1].end_section = True
        heads = [Text(row.group, style="bold")] + ([Text(row.name)] if table.show_names else [])
        rt.add_row(*heads, *_rich_values(table, row))
    return Group(rt, *_rich_notes(table))


def _rich_values(table: Table, row: TableRow) -> list:
    """A row's settings, statistics (best in bold green, marks in yellow) and n, as rich texts."""
    values = [Text(s or "") for s in row.settings]
    for cell, col in zip(row.cells, table.columns):
        values.append(Text(fmt_stat(cell, col), style="bold green" if cell.best else ""))
        if cell.mark:
            values[-1].append(cell.mark, style="yellow")
    return values + [Text(str(row.n))]


def _rich_notes(table: Table) -> list:
    return [Text(n, style="dim") for n in _notes(table)] + [Text(f"  {u}", style="red") for u in table.unfinished]


def to_vertical(table: Table):
    """The rich table for a terminal too narrow for its columns: one block per row headed by its group (and
    name), a ``column  value`` line per non-empty cell, so nothing is cut to ``…``; then the notes."""
    names = _header(table)[1 + table.show_names :]
    pad = max((len(n) for n in names), default=0)
    parts: list = [Text(table.title, style="bold")]
    group = ""
    for row in table.rows:
        group = row.group or group  # a group's later rows leave it blank
        title = Text(group, style="bold")
        if table.show_names and row.name and row.name != group:
            title.append(f"  {row.name}")
        parts += [Text(""), title]
        for name, value in zip(names, _rich_values(table, row)):
            if value.plain:
                parts.append(Text(f"  {name:<{pad}}  ", style="dim") + value)
    return Group(*parts, *_rich_notes(table))


def rich_blocks(grid: Any) -> Any:
    """A rich ``Table`` as :func:`to_vertical` prints ours, for a terminal too narrow for its grid (the paper's
    side-by-side): its title, then per row its first cell in bold and a ``header  value`` line per non-empty cell."""
    heads = [Text.from_markup(h) if isinstance(h, str) else h for h in (c.header for c in grid.columns)]
    pad = max((len(h.plain) for h in heads[1:]), default=0)
    parts: list = [grid.title] if grid.title is not None else []
    for cells in zip(*(list(c.cells) for c in grid.columns)):
        texts = [Text.from_markup(v) if isinstance(v, str) else v for v in cells]
        parts += [Text(""), Text(texts[0].plain, style="bold")]
        parts += [Text(f"  {h.plain:<{pad}}  ", style="dim") + v for h, v in zip(heads[1:], texts[1:]) if v.plain]
    return Group(*parts)


def _widest(renderable: Any) -> int:
    """The columns ``renderable`` needs to show every cell whole (unwrapped)."""
    console = Console(file=io.StringIO(), width=10_000, color_system=None)
    return Measurement.get(console, console.options, renderable).maximum


def _printed(width: int, *renderables: Any) -> str:
    """``renderables`` as a rich console without colour prints them at ``width`` columns."""
    console = Console(file=(out := io.StringIO()), width=width, color_system=None, force_terminal=False)
    console.print(*renderables)
    return out.getvalue()


def rich_width(table: Table) -> int:
    """The columns :func:`to_rich` needs to show every cell whole (its widest row, unwrapped)."""
    return _widest(to_rich(table).renderables[0])


def render(table: Table, fmt: str, width: Optional[int] = None) -> str:
    """The table as text in ``fmt`` (``rich`` without colour at ``width`` columns; by default as wide as it
    needs to show every cell whole, at least 80, as ``ablate table`` prints it piped)."""
    writers = {"md": to_markdown, "latex": to_latex, "csv": to_csv}
    if fmt in writers:  # each writer shows received names (trials, keys, values) without escape sequences
        return writers[fmt](table)
    if fmt == "rich":
        return _printed(width or max(rich_width(table), 80), to_rich(table))
    guess = did_you_mean(str(fmt), FORMATS, cutoff=0.5)
    raise ReportError(f"unknown format {str(fmt)!r}{guess} (choose from: {', '.join(FORMATS)})")


def render_per_seed(sweep: Sweep, fmt: str, width: Optional[int] = None, metric: str = DEFAULT_METRIC) -> str:
    """One line per finished trial on ``metric`` (table order, seeds in order) as CSV (unrounded), LaTeX, a rich
    table (``rich``; one block per trial where the grid needs more than a terminal's ``width``), or Markdown (``md``)."""
    test = Metric(f"test/{metric}", per_split=True)
    keys = [test.split_key(s) for s in sweep.test_splits] or [test.key]
    base = {str(t.seed): t.metrics for t in sweep.base.trials}
    lines = []  # (row, seed, test scores, Δs against the base trial of its seed, per key: do the row's Δs flip sign)
    for row in sweep.rows:
        trials = sorted(row.trials, key=lambda t: value_order(t.seed))
        deltas = {}
        for t in trials:
            b = {} if row.is_base else base.get(str(t.seed), {})
            deltas[t.name] = [t.metrics[k] - b[k] if k in t.metrics and k in b else None for k in keys]
        flips = [len({v > 0 for d in deltas.values() if (v := d[i])}) > 1 for i in range(len(keys))]  # 0, None: no sign
        lines += [(row.name, t.seed, [t.metrics.get(k) for k in keys], deltas[t.name], flips) for t in trials]
    labels = [printable(test.split_of(k) or k.partition("/")[0]) for k in keys]
    scorer = get_scorer(metric)
    name, lower = scorer.label, "" if scorer.higher_is_better else ", lower is better"
    if fmt == "csv":
        head = ["row", "seed", *keys, *(f"{k}.delta_vs_base" for k in keys)]
        return csv_text([head] + [[r, seed, *map(_num, v), *map(_num, d)] for r, seed, v, d, _ in lines])
    title = f"Per seed: {sweep.name or 'ablation'}"
    head = ["row", "seed", *(f"{name} ({s})" for s in labels), *(f"Δ ({s})" for s in labels)]
    cells = []  # a line's test scores, then its Δs against the base (FLIP where the row's signs disagree)
    for row_name, seed, values, row_deltas, flips in lines:
        shown = ["" if d is None else signed(d) + FLIP * f for d, f in zip(row_deltas, flips)]
        cells.append([row_name, str(seed), *("" if v is None else f"{v:.2f}" for v in values), *shown])
    legend = [f"{FLIP} the row's per-seed Δs disagree in sign."] if any(any(flips) for *_, flips in lines) else []
    caption = f"Test {name}{lower}; Δ against the base trial of the same seed."
    if fmt == "rich":  # no colour, as wide as its cells need; narrower than width (a terminal's), as rich_blocks
        rt = RichTable(title=Text(title, style="bold"), caption=caption, header_style="bold")
        for i, text in enumerate(head):
            rt.add_column(Text(text), justify="left" if i == 0 else "right")
        for line in cells:
            rt.add_row(*map(Text, line))
        need = _widest(rt)
        if width is not None and need > width:
            return _printed(width, rich_blocks(rt), Text(""), caption, *legend)
        return _printed(max(need, 80), rt, *legend)
    if fmt == "latex":
        body = [" & ".join(map(latex_escape, c)) + r" \\" for c in cells]
        notes = [latex_escape(caption), *map(latex_escape, legend)]
        return latex_float("lr" + "r" * 2 * len(keys), map(latex_escape, head), body, notes, title)
    out = [
        f"**{md_escape(title)}** (test {name}{lower}; Δ against the base trial of the same seed)",
        "",
        md_line(map(md_escape, head)),
        md_line([":--", "--:", *["--:"] * 2 * len(keys)]),
    ]
    out += [md_line(map(md_escape, line)) for line in cells]
    out += ["", *legend] if legend else []
    return "\n".join(out) + "\n"
