"""Sweep files: W&B's sweep configuration, validated, plus named variants.

A sweep file is a W&B sweep configuration (https://docs.wandb.ai/guides/sweeps/define-sweep-configuration)
and nothing else, so ``wandb sweep FILE`` accepts it unchanged. Parameter names are the dotted keys
of :mod:`ablate.config` (``model.heads``, ``model.attention.score``, ``seed``); a parameter with a
single ``value`` is part of the base every trial starts from.

Paper-style ablations change one thing at a time from that base (Table 3 of Vaswani et al. 2017),
which a grid over independent parameters cannot say. They are written as one extra categorical
parameter, ``variant``, whose values are either a bare name or a mapping of a ``name`` and the
overrides that variant applies on top of the base::

    parameters:
      model.heads: {value: 8}            # base
      seed: {values: [1, 2, 3]}          # crossed with every variant
      variant:
        values:
          - base                          # no overrides
          - {name: A-heads1, model.heads: 1}
          - {name: B-dk16, model.d_k: 16, model.d_v: 64}

W&B's own search sees ``variant`` as an ordinary categorical parameter with dict values (its grid
search hashes them), so the same file runs on a W&B server; :func:`trial_overrides` turns a
sampled point back into ``key=value`` overrides.

The comparisons the sweep is about (which rows its table tests against which, Holm-corrected
together) are a second reserved parameter, a constant, so W&B's schema accepts it and a W&B run's
config carries it to ``ablate table wandb:...``::

      comparisons:
        value:
          - {between: model.attention.score, values: [dot, additive]}  # at equal everything else
          - {between: model.attention.scale}     # every value against the first (sorted)
          - {between: variant, values: [base, A-heads1, A-heads16]}      # named rows

Each entry compares rows that differ only in ``between``: the first of ``values`` (default: the
lowest value present) is the reference, each other value is compared with it. Without
``comparisons`` a table tests every row against the base.

The table's base row is the variant that applies no overrides (a bare name, ``base`` above). A
sweep with none, or with several, names it in a third reserved constant, ``base``: a variant's
name, or for a grid without variants the values of its base point::

      base: {value: transformer}                                  # a variant
      base: {value: {model.attention.score: dot, model.attention.scale: true}}   # a grid's point

A search over hyperparameters (``method: bayes`` or ``random``) repeats every configuration it
proposes over the same seeds when the seed is a *repeat axis*, ``seed: {repeat: N}`` (seeds
1..N)::

      seed: {repeat: 3}                  # every proposal trains with seeds 1, 2 and 3
      train.lr: {min: 0.0001, max: 0.01}

The search then never sees the seed: it proposes configurations, each runs once per seed, and
W&B's engine is told one run per configuration whose metric is the mean over its finished seeds
(:func:`ablate.sweep.search.search_runs`); ``run_cap`` counts configurations. A seed searched like
a hyperparameter under bayes or random (``seed: {values: [1, 2, 3]}``) would let the search chase
lucky seeds, so it is refused with a pointer to ``repeat``. Under ``grid``, ``values`` already
runs every configuration with every seed and ``repeat`` means the same. W&B's server knows no
``repeat``, so ``ablate sweep create`` refuses such a file (:mod:`ablate.sweep.wandb_agent`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml

from ablate.config import flatten, is_key, read_yaml, valid_keys
from ablate.errors import AblateError, closest
from ablate.sweep.points import axis_values
from ablate.utils.typed import is_plain_text

VARIANT = "variant"
"""The reserved parameter whose values are named sets of overrides."""
COMPARISONS = "comparisons"
"""The reserved constant parameter naming the comparisons the sweep's table makes."""
VARIANTS = "variants"
"""The constant that maps variant names to their overrides in a sweep registered with W&B
(:mod:`ablate.sweep.wandb_form`); sweep files write the mappings under ``variant`` instead."""
BASE = "base"
"""The reserved constant parameter naming the table's base row (a variant, or a grid's point)."""
RESERVED = (VARIANT, COMPARISONS, VARIANTS, BASE)
SEED = "seed"
"""The config key of the training seed: the one parameter that can be a repeat axis."""
REPEAT = "repeat"
"""``seed: {repeat: N}``: every configuration the search proposes trains with seeds 1..N."""

_SEARCHABLE = ("values", "min", "max", "mu", "sigma", "a", "b")


class SweepError(AblateError):
    """A user-facing sweep mistake; its message is one actionable line."""


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep file.

    Attributes:
        name: the sweep's name (the file's ``name`` or its stem); names the output folder and the
            W&B group.
        path: where the file was read from (``None`` when built from a dict).
        config: the W&B sweep configuration exactly as written (validated).
    """

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
        metric = self.config.get("metric") or {}
        return metric.get("goal", "minimize")

    @property
    def run_cap(self) -> Optional[int]:
        return self.config.get("run_cap")

    @property
    def varying(self) -> list[str]:
        """Parameters that differ between trials, in file order (``variant`` first, a repeat seed last)."""
        names = [
            n
            for n, p in self.parameters.items()
            if (any(k in p for k in _SEARCHABLE) and not _single_choice(p)) or REPEAT in p
        ]
        return sorted(names, key=lambda n: 0 if n == VARIANT else 2 if REPEAT in self.parameters[n] else 1)

    @property
    def repeat_seeds(self) -> Optional[list[int]]:
        """The seeds every configuration runs with (``seed: {repeat: N}``: 1..N), ``None`` without a repeat axis."""
        param = self.parameters.get(SEED) or {}
        return list(range(1, param[REPEAT] + 1)) if REPEAT in param else None

    @property
    def search_config(self) -> dict[str, Any]:
        """The configuration W&B's search engine is given: the file's, less a repeat seed (it never sees it)."""
        return search_config(self.config)

    def describe(self) -> str:
        where = self.path if self.path is not None else "<dict>"
        return f"{self.name} ({where})"


def _single_choice(param: dict[str, Any]) -> bool:
    return "values" in param and len(param["values"]) == 1


# --------------------------------------------------------------------------------------
# Loading and validation
# --------------------------------------------------------------------------------------


def read_sweep_yaml(path: str | Path) -> dict[str, Any]:
    """Parse a sweep file; malformed YAML raises a one-line :class:`SweepError` with its line."""
    data = read_yaml(path, error=SweepError, kind="sweep file", holds="a W&B sweep configuration (a mapping)")
    if not data:
        raise SweepError(f"{path} must hold a W&B sweep configuration (a mapping), not an empty file")
    return data


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a sweep file (W&B schema, config keys, variants)."""
    path = Path(path)
    config = read_sweep_yaml(path)
    name = str(config.get("name") or path.stem)
    return spec_from_dict(config, name=name, path=path)


def spec_from_dict(config: dict[str, Any], name: str = "sweep", path: Optional[Path] = None) -> SweepSpec:
    """Validate a sweep configuration held in memory."""
    where = str(path) if path is not None else "sweep"
    check_seed_axis(config, where)
    check_wandb_schema(search_config(config), where)
    check_parameters(config["parameters"], where)
    if config["method"] in ("bayes",) and "metric" not in config:
        raise SweepError(f"{where}: method 'bayes' needs a 'metric' (e.g. metric: {{name: val/bleu, goal: maximize}})")
    if "early_terminate" in config and "metric" not in config:
        raise SweepError(f"{where}: 'early_terminate' needs a 'metric' to compare trials by")
    if config["method"] == "custom":
        raise SweepError(f"{where}: method 'custom' needs a W&B scheduler; use grid, random or bayes")
    if (config["method"] == "bayes" or "early_terminate" in config) and not engine_installed():
        needs = "method 'bayes'" if config["method"] == "bayes" else "early_terminate"
        raise SweepError(f"{where}: {needs} needs W&B's sweeps engine, which is not installed: {BAYES_EXTRA}")
    spec = SweepSpec(name=safe_name(name), path=path, config=config)
    if spec.method == "grid":  # W&B's grid refuses continuous distributions: say so before running
        check_grid(spec)
    return spec


def search_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without a repeat seed (``seed: {repeat: N}``), as W&B's schema and search read it."""
    parameters = config.get("parameters")
    if not isinstance(parameters, dict) or not isinstance(parameters.get(SEED), dict) or REPEAT not in parameters[SEED]:
        return config
    return {**config, "parameters": {k: v for k, v in parameters.items() if k != SEED}}


def check_seed_axis(config: dict[str, Any], where: str) -> None:
    """``repeat`` is written ``seed: {repeat: N}`` only, and a search (bayes, random) does not sample the seed.

    Raises:
        SweepError: ``repeat`` on another key or malformed, or a seed with several values or a
            distribution under bayes or random (the search would chase lucky seeds).
    """
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


def check_grid(spec: SweepSpec) -> None:
    """Every parameter of a grid is one W&B's grid search can enumerate (values, a constant, int_uniform, q_uniform)."""
    for name, param in spec.search_config["parameters"].items():
        try:
            axis_values(name, param)
        except ValueError as err:  # e.g. a distribution in a grid
            raise SweepError(f"{spec.describe()}: {str(err).splitlines()[0]}") from None


BAYES_EXTRA = "pip install 'ablate[bayes]'"
"""How to install W&B's ``sweeps`` engine (bayes search, hyperband); it pins numpy<2."""


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
    """Validate against the JSON schema W&B's server uses (where ``sweeps`` is installed, else the
    shape ablate reads: a method, parameters that are mappings); raise one line naming the key."""
    validator = _schema_validator()
    errors = [] if validator is None else list(validator.iter_errors(config))
    if errors:
        errors.sort(key=lambda e: (len(e.path), list(map(str, e.path))))
        raise SweepError(f"{where}: {_describe_schema_error(errors[0])}")
    if "method" not in config:
        raise SweepError(f"{where}: missing required key: 'method'")
    if config["method"] not in METHODS:
        raise SweepError(f"{where}: method: {config['method']!r} is not one of {', '.join(METHODS)}")
    parameters = config.get("parameters")
    if not isinstance(parameters, dict):
        raise SweepError(f"{where}: parameters: a mapping of parameter names to W&B parameters is required")
    for name, param in parameters.items():
        if not isinstance(param, dict) or not set(param) & _PARAMETER_KEYS:
            raise SweepError(
                f"{where}: parameters.{name}: not a valid W&B parameter {param!r}; "
                f"use value, values, or a distribution (min/max)"
            )
        low, high = param.get("min"), param.get("max")
        if isinstance(low, (int, float)) and isinstance(high, (int, float)) and low >= high:
            raise SweepError(f"{where}: parameters.{name}: min {low} is not below max {high}")


METHODS = ("grid", "random", "bayes", "custom")
"""W&B's search methods (``custom`` needs a W&B scheduler, and is refused)."""
_PARAMETER_KEYS = {"value", "values", "min", "max", "distribution", "mu", "sigma", "a", "b", "parameters"}


def _describe_schema_error(error: Any) -> str:
    path = ".".join(str(p) for p in error.path)
    if error.validator == "additionalProperties" and not path:
        extra = re.findall(r"'([^']+)' was unexpected", error.message)
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        key = extra[0] if extra else "?"
        close = closest(key, error.schema.get("properties", {}))
        hint = f"did you mean '{close}'?" if close else f"W&B allows: {allowed}"
        return f"unknown top-level key '{key}' ({hint})"
    if error.validator == "anyOf" and len(error.path) == 2 and error.path[0] == "parameters":
        return (
            f"parameters.{error.path[1]}: not a valid W&B parameter {error.instance!r}; "
            f"use value, values, or a distribution (min/max)"
        )
    if error.validator == "required" and not path:
        return f"missing required key: {error.message}"
    message = error.message.splitlines()[0]
    if len(message) > 200:
        message = message[:197] + "..."
    return f"{path or 'top level'}: {message}"


def check_parameters(parameters: dict[str, Any], where: str) -> None:
    """Every parameter is a config key (or ``variant``); variants are well formed."""
    keys = set(valid_keys())
    for name, param in parameters.items():
        if "parameters" in param:
            raise SweepError(
                f"{where}: parameters.{name}: nested 'parameters' blocks are not supported; "
                f"write dotted names instead (e.g. {name}.<key>: {{value: ...}})"
            )
        if name == VARIANT:
            check_variants(param, where)
            check_variants_fix_no_axis(param, parameters, where)
        elif name == COMPARISONS:
            if "value" not in param:
                raise SweepError(
                    f"{where}: parameters.{COMPARISONS} is a constant: write {COMPARISONS}: {{value: [...]}}"
                )
            parse_comparisons(param["value"], f"{where}: parameters.{COMPARISONS}", keys | {VARIANT})
        elif name == BASE:
            check_base(param, parameters, where)
        elif name not in keys and not is_key(name):
            raise SweepError(f"{where}: parameters.{name}: {_unknown(name, keys)}")


def _unknown(key: str, keys: set[str]) -> str:
    close = closest(key, sorted(keys), cutoff=0.5)
    hint = f"did you mean '{close}'?" if close else "see `ablate train --help` for the keys"
    return f"unknown config key '{key}' ({hint})"


def check_variants(param: dict[str, Any], where: str) -> None:
    """``variant`` must list values, each a name or ``{name: ..., <key>: <value>, ...}``."""
    if "values" not in param:
        raise SweepError(f"{where}: parameters.{VARIANT} must list 'values' (names or {{name: ..., key: value}})")
    keys = set(valid_keys())
    seen: set[str] = set()
    for i, value in enumerate(param["values"]):
        label = f"parameters.{VARIANT}.values[{i}]"
        name = variant_name(value, f"{where}: {label}")
        check_variant_name(name, f"{where}: {label}")
        if name in seen:
            raise SweepError(f"{where}: {label}: duplicate variant name '{name}'")
        seen.add(name)
        for key in variant_overrides(value):
            if key not in keys and not is_key(key):
                raise SweepError(f"{where}: {label} ({name}): {_unknown(key, keys)}")


def check_variants_fix_no_axis(param: dict[str, Any], parameters: dict[str, Any], where: str) -> None:
    """No variant sets a parameter the sweep varies: the variant applies last, so its trials along that
    axis would be identical replicates (``{name: fixed, seed: 7}`` with ``seed: {values: [1, 2]}``)."""
    axes = {
        n
        for n, p in parameters.items()
        if n not in RESERVED and isinstance(p, dict) and (REPEAT in p or (_searched(p) and not _single_choice(p)))
    }
    for i, value in enumerate(param["values"]):
        for key in sorted(axes & set(variant_overrides(value))):
            raise SweepError(
                f"{where}: parameters.{VARIANT}.values[{i}] ({variant_name(value)}) sets {key}, which the sweep varies "
                f"(parameters.{key}): its trials would be identical replicates; drop {key} from the variant "
                f"or make parameters.{key} one value"
            )


def _searched(param: dict[str, Any]) -> bool:
    return any(k in param for k in _SEARCHABLE)


def check_base(param: dict[str, Any], parameters: dict[str, Any], where: str) -> None:
    """``base`` is a constant naming one of the sweep's variants, or (a grid) a mapping of its varying
    parameters to the base point's values."""
    label = f"{where}: parameters.{BASE}"
    value = param.get("value") if isinstance(param, dict) else None
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
    """``comparisons`` entries as ``(key, values or None)``; a bare string is ``{between: key}``.

    Raises:
        SweepError: not a list of ``{between: <key>, values: [...]}``, or (with ``keys``) an unknown key.
    """
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
        if keys is not None and key not in keys and not is_key(key):
            raise SweepError(f"{label}: {_unknown(key, keys)}")
        if values is not None and (not isinstance(values, list) or len(values) < 2):
            raise SweepError(f"{label}: 'values' lists the reference value first, then the values compared with it")
        out.append((key, values))
    return out


# --------------------------------------------------------------------------------------
# From a sampled point to a trial
# --------------------------------------------------------------------------------------


def variant_name(value: Any, where: str = "variant") -> str:
    """The name of a ``variant`` value (a bare string, or the ``name`` of a mapping)."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, dict) and isinstance(value.get("name"), str) and value["name"]:
        return value["name"]
    raise SweepError(f"{where}: a variant is a name or a mapping with a 'name' and overrides, not {value!r}")


MAX_VARIANT_NAME = 64
"""Longest variant name: it is a folder name, a table row and a W&B tag (W&B allows 64 characters)."""
NAME_CHARS = "letters, digits and ._=+,-"


def check_variant_name(name: str, where: str = "variant") -> None:
    """A variant name is its trials' folder name as written: safe characters, not too long.

    Raises:
        SweepError: naming the limit and a name that would pass.
    """
    if len(name) <= MAX_VARIANT_NAME and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._=+,-]*", name):
        return
    shown = name if len(name) <= 40 else f"{name[:37]}..."
    problem = (
        f"is {len(name)} characters long"
        if len(name) > MAX_VARIANT_NAME
        else "holds characters unsafe in a folder name"
    )
    raise SweepError(
        f"{where}: variant name {shown!r} {problem}: use at most {MAX_VARIANT_NAME} {NAME_CHARS}, "
        f"starting with a letter or digit (e.g. {safe_name(name)[:MAX_VARIANT_NAME]!r})"
    )


def variant_overrides(value: Any) -> dict[str, Any]:
    """Dotted overrides of a ``variant`` value (nested mappings are flattened)."""
    if not isinstance(value, dict):
        return {}
    return flatten({k: v for k, v in value.items() if k != "name"})


def resolve(point: dict[str, Any]) -> dict[str, Any]:
    """Dotted config values for a sampled point ``{param: value}``; the variant applies last."""
    values = {k: v for k, v in point.items() if k not in RESERVED}
    if VARIANT in point:
        values.update(variant_overrides(point[VARIANT]))
    return values


@functools.lru_cache(maxsize=4096)
def _float_text(text: str) -> Optional[str]:
    """A float's ``repr`` as YAML 1.1 reads it back equal (``1.0e-05``: it needs a dot), or None; cached,
    as a sweep repeats its values over many trials."""
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text if yaml.safe_load(text) == float(text) else None


def format_value(value: Any) -> str:
    """``value`` as text that YAML (and so ``ablate.config.parse_override``) reads back equal."""
    if isinstance(value, float):
        text = _float_text(repr(value))
        if text is not None:
            return text
    if isinstance(value, str) and (
        is_plain_text(value) or (value and yaml.safe_load(value) == value and "\n" not in value)
    ):
        return value
    return json.dumps(value)


def to_overrides(values: dict[str, Any]) -> list[str]:
    """``{"model.heads": 4}`` -> ``["model.heads=4"]`` (values quoted where YAML needs it)."""
    return [f"{key}={format_value(value)}" for key, value in values.items()]


MAX_NAME = 120
"""Longest folder name :func:`safe_name` gives (a file name may hold 255 bytes; suffixes need room)."""


def safe_name(text: str) -> str:
    """A file-system-safe name: letters, digits and ``._=+,-``; other runs become ``_``.

    A name longer than :data:`MAX_NAME` keeps its start and ends in a digest of the whole text,
    so two long names stay apart and the same text always gives the same name.
    """
    cleaned = re.sub(r"[^A-Za-z0-9._=+,-]+", "_", str(text)).strip("._") or "sweep"
    if len(cleaned) > MAX_NAME:
        tail = hashlib.sha1(str(text).encode()).hexdigest()[:8]
        cleaned = f"{cleaned[: MAX_NAME - 9].rstrip('._')}-{tail}"
    return cleaned
