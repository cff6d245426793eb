"""Typed values from text: YAML files, ``key=value`` overrides and checks against annotations.

Generic over any annotation (``Literal``, ``Optional``, unions, tuples, scalars), so the config
dataclasses in :mod:`ablate.config` stay a plain list of typed fields.
"""

from __future__ import annotations

import difflib
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

import yaml


class ConfigError(ValueError):
    """A user-facing configuration mistake; its message is one actionable line."""


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"model": {"heads": 4}}`` -> ``{"model.heads": 4}``."""
    flat = {}
    for key, value in d.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(str(a) for a in typing.get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    if origin is tuple:
        return "list"
    return getattr(tp, "__name__", str(tp))


def coerce(key: str, value: Any, tp: Any) -> Any:
    """Check ``value`` against the annotation ``tp``; return it converted or raise."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        choices = typing.get_args(tp)
        if value in choices and type(value) is type(choices[0]):
            return value
        if str(value) in [str(c) for c in choices]:
            return next(c for c in choices if str(c) == str(value))
        close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ConfigError(
            f"{key}={value!r} is not valid{hint} (choose from: {', '.join(map(str, choices))})"
        )
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        # bool before int/float: YAML already typed the value, so match exactly first.
        for arg in sorted(args, key=lambda a: a is not bool):
            if arg is type(None):
                continue
            try:
                return coerce(key, value, arg)
            except ConfigError:
                continue
        raise ConfigError(f"{key}={value!r} is not valid (expected {type_name(tp)})")
    if origin is tuple:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}={value!r} is not valid (expected a list)")
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(coerce(key, v, args[0]) for v in value)
        if len(value) != len(args):
            raise ConfigError(f"{key}={value!r} is not valid (expected {len(args)} values)")
        return tuple(coerce(key, v, a) for v, a in zip(value, args))
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}={value!r} is not valid (expected true or false)")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(f"{key}={value!r} is not valid (expected an integer)")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads "5e-4" as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{key}={value!r} is not valid (expected a number)")
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"{key}={value!r} is not valid (expected a string)")
    raise TypeError(f"unsupported config annotation {tp!r} for {key}")


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        node = nested
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"config key '{key}' conflicts with '{part}={child!r}'")
            node = child
        node[parts[-1]] = value
    return nested


def parse_override(text: str) -> tuple[str, Any]:
    """``"model.heads=8"`` -> ``("model.heads", 8)``; the value is parsed as YAML."""
    if "=" not in text:
        raise ConfigError(f"override '{text}' is not of the form key=value (e.g. model.heads=8)")
    key, raw = text.split("=", 1)
    key = key.strip()
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


def read_yaml(path: str | Path, error: type[ValueError] = ConfigError, kind: str = "config file",
              holds: str = "a mapping of config keys") -> dict[str, Any]:
    """Load a YAML mapping; a missing or malformed file raises a one-line ``error`` with the line."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{kind} not found: {path}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        context, opened = getattr(err, "context", None), getattr(err, "context_mark", None)
        if context and opened is not None and (mark is None or opened.line != mark.line):
            problem += f" ({context} started on line {opened.line + 1})"
        raise error(f"malformed YAML in {path}{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error(f"{path} must hold {holds}, not {type(data).__name__}")
    return data
