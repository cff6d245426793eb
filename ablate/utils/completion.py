"""Shell completion of ``key=value`` overrides from a config dataclass.

``ablate train model.att<TAB>`` completes the dotted keys (``model.attention.score=``, ...), and
``model.attention.score=<TAB>`` the choices of a ``Literal`` field, a registry (:class:`OneOf`)
or a bool. Typer calls :func:`complete_override` through the overrides argument's
``autocompletion=`` (``ablate --install-completion`` installs the shell's hook).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Annotated, Any, Literal, Union

from ablate.utils.fields import describe_fields, field_types
from ablate.utils.typed import OneOf


def choices(tp: Any) -> list[str]:
    """The values a field of annotation ``tp`` can take, as override text; ``[]`` when open-ended."""
    origin = typing.get_origin(tp)
    if origin is Annotated:
        marks = [m for m in typing.get_args(tp)[1:] if isinstance(m, OneOf)]
        return [str(c) for c in marks[0].choices()] if marks else choices(typing.get_args(tp)[0])
    if origin is Literal:
        return [str(a) for a in typing.get_args(tp)]
    if origin in (Union, types.UnionType):
        return [c for arg in typing.get_args(tp) for c in choices(arg)]
    if tp is bool:
        return ["true", "false"]
    if tp is type(None):
        return ["null"]
    return []


def field_type(cls: type, key: str) -> Any:
    """The annotation of the dotted ``key`` of the dataclass ``cls`` (``None`` if there is none)."""
    tp: Any = cls
    for part in key.split("."):
        hints = field_types(tp) if isinstance(tp, type) and dataclasses.is_dataclass(tp) else {}
        if part not in hints:
            return None
        tp = hints[part]
    return None if dataclasses.is_dataclass(tp) else tp


def complete_override(cls: type, incomplete: str) -> list[tuple[str, str]]:
    """``(completion, help)`` pairs for a partly typed ``key=value`` override of ``cls``.

    Before the ``=``: every key starting with ``incomplete``, with ``=`` appended and its type or
    choices as help. After it: the key's choices starting with the typed value (``none``-valued
    registries, ``Literal`` fields, bools), each as the whole ``key=value``.
    """
    key, sep, value = incomplete.partition("=")
    if not sep:
        return [
            (f"{name}=", f"{kind}, default {default}")
            for name, kind, default, _ in describe_fields(cls)
            if name.startswith(incomplete)
        ]
    tp = field_type(cls, key)
    if tp is None:
        return []
    return [(f"{key}={c}", "") for c in dict.fromkeys(choices(tp)) if c.startswith(value)]
