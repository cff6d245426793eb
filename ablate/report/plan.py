"""Which rows a table compares: the pairs a sweep names, else every row against the base.

A sweep names its questions in its ``comparisons`` parameter (:mod:`ablate.sweep.spec`), e.g. in
``sweeps/scoring.yaml`` "additive vs dot at the same d_k and scaling" and "scaled vs unscaled at
the same score and d_k" rather than every cell against one base. An entry
``{between: KEY, values: [ref, v1, v2]}`` pairs every two rows whose declared configs are equal
except in ``KEY``, where one has ``ref`` and the other ``v1`` (or ``v2``); ``between: variant``
pairs named rows. Fewer, chosen comparisons also cost less power under the Holm correction.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from ablate.report.aggregate import Row, Sweep, value_order
from ablate.report.records import ReportError

VARIANT = "variant"


def planned_pairs(sweep: Sweep) -> list[tuple[str, str]]:
    """``(reference row, row)`` names the table tests, in table order, without repeats.

    Raises:
        ReportError: the comparisons name a row or key that no trial of the sweep has (see :func:`not_compared`).
    """
    not_compared(sweep)
    if not sweep.comparisons:
        return [(sweep.base.name, r.name) for r in sweep.rows if not r.is_base]
    pairs: list[tuple[str, str]] = []
    for key, values in sweep.comparisons:
        found = _named(sweep.rows, values) if key == VARIANT else _differing_in(sweep.rows, key, values)
        pairs += [p for p in found if p not in pairs]
    return pairs


def not_compared(sweep: Sweep) -> list[str]:
    """What the sweep's comparisons name that no finished row is (its trials failed, or are still to
    run), e.g. ``A-x (no finished trial)``, for the footnote.

    Raises:
        ReportError: a named row that no trial of the sweep has, or a key no row sets: a typo, which
            would otherwise leave the comparison out without a word.
    """
    missing: list[str] = []
    names = [r.name for r in sweep.rows]
    for key, values in sweep.comparisons or []:
        if key == VARIANT:
            known = {t.variant for t in sweep.unfinished}
            for name in map(str, values or []):
                if name in names:
                    continue
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
    pairs = []
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            if key not in a.config and key not in b.config:
                continue
            if not _equal_except(a.config, b.config, key):
                continue
            va, vb = value_order(a.config.get(key)), value_order(b.config.get(key))
            if va == vb:
                continue
            if values:
                ref = value_order(values[0])
                others = {value_order(v) for v in values[1:]}
                if va == ref and vb in others:
                    pairs.append((a.name, b.name))
                elif vb == ref and va in others:
                    pairs.append((b.name, a.name))
            else:
                pairs.append((a.name, b.name) if va < vb else (b.name, a.name))
    if not values:  # every value against the lowest one present in its group
        by_name = {r.name: r for r in rows}
        pairs = [
            (a, b)
            for a, b in pairs
            if not any(
                _equal_except(by_name[a].config, by_name[c].config, key)
                and value_order(by_name[c].config.get(key)) < value_order(by_name[a].config.get(key))
                for c in by_name
            )
        ]
    return pairs


def _equal_except(a: dict[str, Any], b: dict[str, Any], key: str) -> bool:
    return all(value_order(a.get(k)) == value_order(b.get(k)) for k in set(a) | set(b) if k != key)


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
