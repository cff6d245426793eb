"""One way to add a component: ``@ablate.register(kind, name)``, for ablate's own and a user's.

Each kind is one registry dict, held by the module that implements the family (``SCORES`` in
``ablate/model/scores.py``, ...) and filled by this decorator, so the config's choices, ``--help``,
did-you-mean, ``ablate bench`` and the parametrised registry tests see a plugin's component exactly
as a shipped one::

    import ablate
    from ablate.model.scores import Score

    @ablate.register("score", "cosine")
    class CosineScore(Score):
        def __init__(self, d_k, heads, cfg, *, temperature: float = 10.0): ...

A component's hyperparameters are its typed parameters after those of :data:`BUILD_ARGS`
(``model.attention.params.temperature=5``), checked by :func:`check_params`. This module imports no
torch: a config naming only shipped components is checked against ``components.json``
(:data:`ablate.utils.typed.CATALOG_FILE`).
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import typing
from typing import Any, Callable, Optional, TypeVar

from ablate.errors import AblateError, did_you_mean
from ablate.utils.typed import ConfigError, catalogued, coerce

KINDS: dict[str, tuple[str, str]] = {
    "score": ("ablate.model.scores", "SCORES"),
    "positions": ("ablate.model.positions", "POSITIONS"),
    "arch": ("ablate.model.build", "ARCHS"),
    "schedule": ("ablate.training.module", "DECAYS"),
    "length_penalty": ("ablate.model.decoding", "LENGTH_PENALTIES"),
    "source": ("ablate.data.sources", "SOURCES"),
    "metric": ("ablate.metrics", "METRIC_SCORERS"),
}
"""Kind -> (module, name) of its registry dict; the module holds the shipped components."""

BUILD_ARGS: dict[str, tuple[str, ...]] = {
    "score": ("d_k", "heads", "cfg"),
    "positions": ("d_model", "d_k", "heads", "max_positions"),
}
"""The positional arguments the builder of a kind passes to every component; the parameters after them
are the component's hyperparameters. A kind not listed declares its hyperparameters keyword-only."""

RESERVED: dict[str, tuple[str, ...]] = {"score": ("none",), "schedule": ("inverse_sqrt",)}
"""Names a kind handles outside its registry (``score=none``: the RNN without attention)."""

_TABLES: dict[str, dict[str, Any]] = {kind: {} for kind in KINDS}

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")

T = TypeVar("T")


class RegistryError(AblateError):
    """A registration that cannot be: an unknown kind, a bad or taken name."""


def table(kind: str) -> dict[str, Any]:
    """The registry dict of ``kind``, for the module that holds it (``SCORES = table("score")``)."""
    if kind not in KINDS:
        raise RegistryError(
            f"unknown component kind '{kind}'{did_you_mean(kind, list(KINDS))} (kinds: {', '.join(KINDS)})"
        )
    return _TABLES[kind]


def register(kind: str, name: str, *, override: bool = False) -> Callable[[T], T]:
    """Class or function decorator: ``obj`` becomes the ``kind`` component (one of :data:`KINDS`) that the config
    selects by ``name`` (``model.attention.score=<name>``).

    A plugin's ``name`` that ablate also ships either replaces the shipped component in this process
    (``override=True``) or is registered beside it as ``<plugin module>:<name>``, which a config listing the
    plugin selects by ``name`` (:func:`resolve`), so a saved config keeps meaning what it meant.

    Raises:
        RegistryError: an unknown kind, a malformed name, or a name another plugin (or, for ablate's
            own code, another of ablate's components) holds.
    """
    entries = table(kind)
    if not isinstance(name, str) or not _NAME.match(name):
        raise RegistryError(f"{kind} name {name!r} is not valid; use letters, digits, '_', '-', '.' (e.g. 'cosine')")
    if name in RESERVED.get(kind, ()):
        raise RegistryError(f"{kind} name '{name}' is reserved by ablate; pick another name")

    def decorate(obj: T) -> T:
        importlib.import_module(KINDS[kind][0])  # the shipped components first, so a clash is seen
        old = entries.get(name)
        if old is None or old is obj or _where(old) == _where(obj) or override:
            entries[name] = obj
        elif _shipped(old) and not _shipped(obj):
            module = getattr(obj, "__module__", "?")
            entries[f"{module}:{name}"] = obj
            _SHADOWED.setdefault((kind, name), {})[module] = f"{module}:{name}"
        else:
            raise RegistryError(
                f"{kind} '{name}' is already registered by {_where(old)}; register {_where(obj)} under another name"
            )
        return obj

    return decorate


_SHADOWED: dict[tuple[str, str], dict[str, str]] = {}
"""(kind, shipped name) -> {plugin module: the name its component is registered under}."""


def _shipped(obj: Any) -> bool:
    return str(getattr(obj, "__module__", "")).split(".")[0] == "ablate"


def resolve(kind: str, name: str, modules: list[str]) -> str:
    """The name ``name`` selects in a config whose plugins are ``modules``: the plugin's namespaced one
    where a listed plugin registered ``name`` beside a shipped component (:func:`register`), else ``name``."""
    shadows = _SHADOWED.get((kind, name), {})
    listed = [shadows[m] for m in modules if m in shadows]
    return listed[-1] if listed else name


def _where(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def lookup(kind: str, name: str) -> Any:
    """The registered ``kind`` component ``name`` (its family's module imported first), or None."""
    entries = table(kind)
    importlib.import_module(KINDS[kind][0])
    return entries.get(name)


PARAM_TYPES: dict[str, Any] = {
    "any": inspect.Parameter.empty,
    **{tp.__name__: tp for tp in (int, float, bool, str)},
    **{f"{tp.__name__} or null": Optional[tp] for tp in (int, float, bool, str)},
}
"""A catalogued parameter's type by its name in ``components.json``; shipped components use these."""


def _declared(kind: str, name: str) -> Optional[dict[str, tuple[Any, Any]]]:
    """What component ``name`` declares (:func:`declared_params`), from the catalogue while its family's
    module is not imported; None for a name no registry holds."""
    if KINDS[kind][0] not in sys.modules:
        entries = catalogued().get("params", {}).get(kind, {}).get(name)
        if entries is not None:
            return {
                param: (PARAM_TYPES[e["type"]], inspect.Parameter.empty if e["required"] else e["default"])
                for param, e in entries.items()
            }
    obj = lookup(kind, name)
    return None if obj is None else declared_params(obj, kind)


def declared_params(obj: Any, kind: str = "") -> dict[str, tuple[Any, Any]]:
    """A component's hyperparameters: parameter -> ``(annotation, default)``.

    Its keyword-only parameters, and for a kind of :data:`BUILD_ARGS` also the positional-or-keyword
    ones after the arguments the builder passes (``def __init__(self, d_k, heads, cfg, temperature=10.0)``).
    ``inspect.Parameter.empty`` marks a parameter without a default (it must be set) and one
    without an annotation (any value).
    """
    target = obj.__init__ if inspect.isclass(obj) else obj
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return {}
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # noqa: BLE001 - an unresolvable annotation: accept any value
        hints = {}
    positional = [
        name
        for name, p in signature.parameters.items()
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    skip = positional[: (1 if inspect.isclass(obj) else 0) + len(BUILD_ARGS.get(kind, positional))]  # self too
    return {
        name: (hints.get(name, p.annotation), p.default)
        for name, p in signature.parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
        or (p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and name not in skip)
    }


def check_params(kind: str, name: str, params: dict[str, Any], key: str) -> dict[str, Any]:
    """``params`` (the config key ``key``, named in messages) checked against what component ``name`` declares,
    values converted to their types.

    Raises:
        ConfigError: a parameter the component does not declare (did-you-mean), a value of the
            wrong type, or a required parameter left out.
    """
    declared = _declared(kind, name)
    if declared is None:
        return dict(params)
    out: dict[str, Any] = {}
    for param, value in params.items():
        if param not in declared:
            if not declared:
                raise ConfigError(f"{key}.{param}: {kind} '{name}' takes no parameters; remove {key}.{param}")
            raise ConfigError(
                f"{key}.{param} is not a parameter of {kind} '{name}'{did_you_mean(param, list(declared))} "
                f"(parameters: {', '.join(declared)})"
            )
        tp = declared[param][0]
        out[param] = value if tp is inspect.Parameter.empty or tp is Any else coerce(f"{key}.{param}", value, tp)
    missing = [p for p, (_, default) in declared.items() if default is inspect.Parameter.empty and p not in out]
    if missing:
        raise ConfigError(f"{kind} '{name}' needs {', '.join(f'{key}.{p}' for p in missing)}; set it")
    return out
