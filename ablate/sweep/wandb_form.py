"""A sweep file as ablate registers it with a W&B server: variants by name only.

In a sweep file a variant is a name or ``{name: A-heads1, model.heads: 1}``. Registered as is,
every W&B run of a non-base row would hold that mapping as its ``variant`` (locked by the sweep),
and W&B's panels grouped by ``config.variant`` would not separate the rows. So the sweep W&B
sees lists the names only and carries the overrides in one constant parameter, ``variants``::

    variant:  {values: [base, A-heads1]}
    variants: {value: {A-heads1: {model.heads: 1}}}

W&B's grid still has one point per variant; every run's ``variant`` is its name; the trainer
(:func:`ablate.sweep.wandb_command.expand_variant`) and ``ablate sweep agent`` read the overrides back
from ``variants``. :func:`from_wandb` turns a registered sweep back into the file's form.
"""

from __future__ import annotations

import copy
from typing import Any

from ablate.sweep.spec import VARIANT, VARIANTS, SweepError, variant_name, variant_overrides


def to_wandb(config: dict[str, Any]) -> dict[str, Any]:
    """The sweep configuration with name-only variants and a ``variants`` constant (a copy)."""
    out = copy.deepcopy(config)
    param = (out.get("parameters") or {}).get(VARIANT)
    if not isinstance(param, dict) or "values" not in param:
        return out
    overrides = {variant_name(v): variant_overrides(v) for v in param["values"]}
    param["values"] = list(overrides)
    if any(overrides.values()):
        out["parameters"][VARIANTS] = {"value": {name: o for name, o in overrides.items() if o}}
    return out


def from_wandb(config: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`to_wandb`: variants as ``{name, overrides}`` again (a copy)."""
    out = copy.deepcopy(config)
    parameters = out.get("parameters") or {}
    table = parameters.pop(VARIANTS, None)
    if table is not None and isinstance(parameters.get(VARIANT), dict) and "values" in parameters[VARIANT]:
        mapping = _mapping(table.get("value") if isinstance(table, dict) else None)
        parameters[VARIANT]["values"] = [expand(v, mapping) for v in parameters[VARIANT]["values"]]
    return out


def point_from_wandb(point: dict[str, Any]) -> dict[str, Any]:
    """A W&B run's parameters with its ``variant`` name expanded from ``variants`` (a copy)."""
    point = dict(point)
    mapping = _mapping(point.pop(VARIANTS, None))
    if VARIANT in point:
        point[VARIANT] = expand(point[VARIANT], mapping)
    return point


def expand(value: Any, mapping: dict[str, Any]) -> Any:
    """A variant name with its overrides from ``mapping`` (a name without any stays a name)."""
    if isinstance(value, str) and mapping.get(value):
        return {"name": value, **mapping[value]}
    return value


def _mapping(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise SweepError(f"{VARIANTS} must map each variant name to its overrides, not {value!r}")
    return value
