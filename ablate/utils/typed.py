"""Config values from text: safe YAML, ``key=value`` overrides, coercion against annotations, dotted keys.

Generic over any annotation (``Literal``, ``Optional``, unions, tuples, scalars), so the config dataclasses stay
a plain list of typed fields. :func:`load_yaml` refuses alias bombs, duplicate keys and deep nesting. ``trainer.*``
keys are Lightning ``Trainer`` options; one ablate sets from its own key is refused with that key
(``trainer.max_steps`` -> ``train.max_steps``), so a run's budget has one source.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import functools
import importlib
import inspect
import json
import math
import re
import sys
import textwrap
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import yaml

from ablate.errors import AblateError, closest, did_you_mean, first_line


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
    """Marks ``Annotated[str, OneOf(module, registry)]``: a key of the registry ``module.registry`` (a dict or tuple
    of names, or a function returning them), the only list of its variants (the config accepts, lists and
    suggests its names), imported when first checked; ``extra``: choices handled outside the registry (``none``)."""

    module: str
    registry: str
    extra: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """``module:registry``, this registry's name in ``ablate/components.json``."""
        return f"{self.module}:{self.registry}"

    def choices(self) -> list[str]:
        """The registry's names (a function in place of a registry is called), then ``extra``; entry-point
        plugins imported first. While the registry's module is not imported, from :func:`catalogued` (no torch)."""
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


def one_of(tp: Any) -> Optional[OneOf]:
    """The :class:`OneOf` of an ``Annotated`` annotation, if it has one."""
    return next((m for m in getattr(tp, "__metadata__", ()) if isinstance(m, OneOf)), None)


def type_name(tp: Any) -> str:
    """How ``--help`` and the configuration reference name an annotation: its choices, ``int``, ``list``, ..."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if origin is Annotated and one_of(tp) is None:
        return type_name(args[0])
    if origin in (Annotated, Literal):
        return " | ".join(choices(tp))
    if tp is type(None):
        return "null"
    return "list" if origin is tuple else getattr(tp, "__name__", str(tp))


EXPECTED = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
"""The scalar annotations :func:`coerce` takes, and what each expects."""


def coerce(key: str, value: Any, tp: Any) -> Any:
    """Check ``value`` against the annotation ``tp``; return it converted or raise."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        mark, value = one_of(tp), coerce(key, value, args[0])
        return value if mark is None else _choose(key, value, mark.choices())
    if origin is Literal:
        return _choose(key, value, args)
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if value is None and len(options) < len(args):
            return None
        if len(options) == 1:  # Optional[X]: X's own message
            return coerce(key, value, options[0])
        for arg in sorted(options, key=lambda a: a is not bool):  # YAML typed the value: bool matches first
            with contextlib.suppress(ConfigError):
                return coerce(key, value, arg)
        raise ConfigError(f"{key}={value!r} is not valid (expected {type_name(tp)})")
    if origin is tuple:
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}={value!r} is not valid (expected a list)")
        if len(args) == 2 and args[1] is Ellipsis:
            args = (args[0],) * len(value)
        elif len(value) != len(args):
            raise ConfigError(f"{key}={value!r} is not valid (expected {len(args)} values)")
        return tuple(coerce(key, v, a) for v, a in zip(value, args))
    if tp is dict or origin is dict:
        if isinstance(value, dict):
            return dict(value)
        raise ConfigError(f"{key}={value!r} is not valid (expected a mapping of keys, e.g. {key}.<key>=...)")
    if tp not in EXPECTED:
        raise TypeError(f"unsupported config annotation {tp!r} for {key}")
    number, text = isinstance(value, (int, float)) and not isinstance(value, bool), isinstance(value, str)
    if tp is float and (number or text):
        try:
            converted = float(value)  # YAML 1.1 reads "5e-4" as a string
        except ValueError:
            raise ConfigError(f"{key}={value!r} is not valid (expected {EXPECTED[tp]})") from None
        if not math.isfinite(converted):  # .nan passes every check, .inf every budget
            raise ConfigError(f"{key}={value!r} is not a finite number (use null where a key means 'no limit')")
        return converted
    if (
        (tp is bool and isinstance(value, bool))
        or (tp is int and number and (isinstance(value, int) or value.is_integer()))
        or (tp is str and (number or text))
    ):
        return tp(value)
    raise ConfigError(f"{key}={value!r} is not valid (expected {EXPECTED[tp]})")


def _choose(key: str, value: Any, choices: typing.Sequence[Any]) -> Any:
    """The choice whose text is ``value``'s (YAML reads ``train.precision=32`` as a number), else a one-line error."""
    for choice in choices:
        if str(choice) == str(value):
            return choice
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
    except YAMLRefused as err:
        raise ConfigError(f"override '{key}': {err}") from None
    return key, value


@functools.lru_cache(maxsize=4096)
def _parse_value(raw: str) -> Any:
    """An override's value as YAML (text that is not YAML stays text); cached, sweeps repeat values."""
    if is_plain_text(raw):  # a name: no YAML parse (a large sweep has one per trial)
        return raw
    if raw.endswith(":") and is_plain_text(raw[:-1]):  # `hf:`: a scheme and nothing after it, text (YAML: a mapping)
        return raw
    if raw.startswith("["):  # a list of names (a trial's tags): JSON reads its quoted strings as YAML does
        with contextlib.suppress(ValueError):
            items = json.loads(raw)
            if isinstance(items, list) and len(items) < MAX_NODES and all(isinstance(i, str) for i in items):
                return items
    try:
        return load_yaml(raw)
    except yaml.YAMLError:  # a YAMLRefused (alias bomb, duplicate key) is no YAMLError: it propagates
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
        what = "a folder" if path.is_dir() else "a device or a pipe" if path.exists() else None
        raise error(f"{kind} {path} is {what}; give a YAML file" if what else f"{kind} not found: {path}")
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise error(f"{path} is not UTF-8 text (byte {err.start}: {err.reason}); save it as UTF-8") from None
    except OSError as err:
        raise error(f"cannot read {kind} {path}: {err.strerror or err}") from None
    except YAMLRefused as err:
        raise error(f"{kind} {path} {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or first_line(err)
        context, opened = getattr(err, "context", None), getattr(err, "context_mark", None)
        if context and opened is not None and (mark is None or opened.line != mark.line):
            problem += f" ({context} started on line {opened.line + 1})"
        raise error(f"malformed YAML in {path}{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error(f"{path} must hold {holds}, not {type(data).__name__}")
    return data


MAX_NODES = 100_000
"""Most nodes a document may expand to once aliases are followed (real configs have < 1,000)."""
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.=+/-]*")
_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}  # YAML 1.1 reads these as bools, None


def is_plain_text(text: str) -> bool:
    """Whether YAML reads ``text`` back as this very string, decided without parsing it (planning a large
    sweep formats and parses a trial name per trial): a letter or ``_`` first, then letters, digits and
    ``_ . = + / -``, and not a word YAML reads as a boolean or null. ``False`` only means: parse it."""
    return _PLAIN.fullmatch(text) is not None and text.lower() not in _WORDS


MAX_DEPTH = 100
"""Deepest nesting of lists and mappings a document may hold (real configs and sweep files: < 10)."""


class YAMLRefused(AblateError):
    """The document is well formed but refused (alias bomb, duplicate key); the message has the line."""


class _StrictLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if first is not None:
                raise YAMLRefused(
                    f"line {key_node.start_mark.line + 1}: duplicate key '{key}' "
                    f"(first given on line {first}); keep one"
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _check_size(root: yaml.Node, limit: int) -> None:
    """Refuse a node graph whose expansion (every alias followed) exceeds ``limit`` nodes."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        if id(node) not in sizes:
            sizes[id(node)] = 1  # a recursive alias counts once (and PyYAML refuses it anyway)
            items = node.value if isinstance(node, yaml.CollectionNode) else []  # a mapping's: (key, value) pairs
            sizes[id(node)] = 1 + sum(size(n) for item in items for n in (item if isinstance(item, tuple) else [item]))
            if sizes[id(node)] > limit:
                raise YAMLRefused(
                    f"line {node.start_mark.line + 1}: aliases expand this document to more than "
                    f"{limit:,} values (an alias bomb?); write the values out instead of nesting aliases"
                )
        return sizes[id(node)]

    size(root)


def _check_depth(text: str, limit: int) -> None:
    """Refuse a document nested more than ``limit`` deep, reading its events (PyYAML's parser does not
    recurse; its composer and constructor do, and a deep document would exhaust Python's stack)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limit:
                raise YAMLRefused(
                    f"line {event.start_mark.line + 1}: lists and mappings nest more than {limit} levels deep here; "
                    "flatten them"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def load_yaml(text: str) -> Any:
    """Parse one YAML document like ``yaml.safe_load``, refusing alias bombs and duplicate keys.

    Raises:
        yaml.YAMLError: malformed YAML (with its marks).
        YAMLRefused: a duplicate key, an alias bomb or nesting past :data:`MAX_DEPTH`, the message
            starting with ``line N:``.
    """
    _check_depth(text, MAX_DEPTH)
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node, MAX_NODES)
        return loader.construct_document(node)
    finally:
        loader.dispose()


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """Field name -> resolved annotation (``Annotated`` extras kept); cached, since a 10,000-trial
    sweep validates 10,000 configs."""
    return typing.get_type_hints(cls, include_extras=True)


def field_docstrings(cls: type) -> dict[str, str]:
    """Field name -> the whole string literal under it in the class body (indentation removed), as the
    configuration reference (``scripts/gen_config_docs.py``) prints it."""
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


def describe_fields(cls: type, prefix: str = "") -> list[tuple[str, str, Any, str]]:
    """``(dotted key, type or choices, default, one-line doc)`` of every leaf key of ``cls``; the doc is the first
    sentence of the field's docstring (:func:`field_docstrings`)."""
    hints, docs, defaults = field_types(cls), field_docstrings(cls), cls()
    rows: list[tuple[str, str, Any, str]] = []
    for name, tp in hints.items():
        if dataclasses.is_dataclass(tp):
            rows += describe_fields(tp, f"{prefix}{name}.")  # type: ignore[arg-type]
        else:
            text = " ".join(docs.get(name, "").replace("``", "").split())
            first = re.split(r"(?<! al)\. (?=[A-Z])", text)[0].rstrip(".")
            rows.append((prefix + name, type_name(tp), getattr(defaults, name), first))
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


def choices(tp: Any) -> list[str]:
    """The values a field of annotation ``tp`` can take, as override text; ``[]`` when open-ended."""
    origin, mark = typing.get_origin(tp), one_of(tp)
    if origin is Annotated:
        return [str(c) for c in mark.choices()] if mark else choices(typing.get_args(tp)[0])
    if origin is Literal:
        return [str(a) for a in typing.get_args(tp)]
    if origin in (Union, types.UnionType):
        return [c for arg in typing.get_args(tp) for c in choices(arg)]
    if tp is bool:
        return ["true", "false"]
    if tp is type(None):
        return ["null"]
    return []


def leaf_types(cls: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> annotation of every leaf field of the dataclass ``cls``, its sections walked into."""
    leaves = {}
    for name, tp in field_types(cls).items():
        if dataclasses.is_dataclass(tp):
            leaves.update(leaf_types(tp, f"{prefix}{name}."))
        else:
            leaves[prefix + name] = tp
    return leaves


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
    tp = leaf_types(cls).get(key)
    if tp is None:
        return []
    return [(f"{key}={c}", "") for c in dict.fromkeys(choices(tp)) if c.startswith(value)]


TRAINER_OWNED = {
    "max_steps": "train.max_steps",
    "max_epochs": "train.max_epochs",
    "max_time": "train.max_time",
    "accelerator": "train.accelerator",
    "devices": "train.devices",
    "num_nodes": "train.nodes",
    "precision": "train.precision",
    "gradient_clip_val": "train.clip_norm",
    "accumulate_grad_batches": "train.accumulate",
    "val_check_interval": "train.val_every",
    "check_val_every_n_epoch": "train.val_every",
    "log_every_n_steps": "tracking.log_every",
    "logger": "tracking.loggers",
    "default_root_dir": "--run-dir",
}
"""Trainer arguments ablate derives from its own config key (named here)."""
TRAINER_INTERNAL = ("plugins", "use_distributed_sampler", "enable_checkpointing", "fast_dev_run")
"""Trainer arguments ablate's run record depends on (checkpoints, batches per rank)."""


def class_spec(item: Any, key: str = "trainer.callbacks") -> tuple[str, dict[str, Any]]:
    """``(class path or name, init_args)`` of a ``key`` entry in LightningCLI's notation; one-line error else."""
    if isinstance(item, str):
        return item, {}
    if isinstance(item, dict) and isinstance(item.get("class_path"), str):
        args = item.get("init_args") or {}
        if isinstance(args, dict) and set(item) <= {"class_path", "init_args"}:
            return item["class_path"], dict(args)
    raise ConfigError(
        f"{key} entry {item!r} must be a class path or {{class_path: package.module.Class, init_args: {{...}}}}"
    )


def class_module(path: str) -> tuple[str, str]:
    """``(module, name)`` of a class path (``package.module.Class``; ``lightning.pytorch.*`` read as
    ``pytorch_lightning.*``, the package that holds the same classes)."""
    path = re.sub(r"^lightning\.pytorch\.", "pytorch_lightning.", path)
    module, _, name = path.replace(":", ".").rpartition(".")
    return module, name


def import_class(path: str, key: str = "trainer.callbacks") -> type:
    """The class at ``path`` (:func:`class_module`)."""
    module, name = class_module(path)
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        raise ConfigError(f"{key}: cannot import '{path}' (use package.module.Class)") from None


def callback_modules(options: dict[str, Any]) -> dict[str, str]:
    """The modules the ``trainer.callbacks`` of ``options`` name by class path, each with what names it
    (``{"lab": "trainer.callbacks lab.Stamp"}``); importing none."""
    value = options.get("callbacks")
    items = value if isinstance(value, (list, tuple)) else []
    named: dict[str, str] = {}
    for item in items:
        path = class_spec(item)[0]
        named.setdefault(class_module(path)[0], f"trainer.callbacks {path}")
    return named


def check_trainer_options(options: dict[str, Any], imports: bool = True) -> None:
    """Raise :class:`ConfigError` (one line) for an option the Trainer or ablate cannot take; ``imports``:
    import each callback's class (``False``: check its form only, for a record whose code is not to run)."""
    for key, value in options.items():  # ablate's own refusals first: they need no Lightning import (seconds)
        if key in TRAINER_OWNED:
            raise ConfigError(f"trainer.{key} is set by ablate; use {TRAINER_OWNED[key]} instead")
        if key in TRAINER_INTERNAL:
            raise ConfigError(f"trainer.{key} is managed by ablate (checkpoints and batching depend on it)")
        if key == "barebones" and value is True:  # Lightning would name its log_every_n_steps, not ablate's key
            raise ConfigError(
                "trainer.barebones=true turns off the logging and checkpoints every run keeps (tracking.log_every, "
                "at least 1, sets Lightning's log_every_n_steps; best.ckpt, last.ckpt): drop trainer.barebones"
            )
    import pytorch_lightning as pl

    hints = typing.get_type_hints(pl.Trainer.__init__)
    known = [name for name in inspect.signature(pl.Trainer.__init__).parameters if name != "self"]
    for key, value in options.items():
        if key not in known:
            match = closest(key, known)
            hint = f"; did you mean 'trainer.{match}'?" if match else ""
            raise ConfigError(f"unknown Lightning Trainer option 'trainer.{key}'{hint}")
        with contextlib.suppress(TypeError):  # a class in the annotation (a profiler, a strategy): Lightning checks
            coerce(f"trainer.{key}", value, hints.get(key))  # 'deterministic=maybe' was half of True, silently
        if key == "callbacks":
            if not isinstance(value, (list, tuple)):
                raise ConfigError("trainer.callbacks must be a list of class paths or {class_path, init_args}")
            for item in value:
                path = class_spec(item)[0]
                if imports:
                    import_class(path)


def build_trainer_options(options: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """``(Trainer keyword arguments, callback objects)`` from ``trainer.*`` options."""
    check_trainer_options(options)
    kwargs = {k: v for k, v in options.items() if k != "callbacks"}
    callbacks = []
    for item in options.get("callbacks") or []:
        path, args = class_spec(item)
        try:
            callbacks.append(import_class(path)(**args))
        except TypeError as err:
            raise ConfigError(f"trainer.callbacks: {path}: {err}") from None
    return kwargs, callbacks
