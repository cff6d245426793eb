"""Command-line grid axes: ``ablate sweep run FILE model.heads=4,8`` adds a parameter to the sweep.

Hydra users write ``-m model.heads=4,8`` to run one job per value; here an override whose value
is a comma list becomes one more categorical parameter of the sweep (``model.heads: {values: [4,
8]}``), so a grid crosses it with every other axis and random / bayes search samples it. A
parameter of the same name in the file is replaced. Commas inside brackets, braces or quotes do
not split: ``train.tags=[a,b]`` is one list, and a literal comma is kept by quoting the value for
YAML inside the shell's quotes: ``'tracking.name="a,b"'``.
"""

from __future__ import annotations

from typing import Any

from ablate.config import parse_override
from ablate.sweep.spec import RESERVED, SweepError, SweepSpec, format_value, spec_from_dict

_OPEN, _CLOSE, _QUOTES = "[{", "]}", "'\""


def split_top_level(raw: str) -> list[str]:
    """``"4,8"`` -> ``["4", "8"]``; commas inside ``[]``, ``{}`` or quotes do not split."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(raw):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in _QUOTES:
            quote = ch
        elif ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            parts.append(raw[start:i])
            start = i + 1
    parts.append(raw[start:])
    return parts


def split_axes(overrides: list[str]) -> tuple[list[str], dict[str, list[Any]]]:
    """Plain ``key=value`` overrides, and ``{key: [values]}`` for each comma-list override.

    Raises:
        SweepError: an empty item in a comma list (``heads=4,``), a repeated value, or a list
            for a reserved sweep parameter (``variant``).
    """
    plain: list[str] = []
    axes: dict[str, list[Any]] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        parts = split_top_level(raw) if sep else [raw]
        if len(parts) == 1:
            plain.append(item)
            continue
        key = key.strip()
        if key in RESERVED:
            raise SweepError(f"override '{item}': '{key}' is set in the sweep file, not as a comma list")
        if any(not p.strip() for p in parts):
            raise SweepError(
                f"override '{item}': an empty value in the comma list (quote a literal comma: '{key}=\"a,b\"')"
            )
        values = [parse_override(f"{key}={p}")[1] for p in parts]
        if len({repr(v) for v in values}) < len(values):
            raise SweepError(f"override '{item}': a value is listed twice")
        axes[key] = values
    return plain, axes


def with_axes(spec: SweepSpec, axes: dict[str, list[Any]]) -> SweepSpec:
    """``spec`` with each axis as a ``{values: [...]}`` parameter (replacing one of the same name)."""
    if not axes:
        return spec
    parameters = {k: v for k, v in spec.parameters.items() if k not in axes}
    parameters.update({key: {"values": values} for key, values in axes.items()})
    return spec_from_dict({**spec.config, "parameters": parameters}, name=spec.name, path=spec.path)


def axis_overrides(axes: dict[str, list[Any]]) -> list[str]:
    """The axes as the comma-list overrides a user types (recorded in ``sweep.json``)."""
    return [f"{key}={','.join(format_value(v) for v in values)}" for key, values in axes.items()]
