"""What plain ``wandb agent`` runs: the sweep files' ``command`` and the arguments it passes.

``wandb sweep FILE && wandb agent ID`` starts, for every run, the sweep's ``command`` with W&B's
macros filled in: ``${env}`` is ``/usr/bin/env``, ``${interpreter}`` is ``python`` and
``${args_no_hyphens}`` is one ``key=value`` per parameter (``str(value)``, so a dict-valued
``variant`` arrives as Python text: ``variant={'name': 'A-heads1', 'model.heads': 1}``). Every
shipped sweep file holds :data:`SWEEP_COMMAND`; ``ablate train`` accepts those arguments, a
``variant`` included (:func:`expand_variant`).
"""

from __future__ import annotations

import ast
import json
from typing import Any

from ablate.config import parse_override
from ablate.sweep.spec import RESERVED, VARIANT, VARIANTS, SweepError, to_overrides, variant_name, variant_overrides
from ablate.sweep.wandb_form import point_from_wandb

SWEEP_COMMAND = ["${env}", "${interpreter}", "-m", "ablate", "train", "${args_no_hyphens}"]
"""``python -m ablate train key=value ...``: the trainer with the run's parameters as overrides."""


def _variant_value(raw: Any) -> Any:
    """A variant as W&B passes it: a name, a mapping, or a mapping's JSON / Python text."""
    if isinstance(raw, str) and raw.strip().startswith("{"):
        for parse in (json.loads, ast.literal_eval):
            try:
                return parse(raw)
            except (ValueError, SyntaxError):
                continue
        raise SweepError(f"variant={raw!r} is neither a name nor a mapping of a name and overrides")
    return raw


def expand_variant(overrides: list[str]) -> list[str]:
    """Replace a ``variant=...`` argument by ``tracking.variant=<name>`` and its overrides.

    W&B formats every value with ``str``, so a ``null`` in the sweep file arrives as ``None`` and
    is turned back into ``null``. A sweep registered by ``ablate sweep create`` passes the variant by
    name and the names' overrides as ``variants=...`` (:mod:`ablate.sweep.wandb_form`). The sweep's other reserved parameters (``comparisons``: what its table tests) are about the
    sweep, not the run, and are dropped. The variant's overrides come last, so they win over the
    base values W&B passes for the same keys (``model.heads=8 variant={'name': 'A-heads1',
    'model.heads': 1}`` trains one head).

    Raises:
        SweepError: the variant is neither a name nor a mapping with a ``name``.
    """
    rest, variants, table = [], [], None
    for item in overrides:
        key, value = parse_override(item) if "=" in item else (None, None)
        if key == VARIANT:
            variants.append(_variant_value(value))
        elif key == VARIANTS:  # a sweep registered by ablate: the names' overrides
            table = _variant_value(value)
        elif key not in RESERVED:
            # W&B writes ``str(value)``: Python's ``None`` is YAML's ``null``.
            rest.append(f"{key}=null" if value == "None" else item)
    if not variants:
        return rest
    value = variants[-1] if table is None else point_from_wandb({VARIANT: variants[-1], VARIANTS: table})[VARIANT]
    name = variant_name(value, "variant")
    return rest + [f"tracking.variant={name}"] + to_overrides(variant_overrides(value))
