"""Sweep files: W&B's sweep configuration, validated, plus named variants; their points, and their W&B form.

Grid and random points are planned as W&B's ``sweeps`` engine plans them, without it (it pins numpy<2).
Registered with W&B (:func:`to_wandb`), a variant is its name and the overrides travel in one constant,
``variants``; ``ablate train`` reads a plain ``wandb agent``'s arguments back with :func:`expand_variant`.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import importlib.util
import itertools
import json
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import yaml

from ablate.config import closest_key, flatten, is_key, parse_override, read_yaml, valid_keys
from ablate.errors import AblateError, closest
from ablate.utils.plugins import absolute
from ablate.utils.typed import is_plain_text

VARIANT = "variant"  # named sets of overrides
COMPARISONS = "comparisons"  # a constant: the comparisons the sweep's table makes
VARIANTS = "variants"  # a constant: variant name -> overrides, in a sweep registered with W&B
BASE = "base"  # a constant: the table's base row (a variant, or a grid's point)
RESERVED = (VARIANT, COMPARISONS, VARIANTS, BASE)
SEED = "seed"  # the one parameter that can be a repeat axis
RUN_NAME = "tracking.name"  # each trial's own W&B run name: a sweep may vary it, never fix it for many trials
REPEAT = "repeat"  # ``seed: {repeat: N}``: every proposed configuration trains with seeds 1..N
METHODS = ("grid", "random", "bayes", "custom")  # W&B's search methods (custom needs a W&B scheduler: refused)
BAYES_EXTRA = "pip install 'ablate[bayes]'"  # W&B's sweeps engine (bayes search, hyperband); it pins numpy<2
# What plain ``wandb agent`` runs for every run of a shipped sweep file: the trainer, the run's parameters as
# ``key=value`` (W&B writes each with ``str``: a dict-valued variant arrives as Python text).
SWEEP_COMMAND = ["${env}", "${interpreter}", "-m", "ablate", "train", "${args_no_hyphens}"]
MAX_VARIANT_NAME = 64  # a variant name is a folder name, a table row and a W&B tag (W&B allows 64 characters)
MAX_NAME = 120  # longest folder name safe_name gives (a file name may hold 255 bytes; suffixes need room)

_SEARCHABLE = ("values", "min", "max", "mu", "sigma", "a", "b")
_PARAMETER_KEYS = {"value", *_SEARCHABLE, "distribution", "parameters"}
# W&B's parameter distributions (its sweep schema's), checked with or without the ``sweeps`` engine
DISTRIBUTIONS = (
    "constant categorical categorical_w_probabilities int_uniform uniform q_uniform log_uniform log_uniform_values "
    "q_log_uniform q_log_uniform_values inv_log_uniform inv_log_uniform_values normal q_normal log_normal q_log_normal "
    "beta q_beta"
).split()
Point = dict[str, Any]  # one configuration: {parameter name: value} (constants included)


class SweepError(AblateError):
    """A user-facing sweep mistake; its message is one actionable line."""


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep file: its ``name`` (the file's ``name`` or stem; the output folder and W&B group),
    ``path`` (``None`` when built from a dict) and W&B ``config`` exactly as written."""

    name: str
    path: Optional[Path]
    config: dict[str, Any]

    @property
    def method(self) -> str:
        return self.config["method"]

    @property
    def parameters(self) -> dict[str, dict[str, Any]]:
        return self.config["parameters"]

    @property
    def metric(self) -> Optional[str]:
        metric = self.config.get("metric")
        return metric["name"] if metric else None

    @property
    def goal(self) -> str:
        return (self.config.get("metric") or {}).get("goal", "minimize")

    @property
    def run_cap(self) -> Optional[int]:
        return self.config.get("run_cap")

    @property
    def varying(self) -> list[str]:
        """Parameters that differ between trials, in file order (``variant`` first, a repeat seed last)."""
        names = [n for n, p in self.parameters.items() if _varies(p)]
        return sorted(names, key=lambda n: 0 if n == VARIANT else 2 if REPEAT in self.parameters[n] else 1)

    @property
    def repeat_seeds(self) -> Optional[list[int]]:
        """The seeds every configuration runs with (``seed: {repeat: N}``: 1..N), ``None`` without a repeat axis."""
        param = self.parameters.get(SEED) or {}
        return list(range(1, param[REPEAT] + 1)) if REPEAT in param else None

    @property
    def search_config(self) -> dict[str, Any]:
        return search_config(self.config)

    def describe(self) -> str:
        return f"{self.name} ({self.path if self.path is not None else '<dict>'})"


def _varies(param: dict[str, Any]) -> bool:
    """Whether a parameter takes more than one value (a repeat seed does)."""
    return REPEAT in param or (any(k in param for k in _SEARCHABLE) and len(param.get("values", ())) != 1)


# ---- Loading and validation ----


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep file (W&B schema, config keys, variants); malformed YAML is one line."""
    path = Path(path)
    config = read_yaml(path, error=SweepError, kind="sweep file", holds="a W&B sweep configuration (a mapping)")
    if not config:
        raise SweepError(f"{path} must hold a W&B sweep configuration (a mapping), not an empty file")
    return spec_from_dict(config, name=str(config.get("name") or path.stem), path=path)


def spec_from_dict(config: dict[str, Any], name: str = "sweep", path: Optional[Path] = None) -> SweepSpec:
    """Validate a sweep configuration held in memory."""
    where = str(path) if path is not None else "sweep"
    check_seed_axis(config, where)
    check_wandb_schema(search_config(config), where)
    check_parameters(config["parameters"], where)
    method = config["method"]
    if method == "bayes" and "metric" not in config:
        raise SweepError(f"{where}: method 'bayes' needs a 'metric' (e.g. metric: {{name: val/bleu, goal: maximize}})")
    if "early_terminate" in config and "metric" not in config:
        raise SweepError(f"{where}: 'early_terminate' needs a 'metric' to compare trials by")
    if method == "custom":
        raise SweepError(f"{where}: method 'custom' needs a W&B scheduler; use grid, random or bayes")
    if needs_engine(config) and not engine_installed():
        raise engine_missing(where, config)
    spec = SweepSpec(name=safe_name(name), path=path, config=config)
    if method == "grid":  # W&B's grid refuses continuous distributions: say so before running
        try:
            grid_size(spec.search_config["parameters"])
        except ValueError as err:
            raise SweepError(f"{spec.describe()}: {str(err).splitlines()[0]}") from None
    return spec


def search_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without a repeat seed (``seed: {repeat: N}``), as W&B's schema and search read it."""
    parameters = config.get("parameters")
    if not isinstance(parameters, dict) or not isinstance(parameters.get(SEED), dict) or REPEAT not in parameters[SEED]:
        return config
    return {**config, "parameters": {k: v for k, v in parameters.items() if k != SEED}}


def check_seed_axis(config: dict[str, Any], where: str) -> None:
    """``repeat`` is written ``seed: {repeat: N}`` only, and bayes or random search does not sample the seed."""
    parameters = config.get("parameters")
    if not isinstance(parameters, dict):
        return  # the W&B schema check says what is wrong
    for name, param in parameters.items():
        if isinstance(param, dict) and REPEAT in param and name != SEED:
            raise SweepError(f"{where}: parameters.{name}: only the seed repeats (seed: {{{REPEAT}: N}})")
    param = parameters.get(SEED)
    if not isinstance(param, dict):
        return
    if REPEAT in param:
        count = param[REPEAT]
        if set(param) != {REPEAT} or isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise SweepError(
                f"{where}: parameters.{SEED}: write {SEED}: {{{REPEAT}: N}} (N >= 1: seeds 1..N), not {param!r}"
            )
        return
    searched = len(param.get("values") or ()) > 1 or any(k in param for k in _SEARCHABLE if k != "values")
    if config.get("method") in ("bayes", "random") and searched:
        raise SweepError(
            f"{where}: parameters.{SEED}: method '{config['method']}' would search the seed like a hyperparameter "
            f"(and chase lucky seeds); write {SEED}: {{{REPEAT}: N}} to train every proposal with seeds 1..N "
            f"and search on their mean, or {SEED}: {{value: 1}}"
        )


def needs_engine(config: dict[str, Any]) -> Optional[str]:
    """What of a sweep ``config`` needs W&B's ``sweeps`` engine (``method 'bayes'``, ``early_terminate``), if any."""
    if config.get("method") == "bayes":
        return "method 'bayes'"
    return "early_terminate" if "early_terminate" in config else None


def engine_missing(where: str, config: dict[str, Any]) -> SweepError:
    """The one line for a sweep ``config`` that needs W&B's ``sweeps`` engine where it is not installed."""
    return SweepError(
        f"{where}: {needs_engine(config)} needs W&B's sweeps engine, which is not installed: {BAYES_EXTRA}"
    )


def engine_installed() -> bool:
    """Whether W&B's ``sweeps`` engine can be imported (found without importing it)."""
    try:
        found = importlib.util.find_spec("sweeps")
    except ValueError:  # a module object without a spec stands in for it
        return False
    return found is not None and found.origin is not None  # not a checkout's sweeps/ folder of sweep files


@functools.lru_cache(maxsize=1)
def _schema_validator() -> Optional[Any]:
    """W&B's JSON schema of a sweep configuration, read from the ``sweeps`` package's files without
    importing it (that loads pandas and scipy); ``None`` where it is not installed (``ablate[bayes]``)."""
    found = importlib.util.find_spec("sweeps") if engine_installed() else None
    if found is None or not found.submodule_search_locations:
        return None
    import jsonschema  # a dependency of ``sweeps``

    schema = json.loads((Path(list(found.submodule_search_locations)[0]) / "config" / "schema.json").read_text())
    formats = jsonschema.FormatChecker()  # how W&B tells int_uniform from uniform
    formats.checks("float")(lambda value: isinstance(value, float))
    formats.checks("integer")(lambda value: isinstance(value, int))
    return jsonschema.Draft7Validator(schema, format_checker=formats)


def check_wandb_schema(config: dict[str, Any], where: str) -> None:
    """Validate against W&B's JSON schema (where ``sweeps`` is installed) and the shape ablate reads."""
    parameters = config.get("parameters")
    for name, param in parameters.items() if isinstance(parameters, dict) else ():
        kind = param.get("distribution") if isinstance(param, dict) else None
        if kind is not None and kind not in DISTRIBUTIONS:  # W&B's schema says only "not a valid parameter"
            hint = f" (did you mean '{close}'?)" if (close := closest(str(kind), DISTRIBUTIONS)) else ""
            raise SweepError(
                f"{where}: parameters.{name}.distribution: {kind!r} is not one of W&B's ({', '.join(DISTRIBUTIONS)}){hint}"
            )
    validator = _schema_validator()
    errors = [] if validator is None else list(validator.iter_errors(config))
    if errors:
        errors.sort(key=lambda e: (len(e.path), list(map(str, e.path))))
        raise SweepError(f"{where}: {_describe_schema_error(errors[0])}")
    if "method" not in config:
        raise SweepError(f"{where}: missing required key: 'method'")
    if config["method"] not in METHODS:
        raise SweepError(f"{where}: method: {config['method']!r} is not one of {', '.join(METHODS)}")
    if not isinstance(parameters, dict):
        raise SweepError(f"{where}: parameters: a mapping of parameter names to W&B parameters is required")
    for name, param in parameters.items():
        if not isinstance(param, dict) or not set(param) & _PARAMETER_KEYS:
            raise SweepError(f"{where}: {_not_a_parameter(name, param)}")
        low, high = param.get("min"), param.get("max")
        kind = str(param.get("distribution"))
        ranged = not {"value", "values", "parameters"} & set(param) and not re.search("normal|beta", kind)
        if ranged and (low is None or high is None):  # W&B's schema says so where ``sweeps`` is installed
            raise SweepError(f"{where}: {_not_a_parameter(name, param)}")
        if isinstance(low, (int, float)) and isinstance(high, (int, float)) and low >= high:
            raise SweepError(f"{where}: parameters.{name}: min {low} is not below max {high}")


def _not_a_parameter(name: str, param: Any) -> str:
    return f"parameters.{name}: not a valid W&B parameter {param!r}; use value, values, or a distribution (min/max)"


def _describe_schema_error(error: Any) -> str:
    path = ".".join(str(p) for p in error.path)
    if error.validator == "additionalProperties" and not path:
        extra = re.findall(r"'([^']+)' was unexpected", error.message)
        key = extra[0] if extra else "?"
        allowed = error.schema.get("properties", {})
        close = closest(key, allowed)
        hint = f"did you mean '{close}'?" if close else f"W&B allows: {', '.join(sorted(allowed))}"
        return f"unknown top-level key '{key}' ({hint})"
    if error.validator == "anyOf" and len(error.path) == 2 and error.path[0] == "parameters":
        return _not_a_parameter(error.path[1], error.instance)
    if error.validator == "required" and not path:
        return f"missing required key: {error.message}"
    from jsonschema.exceptions import best_match  # a dependency of ``sweeps``, whose schema raised ``error``

    error = best_match([error])  # a oneOf's closest branch: early_terminate.type's choices
    path, message = ".".join(str(p) for p in error.absolute_path), error.message.splitlines()[0]
    return f"{path or 'top level'}: {message if len(message) <= 200 else message[:197] + '...'}"


def check_parameters(parameters: dict[str, Any], where: str) -> None:
    """Every parameter is a config key or a well-formed reserved one."""
    keys = set(valid_keys())
    for name, param in parameters.items():
        if "parameters" in param:
            raise SweepError(
                f"{where}: parameters.{name}: nested 'parameters' blocks are not supported; "
                f"write dotted names instead (e.g. {name}.<key>: {{value: ...}})"
            )
        if name == VARIANT:
            check_variants(param, parameters, where, keys)
        elif name == COMPARISONS:
            if "value" not in param:
                raise SweepError(
                    f"{where}: parameters.{COMPARISONS} is a constant: write {COMPARISONS}: {{value: [...]}}"
                )
            parse_comparisons(param["value"], f"{where}: parameters.{COMPARISONS}", keys | {VARIANT})
        elif name == BASE:
            check_base(param, parameters, where)
        else:
            _check_key(name, keys, f"{where}: parameters.{name}")
            if name == RUN_NAME and not _varies(param):
                raise SweepError(one_run_name(f"{where}: parameters.{name}"))


def one_run_name(where: str) -> str:
    """The error for a :data:`RUN_NAME` that every trial of a sweep (or of a variant) would share."""
    return (
        f"{where}: {RUN_NAME} would give every trial one W&B run name (ablate names each run after its trial); "
        f"name the sweep's W&B group with tracking.group instead, or drop it"
    )


def _check_key(key: str, keys: set[str], where: str) -> None:
    """A sweep names only config keys: another is refused with the closest key."""
    if key not in keys and not is_key(key):
        close = closest_key(key)
        hint = f"did you mean '{close}'?" if close else "see `ablate train --help` for the keys"
        raise SweepError(f"{where}: unknown config key '{key}' ({hint})")


def check_variants(param: dict[str, Any], parameters: dict[str, Any], where: str, keys: set[str]) -> None:
    """``variant`` lists values, each a name or ``{name: ..., <key>: <value>, ...}``, and no variant sets a
    parameter the sweep varies (the variant applies last: its trials along that axis would be replicates)."""
    if "values" not in param:
        raise SweepError(f"{where}: parameters.{VARIANT} must list 'values' (names or {{name: ..., key: value}})")
    axes = {n for n, p in parameters.items() if n not in RESERVED and _varies(p)}
    seen: set[str] = set()
    for i, value in enumerate(param["values"]):
        label = f"{where}: parameters.{VARIANT}.values[{i}]"
        name = variant_name(value, label)
        check_variant_name(name, label)
        if name in seen:
            raise SweepError(f"{label}: duplicate variant name '{name}'")
        seen.add(name)
        overrides = variant_overrides(value)
        for key in overrides:
            _check_key(key, keys, f"{label} ({name})")
        if RUN_NAME in overrides:
            raise SweepError(one_run_name(f"{label} ({name})"))
        for key in sorted(axes & set(overrides)):
            raise SweepError(
                f"{label} ({name}) sets {key}, which the sweep varies (parameters.{key}): its trials would be "
                f"identical replicates; drop {key} from the variant or make parameters.{key} one value"
            )


def check_base(param: dict[str, Any], parameters: dict[str, Any], where: str) -> None:
    """``base`` is a constant naming one of the sweep's variants, or (a grid) its base point's values."""
    label = f"{where}: parameters.{BASE}"
    value = param.get("value")  # a mapping: check_wandb_schema refused any other parameter
    variants = parameters.get(VARIANT)
    if isinstance(variants, dict) and isinstance(variants.get("values"), list):
        names = [variant_name(v, label) for v in variants["values"]]
        if not isinstance(value, str) or value not in names:
            shown = "" if value is None else f" {value!r} is not one of them;"
            raise SweepError(f"{label}:{shown} write {BASE}: {{value: <variant>}}, one of: {', '.join(names)}")
        return
    if not isinstance(value, dict) or not value:
        raise SweepError(
            f"{label}: without variants, write {BASE}: {{value: {{<key>: <value>, ...}}}}, the base point of the grid"
        )
    for key, v in flatten(value).items():
        choices = (parameters.get(key) or {}).get("values")
        if not isinstance(choices, list):
            raise SweepError(f"{label}: '{key}' is not a parameter with 'values' in this sweep")
        if v not in choices:
            raise SweepError(f"{label}: {key}={v!r} is not one of its values {choices}")


def parse_comparisons(
    value: Any, where: str = COMPARISONS, keys: Optional[set[str]] = None
) -> list[tuple[str, Optional[list[Any]]]]:
    """``comparisons`` entries as ``(key, values or None)``; a bare string is ``{between: key}``."""
    if not isinstance(value, list) or not value:
        raise SweepError(f"{where}: must be a list of {{between: <key>, values: [...]}} entries")
    out = []
    for i, entry in enumerate(value):
        entry = {"between": entry} if isinstance(entry, str) else entry
        label = f"{where}[{i}]"
        well_formed = isinstance(entry, dict) and isinstance(entry.get("between"), str)
        if not well_formed or set(entry) - {"between", "values"}:
            raise SweepError(f"{label}: write {{between: <key>, values: [...]}} (values optional), not {entry!r}")
        key, values = entry["between"], entry.get("values")
        if keys is not None:
            _check_key(key, keys, label)
        if values is not None and (not isinstance(values, list) or len(values) < 2):
            raise SweepError(f"{label}: 'values' lists the reference value first, then the values compared with it")
        out.append((key, values))
    return out


def variant_name(value: Any, where: str = "variant") -> str:
    """The name of a ``variant`` value (a bare string, or the ``name`` of a mapping)."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, dict) and isinstance(value.get("name"), str) and value["name"]:
        return value["name"]
    raise SweepError(f"{where}: a variant is a name or a mapping with a 'name' and overrides, not {value!r}")


def check_variant_name(name: str, where: str = "variant") -> None:
    """A variant name is its trials' folder name as written: safe characters, not too long."""
    if len(name) <= MAX_VARIANT_NAME and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._=+,-]*", name):
        return
    shown = name if len(name) <= 40 else f"{name[:37]}..."
    long = len(name) > MAX_VARIANT_NAME
    problem = f"is {len(name)} characters long" if long else "holds characters unsafe in a folder name"
    raise SweepError(
        f"{where}: variant name {shown!r} {problem}: use at most {MAX_VARIANT_NAME} letters, digits and ._=+,-, "
        f"starting with a letter or digit (e.g. {safe_name(name)[:MAX_VARIANT_NAME]!r})"
    )


def variant_overrides(value: Any) -> dict[str, Any]:
    """Dotted overrides of a ``variant`` value (nested mappings are flattened)."""
    return flatten({k: v for k, v in value.items() if k != "name"}) if isinstance(value, dict) else {}


# ---- From a point to a trial's name and overrides ----


def foreign_key(spec: SweepSpec, point: Point) -> Optional[str]:
    """The first parameter of ``point`` (a trial read back from a sweep folder) that ``spec`` cannot have
    planned (not listed; outside ``value``/``values``, a variant's overrides included; a repeat seed not an
    integer; a sampled value not a number), else ``None``. A trial's overrides come from its point, and one
    can name code (``plugins``, ``trainer.callbacks``): a folder's points are run only as the file's."""
    for key, value in point.items():
        param = spec.parameters.get(key)
        if not isinstance(param, dict):
            return key
        allowed = [param["value"]] if "value" in param else param.get("values")
        if allowed is not None:
            ok = value_key(value) in {value_key(v) for v in allowed}
        elif REPEAT in param:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok:
            return key
    return None


def resolve(point: Point) -> dict[str, Any]:
    """Dotted config values for a sampled point ``{param: value}``; the variant applies last."""
    values = {k: v for k, v in point.items() if k not in RESERVED}
    if VARIANT in point:
        values.update(variant_overrides(point[VARIANT]))
    return values


@functools.lru_cache(maxsize=4096)
def _float_text(text: str) -> Optional[str]:
    """A float's ``repr`` as YAML 1.1 reads it back equal (``1.0e-05``: it needs a dot), or None."""
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text if yaml.safe_load(text) == float(text) else None


def format_value(value: Any) -> str:
    """``value`` as text that YAML (and so ``parse_override``) reads back equal."""
    if isinstance(value, float) and (text := _float_text(repr(value))) is not None:
        return text
    if isinstance(value, str) and (is_plain_text(value) or (value and "\n" not in value and _reads_back(value))):
        return value
    return json.dumps(value)


def _reads_back(text: str) -> bool:
    """Whether YAML reads ``text`` back as that string (``[red]x`` is no YAML at all: it needs quotes)."""
    try:
        return yaml.safe_load(text) == text
    except yaml.YAMLError:
        return False


def to_overrides(values: dict[str, Any]) -> list[str]:
    """``{"model.heads": 4}`` -> ``["model.heads=4"]`` (values quoted where YAML needs it)."""
    return [f"{key}={format_value(value)}" for key, value in values.items()]


def safe_name(text: str) -> str:
    """A file-system-safe name (letters, digits, ``._=+,-``); past :data:`MAX_NAME`, its start and a digest."""
    cleaned = re.sub(r"[^A-Za-z0-9._=+,-]+", "_", str(text)).strip("._") or "sweep"
    if len(cleaned) > MAX_NAME:
        tail = hashlib.sha1(str(text).encode()).hexdigest()[:8]
        cleaned = f"{cleaned[: MAX_NAME - 9].rstrip('._')}-{tail}"
    return cleaned


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ",".join(_show(v) for v in value)
    return str(value)


def labels(spec: SweepSpec, point: Point) -> list[str]:
    """What distinguishes this point: ``["A-heads1", "seed=2"]`` (the variant by its name; a varying key by
    its last part, ``score`` for ``model.attention.score``, unless two varying keys share it)."""
    varying = spec.varying
    last = [k.rsplit(".", 1)[-1] for k in varying]
    short = {k: (s if last.count(s) == 1 else k) for k, s in zip(varying, last)}
    return [
        variant_name(point[key]) if key == VARIANT else f"{short[key]}={_show(point[key])}"
        for key in varying
        if key in point
    ]


def trial_name(spec: SweepSpec, point: Point, taken: set[str]) -> str:
    """A unique, file-system-safe name for ``point`` (``-2``, ``-3`` appended on a clash)."""
    base = safe_name("-".join(labels(spec, point)) or "trial")
    name, i = base, 2
    while name in taken:
        name, i = f"{base}-{i}", i + 1
    return name


def trial_overrides(
    spec: SweepSpec, point: Point, name: str, group: Optional[str] = None, extra: Sequence[str] = ()
) -> list[str]:
    """The trainer's ``key=value`` arguments: W&B naming first (a ``tracking.*`` parameter wins, but tags add
    to the trial's labels), then the parameters, then ``extra`` (the command line's); ``plugins`` files,
    relative to the sweep file, made absolute."""
    values = resolve(point)
    if "plugins" in values and spec.path is not None:
        values["plugins"] = absolute(values["plugins"], spec.path.resolve().parent)
    tags, rest = labels(spec, point), to_overrides(values) + list(extra)
    given = [parse_override(o)[1] for o in rest if o.partition("=")[0].strip() == "tracking.tags"]
    if all(isinstance(v, (str, list)) for v in given):  # each tag once, in order (else the config check names it)
        rest = [o for o in rest if o.partition("=")[0].strip() != "tracking.tags"]
        tags = list(dict.fromkeys(tags + [str(tag) for v in given for tag in ([v] if isinstance(v, str) else v)]))
    tracking = {"tracking.group": group or spec.name, "tracking.name": name, "tracking.tags": tags}
    if VARIANT in point:
        tracking["tracking.variant"] = variant_name(point[VARIANT])
    return to_overrides(tracking) + rest


def with_absolute_plugins(config: dict[str, Any], base: Path) -> dict[str, Any]:
    """``config`` (a sweep held in memory) with the relative ``plugins`` file paths of its parameters and
    variants made absolute against ``base``: a dict has no folder of its own, so its paths are the user's
    (the working directory), never files lying where the dict is written."""
    parameters = dict(config.get("parameters") or {})
    param = parameters.get("plugins")
    if isinstance(param, dict):
        param = dict(param)
        if "value" in param:
            param["value"] = absolute(param["value"], base)
        if isinstance(param.get("values"), list):
            param["values"] = [absolute(v, base) for v in param["values"]]
        parameters["plugins"] = param
    variants = parameters.get(VARIANT)
    if isinstance(variants, dict) and isinstance(variants.get("values"), list):
        values = [
            {**v, "plugins": absolute(v["plugins"], base)} if isinstance(v, dict) and "plugins" in v else v
            for v in variants["values"]
        ]
        parameters[VARIANT] = {**variants, "values": values}
    return {**config, "parameters": parameters} if parameters else dict(config)


# ---- Command-line axes: ``ablate sweep run FILE model.heads=4,8`` ----


def split_top_level(raw: str) -> list[str]:
    """``"4,8"`` -> ``["4", "8"]``; commas inside ``[]``, ``{}`` or quotes do not split."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(raw):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            parts.append(raw[start:i])
            start = i + 1
    parts.append(raw[start:])
    return parts


def split_axes(overrides: list[str]) -> tuple[list[str], dict[str, list[Any]]]:
    """Plain ``key=value`` overrides, and ``{key: [values]}`` for each comma list (Hydra's ``-m key=a,b``)."""
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


def check_unswept(spec: SweepSpec, overrides: list[str]) -> None:
    """A ``key=value`` for every trial names no key the sweep varies: it applies last, so the trials along that
    axis would all train its value under names that say otherwise; nor :data:`RUN_NAME` (one name for all)."""
    for item in overrides:
        key = item.partition("=")[0].strip()
        if key == RUN_NAME:
            raise SweepError(one_run_name(f"override '{item}'"))
        if key in spec.varying:
            raise SweepError(
                f"override '{item}': the sweep varies {key} (parameters.{key}) and an override applies to every "
                f"trial, so its trials would differ in name only; give the values to run as a comma list "
                f"({key}=a,b) or change parameters.{key} in the sweep file"
            )


def replaced_variants(spec: SweepSpec, overrides: list[str]) -> list[str]:
    """A note per ``key=value`` that replaces another value a named variant sets: the override still applies
    last (a smoke test shrinks every row so), but those rows then train it under names that say otherwise."""
    variants = (spec.parameters.get(VARIANT) or {}).get("values", [])  # check_variants: a variant lists values
    notes = []
    for item in overrides:
        key, value = parse_override(item)
        changed = [(variant_name(v), variant_overrides(v)[key]) for v in variants if key in variant_overrides(v)]
        changed = [(name, old) for name, old in changed if value_key(old) != value_key(value)]
        if changed:
            rows = ", ".join(f"{name} ({key}={format_value(old)})" for name, old in changed)
            notes.append(f"note: {item} applies after the variants, so {rows} train {item} under their names")
    return notes


def axis_overrides(axes: dict[str, list[Any]]) -> list[str]:
    """The axes as the comma-list overrides a user types (recorded in ``sweep.json``)."""
    return [f"{key}={','.join(format_value(v) for v in values)}" for key, values in axes.items()]


# ---- Grid and random points ----


def axis_values(name: str, param: dict[str, Any]) -> list[Any]:
    """The values a grid takes for one parameter, in W&B's order, each once (a repeat, as :func:`value_key`
    sees it, keeps the first one's place and the later spelling); ValueError in W&B's words for a distribution."""
    if "value" in param:
        return [param["value"]]
    if "values" in param and "probabilities" not in param and param.get("distribution", "categorical") == "categorical":
        return list({value_key(value): value for value in param["values"]}.values())
    low: Any = param.get("min")  # a number where the distribution needs one (check_wandb_schema), else absent
    high: Any = param.get("max")
    kind = param.get("distribution")
    if kind in (None, "int_uniform") and isinstance(low, int) and isinstance(high, int) and "q" not in param:
        return list(range(low, high + 1))
    if kind == "q_uniform":
        q = param.get("q", 1)
        return [low + i * q for i in range(max(0, math.ceil((high - low) / q)))]
    raise ValueError(
        f"Parameter {name} is a disallowed type with grid search. Grid search requires all parameters to be "
        f"categorical, constant, int_uniform, or q_uniform. Specification of probabilities for categorical "
        f"parameters is disallowed in grid search"
    )


def value_key(value: Any) -> str:
    """What makes two grid values the same for W&B (an integral float is its int: ``3e6`` is ``3000000``)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return json.dumps(value, sort_keys=True, default=str)


def grid_key(point: Point, parameters: dict[str, Any]) -> tuple[str, ...]:
    """A point's grid position: :func:`value_key` of each parameter's value (names sorted, constants too)."""
    return tuple(value_key(point.get(name)) for name in sorted(parameters))


def grid_points(parameters: dict[str, Any]) -> Iterator[Point]:
    """Every point of the grid, lazily, in W&B's order (a grid of 10^6 points costs its axes in memory)."""
    names = sorted(parameters)
    for values in itertools.product(*(axis_values(name, parameters[name]) for name in names)):
        yield dict(zip(names, values))


def grid_size(parameters: dict[str, Any]) -> int:
    """How many points a grid over ``parameters`` has, counted without enumerating it (ValueError: a distribution,
    as :func:`axis_values`)."""
    return math.prod(len(axis_values(name, param)) for name, param in parameters.items())


def random_point(parameters: dict[str, Any], rng: random.Random) -> Point:
    """One draw of every parameter (names sorted, as W&B draws them) from W&B's distributions; without a
    ``distribution``, ``values`` is categorical, integer ``min``/``max`` int_uniform, else uniform."""
    return {name: _draw(parameters[name], rng) for name in sorted(parameters)}


def _draw(param: dict[str, Any], rng: random.Random) -> Any:
    if "value" in param:
        return param["value"]
    if "values" in param:
        return rng.choices(param["values"], weights=param.get("probabilities"))[0]
    low: Any = param.get("min")  # a number where the distribution needs one (check_wandb_schema), else absent
    high: Any = param.get("max")
    kind = param.get("distribution") or ("int_uniform" if isinstance(low, int) and isinstance(high, int) else "uniform")
    base, _, _ = kind.removeprefix("q_").partition("_values")
    if kind.endswith("inv_log_uniform_values"):  # 1/X log-uniform: X = exp(-U(log 1/max, log 1/min))
        bounds = (-math.log(high), -math.log(low))
    elif kind.endswith("_values"):
        bounds = (math.log(low), math.log(high))
    else:
        bounds = (low, high)
    draw = {
        "uniform": lambda: rng.uniform(low, high),
        "int_uniform": lambda: rng.randint(low, high),
        "log_uniform": lambda: math.exp(rng.uniform(*bounds)),
        "inv_log_uniform": lambda: math.exp(-rng.uniform(*bounds)),
        "normal": lambda: rng.gauss(param.get("mu", 0.0), param.get("sigma", 1.0)),
        "log_normal": lambda: math.exp(rng.gauss(param.get("mu", 0.0), param.get("sigma", 1.0))),
        "beta": lambda: rng.betavariate(param.get("a", 1.0), param.get("b", 1.0)),
    }
    if base not in draw:
        raise ValueError(f"distribution {kind!r}: not one of W&B's ({', '.join(sorted(draw))}, and their q_ forms)")
    value = draw[base]()
    if kind.startswith("q_"):
        q = param.get("q", 1)
        value = round(value / q) * q
        return int(value) if isinstance(q, int) else value
    return value


# ---- The W&B form: variants by name, and what plain ``wandb agent`` passes ----


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


def point_from_wandb(point: Point) -> Point:
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
    """Replace a ``variant=...`` argument (a name, with ``variants=...`` from ``ablate sweep create``) by
    ``tracking.variant=<name>`` and its overrides, last so they win over W&B's base values; ``None`` (W&B's
    ``str`` of null) becomes ``null``; the other reserved parameters are dropped."""
    rest, variants, table = [], [], None
    for item in overrides:
        key, value = parse_override(item) if "=" in item else (None, None)
        if key == VARIANT:
            variants.append(_variant_value(value))
        elif key == VARIANTS:
            table = _variant_value(value)
        elif key not in RESERVED:
            rest.append(f"{key}=null" if value == "None" else item)
    if not variants:
        return rest
    value = expand(variants[-1], _mapping(table))
    return rest + [f"tracking.variant={variant_name(value, 'variant')}"] + to_overrides(variant_overrides(value))
