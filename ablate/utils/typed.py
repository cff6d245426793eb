"""Typed values from text: YAML files, ``key=value`` overrides and checks against annotations.

Generic over any annotation (``Literal``, ``Optional``, unions, tuples, scalars), so the config
dataclasses in :mod:`ablate.config` stay a plain list of typed fields.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import json
import math
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml

from ablate.errors import AblateError, did_you_mean
from ablate.utils import yaml_safe


class ConfigError(AblateError):
    """A user-facing configuration mistake; its message is one actionable line."""


CATALOG_FILE = Path(__file__).resolve().parents[1] / "components.json"
"""The shipped components' choice lists and parameters, written from the registries by
``scripts/gen_config_docs.py`` (``--check`` in CI fails when it differs from them): a config naming
only shipped components is checked against it, so commands that never build a model
(``sweep run --dry-run``, ``table``) need not import torch."""


@functools.cache
def catalogued() -> dict[str, Any]:
    """:data:`CATALOG_FILE` as data (empty when absent: the registries are imported instead)."""
    try:
        return json.loads(CATALOG_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


@dataclass(frozen=True)
class OneOf:
    """Marks ``Annotated[str, OneOf(module, registry)]``: a key of the registry ``module.registry``.

    The registry (``ablate.model.scores.SCORES``, ...) is the only list of its variants: a new
    variant is one class plus one registry line, and the config accepts it, lists it in
    ``--help`` and suggests it for a misspelling. The module is imported when a value is first
    checked, since it holds the implementations (torch), so importing the config stays light.

    Attributes:
        module: dotted module path of the registry.
        registry: the registry's name in that module (a dict or tuple of names, or a function returning them).
        extra: choices handled outside the registry (e.g. ``none``: no attention at all).
    """

    module: str
    registry: str
    extra: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """``module:registry``, this registry's name in ``ablate/components.json``."""
        return f"{self.module}:{self.registry}"

    def choices(self) -> list[str]:
        """The registry's names (a function in place of a registry is called), then ``extra``.

        The installed entry-point plugins are imported first, so their components are choices.
        While the registry's module is not imported, its names come from the catalogue of shipped
        components (:func:`catalogued`), so checking a name costs no torch.
        """
        from ablate.utils.plugins import entry_points

        entry_points()
        if self.module not in sys.modules:  # once it is imported, its registry may hold a plugin's names
            cached = catalogued().get("choices", {}).get(self.key)
            if cached is not None:
                return list(cached)
        return self.live_choices()

    def live_choices(self) -> list[str]:
        """:meth:`choices` read from the registry itself (its module imported)."""
        names = getattr(importlib.import_module(self.module), self.registry)
        return [*(names() if callable(names) else names), *self.extra]


def choice_marks(tp: Any) -> list[OneOf]:
    """Every :class:`OneOf` in the annotations of ``tp`` (a dataclass, walked into its sections)."""
    marks: list[OneOf] = []

    def walk(t: Any) -> None:
        if dataclasses.is_dataclass(t):
            for sub in typing.get_type_hints(t, include_extras=True).values():
                walk(sub)
            return
        marks.extend(m for m in getattr(t, "__metadata__", ()) if isinstance(m, OneOf) and m not in marks)
        for arg in typing.get_args(t):
            walk(arg)

    walk(tp)
    return marks


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"model": {"heads": 4}}`` -> ``{"model.heads": 4}``.

    Raises:
        ConfigError: one key is given twice, dotted and nested (``model.heads: 2`` beside
            ``model: {heads: 4}``): which one was meant is unknowable, so neither silently wins.
    """
    flat: dict[str, Any] = {}
    for key, value in d.items():
        items = flatten(value, f"{prefix}{key}.") if isinstance(value, dict) and value else {f"{prefix}{key}": value}
        for name, item in items.items():
            if name in flat:
                raise ConfigError(
                    f"config key '{name}' is given twice (dotted and nested, {flat[name]!r} and {item!r}); keep one"
                )
            flat[name] = item
    return flat


def type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        marks = [m for m in typing.get_args(tp)[1:] if isinstance(m, OneOf)]
        return " | ".join(marks[0].choices()) if marks else type_name(typing.get_args(tp)[0])
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
    if origin is Annotated:
        base, *marks = typing.get_args(tp)
        value = coerce(key, value, base)
        for mark in marks:
            if isinstance(mark, OneOf):
                value = _choose(key, value, mark.choices())
        return value
    if origin is Literal:
        return _choose(key, value, typing.get_args(tp))
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        if len([a for a in args if a is not type(None)]) == 1:  # Optional[X]: X's own message
            return coerce(key, value, next(a for a in args if a is not type(None)))
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
    if tp is dict or origin is dict:
        if isinstance(value, dict):
            return dict(value)
        raise ConfigError(f"{key}={value!r} is not valid (expected a mapping of keys, e.g. {key}.<key>=...)")
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
        number = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):  # YAML 1.1 reads "5e-4" as a string
            try:
                number = float(value)
            except ValueError:
                pass
        if number is None:
            raise ConfigError(f"{key}={value!r} is not valid (expected a number)")
        if not math.isfinite(number):  # .nan passes every comparison check, .inf every budget
            raise ConfigError(f"{key}={value!r} is not a finite number (use null where a key means 'no limit')")
        return number
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise ConfigError(f"{key}={value!r} is not valid (expected a string)")
    raise TypeError(f"unsupported config annotation {tp!r} for {key}")


def _choose(key: str, value: Any, choices: typing.Sequence[Any]) -> Any:
    if value in choices and type(value) is type(choices[0]):
        return value
    if str(value) in [str(c) for c in choices]:
        return next(c for c in choices if str(c) == str(value))
    raise ConfigError(
        f"{key}={value!r} is not valid{did_you_mean(str(value), choices)} (choose from: {', '.join(map(str, choices))})"
    )


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
        value = copy.deepcopy(_parse_value(raw)) if raw.strip() else ""
    except yaml_safe.YAMLRefused as err:
        raise ConfigError(f"override '{key}': {err}") from None
    return key, value


@functools.lru_cache(maxsize=4096)
def _parse_value(raw: str) -> Any:
    """An override's value as YAML (text that is not YAML stays text); cached, sweeps repeat values."""
    if yaml_safe.is_plain_text(raw):  # a name: no YAML parse (a large sweep has one per trial)
        return raw
    if raw.startswith("["):  # a list of names (a trial's tags): JSON reads its quoted strings as YAML does
        try:
            items = json.loads(raw)
        except ValueError:
            items = None
        if isinstance(items, list) and len(items) < yaml_safe.MAX_NODES and all(isinstance(i, str) for i in items):
            return items
    try:
        return yaml_safe.load(raw)
    except yaml_safe.YAMLRefused:
        raise
    except yaml.YAMLError:
        return raw


def read_yaml(
    path: str | Path,
    error: type[ValueError] = ConfigError,
    kind: str = "config file",
    holds: str = "a mapping of config keys",
) -> dict[str, Any]:
    """Load a YAML mapping; a missing or malformed file raises a one-line ``error`` with the line."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{kind} not found: {path}")
    try:
        data = yaml_safe.load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise error(f"{path} is not UTF-8 text (byte {err.start}: {err.reason}); save it as UTF-8") from None
    except OSError as err:
        raise error(f"cannot read {kind} {path}: {err.strerror or err}") from None
    except yaml_safe.YAMLRefused as err:
        raise error(f"{kind} {path} {err}") from None
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
