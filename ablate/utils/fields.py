"""Nested dataclasses seen as dotted keys: their types, their one-line docs, their plain-dict form.

What ``ablate train --help`` lists and what an unknown key is checked against both come from here,
so a new config field needs nothing beyond its annotation and the docstring under it.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import re
import textwrap
import typing
from typing import Any

from ablate.utils.typed import type_name


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """Field name -> resolved annotation (``Annotated`` extras kept); cached, since a 10,000-trial
    sweep validates 10,000 configs."""
    return typing.get_type_hints(cls, include_extras=True)


def leaf_keys(cls: type, prefix: str = "") -> list[str]:
    """Every dotted leaf key of the dataclass ``cls``, e.g. ``model.attention.score``."""
    keys = []
    for name, tp in field_types(cls).items():
        if dataclasses.is_dataclass(tp):
            keys += leaf_keys(tp, f"{prefix}{name}.")  # type: ignore[arg-type]
        else:
            keys.append(f"{prefix}{name}")
    return keys


def field_docstrings(cls: type) -> dict[str, str]:
    """Field name -> the whole string literal under it in the class body (indentation removed).

    What the configuration reference (``scripts/gen_config_docs.py``) prints in full.
    """
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]
    docs = {}
    for field_node, doc_node in zip(body, body[1:]):
        if (
            isinstance(field_node, ast.AnnAssign)
            and isinstance(field_node.target, ast.Name)
            and isinstance(doc_node, ast.Expr)
            and isinstance(doc_node.value, ast.Constant)
            and isinstance(doc_node.value.value, str)
        ):
            docs[field_node.target.id] = inspect.cleandoc(doc_node.value.value)
    return docs


def attribute_docs(cls: type) -> dict[str, str]:
    """Field name -> the first sentence of the string literal under it in the class body."""
    docs = {}
    for name, doc in field_docstrings(cls).items():
        text = " ".join(doc.replace("``", "").split())
        docs[name] = re.split(r"(?<! al)\. (?=[A-Z])", text)[0].rstrip(".")
    return docs


def describe_fields(cls: type, prefix: str = "") -> list[tuple[str, str, Any, str]]:
    """``(dotted key, type or choices, default, one-line doc)`` of every leaf key of ``cls``."""
    hints, docs, defaults = field_types(cls), attribute_docs(cls), cls()
    rows: list[tuple[str, str, Any, str]] = []
    for name, tp in hints.items():
        if dataclasses.is_dataclass(tp):
            rows += describe_fields(tp, f"{prefix}{name}.")  # type: ignore[arg-type]
        else:
            rows.append((prefix + name, type_name(tp), getattr(defaults, name), docs.get(name, "")))
    return rows


def to_dict(obj: Any) -> dict[str, Any]:
    """Nested plain-Python dict of a dataclass instance (tuples become lists), for YAML and JSON."""
    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            value = to_dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out
