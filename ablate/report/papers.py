"""Published tables shipped as package data: ``references/<name>.yaml`` -> :class:`Reference`.

A reference file holds a paper's table in ablate's terms:

- ``base``: the paper's base row: ``settings`` (its hyperparameters in ablate config keys, the
  values rows are matched against) and its published ``bleu``, ``ppl`` and ``params``.
- ``rows``: one entry per published row, with the keys it ``changes`` and its scores; a row (or
  the base) may state the ``metric`` its BLEU was computed with and its ``source`` (a commit, a
  table), where they are not the setup's: one metric and one source per published number.
- ``min_delta``: the smallest paper |ΔBLEU| taken as a direction (below it a single published run
  is within seed noise); the headline sign count of :mod:`ablate.report.reference` uses it.
- ``setup``: how the paper trained and decoded its base. A dotted key is an ablate config key
  (checked and typed as ``ablate train`` would), compared with our base row to list where ours
  departs; a plain key is one of :data:`FACTS`, a fact no config key can state, printed as text.

Any other key, in the file, a row or the setup, is refused with one line naming it.
:func:`departures` lists the setup's config keys where a run's config differs from the paper's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ablate.config import ConfigError, flatten, from_flat, to_dict, valid_keys
from ablate.errors import did_you_mean
from ablate.report.records import ReportError
from ablate.utils.typed import read_yaml

REFERENCE_DIR = Path(__file__).parent / "references"

FACTS: dict[str, str] = {
    "data": "training data and the set the scores are on",
    "tokens": "segmentation and vocabulary",
    "batch": "batch size as the source states it",
    "budget": "training length as the source states it",
    "optimizer": "optimizer and learning-rate rule where config keys cannot say it",
    "checkpoints": "which checkpoint is scored",
    "metric": "how BLEU is computed",
    "runs": "runs per row (seeds)",
}
"""The plain (non-config) keys a ``setup`` block may hold, with what each states."""

_FILE_KEYS = {"name", "title", "citation", "data", "min_delta", "setup", "base", "rows"}
_ROW_KEYS = {"label", "changes", "bleu", "ppl", "params", "metric", "source"}


@dataclass(frozen=True)
class PaperRow:
    """One published row: what it changes from the paper's base and its scores.

    Attributes:
        label: as the paper names it, e.g. ``(A) h=1``.
        changes: dotted config key -> the paper's value (empty for the base).
        bleu, ppl: published BLEU and perplexity (None where not published).
        params: parameters in millions (None where the paper leaves it blank).
        metric, source: how its BLEU was computed and where it was published (a commit, a
            notebook), where the reference states them per row ("" where it does not).
    """

    label: str
    changes: dict[str, Any]
    bleu: Optional[float] = None
    ppl: Optional[float] = None
    params: Optional[float] = None
    metric: str = ""
    source: str = ""


@dataclass(frozen=True)
class Setup:
    """How the paper trained and decoded its base.

    Attributes:
        config: dotted ablate config key -> the paper's value (lists as tuples, as run configs hold them).
        facts: a :data:`FACTS` name -> text, for what no config key states.
    """

    config: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Reference:
    """A paper's table: its base (``settings``: the base's hyperparameters), its rows and its setup."""

    name: str
    title: str
    citation: str
    data: str
    settings: dict[str, Any]
    base: PaperRow
    rows: tuple[PaperRow, ...]
    min_delta: float = 0.0
    setup: Setup = field(default_factory=Setup)


@dataclass(frozen=True)
class Departure:
    """A setup key where our base differs from the paper's (``ours`` :data:`NOT_RECORDED` if absent)."""

    key: str
    ours: Any
    paper: Any

    def text(self) -> str:
        return f"{self.key}: {_show(self.ours)} (paper: {_show(self.paper)})"


NOT_RECORDED = "<not recorded>"
"""Our value of a setup key the base row's runs do not record (or do not share across seeds)."""


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return "not recorded" if value == NOT_RECORDED else str(value)


def departures(ours: dict[str, Any], setup: Setup) -> list[Departure]:
    """The keys of ``setup.config`` where ``ours`` (a flattened config) holds another value, in setup order."""
    out = []
    for key, paper in setup.config.items():
        mine = _tuples(ours.get(key, NOT_RECORDED))
        if mine != paper:
            out.append(Departure(key, mine, paper))
    return out


def _unknown(where: str, found: set[str], allowed: set[str] | list[str]) -> ReportError:
    key = sorted(found)[0]
    hint = did_you_mean(key, allowed) or f"; valid: {', '.join(sorted(allowed))}"
    return ReportError(f"{where}: unknown field '{key}'{hint}")


def _row(entry: Any, where: str, extra: frozenset[str] = frozenset()) -> PaperRow:
    if not isinstance(entry, dict) or "label" not in entry:
        raise ReportError(f"{where}: each row needs a 'label'")
    unknown = set(entry) - _ROW_KEYS - extra
    if unknown:
        raise _unknown(f"{where} ({entry['label']})", unknown, _ROW_KEYS | extra)
    return PaperRow(
        str(entry["label"]),
        dict(entry.get("changes") or {}),
        entry.get("bleu"),
        entry.get("ppl"),
        entry.get("params"),
        str(entry.get("metric") or ""),
        str(entry.get("source") or ""),
    )


def _tuples(value: Any) -> Any:
    """Lists as tuples, as a run's recorded config holds them (``train.betas``)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def _setup(block: Any, settings: dict[str, Any], where: str) -> Setup:
    """Split a ``setup`` block into checked config values and facts; refuse anything else."""
    if block is None:
        return Setup()
    if not isinstance(block, dict):
        raise ReportError(f"{where}: must be a mapping of config keys and facts ({', '.join(FACTS)})")
    keys = valid_keys()
    unknown = {k for k in block if k not in FACTS and k not in keys}
    if unknown:
        key = sorted(unknown)[0]
        hint = did_you_mean(key, [*keys, *FACTS], cutoff=0.5)
        raise ReportError(
            f"{where}: unknown key '{key}'{hint} (a setup key is an ablate config key or one of: {', '.join(FACTS)})"
        )
    given = {k: v for k, v in block.items() if k not in FACTS}
    try:
        typed = flatten(to_dict(from_flat(given, trust="never")))  # a reference file's plugins never run
    except ConfigError as err:
        raise ReportError(f"{where}: {err}") from None
    config = {k: _tuples(typed[k]) for k in given}
    clash = next((k for k in config if k in settings and _tuples(settings[k]) != config[k]), None)
    if clash:
        raise ReportError(f"{where}: {clash}={config[clash]!r} but the base's settings say {settings[clash]!r}")
    return Setup(config, {k: str(v) for k, v in block.items() if k in FACTS})


def load_reference(path: Path) -> Reference:
    """Read one reference file (see ``references/vaswani2017-table3.yaml``)."""
    data = read_yaml(path, error=ReportError, kind="reference file", holds="a reference table")
    unknown = set(data) - _FILE_KEYS
    if unknown:
        raise _unknown(path.name, unknown, _FILE_KEYS)
    base = data.get("base") or {}
    settings = dict(base.get("settings") or {})
    rows = tuple(_row(r, f"{path.name}: rows[{i}]") for i, r in enumerate(data.get("rows") or []))
    min_delta = data.get("min_delta", 0.0)
    if not isinstance(min_delta, (int, float)) or isinstance(min_delta, bool) or min_delta < 0:
        raise ReportError(f"{path.name}: min_delta must be a BLEU difference of 0 or more, not {min_delta!r}")
    return Reference(
        str(data.get("name") or path.stem),
        str(data.get("title") or path.stem),
        str(data.get("citation") or ""),
        str(data.get("data") or ""),
        settings,
        _row({"label": "base", **base}, f"{path.name}: base", frozenset({"settings"})),
        rows,
        float(min_delta),
        _setup(data.get("setup"), settings, f"{path.name}: setup"),
    )


REFERENCES: dict[str, Path] = {p.stem: p for p in sorted(REFERENCE_DIR.glob("*.yaml"))}
"""Name -> reference file shipped with the package (a new reference is one more YAML file)."""


def get(name: str) -> Reference:
    """The shipped reference ``name``; a one-line :class:`ReportError` listing valid names otherwise."""
    if name not in REFERENCES:
        raise ReportError(f"unknown reference '{name}' (choose from: {', '.join(REFERENCES)})")
    return load_reference(REFERENCES[name])
